"""One format, both directions, with Hadoop's S3A (issue 46, outcome 3), on the suite's test S3 server.

- ``s3commit show`` reads S3A's ``_SUCCESS`` (a real magic write), ``.pendingset`` and ``.pending``;
- S3A's own classes (``SuccessData``, ``PendingSet``, ``SinglePendingCommit``, loaded through hadoop-aws) read and
  validate s3commit's, field for field;
- what a SIGKILLed S3A job leaves (its ``__magic_job-<uuid>`` directory: a committed task's ``.pendingset``, a running
  task's ``.pending`` files and magic markers; their pending uploads) is found by ``s3commit uploads list`` and
  cleaned by ``uploads sweep --older-than``, ``uploads abort --job`` and ``recover --abort``, and nothing else is:
  a live s3commit job's uploads and directory on the same destination, committed data there, and a pending
  upload elsewhere in the bucket stay as they were;
- S3A's upload listing (``S3AFileSystem.listUploads`` and ``hadoop s3guard uploads -list``) sees s3commit's pending
  uploads.

S3A runs in child processes (s3a_child.py). The leftovers of four killed S3A jobs come from one of them, and one test
reads and cleans them, a destination each: a module-scoped fixture would run that child once per xdist worker.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from s3commit import S3Store, cli, create_committer
from s3commit.model.manifests import PendingSet, PendingUpload, SuccessData
from s3commit.testing.assertions import list_keys, list_pending_uploads
from tests.conftest import store_options_for
from tests.s3a.conftest import run_child

pytestmark = [pytest.mark.slow, pytest.mark.s3a, pytest.mark.spark]

MiB = 1 << 20
S3A_TWO_PART_FILE = 6 * MiB
"""The size of the committed task's first file (s3a_child.TWO_PARTS: two parts of fs.s3a.multipart.size=5M)."""
LEFTOVER_DESTS = ("shown", "by-sweep", "by-abort", "by-recover")


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def run_cli(s3_server, s3_env, capsys) -> Callable[..., CliResult]:
    """``s3commit <args>`` in this process against the test server (credentials from the environment)."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = cli.main([*args, "--endpoint-url", s3_server.endpoint_url, "--max-attempts", "3"])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def killed_s3a_jobs(s3_server, bucket: str) -> dict[str, dict[str, Any]]:
    """Four S3A magic jobs killed with SIGKILL before their job commit, one per destination of
    :data:`LEFTOVER_DESTS` in ``bucket``: what each left, by destination (s3a_child.leftover_job)."""
    jobs = {dest: str(uuid.uuid4()) for dest in LEFTOVER_DESTS}
    result = run_child("s3a-leftovers", s3_server.endpoint_url, bucket,
                       *(f"{dest}={job}" for dest, job in jobs.items()))
    left = {job["dest"]: job for job in result["jobs"]}
    assert sorted(left) == sorted(LEFTOVER_DESTS)
    return left


def new_store(s3_server) -> S3Store:
    return S3Store(store_options_for(s3_server))


def etag_strings(etags: list[Any]) -> list[str]:
    """The part ETags of a ``.pending`` entry in either of Hadoop's forms (strings; 3.5's objects)."""
    return [e["etag"] if isinstance(e, dict) else e for e in etags]


def part_etags(client, bucket: str, key: str, upload_id: str) -> list[str]:
    return [p["ETag"] for p in client.list_parts(Bucket=bucket, Key=key, UploadId=upload_id)["Parts"]]


def s3a_uploads_of(client, bucket: str, job: dict[str, Any]) -> dict[str, str]:
    """The pending uploads of an S3A leftover job, by key: every key it wrote (committed task or running)."""
    keys = set(job["committed_keys"]) | set(job["running_keys"])
    return {u.key: u.upload_id for u in list_pending_uploads(client, bucket, f"{job['dest']}/") if u.key in keys}


# --- s3commit reads S3A's ---------------------------------------------------------------------------------------


def test_show_reads_s3a_success(s3a_jars, s3_server, s3_bucket, s3_client, run_cli):
    run_child("magic", s3_server.endpoint_url, s3_bucket, "table", "1000")
    data = sorted(k for k in list_keys(s3_client, s3_bucket, "table/") if k.endswith(".parquet"))
    uri = f"s3://{s3_bucket}/table/_SUCCESS"

    shown = run_cli("show", uri)
    assert shown.code == 0, shown
    lines = shown.out.splitlines()
    assert "  committer   magic" in lines
    assert any(line.startswith("  job id ") and "(spark.sql.sources.writeJobUUID)" in line for line in lines), lines
    assert sorted(line.strip() for line in lines if line.strip().startswith(f"/{data[0].rsplit('/', 1)[0]}")) \
        == [f"/{k}" for k in data]

    manifest = run_cli("show", uri, "--json").json()["manifest"]
    raw = json.loads(s3_client.get_object(Bucket=s3_bucket, Key="table/_SUCCESS")["Body"].read())
    assert manifest["committer"] == raw["committer"] == "magic"
    assert manifest["jobId"] == raw["jobId"] and manifest["jobIdSource"] == raw["jobIdSource"]
    assert manifest["hostname"] == raw["hostname"] and manifest["timestamp"] == raw["timestamp"]
    assert sorted(manifest["filenames"]) == [f"/{k}" for k in data]
    assert manifest["metrics"] == raw["metrics"] and manifest["diagnostics"] == raw["diagnostics"]


def check_show_reads_s3a_pendingset_and_pending(client, bucket: str, job: dict[str, Any], run_cli) -> None:
    uploads = s3a_uploads_of(client, bucket, job)
    # hadoop-aws 3.5.0 writes each part's ETag as an object (its UploadEtag), not as the string earlier Hadoops
    # wrote, and no extraData into a pendingset.
    raw = json.loads(client.get_object(Bucket=bucket, Key=job["pendingset"])["Body"].read())
    assert "extraData" not in raw
    assert {tuple(sorted(e)) for c in raw["commits"] for e in c["etags"]} == {("checksum", "checksumAlgorithm", "etag")}

    # The committed task's .pendingset: the job, the task attempt, each upload with its parts.
    uri = f"s3://{bucket}/{job['pendingset']}"
    shown = run_cli("show", uri)
    assert shown.code == 0, shown
    assert f"  job id        {job['job_uuid']}" in shown.out.splitlines()
    assert f"  task attempt  {job['committed_task_attempt']}" in shown.out.splitlines()
    assert "  uploads       2, 6.0 MiB" in shown.out.splitlines(), shown.out
    assert f"    s3://{bucket}/{job['dest']}/part-00000.csv  6.0 MiB, 2 parts, upload " in shown.out
    manifest = run_cli("show", uri, "--json").json()["manifest"]
    assert manifest["jobId"] == job["job_uuid"]
    commits = {c["destinationKey"]: c for c in manifest["commits"]}
    assert sorted(commits) == job["committed_keys"]
    for key, commit in commits.items():
        assert commit["bucket"] == bucket and commit["uploadId"] == uploads[key]
        assert etag_strings(commit["etags"]) == part_etags(client, bucket, key, uploads[key])
        assert commit["jobId"] == job["job_uuid"] and commit["taskId"] == job["committed_task_attempt"]
    assert commits[f"{job['dest']}/part-00000.csv"]["length"] == S3A_TWO_PART_FILE
    assert commits[f"{job['dest']}/p=1/part-00000.csv"]["length"] == 1000

    # The running task's .pending files: the final key, the upload, the magic path it was written as.
    for magic_path in job["running_magic_paths"]:
        key = f"{job['dest']}/{magic_path.rsplit('/__base/', 1)[1]}"
        uri = f"s3://{bucket}/{magic_path}.pending"
        shown = run_cli("show", uri)
        assert shown.code == 0, shown
        lines = shown.out.splitlines()
        assert f"  destination  s3://{bucket}/{key}" in lines
        assert f"  upload id    {uploads[key]}" in lines
        assert any(line.startswith("  written as   s3a://") and line.endswith(magic_path) for line in lines), lines
        pending = run_cli("show", uri, "--json").json()["manifest"]
        assert pending["uploadId"] == uploads[key] and pending["partCount"] == 1
        assert etag_strings(pending["etags"]) == part_etags(client, bucket, key, uploads[key])


# --- S3A reads s3commit's ---------------------------------------------------------------------------------------


def test_s3a_reads_s3commit_success_pendingset_and_pending(s3a_jars, s3_server, s3_bucket, s3_client):
    store = new_store(s3_server)
    # A committed job: its _SUCCESS.
    done = create_committer("magic", f"s3://{s3_bucket}/done", store=store, threads=2)
    done.setup_job()
    attempt = done.setup_task(done.new_task_attempt_id(0))
    for name in ("part-00000.csv", "p=1/part-00001.csv"):
        with attempt.open(name) as out:
            out.write(name.encode() * 10)
    done.commit_job([done.commit_task(attempt)])
    # A job with two tasks committed (their .pendingset files) and one running with .pending files, never
    # job-committed.
    running = create_committer("magic", f"s3://{s3_bucket}/running", store=store, threads=2, part_size=5 * MiB,
                               track_commits_in_memory=False)
    running.setup_job()
    try:
        sizes = {0: {"part-00000.csv": S3A_TWO_PART_FILE, "p=1/part-00000.csv": 10}, 1: {"part-00001.csv": 20},
                 2: {"part-00002.csv": 30}}
        for task, files in sizes.items():
            attempt = running.setup_task(running.new_task_attempt_id(task))
            for name, size in files.items():
                with attempt.open(name) as out:
                    out.write(bytes(size))
            if task < 2:
                running.commit_task(attempt)
        keys = list_keys(s3_client, s3_bucket)
        pendingsets = sorted(k for k in keys if k.endswith(".pendingset"))
        pending = sorted(k for k in keys if k.endswith(".pending"))
        assert len(pendingsets) == 2 and len(pending) == 1, keys

        read = run_child("s3a-read", s3_server.endpoint_url, s3_bucket, "done/_SUCCESS", *pendingsets, *pending)["read"]
        for key, result in read.items():
            assert result["loaded"], f"S3A cannot load s3commit's {key}: {result['error']}"
            assert result["validate"] == "ok", f"{key}: {result['validate']}"

        ours = SuccessData.from_json(s3_client.get_object(Bucket=s3_bucket, Key="done/_SUCCESS")["Body"].read())
        theirs = read["done/_SUCCESS"]
        assert theirs["name"] == "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1" and theirs["success"]
        assert (theirs["committer"], theirs["jobId"], theirs["jobIdSource"]) == ("magic", done.job_id,
                                                                                ours.job_id_source)
        assert sorted(theirs["filenames"]) == ["/done/p=1/part-00001.csv", "/done/part-00000.csv"]
        assert (theirs["hostname"], theirs["timestamp"]) == (ours.hostname, ours.timestamp)
        assert theirs["metrics"] == dict(ours.metrics) and theirs["diagnostics"] == dict(ours.diagnostics)

        for key in pendingsets:
            ours_set = PendingSet.from_json(s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read())
            theirs = read[key]
            assert theirs["version"] == 3 and theirs["jobId"] == running.job_id == ours_set.job_id
            assert theirs["size"] == len(ours_set.commits) > 0
            for mine, their in zip(ours_set.commits, theirs["commits"], strict=True):
                assert_same_commit(mine, their, s3_client)
        for key in pending:
            mine = PendingUpload.from_json(s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read())
            assert_same_commit(mine, read[key], s3_client)
        assert {c["length"] for k in pendingsets for c in read[k]["commits"]} == {S3A_TWO_PART_FILE, 10, 20}
        assert max(c["partCount"] for k in pendingsets for c in read[k]["commits"]) == 2
    finally:
        running.abort_job()


def assert_same_commit(mine: PendingUpload, theirs: dict[str, Any], client) -> None:
    """What S3A's ``SinglePendingCommit`` holds is what s3commit wrote, and the upload's parts on the server."""
    assert (theirs["bucket"], theirs["destinationKey"], theirs["uploadId"]) == (mine.bucket, mine.destination_key,
                                                                                 mine.upload_id)
    assert (theirs["length"], theirs["partCount"], theirs["uri"]) == (mine.length, mine.part_count, mine.uri)
    assert (theirs["jobId"], theirs["taskId"]) == (mine.job_id, mine.task_id)
    assert theirs["etags"] == list(mine.etags) == part_etags(client, mine.bucket, mine.destination_key,
                                                             mine.upload_id)
    assert theirs["extraData"] == dict(mine.extra_data)
    algorithm = mine.extra_data.get("s3commit.checksum.algorithm")
    if algorithm:  # the part checksums s3commit sent, where S3A 3.5 passes them on at CompleteMultipartUpload
        assert theirs["checksums"] == [[algorithm, c] for c in mine.extra_data["s3commit.checksum.parts"].split()]


def test_s3a_lists_s3commit_pending_uploads(s3a_jars, s3_server, s3_bucket, s3_client):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=new_store(s3_server), threads=2)
    committer.setup_job()
    try:
        for task in range(2):
            attempt = committer.setup_task(committer.new_task_attempt_id(task))
            for name in (f"part-{task:05d}.csv", f"p={task}/part-{task:05d}.csv"):
                with attempt.open(name) as out:
                    out.write(b"x" * 100)
            if task == 0:
                committer.commit_task(attempt)
        ours = {(u.key, u.upload_id) for u in list_pending_uploads(s3_client, s3_bucket, "out/")}
        assert len(ours) == 4

        result = run_child("s3a-uploads", s3_server.endpoint_url, s3_bucket, "out/")
        assert {(u["key"], u["uploadId"]) for u in result["uploads"]} == ours
        assert result["tool_exit"] == 0, result["tool_output"]
        listed = {tuple(line.split()) for line in result["tool_output"].splitlines() if line.startswith("out/")}
        assert listed == ours, result["tool_output"]
        assert "Total 4 uploads found." in result["tool_output"]
    finally:
        committer.abort_job()


# --- what a SIGKILLed S3A job leaves, and what s3commit cleans --------------------------------------------------


@dataclass
class Neighbours:
    """What shares a destination with a killed S3A job and must outlive its clean-up: committed data, a live
    s3commit job (a committed task's pendingset, a running task's uploads), and a pending upload elsewhere."""

    bucket: str
    dest: str
    live: Any
    live_uploads: set[tuple[str, str]]
    unrelated: tuple[str, str]
    committed: list[str]


@pytest.fixture
def neighbours(s3_server, s3_bucket) -> Iterator[Callable[[str], Neighbours]]:
    """``neighbours(dest)``: the :class:`Neighbours` of ``dest`` in ``s3_bucket``, made now (ended after the test)."""
    made: list[Neighbours] = []

    def make(dest: str) -> Neighbours:
        bucket = s3_bucket
        client = s3_server.client()
        store = new_store(s3_server)
        old = create_committer("magic", f"s3://{bucket}/{dest}", store=store, threads=2)
        old.setup_job()
        attempt = old.setup_task(old.new_task_attempt_id(0))
        with attempt.open("old/part-00000.csv") as out:
            out.write(b"committed before")
        old.commit_job([old.commit_task(attempt)])  # its commit sweeps dead jobs: S3A's (unknown) is left
        live = create_committer("magic", f"s3://{bucket}/{dest}", store=store, threads=2)
        live.setup_job()
        for task in range(2):
            attempt = live.setup_task(live.new_task_attempt_id(task))
            with attempt.open(f"new/part-{task:05d}.csv") as out:
                out.write(b"in progress")
            if task == 0:
                live.commit_task(attempt)
        unrelated_key = f"elsewhere/{dest}.bin"
        unrelated = (unrelated_key, client.create_multipart_upload(Bucket=bucket, Key=unrelated_key)["UploadId"])
        live_uploads = {(u.key, u.upload_id) for u in list_pending_uploads(client, bucket, f"{dest}/new/")}
        assert len(live_uploads) == 2
        found = Neighbours(bucket, dest, live, live_uploads, unrelated,
                           [k for k in list_keys(client, bucket, f"{dest}/") if "__" not in k])
        assert f"{dest}/old/part-00000.csv" in found.committed and f"{dest}/_SUCCESS" in found.committed
        made.append(found)
        return found

    yield make
    for found in made:
        found.live.abort_job()
        s3_server.client().abort_multipart_upload(Bucket=found.bucket, Key=found.unrelated[0],
                                                  UploadId=found.unrelated[1])


def assert_only_s3a_job_cleaned(client, n: Neighbours, job: dict[str, Any], before: set[str], *,
                                directory_removed: bool = True) -> None:
    """The S3A job's uploads are gone (and, unless ``directory_removed`` is false, its directory), and nothing else:
    every other key that was there is there still, and every other upload is pending still."""
    s3a_dir = f"{n.dest}/__magic_job-{job['job_uuid']}/"
    keys = set(list_keys(client, n.bucket))
    gone = before - keys
    assert gone == ({k for k in before if k.startswith(s3a_dir)} if directory_removed else set()), sorted(gone)
    pending = {(u.key, u.upload_id) for u in list_pending_uploads(client, n.bucket)}
    assert not s3a_uploads_of(client, n.bucket, job)
    assert n.live_uploads <= pending and n.unrelated in pending
    live_dir = f"{n.dest}/__magic_job-{n.live.job_id}/"
    live_after = sorted(k for k in keys if k.startswith(live_dir))
    assert live_after == sorted(k for k in before if k.startswith(live_dir)) != []
    assert set(n.committed) <= keys


def check_uploads_list_and_sweep(client, bucket: str, job: dict[str, Any], n: Neighbours, run_cli) -> None:
    s3a = s3a_uploads_of(client, bucket, job)
    assert len(s3a) == 4
    dest = f"s3://{bucket}/by-sweep"

    # `uploads list DEST` shows the S3A job (of unknown liveness: it keeps no record) and its uploads.
    listed = run_cli("uploads", "list", dest, "--json")
    assert listed.code == 0, listed
    report = listed.json()
    assert set(s3a.items()) | n.live_uploads == {(u["key"], u["upload_id"]) for u in report["uploads"]}
    states = {j["job_id"]: (j["committer"], j["state"]) for j in report["jobs"]}
    assert states == {job["job_uuid"]: ("magic", "unknown"), n.live.job_id: ("magic", "alive")}
    text = run_cli("uploads", "list", dest)
    assert f"magic job {job['job_uuid']}: unknown" in text.out + text.err
    by_job = run_cli("uploads", "list", dest, "--job", job["job_uuid"], "--json").json()
    assert {(u["key"], u["upload_id"]) for u in by_job["uploads"]} == set(s3a.items())

    # Without an age an unknown job is never swept; with one, it is (the live job never is).
    before = set(list_keys(client, bucket))
    left = run_cli("uploads", "sweep", dest, "--json")
    if left.code == 0:  # a store known to honour conditional writes: the sweep runs, and leaves both jobs
        assert left.json()["swept"] == []
    assert set(list_keys(client, bucket)) == before and len(s3a_uploads_of(client, bucket, job)) == 4
    swept = run_cli("uploads", "sweep", dest, "--older-than", "0s", "--json")
    assert swept.code == 0, swept
    result = swept.json()
    assert [(s["job_id"], s["uploads_aborted"]) for s in result["swept"]] == [(job["job_uuid"], 4)]
    assert [(s["job_id"], s["why"]) for s in result["left"]] == [(n.live.job_id, "alive")]
    assert_only_s3a_job_cleaned(client, n, job, before)


def check_uploads_abort_by_job(client, bucket: str, job: dict[str, Any], n: Neighbours, run_cli) -> None:
    assert len(s3a_uploads_of(client, bucket, job)) == 4
    before = set(list_keys(client, bucket))

    aborted = run_cli("uploads", "abort", f"s3://{bucket}/by-abort", "--job", job["job_uuid"], "--yes", "--json")
    assert aborted.code == 0, aborted
    assert aborted.json()["aborted"] == 4
    # The command aborts uploads only: the job's directory stays for `uploads sweep` or the operator.
    assert_only_s3a_job_cleaned(client, n, job, before, directory_removed=False)


def check_recover_abort(client, bucket: str, job: dict[str, Any], n: Neighbours, run_cli) -> None:
    assert len(s3a_uploads_of(client, bucket, job)) == 4
    before = set(list_keys(client, bucket))
    s3a_dir = [k for k in before if k.startswith(f"by-recover/__magic_job-{job['job_uuid']}/")]
    # A committed task's pendingset, a running task's two .pending files and their two 0-byte magic markers.
    assert sum(k.endswith(".pendingset") for k in s3a_dir) == 1 and sum(k.endswith(".pending") for k in s3a_dir) == 2
    assert len(s3a_dir) >= 5, s3a_dir

    recovered = run_cli("recover", f"s3://{bucket}/by-recover", "--job", job["job_uuid"], "--abort", "--json")
    assert recovered.code == 0, recovered
    report = recovered.json()
    assert report["action"] == "aborted" and report["aborted"] == 4, report
    assert report["scratch_objects_deleted"] == len(s3a_dir)
    assert_only_s3a_job_cleaned(client, n, job, before)
    again = run_cli("recover", f"s3://{bucket}/by-recover", "--job", job["job_uuid"], "--abort")
    assert again.code == 3, again  # nothing left to do


def test_what_a_killed_s3a_job_leaves_is_read_and_cleaned_by_s3commit(s3a_jars, s3_server, s3_bucket, neighbours,
                                                                     run_cli):
    jobs = killed_s3a_jobs(s3_server, s3_bucket)
    client = s3_server.client()
    check_show_reads_s3a_pendingset_and_pending(client, s3_bucket, jobs["shown"], run_cli)
    check_uploads_list_and_sweep(client, s3_bucket, jobs["by-sweep"], neighbours("by-sweep"), run_cli)
    check_uploads_abort_by_job(client, s3_bucket, jobs["by-abort"], neighbours("by-abort"), run_cli)
    check_recover_abort(client, s3_bucket, jobs["by-recover"], neighbours("by-recover"), run_cli)
