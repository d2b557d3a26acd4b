"""Integrity end to end: a checksum with every part and single-PUT object, recorded in the manifests and named at
Complete; bytes damaged in transit (a proxy flips one bit of a request body and fixes no header) are re-sent
from the buffer, or fail the task cleanly, naming the object, part and algorithm; ``validate_output`` checks
what was committed; summary reports. Every case runs on moto (which validates no checksum: the ETag's MD5
catches the damage, and ``auto`` sends no checksum there) and on SeaweedFS (slow tier; it validates:
``BadDigest``), each behind its own proxy."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from s3commit import S3Store, create_committer
from s3commit.config.options import StoreOptions
from s3commit.errors import ChecksumMismatchError, CommitStateError, ConfigError, JobCommitError, ManifestError
from s3commit.model import checksums
from s3commit.model.checksums import ALGORITHM_KEY, PARTS_KEY
from s3commit.model.manifests import PendingSet
from s3commit.store.capabilities import Outcome, checksum_check
from s3commit.store.capability_cache import known
from s3commit.testing._sim.simulator import SimulatorServer
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed.fixtures import every_server_fixture
from tests.conftest import MAGIC_IN_DEFAULT_TIER, STAGING_AND_MAGIC, store_options_for

s3_server = every_server_fixture()

MIB = 1024 * 1024
SIZES = {"small": 1000, "3-part": 2 * 5 * MIB + 12345}


@pytest.fixture
def proxy(s3_server) -> Iterator[SimulatorServer]:
    """An in-process proxy in front of this test's server, with no latency: it damages what it is told to."""
    with SimulatorServer(upstream=s3_server.raw_endpoint_url) as server:
        yield server


@pytest.fixture
def proxied(proxy, s3_server, s3_bucket) -> S3Store:
    """A store through the proxy, whose endpoint (a new one) has been probed already, as a bucket is once its first
    job ran: the damage each test scripts lands on the job's own parts."""
    store = S3Store(store_options_for(s3_server, endpoint_url=proxy.url))
    assert known(store, s3_bucket) is not None
    return store


