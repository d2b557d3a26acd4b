"""A job commit interrupted half way (its process SIGKILLed), then resumed or aborted through the Python API:
what the JVM bridge does when it re-sends ``job.commit`` to a new sidecar after the old one died, and what
Spark's ``abortJob`` after a failed commit does.

- ``commit_job`` again, with the same task commit messages, finishes the commit exactly: what is left is
  completed, the completed uploads count as done, a clean-up that had begun is finished, and a job whose
  ``_SUCCESS`` is written already just succeeds.
- ``abort_job`` rolls the interrupted commit back as ``s3commit recover --abort`` does (nothing visible), and
  refuses, leaving the output, when the job had in fact committed.

The child is ``crash_child.py`` (see ``test_crash_matrix.py``); it prints its task commit messages first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from s3commit import create_committer
from s3commit.commit.recovery_result import AlreadyCommittedError
from s3commit.config.options import MIN_PART_SIZE
from s3commit.errors import JournalExistsError
from s3commit.model.task_message import TaskCommitMessage
from tests.reliability.crash_child import CRASH_ENV, LEAN_ENV, MESSAGES_PREFIX
from tests.reliability.helpers import assert_all_or_nothing, assert_clean, make_store, success_json, user_keys
from tests.reliability.test_crash_matrix import CHILD, OLD_KEYS, ROOT, expected_output

pytestmark = pytest.mark.integration


def crash(server, bucket, committer, point, tmp_path, *, replace=False, lean=False):
    """Run the child job until it kills itself at ``point``; returns its job id and task commit messages.
    ``lean``: its Completes sent by the lean path (the job commit's from one event loop)."""
    job_id = str(uuid.uuid4())
    env = {**os.environ, **server.env(), CRASH_ENV: point, LEAN_ENV: "1" if lean else "0",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    command = [sys.executable, str(CHILD), "--committer", committer, "--dest", f"s3://{bucket}/out", "--job",
               job_id, "--staging-dir", str(tmp_path / "staging"), "--big", "--print-messages",
               *(["--replace"] if replace else [])]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == -9, f"not killed at {point}:\n{result.stdout}{result.stderr[-3000:]}"
    [line] = [x for x in result.stdout.splitlines() if x.startswith(MESSAGES_PREFIX)]
    messages = [TaskCommitMessage(**{**m, "absolute_dirs": tuple(m["absolute_dirs"])})
                for m in json.loads(line[len(MESSAGES_PREFIX):])]
    return job_id, messages


def again(server, bucket, name, job_id, tmp_path):
    """The committer of the same job in a new process (a new sidecar): same name, same job id."""
    return create_committer(name, f"s3://{bucket}/out", job_id=job_id, store=make_store(server), threads=2,
                            staging_dir=str(tmp_path / "staging-again"), part_size=MIN_PART_SIZE)


@pytest.fixture
def old_data(s3_client, s3_bucket):
    for key in OLD_KEYS:
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"old")


@pytest.mark.parametrize(("name", "lean"), [("magic", False), ("directory", False), ("magic", True)])
def test_a_commit_killed_mid_completion_is_finished_exactly_by_committing_again(name, lean, s3_server, s3_bucket,
                                                                                s3_client, old_data, tmp_path):
    # Given: a job killed after 4 of its 9 uploads were completed (part of its output visible); with ``lean``,
    # its Completes were sent from one event loop (UploadRequests.complete_many).
    job_id, messages = crash(s3_server, s3_bucket, name, "after-k-completes:4", tmp_path, lean=lean)
    # When: the job is committed again, with the same messages.
    success = again(s3_server, s3_bucket, name, job_id, tmp_path).commit_job(messages)
    # Then: exactly the job's output (and the old data), _SUCCESS naming the job, nothing pending or left.
    assert success.job_id == job_id and success.metrics["committer_files"] == 9
    expected = expected_output(name, job_id)
    assert assert_all_or_nothing(s3_client, s3_bucket, expected, old=OLD_KEYS) == "all"
    written = success_json(s3_client, s3_bucket)
    assert written["jobId"] == job_id and written["diagnostics"]["s3commit.recovered"] == "true"
    assert_clean(s3_client, s3_bucket)


def test_a_replacing_commit_killed_mid_overwrite_is_finished_by_committing_again(s3_server, s3_bucket, s3_client,
                                                                                 old_data, tmp_path):
    job_id, messages = crash(s3_server, s3_bucket, "magic", "mid-overwrite", tmp_path, replace=True)
    again(s3_server, s3_bucket, "magic", job_id, tmp_path).commit_job(messages, delete_paths=[""])
    outcome = assert_all_or_nothing(s3_client, s3_bucket, expected_output("magic", job_id), old=OLD_KEYS,
                                    replaced=True)
    assert outcome == "all"
    assert_clean(s3_client, s3_bucket)


@pytest.mark.parametrize("name", ["magic", "partitioned"])
def test_a_commit_killed_mid_completion_then_aborted_leaves_nothing_visible(name, s3_server, s3_bucket, s3_client,
                                                                            old_data, tmp_path):
    job_id, _ = crash(s3_server, s3_bucket, name, "after-k-completes:4", tmp_path)
    visible = set(user_keys(s3_client, s3_bucket)) - set(OLD_KEYS)
    assert 4 <= len(visible) < 9  # part of the output is visible (2 threads): what the roll-back undoes
    committer = again(s3_server, s3_bucket, name, job_id, tmp_path)
    committer.abort_job()
    assert assert_all_or_nothing(s3_client, s3_bucket, {}, old=OLD_KEYS) == "nothing"
    assert success_json(s3_client, s3_bucket) is None
    assert_clean(s3_client, s3_bucket)


@pytest.mark.parametrize(("name", "point"), [("magic", "mid-cleanup"), ("directory", "mid-cleanup-sweep"),
                                             ("magic", "before-success")])
def test_a_commit_killed_late_is_finished_by_committing_again(name, point, s3_server, s3_bucket, s3_client,
                                                              old_data, tmp_path):
    # Given: a job killed after it wrote _SUCCESS (only its clean-up left), or just before.
    job_id, messages = crash(s3_server, s3_bucket, name, point, tmp_path)
    # When / then: committing it again succeeds, with the output exact and nothing left behind.
    success = again(s3_server, s3_bucket, name, job_id, tmp_path).commit_job(messages)
    assert success.job_id == job_id
    assert assert_all_or_nothing(s3_client, s3_bucket, expected_output(name, job_id), old=OLD_KEYS) == "all"
    assert success_json(s3_client, s3_bucket)["jobId"] == job_id
    assert_clean(s3_client, s3_bucket)


def test_a_commit_killed_while_deleting_its_pendingsets_is_finished_by_committing_again(
        s3_server, s3_bucket, s3_client, old_data, tmp_path):
    # Given: a job killed as its clean-up deleted the job directory: one pendingset is gone already.
    job_id, messages = crash(s3_server, s3_bucket, "partitioned", "mid-cleanup", tmp_path)
    s3_client.delete_object(Bucket=s3_bucket, Key=messages[0].pendingset_key)
    # When / then: the same messages commit again without failing on the missing pendingset.
    success = again(s3_server, s3_bucket, "partitioned", job_id, tmp_path).commit_job(messages)
    assert success.job_id == job_id
    assert assert_all_or_nothing(s3_client, s3_bucket, expected_output("partitioned", job_id), old=OLD_KEYS) == "all"
    assert_clean(s3_client, s3_bucket)


def test_aborting_a_job_that_had_committed_refuses_and_leaves_its_output(s3_server, s3_bucket, s3_client,
                                                                        old_data, tmp_path):
    # Given: a job killed in its clean-up, after _SUCCESS: it has committed.
    job_id, _ = crash(s3_server, s3_bucket, "magic", "mid-cleanup", tmp_path)
    committer = again(s3_server, s3_bucket, "magic", job_id, tmp_path)
    # When: it is aborted (Spark does after the commit it thinks failed); then: refused, with the reason.
    with pytest.raises(AlreadyCommittedError, match=f"job {job_id} cannot be aborted: it has committed"):
        committer.abort_job()
    # The output stays, and its clean-up was finished.
    assert assert_all_or_nothing(s3_client, s3_bucket, expected_output("magic", job_id), old=OLD_KEYS) == "all"
    assert success_json(s3_client, s3_bucket)["jobId"] == job_id
    assert_clean(s3_client, s3_bucket)


def test_committing_again_with_other_messages_is_refused_and_changes_nothing(s3_server, s3_bucket, s3_client,
                                                                            old_data, tmp_path):
    job_id, messages = crash(s3_server, s3_bucket, "magic", "after-k-completes:4", tmp_path)
    def keys() -> list[str]:  # all but the dead commit's lease, which the refused commit took over and released
        return sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])
                      if not o["Key"].endswith("__s3commit_lease"))

    before = keys()
    committer = again(s3_server, s3_bucket, "magic", job_id, tmp_path)
    with pytest.raises(JournalExistsError, match="commit journal of another commit"):
        committer.commit_job(messages[:2])
    assert keys() == before
    # The right messages still finish it.
    again(s3_server, s3_bucket, "magic", job_id, tmp_path).commit_job(messages)
    assert assert_all_or_nothing(s3_client, s3_bucket, expected_output("magic", job_id), old=OLD_KEYS) == "all"
    assert_clean(s3_client, s3_bucket)
