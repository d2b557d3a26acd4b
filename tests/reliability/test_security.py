"""Security: credentials stay out of every output; manifests are validated before they are acted on;
encryption, storage class and ACL options reach every object written.

(The sidecar socket's permissions and token belong to the bridge and are tested there.)
"""

from __future__ import annotations

import json
import logging
import pickle
import subprocess
import sys
import traceback
import uuid

import pytest

from s3commit import S3Store, StoreOptions, create_committer
from s3commit.config.options import RetryPolicy
from s3commit.errors import ManifestError, S3CommitError
from s3commit.testing.assertions import count_requests, list_keys, list_pending_uploads
from testbed import CHILD_TIMEOUT
from tests.reliability.helpers import (
    COMMITTERS,
    JobSpec,
    assert_clean,
    is_scratch,
    read,
    run_tasks,
    scratch_keys,
    user_keys,
)

pytestmark = pytest.mark.integration

ACCESS_KEY = "AKIAS3COMMITLEAK0001"
SECRET_KEY = "s3commit/Leak+Secret/Key0123456789abcdefgh"
SESSION_TOKEN = "FwoGZXIvYXdzS3COMMITLEAKTOKEN" + "Q" * 40
PROXY_PASSWORD = "s3commit-Leak-Proxy-Password-42"
SECRETS = {"access key": ACCESS_KEY, "secret key": SECRET_KEY, "secret key (start)": SECRET_KEY[:16],
           "session token": SESSION_TOKEN, "session token (start)": SESSION_TOKEN[:20],
           "proxy password": PROXY_PASSWORD}


def leaky_store(server, **overrides) -> S3Store:
    """A store on the test server (which accepts any credentials) holding distinctive fake credentials."""
    values = {"endpoint_url": server.endpoint_url, "region": "us-east-1", "path_style": True,
              "access_key": ACCESS_KEY, "secret_key": SECRET_KEY, "session_token": SESSION_TOKEN,
              "retry": RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.01)}
    values.update(overrides)
    return S3Store(StoreOptions(**values))


def describe(error: BaseException) -> str:
    """Everything an error shows: str, repr, the whole chained traceback, and its pickled form."""
    return "\n".join([str(error), repr(error), "".join(traceback.format_exception(error)),
                      repr(pickle.loads(pickle.dumps(error)))])


