"""The uploads of job X (``s3commit.commit.job_uploads``), as each user of that one home sees them: ``recover --abort``
with and without a journal, ``uploads list/abort --job``, the job abort and the job commit's clean-up. Custom
partition locations outside the destination are found; another bucket's records and a concurrent job's
uploads are never touched."""

from __future__ import annotations

import json

import pytest

from s3commit import create_committer
from s3commit.commit.job_uploads import JobUploads
from s3commit.commit.manifest_store import load_pendingset
from s3commit.testing.assertions import held_leases, list_keys, list_pending_uploads, visible_keys
from tests.reliability.helpers import assert_clean, make_store, read, user_keys

pytestmark = pytest.mark.integration


def write_custom_location_job(committer, bucket, *, commit_task: bool, tasks: int = 1):
    """Each task writes one file under the destination and one to a custom partition location outside it
    (``elsewhere/p=<task>``), the way Spark's ``newTaskTempFileAbsPath`` does; returns the commit messages."""
    committer.setup_job()
    messages = []
    for task in range(tasks):
        attempt = committer.setup_task(committer.new_task_attempt_id(task))
        with attempt.open(f"p=0/part-{task:05d}-{committer.job_id}.txt") as out:
            out.write(b"inside")
        with attempt.open_absolute(f"s3a://{bucket}/elsewhere/p={task}", f"part-{task:05d}-{committer.job_id}.txt") \
                as out:
            out.write(b"outside")
        for writer in attempt._writers:
            writer.wait_finished()  # closes end in the background: a running task's uploads are then there
        if commit_task:
            messages.append(committer.commit_task(attempt))
    return messages


@pytest.mark.parametrize("commit_task", [True, False], ids=["task-committed", "task-running"])
def test_recover_abort_without_a_journal_aborts_the_custom_location_uploads(commit_task, s3_sim, s3_bucket,
                                                                            run_cli):
    # Given: a job whose driver died before its commit: its uploads outside the destination are known only
    # from its records (the pendingset, or the running attempt's upload markers).
    raw = s3_sim.client(raw=True)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=make_store(s3_sim), threads=1)
    write_custom_location_job(committer, s3_bucket, commit_task=commit_task)
    assert sorted(u.key.split("/")[0] for u in list_pending_uploads(raw, s3_bucket)) == ["elsewhere", "out"]
    # When: the operator discards the job.
    result = run_cli("recover", f"s3://{s3_bucket}/out", "--job", committer.job_id, "--abort", "--json")
    # Then: both uploads are aborted, inside and outside the destination, and the job directory is gone.
    assert result.code == 0, result
    assert json.loads(result.out)["aborted"] == 2
    assert visible_keys(raw, s3_bucket) == [] and held_leases(raw, s3_bucket) == []
    assert_clean(raw, s3_bucket)


def test_recover_abort_with_a_journal_rolls_back_the_custom_location_files(s3_sim, s3_bucket, run_cli):
    raw = s3_sim.client(raw=True)
    store = make_store(s3_sim)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1)
    [message] = write_custom_location_job(committer, s3_bucket, commit_task=True)
    from s3commit.commit.engine import CommitEngine, OverwritePlan
    from s3commit.commit.upload_actions import commit_upload

    engine = CommitEngine(store, dest=committer.dest, layout=committer.layout, job_id=committer.job_id,
                       committer="magic", options=committer.options, absolute_dirs=message.absolute_dirs)
    engine.write_journal([message.pendingset_key], OverwritePlan())
    outside = [c for c in load_pendingset(store, s3_bucket, message.pendingset_key).commits
               if c.destination_key.startswith("elsewhere/")]
    commit_upload(store, outside[0])  # the interrupted commit had completed the custom-location file
    assert run_cli("recover", f"s3://{s3_bucket}/out", "--job", committer.job_id, "--abort").code == 0
    assert visible_keys(raw, s3_bucket) == [] and held_leases(raw, s3_bucket) == []
    assert_clean(raw, s3_bucket)


