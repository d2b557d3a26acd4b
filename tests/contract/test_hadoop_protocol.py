"""Hadoop's ``AbstractITCommitProtocol`` (hadoop-aws, ``org.apache.hadoop.fs.s3a.commit``), case by case, for the
``magic``, ``directory`` and ``partitioned`` committers (issue 46).

Each test is named after Hadoop's test method in snake case and checks what Hadoop's checks, through s3commit's
Python API: a ``JobContext`` is a committer object, a ``TaskAttemptContext`` a task attempt, Hadoop's text output
(``part-m-00000`` holding its eight records) a file written with ``attempt.open``. Every test asserts the keys a
reader sees, the ``_SUCCESS`` data and the uploads left pending. Where s3commit deliberately differs from Hadoop, the
test asserts s3commit's behaviour under a ``# differs from Hadoop:`` comment saying why.

Hadoop method                          test here
testRecoveryAndCleanup                 test_recovery_and_cleanup
testCommitLifecycle                    test_commit_lifecycle
testCommitWithStorageClassConfig       test_commit_with_storage_class_config
testCommitterWithDuplicatedCommit      test_committer_with_duplicated_commit
testTwoTaskAttemptsCommit              test_two_task_attempts_commit (Hadoop's order, and attempt 0 committing last)
testCommitterWithFailure               test_committer_with_failure (Hadoop's fault before the commit, and a failed
                                       Complete inside it)
testCommitterWithNoOutputs             test_committer_with_no_outputs
testMapFileOutputCommitter             test_map_file_output_committer
testAbortTaskNoWorkDone                test_abort_task_no_work_done
testAbortJobNoWorkDone                 test_abort_job_no_work_done
testCommitJobButNotTask                test_commit_job_but_not_task
testAbortTaskThenJob                   test_abort_task_then_job
testFailAbort                          test_fail_abort
testAbortJobNotTask                    test_abort_job_not_task
testConcurrentCommitTaskWithSubDir     test_concurrent_commit_task_with_sub_dir
testAMWorkflow                         test_am_workflow
testParallelJobsToAdjacentPaths        test_parallel_jobs_to_adjacent_paths
testParallelJobsToSameDestination      test_parallel_jobs_to_same_destination (Hadoop's order, and both job commits
                                       at once)
testSelfGeneratedUUID                  test_self_generated_uuid
testS3ACommitterFactoryBinding         test_s3a_committer_factory_binding
checkForThreadLeakage (@AfterAll)      assert_no_committer_threads, after the job commits and aborts here

Left out:
testOutputFormatIntegration: needs MapReduce's OutputFormat and RecordWriter; the JVM bridge's suites cover that path.
testRequirePropagatedUUID: s3commit has no fs.s3a.committer.require.uuid (a job id is given or generated); the
    refusal that protects an unpropagated id is test_self_generated_uuid's.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import threading
from dataclasses import replace

import pytest

from s3commit import (
    CommitStateError,
    ConfigError,
    JobCommitError,
    S3Store,
    SuccessData,
    create_committer,
)
from s3commit.commit.recovery_result import AlreadyCommittedError
from s3commit.committers import DirectoryCommitter, MagicCommitter, PartitionedCommitter
from s3commit.config.options import committer_name_from_conf
from s3commit.errors import PendingsetMissingError, S3CommitError, TransientError
from s3commit.store.uploads import UploadRequests
from s3commit.testing.assertions import held_leases, list_keys, list_pending_uploads, visible_keys
from tests.conftest import STAGING_AND_MAGIC, store_options_for

COMMITTERS = STAGING_AND_MAGIC
PART = "part-m-00000"
CONTENT = b"key1\tval1\nval1\nval2\nkey2\nkey1\nkey2\tval2\n"
"""What Hadoop's text output of its eight records holds (``validateContent``)."""
SUB_DIR = "SUB_DIR"


# --- helpers (Hadoop's startJob, writeTextOutput, validateContent, assert...PathDoesNotExist) -------------------------


@pytest.fixture
def make(store, dest, staging_dir):
    """A committer factory; at teardown every job is aborted quietly (Hadoop's ``abortInTeardown``)."""
    committers = []

    def factory(name, *, target=None, job_id=None, with_store=None, **options):
        options.setdefault("unique_filenames", False)  # Hadoop's staging suite runs without unique names
        committer = create_committer(name, target or dest, job_id=job_id, store=with_store or store, threads=4,
                                     staging_dir=staging_dir, **options)
        committers.append(committer)
        return committer

    yield factory
    for committer in committers:
        with contextlib.suppress(S3CommitError):  # committed (AlreadyCommittedError), or a fault the test injected
            committer.abort_job()
        committer.close()