def bucket_contents(raw, bucket) -> str:
    return "\n".join(f"{key}\n{read(raw, bucket, key).decode('utf-8', 'replace')}" for key in list_keys(raw, bucket))


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_credentials_never_appear_in_logs_errors_manifests_or_summaries(s3_sim, s3_bucket, caplog, monkeypatch,
                                                                        run_cli, tmp_path):
    caplog.set_level(logging.DEBUG)  # every logger, botocore's request dumps included
    raw = s3_sim.client(raw=True)
    seen: list[str] = []
    # 1. Successful jobs of each committer: every manifest as it exists mid-job, the summaries, the objects.
    for name in COMMITTERS:
        store = leaky_store(s3_sim)
        committer = create_committer(name, f"s3://{s3_bucket}/{name}", store=store, threads=2,
                                     staging_dir=str(tmp_path / name))
        committer.setup_job()
        attempt = committer.setup_task(committer.new_task_attempt_id(0))
        with attempt.open("a/part-0.txt") as out:
            out.write(b"data")
        seen.append(bucket_contents(raw, s3_bucket))           # .pending files, upload markers
        message = committer.commit_task(attempt)
        seen.append(bucket_contents(raw, s3_bucket))           # pendingsets
        success = committer.commit_job([message])
        seen += [bucket_contents(raw, s3_bucket), success.to_json().decode(), repr(success), repr(message),
                 repr(committer), repr(store), repr(store.options), str(store.counters.snapshot()),
                 repr(committer.last_commit_stats)]
    # 2. Failures: a commit whose upload vanished, denied access, an unreachable endpoint.
    committer = create_committer("magic", f"s3://{s3_bucket}/failing", store=leaky_store(s3_sim), threads=1)
    messages = run_tasks(committer, JobSpec(tasks=1, files=2))
    victim = list_pending_uploads(raw, s3_bucket, "failing/")[0]
    raw.abort_multipart_upload(Bucket=s3_bucket, Key=victim.key, UploadId=victim.upload_id)
    with pytest.raises(S3CommitError) as commit_error:
        committer.commit_job(messages)
    seen.append(describe(commit_error.value))
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:*",
                                                       "Resource": f"arn:aws:s3:::{s3_bucket}/denied/*"}]}
    raw.put_bucket_policy(Bucket=s3_bucket, Policy=json.dumps(policy))
    with pytest.raises(S3CommitError) as denied:
        create_committer("magic", f"s3://{s3_bucket}/denied", store=leaky_store(s3_sim)).setup_job()
    raw.delete_bucket_policy(Bucket=s3_bucket)
    seen.append(describe(denied.value))
    with pytest.raises(S3CommitError) as unreachable:
        leaky_store(s3_sim, endpoint_url="http://127.0.0.1:9").head_bucket(s3_bucket)
    seen.append(describe(unreachable.value))
    # 3. The CLI, with the credentials in the environment as an operator's would be, at debug level.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    for args in (["show", f"s3://{s3_bucket}/magic/_SUCCESS", "-vv"],
                 ["show", f"s3://{s3_bucket}/magic/_SUCCESS", "--json"],
                 ["uploads", "list", f"s3://{s3_bucket}/magic", "--json", "-vv"],
                 ["recover", f"s3://{s3_bucket}/magic", "--job", str(uuid.uuid4()), "-vv"],
                 ["show", f"s3://{s3_bucket}/missing/_SUCCESS", "-vv"]):
        result = run_cli(*args)
        seen += [result.out, result.err]
    # 4. S3A's settings: a proxy with a password (unreachable), and `python -m s3commit.spark conf` given secrets
    #    (it prints what it is given on stdout, by design, and warns on stderr: the warning must not repeat them).
    proxied = S3Store(StoreOptions.from_hadoop_conf({
        "fs.s3a.endpoint": s3_sim.endpoint_url, "fs.s3a.path.style.access": "true", "fs.s3a.attempts.maximum": "1",
        "fs.s3a.access.key": ACCESS_KEY, "fs.s3a.secret.key": SECRET_KEY, "fs.s3a.proxy.host": "127.0.0.1",
        "fs.s3a.proxy.port": "9", "fs.s3a.proxy.username": "etl", "fs.s3a.proxy.password": PROXY_PASSWORD}))
    with pytest.raises(S3CommitError) as through_proxy:
        proxied.head_bucket(s3_bucket)
    seen += [describe(through_proxy.value), repr(proxied), repr(proxied.options)]
    printed = subprocess.run([sys.executable, "-m", "s3commit.spark", "conf", "--conf",
                              f"fs.s3a.secret.key={SECRET_KEY}", "--conf", f"fs.s3a.proxy.password={PROXY_PASSWORD}"],
                             capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False)
    assert printed.returncode == 0 and SECRET_KEY in printed.stdout and "in clear text" in printed.stderr
    seen.append(printed.stderr)
    seen.append(caplog.text)
    seen += [record.getMessage() for record in caplog.records]
    # Then: not one of the credentials, nor a recognisable part of one, appears anywhere.
    everything = "\n".join(seen)
    assert "botocore.endpoint" in {r.name for r in caplog.records}, "botocore's DEBUG logs were not captured"
    assert "Credential=***" in everything  # the redaction did happen (it is not just that nothing was logged)
    for what, value in SECRETS.items():
        assert value not in everything, f"the {what} leaked"


def test_manifests_are_validated_before_anything_is_completed_or_deleted(s3_sim, s3_bucket, tmp_path):
    # Given: a replacing job (it will delete the old data after completing), whose last pendingset was tampered
    # with to point at an object outside the destination.
    raw = s3_sim.client(raw=True)
    raw.put_object(Bucket=s3_bucket, Key="out/old.txt", Body=b"old")
    raw.put_object(Bucket=s3_bucket, Key="elsewhere/precious.txt", Body=b"precious")
    committer = create_committer("directory", f"s3://{s3_bucket}/out", store=leaky_store(s3_sim),
                                 conflict_mode="replace", threads=2, staging_dir=str(tmp_path))
    messages = run_tasks(committer, JobSpec(tasks=3, files=2, job_id_in_names=True))
    last = messages[-1].pendingset_key
    tampered = json.loads(read(raw, s3_bucket, last))
    tampered["commits"][-1]["destinationKey"] = "elsewhere/precious.txt"
    raw.put_object(Bucket=s3_bucket, Key=last, Body=json.dumps(tampered).encode())
    # When: the job commits.
    with count_requests(s3_sim) as requests, pytest.raises(S3CommitError, match="points outside the destination"):
        committer.commit_job(messages)
    # Then: nothing was completed and no object outside the job's own scratch was deleted.
    assert requests["CompleteMultipartUpload"] == 0
    assert requests["DeleteObject"] == 0
    assert read(raw, s3_bucket, "out/old.txt") == b"old"
    assert read(raw, s3_bucket, "elsewhere/precious.txt") == b"precious"
    assert [k for k in list_keys(raw, s3_bucket) if not is_scratch(k)] == ["elsewhere/precious.txt", "out/old.txt"]
    assert_clean(raw, s3_bucket)


