"""The capability probe: ask a store, in a scratch prefix, what it honours (``s3commit doctor``, and once per
endpoint and bucket before s3commit decides anything from it: :mod:`s3commit.store.capability_cache`).

Each check sends the request it is about exactly once (:meth:`~s3commit.store.requests.Requests.send_once`: a
retry would blur what the store said) and turns the answer into a :class:`~s3commit.store.capabilities.Finding`; a
403 is ``denied`` (the credentials lack a permission), never a missing capability. Everything a check creates lives
under ``<prefix>__s3commit_probe-<uuid>/`` and is deleted (objects) or aborted (uploads) when the probe ends, however it
ends (an exception, Ctrl-C, SIGTERM in the command); scratch directories of probes killed outright are swept by the
next probe in that prefix once they are an hour old. About 40 small requests, no part over 64 bytes.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from s3commit.errors import AccessDeniedError, PreconditionFailedError, S3CommitError, StoreError
from s3commit.model import checksums
from s3commit.model.object_info import multipart_etag
from s3commit.model.paths import PROBE_PATH_PREFIX
from s3commit.store.capabilities import (
    CHECKS,
    EXTRA_CHECKSUM_CHECKS,
    Capabilities,
    Finding,
    Outcome,
    checksum_check,
)
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

RACERS = 8
"""Concurrent ``If-None-Match`` PUTs of one new key in the race check: exactly one must win."""
STALE_AFTER = timedelta(hours=1)
"""A probe scratch directory older than this was left by a probe that was killed: the next probe sweeps it."""
PARALLEL_CHECKS = 6
"""Checks asked at once."""
ETAG_ATTEMPTS = 3
"""Times the part of the ETag check is sent before its ETag is judged (damage in transit changes it too)."""
WRONG_ETAG = '"0123456789abcdef0123456789abcdef"'


def endpoint_of(store: S3Store) -> str:
    """The endpoint the store's client resolved (an explicit option, ``AWS_ENDPOINT_URL``, a profile's
    ``endpoint_url`` or AWS's default), as boto3 resolved it: what capabilities are known by."""
    return str(store.requests.client.meta.endpoint_url).rstrip("/")


class Scratch:
    """The probe's scratch prefix: what its checks created, removed when the probe ends."""

    def __init__(self, store: S3Store, bucket: str, prefix: str) -> None:
        self.store = store
        self.bucket = bucket
        self.prefix = prefix
        self.keys: set[str] = set()
        self.uploads: dict[str, str] = {}  # upload id -> key
        self._lock = threading.Lock()

    def key(self, name: str) -> str:
        key = f"{self.prefix}{name}"
        with self._lock:
            self.keys.add(key)
        return key

    def put(self, name: str, body: bytes) -> tuple[str, str]:
        """A plain object (retried as any PUT): its key and ETag."""
        key = self.key(name)
        return key, self.store.objects.put_object(self.bucket, key, body)

    def create(self, name: str, **params: str) -> tuple[str, str]:
        """A new upload, created once: its key and id."""
        key = self.key(name)
        upload_id = str(self.store.requests.send_once("CreateMultipartUpload", self.bucket, key,
                                                      **self.store.options.write_args(), **params)["UploadId"])
        with self._lock:
            self.uploads[upload_id] = key
        return key, upload_id

    def part(self, key: str, upload_id: str, body: bytes, *, number: int = 1, headers: dict[str, str] | None = None
             ) -> str:
        """One part, sent once (``headers``: boto3's names, e.g. ``ChecksumCRC32``): its ETag."""
        return str(self.store.requests.send_once("UploadPart", self.bucket, key, UploadId=upload_id, PartNumber=number,
                                                 Body=body, **(headers or {}))["ETag"])

    def complete(self, key: str, upload_id: str, parts: list[dict], **params: str) -> dict:
        answer: dict = self.store.requests.send_once("CompleteMultipartUpload", self.bucket, key, UploadId=upload_id,
                                                     MultipartUpload={"Parts": parts}, **params)
        return answer

    def holds(self, key: str) -> bytes | None:
        try:
            return self.store.objects.get_object(self.bucket, key)
        except S3CommitError:
            return None

    def clean(self) -> None:
        """Abort every upload and delete every object the probe made (best effort, each step on its own)."""
        for upload_id, key in list(self.uploads.items()):
            with contextlib.suppress(S3CommitError):
                self.store.uploads.abort_multipart_upload(self.bucket, key, upload_id)
        with contextlib.suppress(S3CommitError):
            listed = {info.key for info in self.store.objects.list_objects(self.bucket, self.prefix)}
            self.store.objects.delete_objects(self.bucket, sorted(self.keys | listed))

    def sweep_stale(self, parent: str, now: datetime) -> None:
        """Remove what probes killed outright left in ``parent``: older than :data:`STALE_AFTER` at ``now``, the
        store's clock (never this host's)."""
        cutoff = now - STALE_AFTER
        stem = f"{parent}{PROBE_PATH_PREFIX}"
        with contextlib.suppress(S3CommitError):
            old = [info.key for info in self.store.objects.list_objects(self.bucket, stem)
                           if info.last_modified is not None and info.last_modified < cutoff]
            self.store.objects.delete_objects(self.bucket, old)
        with contextlib.suppress(S3CommitError):
            for upload in self.store.uploads.list_multipart_uploads(self.bucket, stem):
                if upload.initiated is not None and upload.initiated < cutoff:
                    self.store.uploads.abort_multipart_upload(self.bucket, upload.key, upload.upload_id)