def start_job(make, name, *, write=True, **options):
    """Hadoop's ``startJob``: a committer with its job and one task attempt set up, the text output written."""
    committer = make(name, **options)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    if write:
        write_text_output(attempt)
    return committer, attempt


def write_text_output(attempt, name=PART, data=CONTENT):
    with attempt.open(name) as f:
        f.write(data)
    return name


def pending(s3_client, bucket, prefix=""):
    return [upload.key for upload in list_pending_uploads(s3_client, bucket, prefix)]


def read(s3_client, bucket, key):
    return s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()


def read_success(s3_client, bucket, prefix="out") -> SuccessData:
    return SuccessData.from_json(read(s3_client, bucket, f"{prefix}/_SUCCESS"))


def children(s3_client, bucket, prefix):
    """The names directly under ``prefix`` (files and directories), as ``listStatus`` would give them."""
    page = s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/")
    names = [entry["Key"][len(prefix):] for entry in page.get("Contents", [])]
    names += [entry["Prefix"][len(prefix):].rstrip("/") for entry in page.get("CommonPrefixes", [])]
    return sorted(names)


def not_hidden(names):
    """Hadoop's ``HIDDEN_FILE_FILTER``: names starting with ``_`` or ``.`` are not output (``_SUCCESS``, the lease,
    every job directory)."""
    return [n for n in names if not n.startswith(("_", "."))]


def part_0000(s3_client, bucket, prefix):
    """Hadoop's ``getPart0000``: the one entry directly under ``prefix`` whose name starts with ``part-m-00000``."""
    found = [n for n in children(s3_client, bucket, prefix) if n.startswith(PART)]
    assert len(found) == 1, f"expected one {PART}* under s3://{bucket}/{prefix}, found {found}"
    return prefix + found[0]


def validate_content(s3_client, bucket, prefix="out/", *, expected_job_id=None, name=None):
    """Hadoop's ``validateContent``: the part file holds the text output; ``_SUCCESS`` names the job."""
    if expected_job_id is not None:
        success = read_success(s3_client, bucket, prefix.rstrip("/"))
        assert success.success is True
        assert success.job_id == expected_job_id, f"_SUCCESS names job {success.job_id}, not {expected_job_id}"
        if name is not None:
            assert success.committer == name
    key = part_0000(s3_client, bucket, prefix)
    assert read(s3_client, bucket, key) == CONTENT, f"content of s3://{bucket}/{key}"


def task_attempt_path_exists(committer, attempt, s3_client) -> bool:
    """Hadoop's task attempt path: the attempt's directory in S3 (magic) or on local disk (staging)."""
    if isinstance(committer, MagicCommitter):
        return bool(list_keys(s3_client, committer.dest.bucket, committer.layout.task_attempt_dir(
            attempt.task_attempt_id) + "/"))
    return os.path.exists(attempt.local_dir)


def job_attempt_path_exists(committer, s3_client) -> bool:
    """Hadoop's job attempt path: the job's directory in S3 (every committer), and its local one (staging)."""
    in_s3 = bool(list_keys(s3_client, committer.dest.bucket, committer.layout.job_dir + "/"))
    local = not isinstance(committer, MagicCommitter) and os.path.exists(committer.local_job_dir)
    return in_s3 or local


def assert_no_committer_threads(committer):
    """Hadoop's ``checkForThreadLeakage``: no pool thread of the job's committer is left."""
    prefixes = tuple(f"s3commit-{kind}-{committer.job_id[:8]}" for kind in ("files", "parts"))
    left = [t.name for t in threading.enumerate() if t.name.startswith(prefixes)]
    assert left == [], f"committer threads of job {committer.job_id} left: {left}"


class FirstCompleteFails(UploadRequests):
    """Fails the first CompleteMultipartUpload with "oops" (Hadoop's ``CommitterFaultInjectionImpl`` message)."""

    def __init__(self, requests, bodies, objects):
        super().__init__(requests, bodies, objects)
        self.failed = 0

    def complete_multipart_upload(self, bucket, key, upload_id, etags, **kwargs):
        if not self.failed:
            self.failed += 1
            raise TransientError("oops", operation="CompleteMultipartUpload", bucket=bucket, key=key,
                                 upload_id=upload_id)
        return super().complete_multipart_upload(bucket, key, upload_id, etags, **kwargs)

    def complete_many(self, calls, *, done, stop_on_failure=True, **kwargs):
        """The same fault where a job commit sends its Completes from one event loop (the lean path's)."""
        calls = iter(calls)
        failures = []
        if not self.failed and (first := next(calls, None)) is not None:
            self.failed += 1
            tag, call = first
            failures.append((tag, TransientError("oops", operation="CompleteMultipartUpload", bucket=call.bucket,
                                                 key=call.key, upload_id=call.upload_id)))
            if stop_on_failure:
                return failures
        return failures + super().complete_many(calls, done=done, stop_on_failure=stop_on_failure, **kwargs)