def test_uploads_abort_by_job_ignores_records_naming_another_bucket(s3_sim, s3_bucket, run_cli):
    # Given: a job's pendingset with one entry naming another bucket, and a stranger's upload in this bucket
    # that happens to have the upload id that entry names (a forged or corrupt record).
    raw = s3_sim.client(raw=True)
    store = make_store(s3_sim)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("mine.txt") as out:
        out.write(b"mine")
    message = committer.commit_task(attempt)
    stranger = raw.create_multipart_upload(Bucket=s3_bucket, Key="out/stranger.txt")["UploadId"]
    pendingset = json.loads(read(raw, s3_bucket, message.pendingset_key))
    forged = dict(pendingset["commits"][0], bucket="another-bucket", destinationKey="out/stranger.txt",
                  uploadId=stranger)
    pendingset["commits"].append(forged)
    raw.put_object(Bucket=s3_bucket, Key=message.pendingset_key, Body=json.dumps(pendingset).encode())
    # When: the operator lists and aborts the job's uploads.
    listed = run_cli("uploads", "list", f"s3://{s3_bucket}/out", "--job", committer.job_id, "--json")
    assert [u["key"] for u in json.loads(listed.out)["uploads"]] == ["out/mine.txt"]
    assert run_cli("uploads", "abort", f"s3://{s3_bucket}/out", "--job", committer.job_id, "--yes").code == 0
    # Then: only the job's own upload went; the stranger's is pending still.
    assert [u.upload_id for u in list_pending_uploads(raw, s3_bucket)] == [stranger]
    raw.abort_multipart_upload(Bucket=s3_bucket, Key="out/stranger.txt", UploadId=stranger)


def concurrent_jobs(s3_sim, bucket):
    """Two magic jobs writing to one destination, file names without job ids, tasks done, not committed."""
    jobs = []
    for name in ("a", "b"):
        committer = create_committer("magic", f"s3://{bucket}/out", store=make_store(s3_sim), threads=1)
        committer.setup_job()
        messages = []
        for task in range(2):
            attempt = committer.setup_task(committer.new_task_attempt_id(task))
            with attempt.open(f"{name}/part-{task}.txt") as out:
                out.write(name.encode())
            out.wait_finished()  # its close ended in the background: the upload and its marker are there
            if task == 0:
                messages.append(committer.commit_task(attempt))  # task 1 is still running: markers only
        jobs.append((committer, messages))
    return jobs


@pytest.mark.parametrize("how", ["abort_job", "commit_job", "recover --abort", "uploads abort --job"])
def test_a_concurrent_jobs_uploads_are_never_touched(how, s3_sim, s3_bucket, run_cli):
    raw = s3_sim.client(raw=True)
    (a, a_messages), (b, b_messages) = concurrent_jobs(s3_sim, s3_bucket)
    b_uploads = sorted(u.upload_id for u in JobUploads(b.store, b.dest, b.job_id).pending(
        JobUploads(b.store, b.dest, b.job_id).read_records()))
    assert len(b_uploads) == 2
    # When: job A ends, one way or another.
    if how == "abort_job":
        a.abort_job()
    elif how == "commit_job":
        a.commit_job(a_messages)
    else:
        args = ["recover", str(a.dest), "--job", a.job_id, "--abort"] \
            if how == "recover --abort" else ["uploads", "abort", str(a.dest), "--job", a.job_id, "--yes"]
        assert run_cli(*args).code == 0
    # Then: every upload of job B is pending still, and B commits in full.
    assert sorted(u.upload_id for u in list_pending_uploads(raw, s3_bucket)) == b_uploads
    b.commit_job(b_messages)
    assert read(raw, s3_bucket, "out/b/part-0.txt") == b"b"
    expected = ["out/a/part-0.txt", "out/b/part-0.txt"] if how == "commit_job" else ["out/b/part-0.txt"]
    assert user_keys(raw, s3_bucket) == expected
    if how == "uploads abort --job":  # the command aborts uploads only; A's job directory is the operator's
        for key in list_keys(raw, s3_bucket, f"{a.layout.job_dir}/"):
            raw.delete_object(Bucket=s3_bucket, Key=key)
    assert_clean(raw, s3_bucket)