# --- the checks ---------------------------------------------------------------------------------------------


def _refused(err: StoreError) -> Finding:
    return Finding(Outcome.REFUSED, err.code or type(err).__name__, err.detail[:200])


def check_put_if_none_match(scratch: Scratch) -> Finding:
    key, _ = scratch.put("put-if-none-match", b"first")
    try:
        scratch.store.requests.send_once("PutObject", scratch.bucket, key, Body=b"second", IfNoneMatch="*")
    except PreconditionFailedError as err:
        return Finding(Outcome.HONOURED, err.code or "412")
    except AccessDeniedError:
        raise
    except StoreError as err:
        return _refused(err)
    return Finding(Outcome.IGNORED, detail=f"the existing object now holds {scratch.holds(key)!r}")


def check_put_if_match(scratch: Scratch) -> Finding:
    key, etag = scratch.put("put-if-match", b"v1")
    try:
        scratch.store.requests.send_once("PutObject", scratch.bucket, key, Body=b"wrong", IfMatch=WRONG_ETAG)
    except PreconditionFailedError:
        pass
    except AccessDeniedError:
        raise
    except StoreError as err:
        return _refused(err)
    else:
        return Finding(Outcome.IGNORED, detail="a PUT with a wrong If-Match replaced the object")
    try:
        scratch.store.requests.send_once("PutObject", scratch.bucket, key, Body=b"v2", IfMatch=etag)
    except AccessDeniedError:
        raise
    except StoreError as err:
        return Finding(Outcome.REFUSED, err.code or type(err).__name__, "the right ETag was refused too")
    return Finding(Outcome.HONOURED, "412")


def check_delete_if_match(scratch: Scratch) -> Finding:
    key, etag = scratch.put("delete-if-match", b"keep")
    try:
        scratch.store.requests.send_once("DeleteObject", scratch.bucket, key, IfMatch=WRONG_ETAG)
    except PreconditionFailedError:
        pass
    except AccessDeniedError:
        raise
    except StoreError as err:
        return _refused(err)
    else:
        if scratch.holds(key) is None:
            return Finding(Outcome.IGNORED, detail="a DELETE with a wrong If-Match deleted the object")
        return Finding(Outcome.IGNORED, detail="a DELETE with a wrong If-Match answered success (object kept)")
    try:
        scratch.store.requests.send_once("DeleteObject", scratch.bucket, key, IfMatch=etag)
    except AccessDeniedError:
        raise
    except StoreError as err:
        return Finding(Outcome.REFUSED, err.code or type(err).__name__, "the right ETag was refused too")
    if scratch.holds(key) is not None:
        return Finding(Outcome.REFUSED, detail="a DELETE with the right If-Match kept the object")
    return Finding(Outcome.HONOURED, "412")


