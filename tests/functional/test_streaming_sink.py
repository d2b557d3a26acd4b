"""The file sink's batch commits (s3commit.committers.sink_batches) without Spark: a batch's files stay pending until
its log entry exists, a lost batch is rolled back, and recovery settles left-over batch jobs by what the log holds.
Against the moto server behind the simulator (profile none)."""

from __future__ import annotations

import json

import pytest

from s3commit.committers.magic import MagicCommitter
from s3commit.committers.sink_batches import (
    BatchCommit,
    SinkLog,
    batch_job_id,
    batch_jobs,
    batch_of_job,
    recover_sink,
)
from s3commit.errors import ConfigError, ManifestError
from s3commit.model.batch_journal import BatchJournal
from s3commit.model.manifests import CommitJournal
from s3commit.model.paths import MAGIC_PATH_PREFIX
from s3commit.model.uri import S3Uri
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys, list_pending_uploads


@pytest.fixture
def sink(s3_bucket) -> S3Uri:
    return S3Uri(s3_bucket, "sink")


def write_batch_files(store, sink: S3Uri, job_id: str, *, tasks: int = 2) -> list:
    """What a batch's tasks do: write one file each to a magic path and commit (pending uploads)."""
    committer = MagicCommitter(sink, job_id=job_id, store=store)
    messages = []
    for task in range(tasks):
        attempt = committer.setup_task(committer.new_task_attempt_id(task))
        with attempt.open(f"part-{task:05d}-{job_id}.parquet") as out:
            out.write(f"task {task} of {job_id}".encode())
        messages.append(committer.commit_task(attempt))
    committer.close()
    return messages


def write_log_entry(s3_client, sink: S3Uri, batch: int, keys, *, name: str | None = None) -> None:
    """The sink's log entry as Spark writes it: ``v1`` then one JSON file status per line."""
    lines = ["v1", *(json.dumps({"path": f"s3a://{sink.bucket}/{k}", "size": 1, "isDir": False,
                                 "modificationTime": 0, "blockReplication": 1, "blockSize": 1,
                                 "action": "add"}) for k in keys)]
    s3_client.put_object(Bucket=sink.bucket, Key=f"{sink.key}/_spark_metadata/{name or batch}",
                         Body="\n".join(lines).encode())


def data_keys(s3_client, sink: S3Uri) -> list[str]:
    return [k for k in list_keys(s3_client, sink.bucket, sink.prefix)
            if "/_spark_metadata/" not in k and MAGIC_PATH_PREFIX not in k]


def test_batch_job_ids_carry_the_batch():
    job = batch_job_id(42)
    assert job.startswith("b42-") and batch_of_job(job) == 42
    assert batch_of_job("3f2c1d9e-aaaa-bbbb-cccc-000000000000") is None
    assert batch_of_job("b12") is None
    # A plain job UUID whose first group happens to be "b" and seven digits is not batch 5173623's job.
    assert batch_of_job("b5173623-d4e8-44a5-9a5b-4adfd4597faf") is None
    assert batch_of_job("b5173623-3f2c1d9e-aaaa-bbbb-cccc-000000000000") == 5173623
    with pytest.raises(ConfigError):
        batch_job_id(-1)


def test_a_batch_journal_is_not_a_job_commit_journal():
    journal = BatchJournal(job_id="b3-x", batch_id=3, bucket="b", dest_key="sink",
                           pendingsets=("sink/__magic_job-b3-x/job-b3-x/00/t.pendingset",))
    assert BatchJournal.from_json(journal.to_json()) == journal
    # `s3commit recover` reads job-commit journals: it must refuse to finish a batch regardless of the log.
    with pytest.raises(ManifestError):
        CommitJournal.from_json(journal.to_json())


def test_recover_refuses_a_batch_job_and_abort_job_rolls_it_back(store, s3_client, sink):
    from s3commit.commit.recovery import RecoveryError, recover

    job = batch_job_id(5)
    commit = BatchCommit(store, sink, job)
    commit.prepare(write_batch_files(store, sink, job))
    # Its fate is the sink log's: `s3commit recover` (finish or abort) refuses it and touches nothing.
    for abort in (False, True):
        with pytest.raises(RecoveryError, match="streaming sink batch"):
            recover(store, sink, job, abort=abort)
    assert len(list_pending_uploads(s3_client, sink.bucket)) == 2
    # A batch's own journal is not read as an interrupted job commit's: the roll-back aborts it all.
    commit.roll_back()
    assert_no_pending_uploads(s3_client, sink.bucket)
    assert list_keys(s3_client, sink.bucket, sink.prefix) == []