class FailingCompletes(S3Store):
    """A store whose first CompleteMultipartUpload fails with "oops" (Hadoop's ``CommitterFaultInjectionImpl``)."""

    uploads_class = FirstCompleteFails


class InjectedFailure(Exception):
    """Hadoop's ``CommitterFaultInjectionImpl.Failure``."""


# --- the cases -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", COMMITTERS)
def test_recovery_and_cleanup(name, make, s3_client, s3_bucket):
    committer, attempt = start_job(make, name)
    assert attempt.work_path and str(committer.dest) == f"s3://{s3_bucket}/out"
    message = committer.commit_task(attempt)
    assert not task_attempt_path_exists(committer, attempt, s3_client), "task attempt path left after task commit"
    assert pending(s3_client, s3_bucket) == [f"out/{PART}"]

    # Hadoop's second application attempt of the job: a new committer object with the job's id.
    second = make(name, job_id=committer.job_id)
    # differs from Hadoop: a second setup of a live job's id is refused (two live jobs with one id would commit and
    # clean up each other's files); a job that is gone is discarded with `s3commit recover --abort`. Hadoop's second
    # attempt sets the job up again. Neither recovers tasks (Hadoop: isRecoverySupported() is false and recoverTask
    # fails; s3commit has no task recovery at all: a task runs again).
    with pytest.raises(ConfigError, match=f"job id {committer.job_id} is already used by another job"):
        second.setup_job()
    second.abort_task(second.attach_task(attempt.task_attempt_id))  # nothing to abort: the task committed
    assert pending(s3_client, s3_bucket) == [f"out/{PART}"]
    second.abort_job()  # aborts the committed task's uploads
    assert pending(s3_client, s3_bucket) == []
    assert list_keys(s3_client, s3_bucket, "out/") == []
    assert not job_attempt_path_exists(committer, s3_client)
    # The first attempt cannot commit what the second aborted.
    with pytest.raises(PendingsetMissingError, match="is missing"):
        committer.commit_job([message])
    assert visible_keys(s3_client, s3_bucket, "out/") == []
    assert pending(s3_client, s3_bucket) == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_commit_lifecycle(name, make, s3_client, s3_bucket):
    committer, attempt = start_job(make, name, write=False)
    # 1. Writing output.
    write_text_output(attempt)
    # 2. Committing the task: nothing visible at the destination, the upload pending.
    assert committer.needs_task_commit(attempt), f"no files to commit were found by {committer}"
    message = committer.commit_task(attempt)
    assert (message.files, message.bytes) == (1, len(CONTENT))
    assert [k for k in visible_keys(s3_client, s3_bucket, "out/") if "part" in k] == []
    assert visible_keys(s3_client, s3_bucket, "out/") == []
    # 3. Committing the job.
    assert pending(s3_client, s3_bucket, "out/") == [f"out/{PART}"]
    success = committer.commit_job([message])
    # 4. Validating the content, _SUCCESS and that nothing is pending.
    assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS", f"out/{PART}"]
    validate_content(s3_client, s3_bucket, expected_job_id=committer.job_id, name=name)
    marker = read_success(s3_client, s3_bucket)
    assert marker.filenames == (f"/out/{PART}",)
    assert marker.metrics["committer_files"] == 1
    assert success.job_id == committer.job_id and success.filenames == marker.filenames
    assert pending(s3_client, s3_bucket) == []
    assert not job_attempt_path_exists(committer, s3_client)
    assert_no_committer_threads(committer)