def check_delete_objects_if_match(scratch: Scratch) -> Finding:
    keys = [scratch.put(f"delete-objects-if-match-{n}", b"keep")[0] for n in range(2)]
    try:
        answer = scratch.store.requests.send_once("DeleteObjects", scratch.bucket, Delete={
            "Objects": [{"Key": key, "ETag": WRONG_ETAG} for key in keys], "Quiet": False})
    except AccessDeniedError:
        raise
    except StoreError as err:
        return _refused(err)
    refused = {e.get("Key") for e in answer.get("Errors") or [] if e.get("Code") == "PreconditionFailed"}
    kept = [key for key in keys if scratch.holds(key) is not None]
    if refused == set(keys) and len(kept) == len(keys):
        return Finding(Outcome.HONOURED, "PreconditionFailed")
    return Finding(Outcome.IGNORED, detail=f"{len(keys) - len(kept)} of {len(keys)} keys deleted despite a wrong ETag")


def check_put_if_none_match_race(scratch: Scratch) -> Finding:
    key = scratch.key("race")
    start = threading.Barrier(RACERS)
    results: list[str] = []
    lock = threading.Lock()

    def race(n: int) -> None:
        start.wait()
        try:
            scratch.store.requests.send_once("PutObject", scratch.bucket, key, Body=f"racer {n}".encode(),
                                             IfNoneMatch="*")
            outcome = "won"
        except PreconditionFailedError:
            outcome = "lost"
        except StoreError as err:
            outcome = err.code or type(err).__name__
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=race, args=(n,), name=f"s3commit-probe-race-{n}") for n in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = results.count("won")
    others = sorted({r for r in results if r not in ("won", "lost")})
    if any(code in ("AccessDenied", "403") for code in others):
        return Finding(Outcome.DENIED, "AccessDenied")
    detail = f"{won} of {RACERS} won" + (f"; other answers: {', '.join(others)}" if others else "")
    if won == 1:
        return Finding(Outcome.HONOURED, detail=detail)
    if won > 1:
        return Finding(Outcome.IGNORED, detail=detail)
    return Finding(Outcome.FAILED, others[0] if others else "", detail)


def check_complete_if_none_match(scratch: Scratch) -> Finding:
    key, _ = scratch.put("complete-if-none-match", b"old")
    key, upload_id = scratch.create("complete-if-none-match")
    etag = scratch.part(key, upload_id, b"new")
    try:
        scratch.complete(key, upload_id, [{"PartNumber": 1, "ETag": etag}], IfNoneMatch="*")
    except PreconditionFailedError as err:
        return Finding(Outcome.HONOURED, err.code or "412")
    except AccessDeniedError:
        raise
    except StoreError as err:
        return _refused(err)
    return Finding(Outcome.IGNORED, detail="the existing object was replaced")


def checksum_checker(algorithm: str) -> Callable[[Scratch], Finding]:
    """The check of whether the store validates ``algorithm``'s part checksums."""
    def check(scratch: Scratch) -> Finding:
        name = checksum_check(algorithm)
        key, upload_id = scratch.create(name, ChecksumAlgorithm=algorithm)
        wrong = checksums.checksum(algorithm, b"other bytes")
        try:
            scratch.part(key, upload_id, b"these bytes", headers={checksums.request_field(algorithm): wrong})
        except AccessDeniedError:
            raise
        except StoreError as err:
            return Finding(Outcome.HONOURED, err.code or type(err).__name__)
        return Finding(Outcome.IGNORED, detail=f"a part with a wrong {algorithm} checksum was accepted")
    return check