def test_recover_validates_the_pendingsets_before_rolling_anything_back(s3_sim, s3_bucket, run_cli):
    # Given: an interrupted commit (its journal written), and then one of its pendingsets tampered with.
    raw = s3_sim.client(raw=True)
    raw.put_object(Bucket=s3_bucket, Key="elsewhere/precious.txt", Body=b"precious")
    store = leaky_store(s3_sim)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1)
    messages = run_tasks(committer, JobSpec(tasks=2, files=2, job_id_in_names=True))
    from s3commit.commit.engine import CommitEngine, OverwritePlan

    keys = [m.pendingset_key for m in messages]
    CommitEngine(store, dest=committer.dest, layout=committer.layout, job_id=committer.job_id, committer="magic",
              options=committer.options).write_journal(keys, OverwritePlan())
    tampered = json.loads(read(raw, s3_bucket, keys[1]))
    tampered["commits"][0]["destinationKey"] = "elsewhere/precious.txt"
    raw.put_object(Bucket=s3_bucket, Key=keys[1], Body=json.dumps(tampered).encode())
    # When: the operator rolls it back.
    with count_requests(s3_sim) as requests:
        result = run_cli("recover", f"s3://{s3_bucket}/out", "--job", committer.job_id, "--abort")
    # Then: refused as bad input before any abort or delete; the precious object is intact.
    assert result.code == 2
    assert "points outside the destination" in result.err
    assert requests["AbortMultipartUpload"] == 0
    assert requests["DeleteObject"] <= 1 and requests["DeleteObjects"] == 0  # at most the release of its lease
    assert read(raw, s3_bucket, "elsewhere/precious.txt") == b"precious"
    # The committer's own abort refuses it the same way: it would roll back by the tampered journal.
    with pytest.raises(ManifestError, match="points outside the destination"):
        committer.abort_job()
    assert read(raw, s3_bucket, "elsewhere/precious.txt") == b"precious"
    # The job is then discarded by hand, as the runbook says for a tampered job directory.
    assert run_cli("uploads", "abort", f"s3://{s3_bucket}/out", "--job", committer.job_id, "--yes").code == 0
    for key in scratch_keys(raw, s3_bucket):
        raw.delete_object(Bucket=s3_bucket, Key=key)
    raw.delete_object(Bucket=s3_bucket, Key="elsewhere/precious.txt")
    assert user_keys(raw, s3_bucket) == []
    assert_clean(raw, s3_bucket)


WRITE_OPTIONS = {
    "sse-s3": {"sse_algorithm": "AES256"},
    "sse-kms+storage-class+acl": {"sse_algorithm": "aws:kms",
                                  "sse_kms_key_id": "arn:aws:kms:us-east-1:123456789012:key/s3commit-test",
                                  "storage_class": "STANDARD_IA", "acl": "public-read"},
}


def check_object(raw, bucket, key, options) -> None:
    head = raw.head_object(Bucket=bucket, Key=key)
    assert head.get("ServerSideEncryption") == options["sse_algorithm"], key
    assert head.get("SSEKMSKeyId") == options.get("sse_kms_key_id"), key
    assert head.get("StorageClass") == options.get("storage_class"), key
    if "acl" in options:
        # moto answers GetObjectAcl for completed uploads only when an ACL was given (else a 500), so this is
        # checked where the option is set; public-read is the canned ACL whose grant is visible.
        grants = raw.get_object_acl(Bucket=bucket, Key=key)["Grants"]
        assert {"Type": "Group", "URI": "http://acs.amazonaws.com/groups/global/AllUsers"} in [
            g["Grantee"] for g in grants if g["Permission"] == "READ"], key


@pytest.mark.parametrize("options_name", list(WRITE_OPTIONS))
@pytest.mark.parametrize("name", COMMITTERS)
def test_encryption_storage_class_and_acl_reach_every_object_written(name, options_name, s3_sim, s3_bucket,
                                                                     tmp_path):
    options = WRITE_OPTIONS[options_name]
    raw = s3_sim.client(raw=True)
    store = S3Store(StoreOptions(endpoint_url=s3_sim.endpoint_url, region="us-east-1", path_style=True,
                                 access_key="testing", secret_key="testing", **options))
    committer = create_committer(name, f"s3://{s3_bucket}/out", store=store, threads=2, staging_dir=str(tmp_path),
                                 track_commits_in_memory=False)  # .pending files too
    checked: set[str] = set()

    def check_all() -> None:
        for key in list_keys(raw, s3_bucket):
            check_object(raw, s3_bucket, key, options)
            checked.add(key)

    # Every object, at each stage: the magic .pending files and upload markers, the pendingsets, the data
    # (completed uploads) and _SUCCESS.
    committer.setup_job()
    messages = []
    for task in range(2):
        attempt = committer.setup_task(committer.new_task_attempt_id(task))
        for index in range(2):
            with attempt.open(f"p={index}/part-{task}-{index}.txt") as out:
                out.write(b"secret data")
        check_all()
        messages.append(committer.commit_task(attempt))
        check_all()
    committer.commit_job(messages)
    check_all()
    assert any(k.endswith(".pendingset") for k in checked)
    assert any(k.endswith("_SUCCESS") for k in checked)
    assert len(user_keys(raw, s3_bucket)) == 4
    if name == "magic":
        assert any(k.endswith(".pending") for k in checked)
    assert_clean(raw, s3_bucket)