def test_files_stay_pending_until_finish_after_the_log_entry(store, s3_client, sink):
    job = batch_job_id(0)
    commit = BatchCommit(store, sink, job)
    uploads = commit.prepare(write_batch_files(store, sink, job))
    # Prepared and journaled: nothing visible, two uploads pending, and their keys come back for the log.
    assert sorted(u.destination_key for u in uploads) == [f"sink/part-0000{t}-{job}.parquet" for t in (0, 1)]
    assert data_keys(s3_client, sink) == []
    assert len(list_pending_uploads(s3_client, sink.bucket)) == 2
    assert commit.journal() is not None
    write_log_entry(s3_client, sink, 0, [u.destination_key for u in uploads])
    assert commit.finish() == 2
    assert data_keys(s3_client, sink) == sorted(u.destination_key for u in uploads)
    assert [k for k in list_keys(s3_client, sink.bucket, sink.prefix) if MAGIC_PATH_PREFIX in k] == []
    assert_no_pending_uploads(s3_client, sink.bucket)


def test_a_batch_whose_file_names_lack_its_job_id_is_refused_before_its_journal(store, s3_client, sink):
    """The sink's recovery finds a batch's files by the job id in their names: a batch whose names lack it is refused
    before anything is journalled (it could otherwise be rolled back after its log entry), and rolls back clean."""
    job = batch_job_id(0)
    committer = MagicCommitter(sink, job_id=job, store=store)
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("part-00000.parquet") as out:
        out.write(b"no job id in my name")
    message = committer.commit_task(attempt)
    committer.close()
    commit = BatchCommit(store, sink, job)
    with pytest.raises(ManifestError, match="must carry its job id"):
        commit.prepare([message])
    assert commit.journal() is None
    commit.roll_back()
    assert list_keys(s3_client, sink.bucket, sink.prefix) == []
    assert_no_pending_uploads(s3_client, sink.bucket)


def test_a_batch_whose_log_entry_lost_is_rolled_back(store, s3_client, sink):
    job = batch_job_id(0)
    commit = BatchCommit(store, sink, job)
    commit.prepare(write_batch_files(store, sink, job))
    commit.roll_back()
    assert list_keys(s3_client, sink.bucket, sink.prefix) == []
    assert_no_pending_uploads(s3_client, sink.bucket)


def test_an_empty_batch_writes_nothing(store, s3_client, sink):
    commit = BatchCommit(store, sink, batch_job_id(0))
    assert commit.prepare([]) == []
    assert commit.finish() == 0
    assert list_keys(s3_client, sink.bucket, sink.prefix) == []


def test_recovery_finishes_a_batch_the_log_committed(store, s3_client, sink):
    # 1. A driver prepared batch 4 and wrote its log entry, then died before completing.
    job = batch_job_id(4)
    uploads = BatchCommit(store, sink, job).prepare(write_batch_files(store, sink, job))
    write_log_entry(s3_client, sink, 4, [u.destination_key for u in uploads])
    # 2. The next run (or a reader) settles it: the files become visible, the job's traces go.
    report = recover_sink(store, sink)
    assert report.finished == [job] and not report.rolled_back and not report.undecided
    assert data_keys(s3_client, sink) == sorted(u.destination_key for u in uploads)
    assert_no_pending_uploads(s3_client, sink.bucket)
    assert batch_jobs(store, sink) == []
    # 3. Settled once: a second pass has nothing to do.
    assert recover_sink(store, sink).to_dict() == {"finished": [], "rolled_back": [], "undecided": {},
                                                   "failed": {}}


def test_recovery_finishes_a_clean_up_cut_short_after_the_pendingsets_went(store, s3_client, sink):
    # The driver completed the batch and began its clean-up: the pendingsets are gone, the journal is not.
    job = batch_job_id(6)
    commit = BatchCommit(store, sink, job)
    uploads = commit.prepare(write_batch_files(store, sink, job))
    write_log_entry(s3_client, sink, 6, [u.destination_key for u in uploads])
    for upload in uploads:
        store.uploads.complete_multipart_upload(sink.bucket, upload.destination_key, upload.upload_id, upload.etags)
    store.objects.delete_objects(sink.bucket, commit.pendingsets)
    assert recover_sink(store, sink).finished == [job]
    assert batch_jobs(store, sink) == []
    assert data_keys(s3_client, sink) == sorted(u.destination_key for u in uploads)


