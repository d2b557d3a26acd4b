"""A job in a child process that SIGKILLs itself at a named point of its lifecycle (the crash matrix).

Run as ``python tests/reliability/crash_child.py --committer magic --dest s3://b/out --job <uuid>`` with the
environment of an S3 test server (``S3TestServer.env()``) and ``S3COMMIT_CRASH_AT=<point>``. The point is
read here, by this test helper, and nowhere in s3commit: a :class:`CrashingStore`'s collaborators wrap the
store's requests and kill the process before or after the n-th matching request (one :class:`CrashPoint`
counts them), and :func:`checkpoint` kills it between lifecycle calls. SIGKILL runs no handler, no
``finally`` and no ``atexit``: exactly what a lost executor or an OOM-killed driver leaves behind. Exit code 0
means the point was never reached (a test failure).

Crash points: ``after-create`` (magic: an upload created, not yet recorded), ``mid-write``,
``after-pending``, ``mid-task-commit``, ``after-task-commit``, ``after-k-completes`` (``after-k-completes:<k>``),
``before-success``, ``mid-overwrite``, ``mid-cleanup`` (job directory being deleted, ``_SUCCESS`` written: under
the lease the deletion goes beside the ``_SUCCESS`` PUT, so it waits for that PUT before the process is killed),
``cleanup-before-success`` (under the lease: the job directory deleted, the ``_SUCCESS`` PUT beside it not sent yet)
and ``mid-cleanup-sweep`` (the orphan sweep after ``_SUCCESS``: the sweep runs beside the ``_SUCCESS`` PUT, so its
listing waits for that PUT before the process is killed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import threading
from dataclasses import dataclass

from s3commit import S3Store, StoreOptions, create_committer
from s3commit.config.options import MIN_PART_SIZE, RetryPolicy
from s3commit.model.paths import UPLOAD_MARKER_SUFFIX
from s3commit.store.conditional import ConditionalRequests
from s3commit.store.objects import ObjectRequests
from s3commit.store.uploads import UploadRequests

CRASH_ENV = "S3COMMIT_CRASH_AT"
MESSAGES_PREFIX = "task commit messages: "
LEAN_ENV = "S3COMMIT_CRASH_LEAN"
"""Set to 1: the child's store sends its Completes by the lean path, a job commit's from one event loop."""


@dataclass(frozen=True)
class StorePoint:
    """Kill the process ``when`` ("before"/"after") the ``nth`` call of ``method`` whose key matches."""

    method: str
    when: str
    nth: int = 1
    key_suffix: str | None = None
    key_contains: str | None = None
    armed_by: str | None = None
    """Only count calls after a ``put_object`` of a key with this suffix has happened (a later phase)."""
    waits: bool = False
    """A matching call made after the first Complete waits for that ``put_object`` (up to a minute)."""
    holds: str | None = None
    """A ``put_object`` of a key with this suffix waits (up to a minute) while the process is killed at the point."""


# The store-level points, by committer family (the staging committers upload only at task commit and write
# no .pending files, so some points differ or do not exist for them).
MAGIC_POINTS = {
    "after-create": StorePoint("create_multipart_upload", "after", 1),
    "mid-write": StorePoint("upload_part", "before", 2),
    "after-pending": StorePoint("put_object", "after", 2, key_suffix=".pending"),
    "mid-task-commit": StorePoint("put_object", "before", 2, key_suffix=".pendingset"),
}
STAGING_POINTS = {
    "mid-task-commit": StorePoint("upload_part", "after", 2),
}
COMMON_POINTS = {
    "before-success": StorePoint("put_object", "before", 1, key_suffix="_SUCCESS"),
    "mid-overwrite": StorePoint("delete_objects", "before", 1, key_contains="old-"),
    "mid-cleanup": StorePoint("delete_objects", "before", 1, key_contains="_job-", armed_by="_SUCCESS", waits=True),
    "cleanup-before-success": StorePoint("delete_objects", "after", 1, key_contains="_job-",
                                         armed_by="_commit-journal.json", holds="_SUCCESS"),
    "mid-cleanup-sweep": StorePoint("list_multipart_uploads", "before", 1, armed_by="_SUCCESS", waits=True),
}
LIFECYCLE_POINTS = {"mid-write-local", "after-task-commit"}
"""Points between lifecycle calls, taken by :func:`checkpoint` (``mid-write-local``: staging, files half
written on local disk)."""


def points_for(committer: str) -> list[str]:
    """The points of the all-or-nothing matrix (``after-create`` is a known limit, tested on its own)."""
    family = {k: v for k, v in MAGIC_POINTS.items() if k != "after-create"} if committer == "magic" \
        else STAGING_POINTS
    local = ["mid-write-local"] if committer != "magic" else []
    return [*family, *local, "after-task-commit", "after-k-completes:4", *COMMON_POINTS]


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def checkpoint(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        die()


class CrashPoint:
    """The point named by ``S3COMMIT_CRASH_AT`` and what is counted towards it: one object, shared by the
    store's collaborators (:class:`CrashingObjects`, :class:`CrashingUploads`, :class:`CrashingConditional`),
    which report each request to it before and after sending it; it SIGKILLs the process at the point."""

    def __init__(self, committer: str) -> None:
        spec = os.environ.get(CRASH_ENV, "")
        name, _, arg = spec.partition(":")
        table = {**COMMON_POINTS, **(MAGIC_POINTS if committer == "magic" else STAGING_POINTS)}
        if name == "after-k-completes":
            self.point: StorePoint | None = StorePoint("complete_multipart_upload", "after", int(arg or 1))
        else:
            self.point = table.get(name)
        self.count = 0
        self.armed = False
        self.arming = threading.Event()  # set with `armed`
        self.completing = False
        self.lock = threading.Lock()
        # Magic uploads being created or created whose record (.upload marker) is not written yet: the
        # after-create window, a known limit tested on its own; every other point is taken outside it, so that
        # a kill there never lands in it by the timing of the write's threads (a loaded machine's).
        self.unrecorded = 0
        self.recorded = threading.Condition()
        self.waits_for_records = committer == "magic" and name != "after-create"

    def hit(self, method: str, key: str, when: str) -> None:
        point = self.point
        if point is None or point.method != method or point.when != when:
            return
        if point.armed_by and not self.armed:
            return
        if point.key_suffix and not key.endswith(point.key_suffix):
            return
        if point.key_contains and point.key_contains not in key:
            return
        with self.lock:
            self.count += 1
            if self.count != point.nth:
                return
        if self.waits_for_records:
            with self.recorded:  # held while dying: no Create is sent after the wait
                self.recorded.wait_for(lambda: self.unrecorded == 0, timeout=30)
                die()
        die()

    def around(self, method: str, key: str, call):  # type: ignore[no-untyped-def]
        self.hit(method, key, "before")
        result = call()
        self.hit(method, key, "after")
        return result

    def creating(self) -> None:
        """A Create is about to be sent: counted before it is, so a kill waits for its record (or its failure)."""
        with self.recorded:
            self.unrecorded += 1

    def recorded_one(self) -> None:
        """A Create was recorded (its upload marker written), or failed."""
        with self.recorded:
            self.unrecorded -= 1
            self.recorded.notify_all()

    def put(self, key: str) -> None:
        """A PUT of ``key`` happened: it may arm the point (a later phase begins)."""
        if self.point is not None and self.point.armed_by and key.endswith(self.point.armed_by):
            self.armed = True
            self.arming.set()


class CrashingObjects(ObjectRequests):
    """PUTs (upload markers, ``.pending``, ``.pendingset``, ``_SUCCESS``) and deletes, reported to the crash point."""

    crash: CrashPoint  # set by CrashingStore

    def put_object(self, bucket, key, body, **kwargs):  # type: ignore[no-untyped-def]
        def put():  # type: ignore[no-untyped-def]
            answer = super(CrashingObjects, self).put_object(bucket, key, body, **kwargs)
            if key.endswith(UPLOAD_MARKER_SUFFIX):
                self.crash.recorded_one()
            return answer

        point = self.crash.point
        if point is not None and point.holds and key.endswith(point.holds):
            threading.Event().wait(60)  # the process is killed meanwhile, at the point
        result = self.crash.around("put_object", key, put)
        self.crash.put(key)
        return result

    def delete_objects(self, bucket, keys):  # type: ignore[no-untyped-def]
        keys = list(keys)
        joined = " ".join(keys)
        point = self.crash.point
        if point is not None and point.waits and point.method == "delete_objects" and self.crash.completing \
                and (point.key_contains is None or point.key_contains in joined):
            self.crash.arming.wait(60)  # (the deletion beside the PUT that arms the point: killed once it is done)
        return self.crash.around("delete_objects", joined, lambda: super(CrashingObjects, self)
                                 .delete_objects(bucket, keys))


class CrashingUploads(UploadRequests):
    """Creates, parts, Completes and the listing of uploads (the orphan sweep), reported to the crash point."""

    crash: CrashPoint  # set by CrashingStore

    def create_multipart_upload(self, bucket, key, **kwargs):  # type: ignore[no-untyped-def]
        def create():  # type: ignore[no-untyped-def]
            self.crash.creating()
            try:
                return super(CrashingUploads, self).create_multipart_upload(bucket, key, **kwargs)
            except BaseException:
                self.crash.recorded_one()
                raise

        return self.crash.around("create_multipart_upload", key, create)

    def upload_part(self, bucket, key, upload_id, part_number, body, **kwargs):  # type: ignore[no-untyped-def]
        return self.crash.around("upload_part", key, lambda: super(CrashingUploads, self).upload_part(
            bucket, key, upload_id, part_number, body, **kwargs))

    def complete_multipart_upload(self, bucket, key, upload_id, etags, **kwargs):  # type: ignore[no-untyped-def]
        self.crash.completing = True
        return self.crash.around("complete_multipart_upload", key, lambda: super(CrashingUploads, self)
                                 .complete_multipart_upload(bucket, key, upload_id, etags, **kwargs))

    def complete_many(self, calls, *, done, **kwargs):  # type: ignore[no-untyped-def]
        """The Completes sent from one loop (``S3COMMIT_CRASH_LEAN``): each one done counts as one completed."""
        self.crash.completing = True

        def counted(tag, etag):  # type: ignore[no-untyped-def]
            done(tag, etag)
            self.crash.hit("complete_multipart_upload", getattr(tag, "destination_key", ""), "after")

        return super().complete_many(calls, done=counted, **kwargs)

    def list_multipart_uploads(self, bucket, prefix):  # type: ignore[no-untyped-def]
        point = self.crash.point
        if point is not None and point.waits and self.crash.completing:
            self.crash.arming.wait(60)
        self.crash.hit("list_multipart_uploads", prefix, "before")
        return super().list_multipart_uploads(bucket, prefix)


class CrashingConditional(ConditionalRequests):
    """Overwrite deletions conditional on the ETag listed (where the store honours it): deletions too, reported to
    the crash point as ``delete_objects``."""

    crash: CrashPoint  # set by CrashingStore

    def delete_objects_if_match(self, bucket, objects):  # type: ignore[no-untyped-def]
        objects = list(objects)
        return self.crash.around("delete_objects", " ".join(k for k, _ in objects),
                                 lambda: super(CrashingConditional, self).delete_objects_if_match(bucket, objects))

    def delete_if_match(self, bucket, key, etag):  # type: ignore[no-untyped-def]
        return self.crash.around("delete_objects", key, lambda: super(CrashingConditional, self)
                                 .delete_if_match(bucket, key, etag))


class CrashingStore(S3Store):
    """An S3Store that SIGKILLs its process at the point named by ``S3COMMIT_CRASH_AT``: its collaborators report
    their requests to one :class:`CrashPoint` (``store.crash``)."""

    objects_class = CrashingObjects
    uploads_class = CrashingUploads
    conditional_class = CrashingConditional

    def __init__(self, options: StoreOptions, committer: str) -> None:
        super().__init__(options)
        self.crash = CrashPoint(committer)
        self.objects.crash = self.uploads.crash = self.conditional.crash = self.crash  # type: ignore[attr-defined]


def file_name(task: int, index: int) -> str:
    return f"year=202{task % 2}/part-{task:05d}-{index}.txt"


def file_body(task: int, index: int, *, big: bool) -> bytes:
    # The first file of the first task spans two parts, so a crash can land between its parts.
    if big and task == 0 and index == 0:
        return b"B" * (MIN_PART_SIZE + 1024 * 1024)
    return f"task {task} file {index}\n".encode() * 10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--committer", required=True)
    parser.add_argument("--dest", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--staging-dir")
    parser.add_argument("--replace", action="store_true", help="overwrite the destination (replace its data)")
    parser.add_argument("--big", action="store_true", help="make one file span two parts")
    parser.add_argument("--print-messages", action="store_true",
                        help="print the task commit messages (one JSON line) before the job commit")
    args = parser.parse_args(argv)

    options = StoreOptions(endpoint_url=os.environ["AWS_ENDPOINT_URL"], region="us-east-1", path_style=True,
                           retry=RetryPolicy(max_attempts=5, initial_delay=0.01, max_delay=0.2),
                           lean_requests=os.environ.get(LEAN_ENV) == "1")
    store = CrashingStore(options, args.committer)
    overrides = {"threads": 2, "staging_dir": args.staging_dir, "part_size": MIN_PART_SIZE}
    if os.environ.get(CRASH_ENV) == "after-pending":  # a point of per-file manifests, not of in-memory tracking
        overrides["track_commits_in_memory"] = False
    if args.replace and args.committer == "directory":
        overrides["conflict_mode"] = "replace"
    committer = create_committer(args.committer, args.dest, job_id=args.job, store=store, **overrides)
    committer.setup_job()
    messages = []
    for task in range(args.tasks):
        attempt = committer.setup_task(committer.new_task_attempt_id(task))
        for index in range(args.files):
            with attempt.open(file_name(task, index)) as out:
                out.write(file_body(task, index, big=args.big))
            if task == 1 and index == 0:
                checkpoint("mid-write-local")
        messages.append(committer.commit_task(attempt))
    if args.print_messages:
        print(MESSAGES_PREFIX + json.dumps([dataclasses.asdict(m) for m in messages]), flush=True)
    checkpoint("after-task-commit")
    delete_paths = ("",) if args.replace and args.committer == "magic" else ()
    replace_partitions = args.replace and args.committer == "partitioned"
    committer.commit_job(messages, delete_paths=delete_paths, replace_partitions=replace_partitions)
    print("committed without reaching the crash point", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