def payload(size: int, seed: int = 0) -> bytes:
    block = bytes((i * 31 + seed) % 251 for i in range(65536))
    return (block * (size // len(block) + 1))[:size]


def run_job(store: S3Store, name: str, dest: str, staging_dir: str, data: bytes, *, files: int = 2, **options):
    committer = create_committer(name, dest, store=store, staging_dir=staging_dir, part_size=5 * MIB, **options)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    for n in range(files):
        with attempt.open(f"part-{n:05d}.bin") as out:
            out.write(data)
    message = committer.commit_task(attempt)
    return committer, committer.commit_job([message])


def data_keys(s3_client, bucket: str) -> list[str]:
    return sorted(k for k in list_keys(s3_client, bucket, "out/") if k.endswith(".bin"))


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("name", MAGIC_IN_DEFAULT_TIER)  # staging: the next test resends their parts too
def test_a_part_damaged_in_transit_is_resent_and_the_output_is_exact(proxy, proxied, s3_client, s3_bucket, dest,
                                                                     staging_dir, name, size):
    data = payload(SIZES[size])
    proxy.simulator.injector.script("UploadPart", "corrupt", 1)
    _, success = run_job(proxied, name, dest, staging_dir, data)

    assert proxy.simulator.snapshot().faults_of("corrupt") == 1
    assert proxied.counters.snapshot()["retries"].get("UploadPart") == 1  # the damaged part, sent again
    keys = data_keys(s3_client, s3_bucket)
    assert len(keys) == 2
    for key in keys:
        assert s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read() == data
    assert success.diagnostics["fs.s3a.create.checksum.algorithm"] == checksums.automatic()
    assert success.diagnostics["s3commit.checksum.algorithm.effective"] == str(
        proxied.uploads.checksum_algorithm(s3_bucket) or "none")
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.parametrize("name", MAGIC_IN_DEFAULT_TIER)
def test_a_part_that_never_arrives_intact_fails_the_task_naming_object_part_and_algorithm(
        proxy, proxied, s3_client, s3_bucket, dest, staging_dir, name):
    proxy.simulator.injector.script("UploadPart", "corrupt", 50)
    committer = create_committer(name, dest, store=proxied, staging_dir=staging_dir, part_size=5 * MIB)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    # Magic: the file's close returns while its part uploads; the task commit names the failure (its cause).
    with pytest.raises((ChecksumMismatchError, CommitStateError)) as info:
        with attempt.open("part-00000.bin") as out:
            out.write(payload(SIZES["small"]))
        committer.commit_task(attempt)
    text = str(info.value)
    sent = proxied.uploads.checksum_algorithm(s3_bucket) or "no checksum (MD5 of the ETag only)"
    assert "part 1 of s3://" in text and "part-00000" in text and sent in text
    assert "could not be sent intact in 5 attempt(s)" in text
    committer.abort_task(attempt)
    committer.abort_job()
    assert data_keys(s3_client, s3_bucket) == []
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_single_put_objects_damaged_in_transit_are_resent(proxy, proxied, s3_client, s3_bucket):
    data = payload(300_000)
    proxy.simulator.injector.script("PutObject", "corrupt", 2)
    proxied.objects.put_object(s3_bucket, "plain/one", data)
    proxied.objects.put_object(s3_bucket, "plain/conditional", data, if_none_match=True)
    for key in ("plain/one", "plain/conditional"):
        assert s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read() == data
    assert proxied.counters.snapshot()["retries"]["PutObject"] == 2


def one_task(store, s3_client, bucket: str, dest: str, staging_dir: str, name: str, **options):
    """A job of one task that wrote one 3-part file, its task committed; returns the committer, the task's message
    and the file's manifest entry as the pendingset records it."""
    committer = create_committer(name, dest, store=store, staging_dir=staging_dir, part_size=5 * MIB, **options)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("part-00000.bin") as out:
        out.write(payload(SIZES["3-part"]))
    message = committer.commit_task(attempt)
    (commit,) = PendingSet.from_json(s3_client.get_object(Bucket=bucket, Key=message.pendingset_key)[
        "Body"].read()).commits
    return committer, message, commit


@pytest.mark.parametrize("name", STAGING_AND_MAGIC)
def test_manifests_record_part_checksums_in_extra_data(s3_server, s3_client, s3_bucket, dest, staging_dir, name):
    named = S3Store(store_options_for(s3_server, checksum_algorithm=checksums.automatic()))  # sent on every store
    committer, message, commit = one_task(named, s3_client, s3_bucket, dest, staging_dir, name)
    assert commit.extra_data[ALGORITHM_KEY] == checksums.automatic() and len(commit.extra_data[PARTS_KEY].split()) == 3
    committer.commit_job([message])
    head = s3_client.head_object(Bucket=s3_bucket, Key=commit.destination_key, ChecksumMode="ENABLED")
    assert head["ContentLength"] == SIZES["3-part"]


@pytest.mark.parametrize("name", STAGING_AND_MAGIC)
def test_auto_sends_no_checksum_the_store_ignores_unless_the_output_is_validated(
        store, s3_client, s3_bucket, dest, staging_dir, name):
    """``auto`` where the store ignores every checksum and gives MD5 part ETags (moto): no checksum is sent or
    recorded (the ETag check catches damage in transit), except for a job that validates its output, whose check is
    the checksum the store computes of what it keeps. Where the store validates the checksum (SeaweedFS), it is
    always sent and recorded."""
    found = known(store, s3_bucket)
    assert found is not None
    ignored = found.outcome(checksum_check(checksums.automatic())) is Outcome.IGNORED
    assert store.uploads.checksum_algorithm(s3_bucket) == (None if ignored else checksums.automatic())
    assert store.uploads.checksum_algorithm(s3_bucket, object_checked=True) == checksums.automatic()
    data = payload(SIZES["3-part"])
    for validate in (False, True):
        committer, message, commit = one_task(store, s3_client, s3_bucket, f"{dest}-{validate}", staging_dir, name,
                                              validate_output=validate)
        assert (ALGORITHM_KEY in commit.extra_data) == (validate or not ignored)
        success = committer.commit_job([message])
        assert success.diagnostics["s3commit.checksum.algorithm.effective"] == (
            "none" if ignored and not validate else checksums.automatic())
        assert success.metrics.get("committer_checksums_verified", 0) == (1 if validate else 0)
        assert s3_client.get_object(Bucket=s3_bucket, Key=commit.destination_key)["Body"].read() == data


def committed_task(store, s3_client, bucket: str, dest: str, size: int, **options):
    """A magic job with one committed task of one file; returns the committer, the message and the pendingset's
    JSON (for a test to edit and put back)."""
    committer = create_committer("magic", dest, store=store, part_size=5 * MIB, **options)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("part-00000.bin") as out:
        out.write(payload(size))
    message = committer.commit_task(attempt)
    return committer, message, json.loads(s3_client.get_object(Bucket=bucket, Key=message.pendingset_key)[
        "Body"].read())


def test_a_pending_whose_checksums_do_not_match_its_parts_is_refused(s3_server, s3_client, s3_bucket, dest):
    named = S3Store(store_options_for(s3_server, checksum_algorithm=checksums.automatic()))
    committer, message, raw = committed_task(named, s3_client, s3_bucket, dest, SIZES["3-part"])
    extra = raw["commits"][0]["extraData"]
    extra[PARTS_KEY] = " ".join(extra[PARTS_KEY].split()[:2])  # two checksums for three parts
    s3_client.put_object(Bucket=s3_bucket, Key=message.pendingset_key, Body=json.dumps(raw).encode())
    with pytest.raises(ManifestError, match=rf"has 2 {checksums.automatic()} checksum\(s\) for 3 part\(s\)"):
        committer.commit_job([message])
    # Nothing was completed; the upload the manifest names is left for `s3commit uploads abort` (a job does
    # not act on a manifest it cannot trust), as for any corrupt pendingset.
    assert data_keys(s3_client, s3_bucket) == []


def test_checksum_algorithms_are_checked_by_name():
    with pytest.raises(ConfigError, match="Valid values are: CRC32, CRC32C, CRC64NVME, SHA256, auto, none"):
        StoreOptions(checksum_algorithm="md5")
    try:
        import awscrt  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match=r"s3commit\[crt\]"):
            StoreOptions(checksum_algorithm="crc32c")
    assert StoreOptions(checksum_algorithm="none").checksum_algorithm is None
    assert StoreOptions.from_hadoop_conf({"fs.s3a.create.checksum.algorithm": "sha256"}).checksum_algorithm == (
        "SHA256")


def test_auto_is_crc32c_where_awscrt_computes_it_else_crc32(monkeypatch):
    try:
        import awscrt.checksums  # noqa: F401
        crt = True
    except ImportError:
        crt = False
    assert StoreOptions().checksum_algorithm == ("CRC32C" if crt else "CRC32")
    assert StoreOptions.from_hadoop_conf({}).checksum_algorithm == StoreOptions().checksum_algorithm
    assert StoreOptions(checksum_algorithm="AUTO").checksum_algorithm == StoreOptions().checksum_algorithm
    monkeypatch.setattr(checksums, "crt_available", lambda: False)  # a process without s3commit[crt]
    assert StoreOptions().checksum_algorithm == "CRC32"
    assert StoreOptions.from_hadoop_conf({"fs.s3a.create.checksum.algorithm": "auto"}).checksum_algorithm == "CRC32"
    with pytest.raises(ConfigError, match=r"CRC32C needs AWS's CRT: pip install 's3commit\[crt\]'"):
        StoreOptions(checksum_algorithm="CRC32C")
    # CRC32C recorded by a process with awscrt, validated by one without: sizes only, never a false mismatch.
    assert checksums.composite("CRC32C", ["AAAAAA=="]) is None
    assert checksums.composite("CRC32", ["AAAAAA=="]) == checksums.checksum("CRC32", bytes(4)) + "-1"


def test_tasks_that_chose_different_checksums_commit_one_exact_job(s3_server, s3_client, s3_bucket, dest, staging_dir):
    """Executors with and without awscrt resolve ``auto`` differently: each upload records its own algorithm, and
    the job commit names each one's at its Complete and validates each object against its own."""
    pytest.importorskip("awscrt", reason="the crt extra (in .[all]) computes CRC32C")
    options = store_options_for(s3_server)
    committer = create_committer("magic", dest, store=S3Store(options), part_size=5 * MIB, validate_output=True,
                                 job_id="0c9e4b1a-2f61-4d2e-9a57-6f1d2b8c3e10")
    committer.setup_job()
    data = payload(SIZES["3-part"])
    messages = []
    for task, algorithm in enumerate(("CRC32", "CRC32C")):
        named = S3Store(store_options_for(s3_server, checksum_algorithm=algorithm))
        worker = create_committer("magic", dest, store=named, part_size=5 * MIB, job_id=committer.job_id)
        attempt = worker.setup_task(worker.new_task_attempt_id(task))
        with attempt.open(f"part-{task:05d}.bin") as out:
            out.write(data)
        messages.append(worker.commit_task(attempt))
    success = committer.commit_job(messages)
    assert success.metrics["committer_checksums_verified"] == 2  # each against the algorithm its parts record
    for key in data_keys(s3_client, s3_bucket):
        assert s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read() == data
    assert len(data_keys(s3_client, s3_bucket)) == 2
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.parametrize("algorithm", ["SHA256", "none", "CRC32C", "CRC64NVME"])
def test_other_algorithms_and_none_commit_exact_output(s3_server, s3_client, s3_bucket, dest, staging_dir,
                                                       algorithm):
    if algorithm in ("CRC32C", "CRC64NVME"):
        pytest.importorskip("awscrt", reason="the crt extra (in .[all]) computes CRC32C and CRC64NVME")
    store = S3Store(store_options_for(s3_server, checksum_algorithm=algorithm))  # named: sent on every store
    data = payload(SIZES["3-part"])
    _, success = run_job(store, "magic", dest, staging_dir, data, files=1, validate_output=True)
    (key,) = data_keys(s3_client, s3_bucket)
    assert s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read() == data
    assert success.metrics["committer_objects_validated"] == 1
    # The composite algorithms' object checksums are compared (CRC64NVME's is a full-object one: sizes only).
    assert success.metrics["committer_checksums_verified"] == (1 if algorithm in ("SHA256", "CRC32C") else 0)


@pytest.mark.parametrize("name", STAGING_AND_MAGIC)
def test_validate_output_checks_size_and_checksum_of_every_committed_object(store, s3_client, s3_bucket, dest,
                                                                           staging_dir, name):
    _, success = run_job(store, name, dest, staging_dir, payload(SIZES["3-part"]), validate_output=True)
    assert success.metrics["committer_objects_validated"] == 2
    # Both servers return the COMPOSITE checksum of the parts (CRC32C where awscrt is installed, else CRC32): it is
    # compared with the one the parts record.
    assert success.metrics["committer_checksums_verified"] == 2


def test_validate_output_fails_and_rolls_back_a_job_whose_object_is_not_its_manifests(store, s3_client, s3_bucket,
                                                                                      dest):
    committer, message, raw = committed_task(store, s3_client, s3_bucket, dest, SIZES["small"],
                                             validate_output=True)
    raw["commits"][0]["length"] += 1  # the manifest says one byte more than was uploaded
    s3_client.put_object(Bucket=s3_bucket, Key=message.pendingset_key, Body=json.dumps(raw).encode())
    with pytest.raises(JobCommitError) as info:
        committer.commit_job([message])
    assert "has 1000 bytes, its manifest says 1001" in str(info.value.__cause__)
    assert data_keys(s3_client, s3_bucket) == []  # completed, then reverted
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.parametrize("name", MAGIC_IN_DEFAULT_TIER)
def test_summary_reports_are_written_after_a_success_and_after_a_failure(store, s3_client, s3_bucket, dest,
                                                                         staging_dir, tmp_path, name):
    reports = str(tmp_path / "reports")
    committer, success = run_job(store, name, dest, staging_dir, b"x" * 100, summary_report_dir=reports)
    report = json.loads((tmp_path / "reports" / f"summary-{committer.job_id}.json").read_text())
    assert report == json.loads(success.to_json()) and report["success"] is True

    # A failed job (a pendingset that is not JSON): its report says so, and why; here to the store.
    s3_reports = f"s3://{s3_bucket}/reports"
    failing = create_committer(name, f"{dest}-2", store=store, staging_dir=staging_dir,
                               summary_report_dir=s3_reports)
    failing.setup_job()
    attempt = failing.setup_task(failing.new_task_attempt_id(0))
    with attempt.open("part-00000.bin") as out:
        out.write(b"y")
    message = failing.commit_task(attempt)
    s3_client.put_object(Bucket=s3_bucket, Key=message.pendingset_key, Body=b"not json")
    with pytest.raises(ManifestError):
        failing.commit_job([message])
    failed = json.loads(s3_client.get_object(Bucket=s3_bucket, Key=f"reports/summary-{failing.job_id}.json")[
        "Body"].read())
    assert failed["success"] is False and "ManifestError" in failed["diagnostics"]["failure"]
    assert failed["jobId"] == failing.job_id and failed["filenames"] == []


def test_a_report_directory_that_cannot_be_written_does_not_fail_the_job(store, s3_client, s3_bucket, dest,
                                                                         staging_dir, tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("a file, not a directory")
    with caplog.at_level("WARNING", logger="s3commit.commit.summary_reports"):
        _, success = run_job(store, "magic", dest, staging_dir, b"z", summary_report_dir=os.fspath(blocked))
    assert success.success and "could not write its summary report" in caplog.text