def test_recovery_leaves_an_undecided_batch_then_rolls_it_back_once_another_job_commits_it(store, s3_client, sink):
    write_log_entry(s3_client, sink, 0, [])
    # 1. Run A prepared batch 1 (journal written) and died before its log entry.
    old = batch_job_id(1)
    BatchCommit(store, sink, old).prepare(write_batch_files(store, sink, old))
    # 2. The log has no batch 1: A may still be running, so nothing is touched.
    report = recover_sink(store, sink)
    assert report.undecided == {old: 1}
    assert len(list_pending_uploads(s3_client, sink.bucket)) == 2
    # 3. Run B redoes batch 1 and commits it.
    new = batch_job_id(1)
    commit = BatchCommit(store, sink, new)
    uploads = commit.prepare(write_batch_files(store, sink, new))
    write_log_entry(s3_client, sink, 1, [u.destination_key for u in uploads])
    commit.finish()
    # 4. Now the log has decided against A's job: it is rolled back; B's files alone are visible.
    report = recover_sink(store, sink, exclude=[new])
    assert report.rolled_back == [old]
    assert data_keys(s3_client, sink) == sorted(u.destination_key for u in uploads)
    assert_no_pending_uploads(s3_client, sink.bucket)
    assert batch_jobs(store, sink) == []


def test_recovery_rolls_back_a_job_killed_in_its_tasks(store, s3_client, sink):
    # Tasks committed (pendingsets saved) but the driver died before the journal; the batch was redone.
    old = batch_job_id(0)
    write_batch_files(store, sink, old)
    write_log_entry(s3_client, sink, 0, ["sink/part-00000-someone-else.parquet"])
    assert recover_sink(store, sink).rolled_back == [old]
    assert_no_pending_uploads(s3_client, sink.bucket)
    assert list_keys(s3_client, sink.bucket, f"{sink.key}/{MAGIC_PATH_PREFIX}") == []


def test_recovery_reads_a_compaction_when_the_batch_file_is_gone(store, s3_client, sink):
    # Batch 5's own log file was deleted after compaction 9 took in its entries.
    job = batch_job_id(5)
    uploads = BatchCommit(store, sink, job).prepare(write_batch_files(store, sink, job))
    write_log_entry(s3_client, sink, 9, [u.destination_key for u in uploads], name="9.compact")
    log = SinkLog(store, sink)
    assert log.latest() == 9 and log.entry_names(5, job) is True and log.entry_names(5, "other") is False
    assert recover_sink(store, sink).finished == [job]
    assert data_keys(s3_client, sink) == sorted(u.destination_key for u in uploads)


def test_recovery_leaves_the_callers_own_job_and_other_jobs_alone(store, s3_client, sink):
    write_log_entry(s3_client, sink, 0, [])
    mine = batch_job_id(0)
    write_batch_files(store, sink, mine)
    # A batch (non-streaming) magic job writing into the same directory is not a batch job: never touched.
    # Its id is a UUID shaped like a batch's prefix (b + 7 digits): a random one is so about once in 400 runs.
    batch_write = MagicCommitter(sink, store=store, job_id="b5173623-d4e8-44a5-9a5b-4adfd4597faf")
    batch_write.setup_job()
    attempt = batch_write.setup_task(batch_write.new_task_attempt_id(0))
    with attempt.open("x.parquet") as out:
        out.write(b"x")
    report = recover_sink(store, sink, exclude=[mine])
    assert report.to_dict() == {"finished": [], "rolled_back": [], "undecided": {}, "failed": {}}
    assert len(list_pending_uploads(s3_client, sink.bucket)) == 3


def test_recovery_finds_a_batch_killed_while_its_tasks_wrote_by_its_uploads(store, s3_client, sink):
    # A task died with its file's upload under way: no .pending yet, nothing in the job directory.
    old = batch_job_id(2)
    store.uploads.create_multipart_upload(sink.bucket, f"sink/p=1/part-00000-{old}.c000.snappy.parquet")
    write_log_entry(s3_client, sink, 1, [])
    assert batch_jobs(store, sink) == [old]
    assert recover_sink(store, sink).undecided == {old: 2}
    write_log_entry(s3_client, sink, 2, ["sink/p=1/part-00000-the-run-that-redid-it.parquet"])
    assert recover_sink(store, sink).rolled_back == [old]
    assert_no_pending_uploads(s3_client, sink.bucket)


def test_recovery_with_nothing_left_costs_a_list_and_an_upload_listing(store, s3_server, sink):
    before = s3_server.stats()
    assert recover_sink(store, sink).to_dict()["finished"] == []
    assert dict(s3_server.stats().minus(before).requests) == {"ListObjectsV2": 1, "ListMultipartUploads": 1}
