"""Task commit as an operation of the commit layer (s3commit.commit.task_commit), run on S3 in memory without a
committer: the magic task commit and abort, the staging task commit's upload-and-save."""

from __future__ import annotations

import pytest

from s3commit.commit.task_commit import TaskAttemptRef, abort_magic_task, commit_magic_task, commit_staging_task
from s3commit.commit.task_registry import MagicTaskRegistry
from s3commit.committers.magic import open_magic_file
from s3commit.config.options import CommitterOptions
from s3commit.errors import StoreError
from s3commit.model.manifests import PendingSet
from s3commit.model.paths import MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX, JobLayout
from s3commit.model.uri import S3Uri
from s3commit.testing.memory import MemoryS3, client_of, s3_error
from s3commit.transfer.parallel import SerialExecutor

BUCKET = "b"
JOB = "0b5e7c1e-6f0e-4f53-9a38-0c1d2e3f4a5b"
ATTEMPT = "attempt_202611281200_0001_m_000003_0"
TASK = "task_202611281200_0001_m_000003"


def attempt_ref(prefix: str) -> TaskAttemptRef:
    layout = JobLayout("t", JOB, dir_prefix=prefix)
    return TaskAttemptRef(bucket=BUCKET, job_id=JOB, task_id=TASK, task_attempt_id=ATTEMPT,
                          pendingset_key=layout.pendingset_key(TASK), attempt_dir=layout.task_attempt_dir(ATTEMPT),
                          dest_prefix="t/")


@pytest.fixture
def s3() -> MemoryS3:
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    return s3


def write_magic(s3: MemoryS3, registry: MagicTaskRegistry, ref: TaskAttemptRef, files: dict[str, bytes]) -> None:
    store = s3.store()
    registry.opened(JOB, ATTEMPT)
    base = JobLayout("t", JOB, dir_prefix=MAGIC_PATH_PREFIX).task_attempt_base(ATTEMPT)
    for relative, body in files.items():
        with open_magic_file(store, S3Uri(BUCKET, f"{base}/{relative}"), options=CommitterOptions(),
                             registry=registry) as out:
            out.write(body)


def test_magic_task_commit_of_files_tracked_in_memory_is_one_put_of_the_pendingset(s3):
    registry, ref = MagicTaskRegistry(), attempt_ref(MAGIC_PATH_PREFIX)
    # Names carrying the job id (Spark's): the job's sweep finds their uploads, so nothing is recorded in S3.
    write_magic(s3, registry, ref, {f"year=2026/part-0-{JOB}.parquet": b"a" * 10, f"part-1-{JOB}.parquet": b"b" * 7})
    store = s3.store()

    message = commit_magic_task(store, ref, executor=SerialExecutor(), window=4, registry=registry)

    assert [r.operation for r in client_of(store).requests] == ["put_object"]
    assert (message.job_id, message.task_id, message.task_attempt_id) == (JOB, TASK, ATTEMPT)
    assert (message.pendingset_key, message.files, message.bytes, message.absolute_dirs) == (
        ref.pendingset_key, 2, 17, ())
    pendingset = PendingSet.from_json(s3.objects(BUCKET)[ref.pendingset_key])
    assert [c.destination_key for c in pendingset.commits] == [f"t/part-1-{JOB}.parquet",
                                                               f"t/year=2026/part-0-{JOB}.parquet"]
    assert len(s3.uploads(BUCKET)) == 2  # the job commit completes them
    assert registry.is_closed(JOB, ATTEMPT)


def test_magic_task_abort_aborts_every_upload_and_leaves_no_scratch(s3):
    registry, ref = MagicTaskRegistry(), attempt_ref(MAGIC_PATH_PREFIX)
    write_magic(s3, registry, ref, {"a.parquet": b"a", "b.parquet": b"b"})

    assert abort_magic_task(s3.store(), ref, registry=registry) == 2

    assert s3.uploads(BUCKET) == []
    assert s3.objects(BUCKET) == {}
    assert abort_magic_task(s3.store(), ref, registry=registry) == 0  # idempotent


def test_staging_task_commit_uploads_local_files_and_saves_the_pendingset(s3, tmp_path):
    ref = attempt_ref(STAGING_PATH_PREFIX)
    (tmp_path / "p=1").mkdir()
    (tmp_path / "p=1" / "a.csv").write_bytes(b"x" * 3)
    (tmp_path / "b.csv").write_bytes(b"y" * 5)
    files = {str(tmp_path / "p=1" / "a.csv"): f"t/p=1/a-{JOB}.csv", str(tmp_path / "b.csv"): f"t/b-{JOB}.csv"}

    message = commit_staging_task(s3.store(), ref, files, part_size=5 * 1024 * 1024, threads=2,
                                  executor=SerialExecutor(), part_executor=SerialExecutor())

    assert (message.pendingset_key, message.files, message.bytes) == (ref.pendingset_key, 2, 8)
    pendingset = PendingSet.from_json(s3.objects(BUCKET)[ref.pendingset_key])
    assert [(c.destination_key, c.length, c.text) for c in pendingset.commits] == [
        (f"t/p=1/a-{JOB}.csv", 3, "partition: p=1"), (f"t/b-{JOB}.csv", 5, "")]
    assert sorted(key for key, _ in s3.uploads(BUCKET)) == sorted(files.values())


def test_staging_task_commit_that_fails_aborts_the_uploads_it_made(s3, tmp_path):
    ref = attempt_ref(STAGING_PATH_PREFIX)
    for name in ("a", "b"):
        (tmp_path / name).write_bytes(b"z")
    files = {str(tmp_path / "a"): "t/a", str(tmp_path / "b"): "t/b"}
    store = s3.store(fail=lambda r: s3_error("AccessDenied", 403) if r.operation == "put_object" else None)

    with pytest.raises(StoreError):
        commit_staging_task(store, ref, files, part_size=5 * 1024 * 1024, threads=2, executor=SerialExecutor(),
                            part_executor=SerialExecutor())

    assert s3.uploads(BUCKET) == []
    assert ref.pendingset_key not in s3.objects(BUCKET)