@pytest.mark.parametrize("name", COMMITTERS)
def test_commit_with_storage_class_config(name, make, s3_server, s3_client, s3_bucket):
    store = S3Store(replace(store_options_for(s3_server), storage_class="INTELLIGENT_TIERING"))
    committer, attempt = start_job(make, name, with_store=store)
    message = committer.commit_task(attempt)
    assert pending(s3_client, s3_bucket, "out/") == [f"out/{PART}"]
    committer.commit_job([message])
    validate_content(s3_client, s3_bucket, expected_job_id=committer.job_id)
    assert pending(s3_client, s3_bucket) == []
    head = s3_client.head_object(Bucket=s3_bucket, Key=f"out/{PART}")
    assert head.get("StorageClass", "STANDARD").upper() == "INTELLIGENT_TIERING", head.get("StorageClass")


@pytest.mark.parametrize("name", COMMITTERS)
def test_committer_with_duplicated_commit(name, make, s3_client, s3_bucket):
    committer, attempt = start_job(make, name)
    committer.commit_job([committer.commit_task(attempt)])
    validate_content(s3_client, s3_bucket, expected_job_id=committer.job_id)
    assert pending(s3_client, s3_bucket) == []
    # differs from Hadoop: a second commit of the attempt fails with CommitStateError, for every committer (Hadoop:
    # FileNotFoundException, as the task attempt path is gone; not checked for magic with in-memory tracking).
    with pytest.raises(CommitStateError, match=f"task attempt {attempt.task_attempt_id} is already committed"):
        committer.commit_task(attempt)
    # differs from Hadoop: aborting a committed job raises AlreadyCommittedError and leaves its output in place
    # (Hadoop's abortJob after commitJob only cleans up): nothing is ever rolled back after _SUCCESS.
    with pytest.raises(AlreadyCommittedError, match="has committed"):
        committer.abort_job()
    assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS", f"out/{PART}"]
    validate_content(s3_client, s3_bucket, expected_job_id=committer.job_id)
    assert pending(s3_client, s3_bucket) == []


# attempt-0-last: attempt 0 ran late and commits after attempt 1 (the magic committer's first attempt writes its
# pendingset with If-None-Match, so it finds attempt 1's and aborts its uploads: found by this case).
TWO_ATTEMPTS = [pytest.param(name, order, id=f"{name}-{order}") for order in ("attempt-1-last", "attempt-0-last")
                for name in COMMITTERS]


@pytest.mark.parametrize(("name", "order"), TWO_ATTEMPTS)
def test_two_task_attempts_commit(name, order, make, s3_client, s3_bucket):
    # HADOOP-17258: two attempts of one task both commit; the one committed last wins, and only its files are
    # visible. Hadoop commits attempt 0, then attempt 1 (basename "attempt2"); the reverse is a speculative attempt
    # that committed before the original.
    committer = make(name)
    committer.setup_job()
    first = committer.setup_task(committer.new_task_attempt_id(0, 0))
    name1 = write_text_output(first)
    second = committer.setup_task(committer.new_task_attempt_id(0, 1))
    name2 = write_text_output(second, "attempt2-m-00000")
    assert name1 != name2
    if order == "attempt-1-last":
        committer.commit_task(first)
        committer.commit_task(second)
        winner, loser = name2, name1
    else:
        committer.commit_task(second)
        committer.commit_task(first)
        winner, loser = name1, name2
    success = committer.commit_job()  # Hadoop's commitJob(JobContext): every pendingset of the job
    assert success.filenames == (f"/out/{winner}",), "files committed"
    assert read_success(s3_client, s3_bucket).filenames == (f"/out/{winner}",)
    assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS", f"out/{winner}"]
    assert f"out/{loser}" not in visible_keys(s3_client, s3_bucket, "out/")
    assert read(s3_client, s3_bucket, f"out/{winner}") == CONTENT
    left = pending(s3_client, s3_bucket)
    assert left == [], (f"the losing attempt's upload {left} is still pending after the job commit: nothing will "
                        "ever complete or abort it")


