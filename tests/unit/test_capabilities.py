"""The capabilities model: what each finding means for s3commit's decisions, and its JSON form."""

from __future__ import annotations

import pytest

from s3commit.errors import ManifestError
from s3commit.store.capabilities import CHECKS, Capabilities, Finding, Outcome

HONOURED = {name: Finding(Outcome.HONOURED) for name in (
    "put-if-none-match", "put-if-match", "delete-if-match", "put-if-none-match-race", "complete-if-none-match",
    "checksum-crc32", "checksum-sha256", "content-md5")}
LIKE_AWS = {**HONOURED, **{name: Finding(Outcome.YES) for name in (
    "part-etag-md5", "list-uploads", "head-checksum", "repeated-complete", "multipart-etag", "part-number-gaps")}}


def caps(**changes: Finding) -> Capabilities:
    return Capabilities("http://127.0.0.1:9000", "bkt", 1.0, {**LIKE_AWS, **{k.replace("_", "-"): v
                                                                          for k, v in changes.items()}})


def test_a_store_like_aws_loses_nothing():
    store = caps()
    assert store.conditional_writes and store.conditional_complete and store.lists_uploads
    assert not store.needs_etag_check("CRC32")
    assert store.lost_features("CRC32") == []


def test_one_ignored_condition_is_enough_to_lose_the_lease():
    for name in ("put_if_none_match", "put_if_match", "put_if_none_match_race"):
        store = caps(**{name: Finding(Outcome.IGNORED)})
        assert not store.conditional_writes, name
        assert any("commit lease" in lost for lost in store.lost_features("CRC32"))


def test_a_store_whose_completed_objects_carry_another_etag_is_judged_by_length_and_date():
    assert caps().multipart_etags
    assert not caps(multipart_etag=Finding(Outcome.NO, detail="ETag of the whole object")).multipart_etags
    unknown = Capabilities("http://127.0.0.1:9000", "bkt", 1.0, {})  # (a cache from before the check: as on S3)
    assert unknown.multipart_etags


def test_a_store_that_ignores_conditional_deletes_keeps_the_lease_and_deletes_unconditionally():
    # (gofakes3's answers: the lease is taken, renewed, released and taken over by conditional PUTs alone)
    store = caps(delete_if_match=Finding(Outcome.IGNORED), delete_objects_if_match=Finding(Outcome.IGNORED))
    assert store.conditional_writes
    assert not store.conditional_deletes and not store.conditional_batch_deletes
    assert store.lost_features("CRC32") == []
    rows = {name: action for name, _request, _result, action in store.rows()}
    assert "lease" not in rows["delete-if-match"] and "unconditional" in rows["delete-if-match"]


def test_a_permission_the_probe_lacked_counts_as_unknown_not_as_honoured():
    store = caps(put_if_match=Finding(Outcome.DENIED, "AccessDenied"))
    assert not store.conditional_writes
    row = next(r for r in store.rows() if r[0] == "put-if-match")
    assert row[2] == "denied (AccessDenied)" and "grant the permission" in row[3]


def test_the_etag_check_is_needed_only_where_the_checksum_is_not_validated_and_etags_are_md5s():
    rclone_like = caps(checksum_crc32=Finding(Outcome.IGNORED), checksum_sha256=Finding(Outcome.IGNORED))
    assert rclone_like.needs_etag_check("CRC32") and rclone_like.needs_etag_check("SHA256")
    assert rclone_like.needs_etag_check(None)
    assert rclone_like.integrity_verified("CRC32")  # by the ETag check
    assert not caps().needs_etag_check("CRC32") and caps().needs_etag_check(None)
    assert caps().needs_etag_check("CRC32C")  # never probed: the safe way
    no_md5 = caps(checksum_crc32=Finding(Outcome.IGNORED), part_etag_md5=Finding(Outcome.NO))
    assert not no_md5.needs_etag_check("CRC32")
    assert not no_md5.integrity_verified("CRC32")
    assert any("damage in transit" in lost for lost in no_md5.lost_features("CRC32"))


def test_a_store_without_upload_listing_loses_the_orphan_sweep():
    store = caps(list_uploads=Finding(Outcome.NO, "NotImplemented"))
    assert not store.lists_uploads
    assert any("orphan" in lost for lost in store.lost_features("CRC32"))


def test_rows_say_what_s3commit_does_with_each_answer_in_probe_order():
    store = caps(checksum_crc32=Finding(Outcome.IGNORED))
    rows = {name: (result, action) for name, _request, result, action in store.rows()}
    assert rows["checksum-crc32"] == ("ignored", next(c.when_not for c in CHECKS if c.name == "checksum-crc32"))
    assert rows["put-if-match"][0] == "honoured"
    assert [r[0] for r in store.rows()] == list(store.findings)


def test_json_round_trip_and_a_foreign_document_is_named():
    store = caps(repeated_complete=Finding(Outcome.NO, "NoSuchUpload", "second Complete"))
    assert Capabilities.from_json(store.to_json()) == store
    with pytest.raises(ManifestError, match=r"cache\.json.*format"):
        Capabilities.from_json(b'{"format": "other"}', source="cache.json")
    with pytest.raises(ManifestError, match="not JSON"):
        Capabilities.from_json(b"{", source="cache.json")
    assert "put-if-match=honoured" in store.summary()