def check_content_md5(scratch: Scratch) -> Finding:
    key, upload_id = scratch.create("content-md5")
    wrong = base64.b64encode(hashlib.md5(b"other bytes", usedforsecurity=False).digest()).decode()
    try:
        scratch.part(key, upload_id, b"these bytes", headers={"ContentMD5": wrong})
    except AccessDeniedError:
        raise
    except StoreError as err:
        return Finding(Outcome.HONOURED, err.code or type(err).__name__)
    return Finding(Outcome.IGNORED, detail="a part with a wrong Content-MD5 was accepted")


def check_part_etag_md5(scratch: Scratch) -> Finding:
    """A part whose ETag is some other MD5 may have been damaged on the way: sent again (up to three times) before
    the store is said to give ETags that are not MD5s (which would switch the ETag check off)."""
    key, upload_id = scratch.create("part-etag-md5")
    body = b"part bytes for the ETag check"
    md5 = checksums.md5_etag(body)
    for attempt in range(1, ETAG_ATTEMPTS + 1):
        etag = scratch.part(key, upload_id, body).strip('"').lower()
        if etag == md5:
            return Finding(Outcome.YES, detail=f"ETag {etag} is the MD5" + (f" (attempt {attempt})" if attempt > 1
                                                                               else ""))
        if len(etag) != 32 or any(c not in "0123456789abcdef" for c in etag):
            break  # not shaped as an MD5: no damage explains it
    return Finding(Outcome.NO, detail=f"ETag {etag}, MD5 {md5}")


def check_list_uploads(scratch: Scratch) -> Finding:
    _key, upload_id = scratch.create("list-uploads")
    try:
        listed = {u.upload_id for u in scratch.store.uploads.list_multipart_uploads(scratch.bucket, scratch.prefix)}
    except AccessDeniedError:
        raise
    except StoreError as err:
        return Finding(Outcome.NO, err.code or type(err).__name__, err.detail[:200])
    if upload_id in listed:
        return Finding(Outcome.YES, detail=f"{len(listed)} uploads listed under the probe's prefix")
    return Finding(Outcome.NO, detail=f"the upload was not listed ({len(listed)} others were)")


def check_repeated_complete(scratch: Scratch) -> Finding:
    key, upload_id = scratch.create("repeated-complete")
    parts = [{"PartNumber": 1, "ETag": scratch.part(key, upload_id, b"once")}]
    scratch.complete(key, upload_id, parts)
    try:
        scratch.complete(key, upload_id, parts)
    except AccessDeniedError:
        raise
    except StoreError as err:
        return Finding(Outcome.NO, err.code or type(err).__name__, err.detail[:200])
    return Finding(Outcome.YES, detail="the second Complete succeeded")


def check_multipart_etag(scratch: Scratch) -> Finding:
    key, upload_id = scratch.create("multipart-etag")
    etag = scratch.part(key, upload_id, b"one part")
    scratch.complete(key, upload_id, [{"PartNumber": 1, "ETag": etag}])
    expected = multipart_etag([etag])
    found = scratch.store.objects.head_object(scratch.bucket, key).etag
    if expected is None:
        return Finding(Outcome.NO, detail=f"the part's ETag {etag} is not an MD5")
    return Finding(Outcome.YES if found == expected else Outcome.NO,
                   detail=f"ETag {found}" + ("" if found == expected else f", S3's would be {expected}"))


def check_part_number_gaps(scratch: Scratch) -> Finding:
    key, upload_id = scratch.create("part-number-gaps")
    etag = scratch.part(key, upload_id, b"part two", number=2)
    try:
        scratch.complete(key, upload_id, [{"PartNumber": 2, "ETag": etag}])
    except AccessDeniedError:
        raise
    except StoreError as err:
        return Finding(Outcome.NO, err.code or type(err).__name__, err.detail[:200])
    return Finding(Outcome.YES, detail="an upload of one part numbered 2 completed")