@pytest.mark.parametrize("fault", ["before-commit", "first-complete"])
@pytest.mark.parametrize("name", COMMITTERS)
def test_committer_with_failure(name, fault, make, s3_server, s3_client, s3_bucket):
    if fault == "before-commit":
        # Hadoop's fault: the committer's first job commit fails ("oops") before it begins.
        committer, attempt = start_job(make, name)
        message = committer.commit_task(attempt)
        real = committer._commit_job

        def fail_once(*args, **kwargs):
            committer._commit_job = real
            raise InjectedFailure("oops")

        committer._commit_job = fail_once
        with pytest.raises(InjectedFailure, match="oops"):
            committer.commit_job([message])
        assert visible_keys(s3_client, s3_bucket, "out/") == []
        assert pending(s3_client, s3_bucket) == [f"out/{PART}"]
        # The retry commits the job.
        committer.commit_job([message])
        validate_content(s3_client, s3_bucket, expected_job_id=committer.job_id)
        assert pending(s3_client, s3_bucket) == []
        assert_no_committer_threads(committer)
        # differs from Hadoop: a third commit of the committer fails with CommitStateError (Hadoop:
        # FileNotFoundException for magic, IOException for staging, as the job's directory is gone)...
        with pytest.raises(CommitStateError, match="is already committed; a job commits once"):
            committer.commit_job([message])
        # ...and a commit sent again by another committer object of the job (a driver that lost the answer) returns
        # the same _SUCCESS instead of failing: a job commits exactly once, and says so each time it is asked.
        again = make(name, job_id=committer.job_id).commit_job([message])
        assert again.job_id == committer.job_id and again.filenames == (f"/out/{PART}",)
        assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS", f"out/{PART}"]
        validate_content(s3_client, s3_bucket, expected_job_id=committer.job_id)
        return
    # A fault inside the commit: its first Complete fails.
    store = FailingCompletes(store_options_for(s3_server))
    committer, attempt = start_job(make, name, with_store=store)
    message = committer.commit_task(attempt)
    with pytest.raises(JobCommitError, match="oops") as failure:
        committer.commit_job([message])
    assert (failure.value.reverted, failure.value.aborted) == (0, 1)
    assert visible_keys(s3_client, s3_bucket, "out/") == []
    assert pending(s3_client, s3_bucket) == []
    assert not job_attempt_path_exists(committer, s3_client)
    assert_no_committer_threads(committer)
    # differs from Hadoop: Hadoop's retry succeeds only because its injected fault comes before its commit begins; a
    # failed s3commit commit has rolled back and aborted the job (as Hadoop's commitJob does on a real failure), so
    # a retry is refused, by the committer and by another committer object of the job alike: the job runs again.
    with pytest.raises(CommitStateError, match="is already aborted; a job commits once"):
        committer.commit_job([message])
    with pytest.raises(PendingsetMissingError, match="is missing: was the job already committed or aborted"):
        make(name, job_id=committer.job_id).commit_job([message])
    assert visible_keys(s3_client, s3_bucket, "out/") == []
    assert pending(s3_client, s3_bucket) == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_committer_with_no_outputs(name, make, s3_client, s3_bucket):
    committer, attempt = start_job(make, name, write=False)
    assert committer.needs_task_commit(attempt) is (name == "magic")  # staging: only with local files
    message = committer.commit_task(attempt)
    assert (message.files, message.pendingset_key) == (0, None)
    assert not task_attempt_path_exists(committer, attempt, s3_client)
    success = committer.commit_job([message])
    assert success.filenames == ()
    assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS"]
    assert read_success(s3_client, s3_bucket).job_id == committer.job_id
    assert pending(s3_client, s3_bucket) == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_map_file_output_committer(name, make, s3_client, s3_bucket):
    # A MapFile is a directory part-m-00000/ holding an "index" and a "data" file.
    # differs from Hadoop: its partitioned suite skips this case ("not suitable for Map Output"); s3commit's
    # partitioned committer (append) commits the directory like any other partition.
    committer, attempt = start_job(make, name, write=False)
    index, data = b"index of ten records\n", b"".join(b"%d\tval%d\n" % (i, 2 - (i & 1)) for i in range(10))
    write_text_output(attempt, f"{PART}/index", index)
    write_text_output(attempt, f"{PART}/data", data)
    committer.commit_job([committer.commit_task(attempt)])
    success = read_success(s3_client, s3_bucket)
    assert success.job_id == committer.job_id
    assert set(success.filenames) == {f"/out/{PART}/data", f"/out/{PART}/index"}
    # Listed with HIDDEN_FILE_FILTER: exactly the map directory.
    assert not_hidden(children(s3_client, s3_bucket, "out/")) == [PART]
    assert part_0000(s3_client, s3_bucket, "out/") == f"out/{PART}"
    assert children(s3_client, s3_bucket, f"out/{PART}/") == ["data", "index"]
    assert read(s3_client, s3_bucket, f"out/{PART}/index") == index
    assert read(s3_client, s3_bucket, f"out/{PART}/data") == data
    assert pending(s3_client, s3_bucket) == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_abort_task_no_work_done(name, make, s3_client, s3_bucket):
    committer, attempt = start_job(make, name, write=False)
    committer.abort_task(attempt)
    assert not task_attempt_path_exists(committer, attempt, s3_client)
    assert visible_keys(s3_client, s3_bucket, "out/") == []
    assert pending(s3_client, s3_bucket) == []
    with pytest.raises(CommitStateError, match=f"task attempt {attempt.task_attempt_id} is already aborted"):
        committer.commit_task(attempt)
    committer.abort_job()  # Hadoop's executeWork aborts the job after the work
    assert list_keys(s3_client, s3_bucket, "out/") == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_abort_job_no_work_done(name, make, s3_client, s3_bucket):
    committer, attempt = start_job(make, name, write=False)
    committer.abort_job()
    assert not task_attempt_path_exists(committer, attempt, s3_client)
    assert list_keys(s3_client, s3_bucket, "out/") == []
    assert not job_attempt_path_exists(committer, s3_client)
    assert pending(s3_client, s3_bucket) == []
    with pytest.raises(CommitStateError, match="is already aborted"):
        committer.setup_task(committer.new_task_attempt_id(1))
    with pytest.raises(CommitStateError, match="is already aborted"):
        committer.commit_job([])
    assert list_keys(s3_client, s3_bucket, "out/") == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_commit_job_but_not_task(name, make, s3_client, s3_bucket):
    committer, attempt = start_job(make, name)
    if name == "magic":
        assert pending(s3_client, s3_bucket) == [f"out/{PART}"]  # streamed as it was written
    # The job is committed by a new committer object of the job, without the task's commit.
    success = make(name, job_id=committer.job_id).commit_job()
    assert success.job_id == committer.job_id and success.filenames == ()
    assert not [n for n in children(s3_client, s3_bucket, "out/") if n.startswith(PART)]
    assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS"]
    assert not task_attempt_path_exists(committer, attempt, s3_client)
    # differs from Hadoop: Hadoop cancels the uncommitted task's uploads by aborting every upload under the destination
    # (fs.s3a.committer.abort.pending.uploads, which would take other jobs' too); s3commit aborts its own job's only.
    assert pending(s3_client, s3_bucket) == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_abort_task_then_job(name, make, s3_client, s3_bucket):
    committer, attempt = start_job(make, name)
    committer.abort_task(attempt)
    assert not task_attempt_path_exists(committer, attempt, s3_client)  # nothing under the work path
    committer.abort_job()
    # The output directory is absent or empty (magic: __magic_job-<id> is gone too); no upload is pending.
    assert list_keys(s3_client, s3_bucket, "out/") == []
    assert not job_attempt_path_exists(committer, s3_client)
    assert pending(s3_client, s3_bucket) == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_fail_abort(name, make, s3_client, s3_bucket):
    committer, attempt = start_job(make, name)
    committer.abort_task(attempt)
    assert not [n for n in children(s3_client, s3_bucket, "out/") if n.startswith(PART)]
    assert "_SUCCESS" not in children(s3_client, s3_bucket, "out/")
    committer.abort_job()
    assert not task_attempt_path_exists(committer, attempt, s3_client)
    assert not job_attempt_path_exists(committer, s3_client)
    assert_no_committer_threads(committer)
    committer.abort_job()  # idempotent
    assert list_keys(s3_client, s3_bucket, "out/") == []
    assert pending(s3_client, s3_bucket) == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_abort_job_not_task(name, make, s3_client, s3_bucket):
    committer, attempt = start_job(make, name)
    committer.abort_job()
    assert not task_attempt_path_exists(committer, attempt, s3_client)
    assert not job_attempt_path_exists(committer, s3_client)
    assert pending(s3_client, s3_bucket) == []
    assert list_keys(s3_client, s3_bucket, "out/") == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_concurrent_commit_task_with_sub_dir(name, make, s3_client, s3_bucket):
    am_committer = make(name)
    am_committer.setup_job()
    messages, errors = {}, []

    def task(n):
        # Each task has its own copy of the committer, as a worker receives it.
        worker = pickle.loads(pickle.dumps(am_committer))
        try:
            attempt = worker.setup_task(worker.new_task_attempt_id(n))
            write_text_output(attempt, f"{SUB_DIR}/part-m-0000{n}")
            messages[n] = worker.commit_task(attempt)
        except Exception as err:  # surfaced below
            errors.append(err)
        finally:
            worker.close()

    threads = [threading.Thread(target=task, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    am_committer.commit_job([messages[0], messages[1]])
    assert visible_keys(s3_client, s3_bucket, "out/") == [
        f"out/{SUB_DIR}/part-m-00000", f"out/{SUB_DIR}/part-m-00001", "out/_SUCCESS"]
    assert not [n for n in children(s3_client, s3_bucket, "out/") if n.startswith(PART)]
    assert list_keys(s3_client, s3_bucket, f"out/{SUB_DIR}/{SUB_DIR}") == []
    validate_content(s3_client, s3_bucket, f"out/{SUB_DIR}/")  # no _SUCCESS in the subdirectory
    assert read(s3_client, s3_bucket, f"out/{SUB_DIR}/part-m-00001") == CONTENT
    assert read_success(s3_client, s3_bucket).job_id == am_committer.job_id
    assert pending(s3_client, s3_bucket) == []
    assert_no_committer_threads(am_committer)


@pytest.mark.parametrize("name", COMMITTERS)
def test_am_workflow(name, make, s3_client, s3_bucket):
    # The application master aborts a failed container's task attempt with a committer object of its own.
    committer, attempt = start_job(make, name)
    am = make(name, job_id=committer.job_id)
    am.abort_task(am.attach_task(attempt.task_attempt_id))
    assert pending(s3_client, s3_bucket) == []
    assert not task_attempt_path_exists(committer, attempt, s3_client)
    if name == "magic":
        with pytest.raises(CommitStateError, match=f"task attempt {attempt.task_attempt_id} of job"):
            committer.commit_task(attempt)
    success = committer.commit_job()
    assert success.filenames == ()
    assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS"]
    assert pending(s3_client, s3_bucket) == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_parallel_jobs_to_adjacent_paths(name, make, s3_client, s3_bucket):
    # Hadoop's second destination is the first's name plus "job2Dest": a sibling whose key starts with the first's.
    job1, task1 = start_job(make, name)
    job2 = make(name, target=f"s3://{s3_bucket}/outjob2Dest")
    job2.setup_job()
    task2 = job2.setup_task(job2.new_task_attempt_id(0))
    assert job1.dest != job2.dest and job1.job_id != job2.job_id
    write_text_output(task2)
    # Commit the tasks in the order task 2, task 1.
    message2 = job2.commit_task(task2)
    message1 = job1.commit_task(task1)
    assert pending(s3_client, s3_bucket, "out/") == [f"out/{PART}"]
    assert pending(s3_client, s3_bucket, "outjob2Dest/") == [f"outjob2Dest/{PART}"]
    # Commit the jobs in the order job 1, job 2.
    job1.commit_job([message1])
    assert pending(s3_client, s3_bucket, "out/") == []
    validate_content(s3_client, s3_bucket, "out/", expected_job_id=job1.job_id)
    assert pending(s3_client, s3_bucket, "outjob2Dest/") == [f"outjob2Dest/{PART}"]
    assert visible_keys(s3_client, s3_bucket, "outjob2Dest/") == []
    job2.commit_job([message2])
    validate_content(s3_client, s3_bucket, "outjob2Dest/", expected_job_id=job2.job_id)
    assert visible_keys(s3_client, s3_bucket) == [
        "out/_SUCCESS", f"out/{PART}", "outjob2Dest/_SUCCESS", f"outjob2Dest/{PART}"]
    assert pending(s3_client, s3_bucket) == []


@pytest.mark.parametrize("commits", ["in-hadoop-order", "at-once"])
@pytest.mark.parametrize("name", COMMITTERS)
def test_parallel_jobs_to_same_destination(name, commits, make, s3_client, s3_bucket):
    # HADOOP-17318: two jobs with their own ids write one destination, with the same task attempt id.
    # differs from Hadoop: Hadoop needs fs.s3a.committer.abort.pending.uploads=false here, or a job commit aborts the
    # other job's uploads; s3commit never aborts another job's uploads.
    job1 = make(name, job_id="job-one-" + os.urandom(4).hex())
    job1.setup_job()
    task1 = job1.setup_task(job1.new_task_attempt_id(0))
    write_text_output(task1)
    job2 = make(name, job_id="job-two-" + os.urandom(4).hex())
    job2.setup_job()
    task2 = job2.setup_task(task1.task_attempt_id)
    # Each job's directory, task attempt directory and work path are its own, named by its id.
    assert job1.layout.job_dir != job2.layout.job_dir
    assert job1.layout.task_attempt_dir(task1.task_attempt_id) != job2.layout.task_attempt_dir(task2.task_attempt_id)
    assert task1.work_path != task2.work_path
    assert job1.job_id in task1.work_path and job2.job_id in task2.work_path
    assert job1.job_id_source == job2.job_id_source == "caller"  # Hadoop: SparkWriteUUID
    writer2 = task2.open("task2-m-00000")  # job 2's file is being written (magic: its upload is open)
    writer2.write(CONTENT[:9])
    message1 = job1.commit_task(task1)
    if commits == "in-hadoop-order" and name == "magic":
        job1.commit_job([message1])  # while job 2's upload is open
    writer2.write(CONTENT[9:])
    writer2.close()
    message2 = job2.commit_task(task2)
    if commits == "in-hadoop-order":
        if name != "magic":
            assert pending(s3_client, s3_bucket) == [f"out/{PART}", "out/task2-m-00000"]
            job1.commit_job([message1])
        assert pending(s3_client, s3_bucket) == ["out/task2-m-00000"]
        job2.commit_job([message2])
        assert read_success(s3_client, s3_bucket).job_id == job2.job_id
    else:
        # differs from Hadoop: the destination's commit lease serializes the two commits (Hadoop takes no lock).
        barrier, errors = threading.Barrier(2), []

        def commit(job, message):
            barrier.wait()
            try:
                job.commit_job([message])
            except Exception as err:  # surfaced below
                errors.append(err)

        threads = [threading.Thread(target=commit, args=pair) for pair in ((job1, message1), (job2, message2))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert read_success(s3_client, s3_bucket).job_id in (job1.job_id, job2.job_id)
    assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS", f"out/{PART}", "out/task2-m-00000"]
    assert read(s3_client, s3_bucket, f"out/{PART}") == CONTENT
    assert read(s3_client, s3_bucket, "out/task2-m-00000") == CONTENT
    assert pending(s3_client, s3_bucket) == []
    assert held_leases(s3_client, s3_bucket) == []
    assert not job_attempt_path_exists(job1, s3_client) and not job_attempt_path_exists(job2, s3_client)


@pytest.mark.parametrize("name", COMMITTERS)
def test_self_generated_uuid(name, make, s3_client, s3_bucket):
    committer = make(name)  # no job id given: the committer generates one
    uuid = committer.job_id
    assert committer.job_id_source == "generated"
    committer.setup_job()
    # Because the job was set up on it, the committer (or a copy of it: Hadoop's job configuration) sets up tasks.
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    copy = pickle.loads(pickle.dumps(committer))
    assert (copy.job_id, copy.job_id_source) == (uuid, "generated")
    copied_attempt = copy.setup_task(copy.new_task_attempt_id(1))
    copy.abort_task(copied_attempt)
    copy.close()
    # A new committer generates another id, and refuses task setup: no driver would commit its task.
    committer2 = make(name)
    assert committer2.job_id_source == "generated" and committer2.job_id != uuid
    attempt_id = committer2.new_task_attempt_id(1)
    with pytest.raises(CommitStateError, match=rf"task attempt {attempt_id}: this committer generated its own job id "
                                               rf"\({committer2.job_id}\) and its job was never set up"):
        committer2.setup_task(attempt_id)
    assert list_keys(s3_client, s3_bucket, committer2.layout.job_dir + "/") == []
    # Task abort with the self-generated id is fine.
    attempt2 = committer2.attach_task(attempt_id)
    committer2.abort_task(attempt2)
    assert attempt2.aborted and not task_attempt_path_exists(committer2, attempt2, s3_client)
    # The job set up on the first committer commits under its generated id.
    write_text_output(attempt)
    success = committer.commit_job([committer.commit_task(attempt)])
    assert (success.job_id, success.job_id_source) == (uuid, "generated")
    marker = read_success(s3_client, s3_bucket)
    assert (marker.job_id, marker.job_id_source, marker.filenames) == (uuid, "generated", (f"/out/{PART}",))
    assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS", f"out/{PART}"]
    assert pending(s3_client, s3_bucket) == []


@pytest.mark.parametrize("name", COMMITTERS)
def test_s3a_committer_factory_binding(name, store, dest):
    # The committer named in Hadoop's configuration is the committer the factory makes.
    expected = {"magic": MagicCommitter, "directory": DirectoryCommitter, "partitioned": PartitionedCommitter}[name]
    bound = committer_name_from_conf({"fs.s3a.committer.name": name})
    committer = create_committer(bound, dest, store=store)
    assert type(committer) is expected and committer.name == name
    assert type(create_committer(name, dest, store=store)) is type(committer)
    with pytest.raises(ConfigError, match="invalid"):
        create_committer(committer_name_from_conf({"fs.s3a.committer.name": "invalid"}), dest, store=store)
