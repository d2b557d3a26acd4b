"""The persistent formats: golden files, round trips, and every validation rule."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from s3commit.errors import ManifestError
from s3commit.model.manifests import (
    COMPLETED_AT_TASK_COMMIT,
    COMPLETED_KEY,
    SUCCESS_NAME,
    CommitJournal,
    EtagForm,
    PendingSet,
    PendingUpload,
    SuccessData,
    java_date,
)

GOLDEN = Path(__file__).parent.parent / "golden"


def pending(**changes):
    base = PendingUpload(bucket="bkt", destination_key="out/a.txt", upload_id="u1", etags=('"e1"',),
                         length=3, uri="s3a://bkt/out/a.txt")
    return replace(base, **changes)


def test_golden_pending_file_loads_with_hadoop_field_names():
    loaded = PendingUpload.from_json((GOLDEN / "magic.pending").read_bytes(), source="magic.pending")
    assert loaded.bucket == "bkt"
    assert loaded.destination_key == "out/part-00000-7f1e.snappy.parquet"
    assert loaded.upload_id == "VXBsb2FkSUQtZXhhbXBsZQ"
    assert loaded.etags == ('"a54357aff0632cce46d942af68356b38"',)
    assert loaded.length == 1024
    assert loaded.uri.startswith("s3a://bkt/out/__magic_job-")
    assert loaded.filename == "magic.pending"  # set on load; the persisted value is ignored


def test_golden_pendingset_loads_and_ignores_unknown_fields():
    loaded = PendingSet.from_json((GOLDEN / "task.pendingset").read_bytes())
    assert loaded.job_id == "0b5c2f7e-1a2b-4c3d-9e8f-001122334455"
    assert [c.destination_key for c in loaded.commits] == ["out/year=2025/part-00001-0b5c.csv",
                                                           "out/year=2026/part-00001-0b5c.csv"]
    assert loaded.commits[0].part_count == 2
    assert loaded.commits[0].text == "partition: year=2025"
    assert loaded.total_length == 5242888


def test_golden_success_file_loads():
    loaded = SuccessData.from_json((GOLDEN / "_SUCCESS").read_bytes())
    assert loaded.committer == "magic"
    assert loaded.job_id_source == "spark.sql.sources.writeJobUUID"
    assert loaded.filenames == ("/out/part-00000-7f1e.snappy.parquet",)


@pytest.mark.parametrize("name", ["magic.pending", "task.pendingset", "_SUCCESS"])
def test_written_json_has_exactly_the_golden_field_names(name):
    golden = json.loads((GOLDEN / name).read_bytes())
    cls = {"magic.pending": PendingUpload, "task.pendingset": PendingSet, "_SUCCESS": SuccessData}[name]
    ours = json.loads(cls.from_json(json.dumps(golden)).to_json())
    golden.pop("unknownFutureField", None)
    expected = set(golden) | ({"extraData"} if name == "task.pendingset" else set())
    assert set(ours) == expected
    if name == "task.pendingset":
        assert set(ours["commits"][0]) == set(golden["commits"][0])


def test_pending_round_trip_keeps_every_field():
    original = pending(job_id="j", task_id="t", text="partition: x=1", extra_data={"k": "v"}, created=5, saved=6)
    again = PendingUpload.from_json(original.to_json())
    assert replace(again, filename=None) == original
    assert json.loads(original.to_json())["partCount"] == 1


@pytest.mark.parametrize(("field", "value", "message"), [
    ("version", 1, "Wrong version: 1"),
    ("version", 3, "Wrong version: 3"),
    ("bucket", "", "Empty bucket"),
    ("destinationKey", "", "Empty destination"),
    ("uploadId", "", "Empty uploadId"),
    ("length", -1, "Invalid length"),
    ("uri", "", "Empty uri"),
    ("etags", None, "No etag list"),
    ("etags", [], "No upload parts"),
    ("etags", ['"a"', ""], "Empty etag for part 2"),
    ("length", "3", "wrong type"),
    ("extraData", {"k": 1}, "must be strings"),
])
def test_pending_validation_names_the_broken_rule(field, value, message):
    obj = json.loads(pending().to_json())
    obj[field] = value
    with pytest.raises(ManifestError, match=message) as err:
        PendingUpload.from_json(json.dumps(obj), source="s3://bkt/x.pending")
    assert "s3://bkt/x.pending" in str(err.value)


@pytest.mark.parametrize("data", [b"", b"{", b"[1, 2]", b"\xff\xfe", b"null"])
def test_corrupt_or_truncated_json_is_a_manifest_error(data):
    with pytest.raises(ManifestError):
        PendingSet.from_json(data, source="t.pendingset")


def test_pendingset_with_a_key_twice_is_rejected():
    twice = PendingSet(commits=(pending(), pending(upload_id="u2")))
    with pytest.raises(ManifestError, match="more than one pending commit"):
        PendingSet.from_json(json.dumps({**json.loads(PendingSet(commits=(pending(),)).to_json()),
                                         "commits": [json.loads(c.to_json()) for c in twice.commits]}))


def test_pendingset_of_another_version_is_rejected():
    obj = json.loads(PendingSet(commits=(pending(),)).to_json())
    obj["version"] = 2
    with pytest.raises(ManifestError, match="Wrong version: 2"):
        PendingSet.from_json(json.dumps(obj))


def test_with_job_stamps_job_and_attempt_on_every_commit():
    stamped = PendingSet(commits=(pending(),)).with_job("J", "attempt_x_0000_m_000001_0")
    assert stamped.job_id == "J"
    assert stamped.commits[0].job_id == "J" and stamped.commits[0].task_id == "attempt_x_0000_m_000001_0"
    assert stamped.task_attempt_id == "attempt_x_0000_m_000001_0"


def test_empty_pendingset_is_valid():
    assert PendingSet.from_json(PendingSet(commits=()).to_json()).commits == ()


def test_success_data_forces_the_hadoop_name_and_rejects_others():
    data = json.loads(SuccessData(committer="magic", job_id="j").to_json())
    assert data["name"] == SUCCESS_NAME
    data["name"] = "org.apache.hadoop.fs.s3a.commit.files.SuccessData/2"
    with pytest.raises(ManifestError, match="Incompatible file format"):
        SuccessData.from_json(json.dumps(data))
    del data["name"]
    with pytest.raises(ManifestError, match="no 'name' field"):
        SuccessData.from_json(json.dumps(data))


def test_success_data_lists_at_most_100_files():
    with pytest.raises(ManifestError, match="at most 100"):
        SuccessData(committer="magic", job_id="j", filenames=tuple(f"/f{i}" for i in range(101))).to_json()


def test_journal_round_trip_and_rejects_non_pendingset_entries():
    journal = CommitJournal(job_id="j", committer="magic", bucket="bkt", dest_key="out",
                            pendingsets=("out/__magic_job-j/job-j/00/t.pendingset",), delete_paths=("",),
                            replace_partitions=True, created=1, absolute_dirs=("custom/p=1",),
                            delete_outside=("custom/p=2",))
    assert CommitJournal.from_json(journal.to_json()) == journal
    # A journal written before deleteOutside existed reads as deleting nothing outside the destination.
    older = json.loads(journal.to_json())
    del older["deleteOutside"]
    assert CommitJournal.from_json(json.dumps(older)).delete_outside == ()
    with pytest.raises(ManifestError, match="deleteOutside and firstFiles must be lists of strings"):
        CommitJournal.from_json(json.dumps({**older, "deleteOutside": "custom/p=2"}))
    with pytest.raises(ManifestError, match=r"not a \.pendingset"):
        CommitJournal(job_id="j", committer="m", bucket="b", dest_key="", pendingsets=("x",)).to_json()


def test_a_journal_whose_success_goes_beside_the_clean_up_carries_what_success_says():
    journal = CommitJournal(job_id="j", committer="magic", bucket="bkt", dest_key="out",
                            pendingsets=("out/__magic_job-j/job-j/00/t.pendingset",), created=1,
                            success_beside_cleanup=True, files=3, total_bytes=30,
                            first_files=("out/a", "out/b", "out/c"))
    written = json.loads(journal.to_json())
    assert (written["successBesideCleanup"], written["files"], written["bytes"], written["firstFiles"]) == (
        True, 3, 30, ["out/a", "out/b", "out/c"])
    assert CommitJournal.from_json(journal.to_json()) == journal
    # Without it (no lease, or a journal of an earlier version) none of it is written, and it reads as not beside.
    plain = replace(journal, success_beside_cleanup=False, files=0, total_bytes=0, first_files=())
    assert not {"successBesideCleanup", "files", "bytes", "firstFiles"} & set(json.loads(plain.to_json()))
    assert CommitJournal.from_json(plain.to_json()) == plain
    with pytest.raises(ManifestError, match="firstFiles lists 101 keys; at most 100"):
        replace(journal, first_files=tuple(f"out/{i}" for i in range(101))).to_json()
    with pytest.raises(ManifestError, match="files"):
        CommitJournal.from_json(json.dumps({**written, "files": "3"}))


def test_java_date_matches_java_util_date_to_string_in_utc():
    assert java_date(1741166366000) == "Wed Mar 05 09:19:26 UTC 2025"


@pytest.mark.parametrize(("version", "objects"), [
    ("3.3.4", False), ("3.4.1", False), ("3.4.2", True), ("3.5.0", True), ("3.4.2-amzn-1", True),
    ("3.3.6-amzn-3", False), (None, True), ("", True), ("trunk", True),
])
def test_part_etags_are_written_in_the_form_of_the_s3a_beside(version, objects):
    from s3commit.model import manifests

    upload = replace(pending(), etags=("e1", "e2"), length=6)
    form = manifests.EtagForm.of_hadoop(version)
    assert (form is manifests.EtagForm.OBJECTS) is objects
    etags = json.loads(upload.to_json(etag_form=form))["etags"]
    if objects:
        assert etags == [{"etag": "e1", "checksumAlgorithm": None, "checksum": None},
                         {"etag": "e2", "checksumAlgorithm": None, "checksum": None}]
    else:
        assert etags == ["e1", "e2"]
    assert manifests.PendingUpload.from_json(upload.to_json(etag_form=form)).etags == upload.etags  # either form


def test_a_pendingset_writes_every_commits_part_etags_in_the_form_asked_and_objects_by_default():
    from s3commit.model.manifests import EtagForm

    pendingset = PendingSet(commits=(pending(), pending(destination_key="out/b.txt", upload_id="u2")))
    as_strings = json.loads(pendingset.to_json(etag_form=EtagForm.STRINGS))
    assert [c["etags"] for c in as_strings["commits"]] == [['"e1"'], ['"e1"']]
    assert pendingset.to_json() == pendingset.to_json(etag_form=EtagForm.OBJECTS)
    assert json.loads(pendingset.to_json())["commits"][0]["etags"][0]["etag"] == '"e1"'
    assert PendingSet.from_json(pendingset.to_json(etag_form=EtagForm.STRINGS)) == PendingSet.from_json(
        pendingset.to_json())


class _RecordedPuts:
    def __init__(self):
        self.puts = {}

    def put_object(self, bucket, key, body, **_):
        self.puts[key] = body


class _Recording:
    """What the manifest store needs of a store: its options and the PUTs it is asked for (recorded)."""

    def __init__(self, options):
        self.options = options
        self.objects = _RecordedPuts()


@pytest.mark.parametrize("form", ["objects", "strings", None])
def test_manifests_are_saved_in_the_etag_form_the_stores_options_name(form):
    from s3commit.commit.manifest_store import save_pending_upload, save_pendingset, save_task_pendingset
    from s3commit.config.options import StoreOptions
    from s3commit.model.manifests import EtagForm

    options = StoreOptions() if form is None else StoreOptions(etag_form=form)
    expected = EtagForm.OBJECTS if form is None else EtagForm(form)
    assert options.etag_form is expected
    with pytest.raises(ValueError, match=r"etag_form 'lists' is not valid\. Valid values are: objects, strings"):
        StoreOptions(etag_form="lists")
    store = _Recording(options)
    pendingset = PendingSet(commits=(pending(),))
    save_pending_upload(store, "bkt", "a.pending", pending())
    save_pendingset(store, "bkt", "a.pendingset", pendingset)
    save_task_pendingset(store, "bkt", "t.pendingset", pendingset, first_attempt=True)
    assert store.objects.puts == {"a.pending": pending().to_json(etag_form=expected),
                          "a.pendingset": pendingset.to_json(etag_form=expected),
                          "t.pendingset": pendingset.to_json(etag_form=expected)}


def test_a_sidecars_stores_write_the_etag_form_it_was_given():
    from s3commit.bridge.registry import Configurations
    from s3commit.model.manifests import EtagForm

    conf = {"fs.s3a.endpoint": "http://127.0.0.1:9"}
    for confs, form in ((Configurations(), EtagForm.OBJECTS),
                        (Configurations(etag_form=EtagForm.STRINGS), EtagForm.STRINGS)):
        assert confs.get(confs.register(conf)).store.options.etag_form is form


def test_golden_pendingset_completed_at_task_commit_marks_the_entry_in_extra_data_only():
    data = (GOLDEN / "completed-at-task-commit.pendingset").read_bytes()
    loaded = PendingSet.from_json(data)
    assert [c.completed_at_task_commit for c in loaded.commits] == [True, False]
    # Hadoop's field names, nothing more: the mark is an extraData entry (Map<String, String>, which S3A ignores).
    golden, ours = json.loads(data), json.loads(loaded.to_json(etag_form=EtagForm.STRINGS))
    assert ours == golden
    assert ours["commits"][0]["extraData"] == {COMPLETED_KEY: COMPLETED_AT_TASK_COMMIT}
    # Hadoop's own pendingsets record none.
    hadoop = PendingSet.from_json((GOLDEN / "task.pendingset").read_bytes())
    assert not any(c.completed_at_task_commit for c in hadoop.commits)


def test_as_completed_keeps_the_recorded_checksums():
    entry = pending(extra_data={"k": "v"}).as_completed()
    assert entry.completed_at_task_commit and entry.extra_data == {"k": "v", COMPLETED_KEY: COMPLETED_AT_TASK_COMMIT}
    assert PendingUpload.from_json(entry.to_json()).completed_at_task_commit


@pytest.mark.parametrize("text", [b'{"a": 1, "a": 2}', b'{"n": NaN}', b'[18446744073709551615, -9223372036854775808]',
                                  '{"s": "\u00e9"}', b'[1e400]', b'{"k": [1.5, null, true]}'])
def test_json_is_read_as_the_standard_library_reads_it(text):
    from s3commit.model import json_text

    assert repr(json_text.loads(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", [b"{not json", b"\x00\xff", b'{"a": 1', b""])
def test_json_that_neither_parser_reads_fails_with_the_standard_librarys_error(text):
    from s3commit.model import json_text

    with pytest.raises(json.JSONDecodeError) as ours:
        json_text.loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)


def test_a_length_past_64_bits_in_a_pendingset_is_refused_as_not_a_number_of_its_type():
    upload = json.loads(PendingUpload(bucket="b", destination_key="k", upload_id="u", etags=("e",), length=1,
                                      uri="s3a://b/k").to_json())
    text = json.dumps({**upload, "length": 10**30}).encode()
    with pytest.raises(ManifestError, match="length"):
        PendingUpload.from_json(text, source="s3://b/k.pending")


def test_a_journal_carries_the_task_attempts_accepted_for_each_pendingset():
    keys = ("out/__magic_job-j/job-j/00/t0.pendingset", "out/__magic_job-j/job-j/00/t1.pendingset")
    journal = CommitJournal(job_id="j", committer="magic", bucket="bkt", dest_key="out", pendingsets=keys, created=1,
                            accepted_attempts={keys[0]: ("attempt_1_0000_m_000000_0",)})
    written = json.loads(journal.to_json())
    assert written["acceptedAttempts"] == {keys[0]: ["attempt_1_0000_m_000000_0"]}
    assert CommitJournal.from_json(journal.to_json()) == journal
    # None accepted by name (a journal of an earlier version, or a caller that accepts any): none written, any read.
    plain = replace(journal, accepted_attempts={})
    assert "acceptedAttempts" not in json.loads(plain.to_json())
    assert CommitJournal.from_json(plain.to_json()).accepted_attempts == {}
    with pytest.raises(ManifestError, match="not one of the journal's pendingsets"):
        CommitJournal.from_json(json.dumps({**written, "acceptedAttempts": {"out/other.pendingset": ["a"]}}))
    with pytest.raises(ManifestError, match="acceptedAttempts must map pendingsets to lists"):
        CommitJournal.from_json(json.dumps({**written, "acceptedAttempts": {keys[0]: "a"}}))