def check_head_checksum(scratch: Scratch) -> Finding:
    key, upload_id = scratch.create("head-checksum", ChecksumAlgorithm="CRC32")
    body = b"checksummed bytes"
    value = checksums.checksum("CRC32", body)
    etag = scratch.part(key, upload_id, body, headers={"ChecksumCRC32": value})
    scratch.complete(key, upload_id, [{"PartNumber": 1, "ETag": etag, "ChecksumCRC32": value}])
    info = scratch.store.objects.head_object(scratch.bucket, key, checksums=True)
    returned = dict(info.checksums).get("CRC32")
    if not returned:
        return Finding(Outcome.NO, detail="HEAD returned no CRC32")
    expected = str(checksums.composite("CRC32", [value]))
    same = checksums.composite_matches(expected, returned)
    return Finding(Outcome.YES if same else Outcome.NO,
                   detail=f"CRC32 {returned}" + ("" if same else f", expected {expected} (not comparable)"))


CHECKERS: dict[str, Callable[[Scratch], Finding]] = {
    "put-if-none-match": check_put_if_none_match,
    "put-if-match": check_put_if_match,
    "delete-if-match": check_delete_if_match,
    "delete-objects-if-match": check_delete_objects_if_match,
    "put-if-none-match-race": check_put_if_none_match_race,
    "complete-if-none-match": check_complete_if_none_match,
    "checksum-crc32": checksum_checker("CRC32"),
    "checksum-sha256": checksum_checker("SHA256"),
    "content-md5": check_content_md5,
    "part-etag-md5": check_part_etag_md5,
    "list-uploads": check_list_uploads,
    "repeated-complete": check_repeated_complete,
    "multipart-etag": check_multipart_etag,
    "part-number-gaps": check_part_number_gaps,
    "head-checksum": check_head_checksum,
}
assert list(CHECKERS) == [check.name for check in CHECKS]


def _crt_checks() -> dict[str, Callable[[Scratch], Finding]]:
    try:
        import awscrt.checksums  # noqa: F401
    except ImportError:
        return {}
    return {check.name: checksum_checker(check.name.removeprefix("checksum-").upper())
            for check in EXTRA_CHECKSUM_CHECKS}


def _checked(check: Callable[[Scratch], Finding], scratch: Scratch) -> Finding:
    try:
        return check(scratch)
    except AccessDeniedError as err:
        return Finding(Outcome.DENIED, err.code or "AccessDenied", f"{err.operation}: {err.detail[:160]}")
    except StoreError as err:
        return Finding(Outcome.FAILED, err.code or type(err).__name__, f"{err.operation}: {err.detail[:160]}")


def probe(store: S3Store, bucket: str, prefix: str = "") -> Capabilities:
    """Ask the store what it honours, in a scratch prefix under ``prefix`` (a key prefix in ``bucket``), and
    remove what the probe made. Every check runs, whatever the others found.

    Raises:
        NoSuchBucketError, EndpointUnreachableError: there is no store to ask (nothing was written).
    """
    parent = prefix.strip("/")
    parent = f"{parent}/" if parent else ""
    now = store.head_bucket(bucket)
    scratch = Scratch(store, bucket, f"{parent}{PROBE_PATH_PREFIX}{uuid.uuid4().hex}/")
    started = time.monotonic()
    checks = {**CHECKERS, **_crt_checks()}
    try:
        # The checks are independent (a key or an upload each): asked side by side, read in order.
        with ThreadPoolExecutor(PARALLEL_CHECKS, thread_name_prefix="s3commit-probe") as pool:
            stale = pool.submit(scratch.sweep_stale, parent, now)
            running = {name: pool.submit(_checked, check, scratch) for name, check in checks.items()}
            findings = {name: future.result() for name, future in running.items()}
            stale.result()
    finally:
        scratch.clean()
    log.info("probed s3://%s/%s at %s in %.2f s: %s", bucket, parent, endpoint_of(store),
             time.monotonic() - started, ", ".join(f"{n}={f}" for n, f in findings.items()))
    return Capabilities(endpoint_of(store), bucket, time.time(), findings)
