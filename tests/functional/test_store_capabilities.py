"""The capability probe on three real S3 implementations with different answers (moto here; SeaweedFS and rclone in
the slow tier), its clean-up, its cache, and the decisions s3commit takes from it (the ETag check with the endpoint
given the ways boto3 users give it, the orphan sweep, refusals of what a store cannot do)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import replace
from datetime import timedelta

import pytest

from s3commit import S3Store, create_committer
from s3commit.cli import main as cli_main
from s3commit.config.options import StoreOptions
from s3commit.errors import AccessDeniedError, ConfigError
from s3commit.model.paths import PROBE_PATH_PREFIX
from s3commit.model.uri import S3Uri
from s3commit.store import capability_cache
from s3commit.store.capabilities import Capabilities, Finding, Outcome
from s3commit.store.probe import CHECKERS, endpoint_of, probe
from s3commit.testing._sim.profiles import get_profile
from s3commit.testing._sim.simulator import SimulatorConfig, SimulatorServer
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed.fixtures import ALL_SERVERS, every_server_fixture
from tests.clocks import let_store_time_pass
from tests.conftest import store_options_for

s3_server = every_server_fixture(ALL_SERVERS)

H, IG, Y = "honoured", "ignored", "yes"
EXPECTED = {
    # moto 5.2: conditions honoured, checksums and Content-MD5 not validated.
    "moto": {"put-if-none-match": H, "put-if-match": H, "delete-if-match": H, "put-if-none-match-race": H,
             "complete-if-none-match": H, "checksum-crc32": IG, "checksum-sha256": IG, "content-md5": IG,
             "part-etag-md5": Y, "list-uploads": Y, "repeated-complete": Y, "multipart-etag": Y,
             "part-number-gaps": Y, "head-checksum": Y},
    # SeaweedFS 4.x: conditions honoured, checksums and Content-MD5 validated.
    "seaweedfs": {"put-if-none-match": H, "put-if-match": H, "delete-if-match": H, "put-if-none-match-race": H,
                  "complete-if-none-match": H, "checksum-crc32": H, "checksum-sha256": H, "content-md5": H,
                  "part-etag-md5": Y, "list-uploads": Y, "repeated-complete": Y, "multipart-etag": Y,
                  "part-number-gaps": Y, "head-checksum": Y},
    # rclone serve s3: conditions and checksums accepted and ignored, Content-MD5 validated, a completed object's ETag
    # the MD5 of its bytes.
    "rclone": {"put-if-none-match": IG, "put-if-match": IG, "delete-if-match": IG, "put-if-none-match-race": IG,
               "complete-if-none-match": IG, "checksum-crc32": IG, "checksum-sha256": IG, "content-md5": H,
               "part-etag-md5": Y, "list-uploads": Y, "repeated-complete": "no", "multipart-etag": "no",
               "part-number-gaps": "no", "head-checksum": "no"},
}


def server_name(server) -> str:
    return getattr(server, "name", "moto")


@pytest.fixture
def cold(monkeypatch, tmp_path):
    """Nothing known of any store: a cache directory of this test's own, nothing in memory."""
    monkeypatch.setenv(capability_cache.DIR_ENV, str(tmp_path / "capabilities"))
    capability_cache.forget()
    yield tmp_path / "capabilities"
    capability_cache.forget()


def fresh_bucket(server) -> str:
    """A bucket made straight on the server: nothing known of it (the fixtures' buckets are known at once)."""
    name = f"cold-{uuid.uuid4().hex[:12]}"
    server.client().create_bucket(Bucket=name)
    return name


def left_under(server, bucket: str, prefix: str) -> tuple[list[str], list[str]]:
    client = server.client()
    keys = list_keys(client, bucket, prefix)
    uploads = [u["Key"] for u in client.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])]
    return keys, uploads


def test_the_probe_finds_what_each_server_honours_and_leaves_nothing(s3_server, store, s3_bucket):
    found = probe(store, s3_bucket, "tables/t1")

    outcomes = {name: finding.outcome.value for name, finding in found.findings.items()}
    expected = EXPECTED[server_name(s3_server)]
    assert {name: outcomes[name] for name in expected} == expected
    assert found.endpoint == s3_server.endpoint_url and found.bucket == s3_bucket
    assert left_under(s3_server, s3_bucket, "") == ([], [])
    safe = not found.lost_features("CRC32")
    assert safe == (server_name(s3_server) != "rclone")


def test_doctor_prints_the_table_and_json_and_its_exit_status_says_whether_every_feature_is_safe(
        s3_server, s3_bucket, capsys, cold):
    argv = ["doctor", f"s3://{s3_bucket}/warehouse", "--endpoint-url", s3_server.endpoint_url, "--region",
            "us-east-1"]
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        status = cli_main(argv)
        table = capsys.readouterr().out
        json_status = cli_main([*argv, "--json"])
        report = json.loads(capsys.readouterr().out)

    rclone = server_name(s3_server) == "rclone"
    assert status == json_status == (1 if rclone else 0)
    assert "put-if-none-match" in table and "what s3commit does" in table
    assert ("Not safe here: the commit lease" in table) == rclone
    assert report["safe"] is (not rclone)
    assert {name: f["outcome"] for name, f in report["findings"].items()}["checksum-crc32"] == \
        EXPECTED[server_name(s3_server)]["checksum-crc32"]
    assert report["actions"]["list-uploads"].startswith("job commit and abort sweep")
    # The doctor refreshed the cache jobs read: a job in this process asks nothing more.
    assert capability_cache.cache_file(endpoint_of(S3Store(store_options_for(s3_server))), s3_bucket).is_file()
    assert left_under(s3_server, s3_bucket, "") == ([], [])


def test_a_probe_interrupted_removes_what_it_made(s3_server, store, s3_bucket, monkeypatch):
    def interrupted(scratch):
        scratch.create("interrupted")
        scratch.put("interrupted-object", b"x")
        raise KeyboardInterrupt

    monkeypatch.setitem(CHECKERS, "head-checksum", interrupted)
    with pytest.raises(KeyboardInterrupt):
        probe(store, s3_bucket, "t")
    assert left_under(s3_server, s3_bucket, "") == ([], [])


def test_a_probe_sweeps_the_scratch_of_a_probe_killed_outright(s3_server, store, s3_bucket, monkeypatch):
    client = s3_server.client()
    stale = f"t/{PROBE_PATH_PREFIX}0123/left-by-a-killed-probe"
    client.put_object(Bucket=s3_bucket, Key=stale, Body=b"x")
    upload = client.create_multipart_upload(Bucket=s3_bucket, Key=stale)["UploadId"]
    monkeypatch.setattr("s3commit.store.probe.STALE_AFTER", timedelta(0))  # an hour, made a moment for the test
    let_store_time_pass(s3_server, s3_bucket, 1.1)  # older than the store's "now" (Last-Modified has whole seconds)
    probe(store, s3_bucket, "t")
    assert left_under(s3_server, s3_bucket, "t/") == ([], [])
    assert upload not in {u["UploadId"] for u in client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", [])}


def test_a_permission_the_credentials_lack_is_reported_as_denied(s3_server, store, s3_bucket, monkeypatch):
    send = store.requests.send_once

    def no_conditional_deletes(operation, bucket, key=None, **params):
        if operation == "DeleteObject" and "IfMatch" in params:
            raise AccessDeniedError("not allowed", operation=operation, bucket=bucket, key=key, code="AccessDenied")
        return send(operation, bucket, key, **params)

    monkeypatch.setattr(store.requests, "send_once", no_conditional_deletes)
    found = probe(store, s3_bucket)
    assert str(found.findings["delete-if-match"]) == "denied (AccessDenied)"
    assert not found.conditional_deletes  # unknown counts as missing, never as honoured
    # The lease needs conditional PUTs only: a role that may not delete conditionally keeps it.
    assert found.conditional_writes == (EXPECTED[server_name(s3_server)]["put-if-match"] == "honoured")
    assert found.findings["put-if-match"].outcome.value == EXPECTED[server_name(s3_server)]["put-if-match"]


# --- the cache ----------------------------------------------------------------------------------------------


def one_file_job(store: S3Store, dest: str, staging_dir: str, **options):
    committer = create_committer("magic", dest, store=store, staging_dir=staging_dir, **options)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("part-00000.txt") as out:
        out.write(b"hello\n")
    return committer.commit_job([committer.commit_task(attempt)])


def total(store: S3Store) -> int:
    return sum(store.counters.snapshot()["requests"].values())


JOB_IN_A_PROCESS = textwrap.dedent("""
    import json, sys
    from s3commit import S3Store, StoreOptions
    from tests.functional.test_store_capabilities import one_file_job, total
    store = S3Store(StoreOptions(endpoint_url=sys.argv[1], region="us-east-1", path_style=True,
                                 access_key="testing", secret_key="testing"))
    one_file_job(store, sys.argv[2], sys.argv[3])
    print(json.dumps({"requests": total(store)}))
""")


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_a_store_is_probed_once_then_known_to_later_jobs_and_processes_without_a_request(
        s3_server, cold, staging_dir, tmp_path):
    if server_name(s3_server) != "moto":
        pytest.skip("request counts compared on moto only")
    bucket = fresh_bucket(s3_server)
    first, second = S3Store(store_options_for(s3_server)), S3Store(store_options_for(s3_server))
    success = one_file_job(first, f"s3://{bucket}/a", staging_dir)
    one_file_job(second, f"s3://{bucket}/b", staging_dir)

    assert total(first) > total(second) + 40  # the first job probed; the second, in this process, asked nothing
    assert success.diagnostics["s3commit.capabilities"].startswith("put-if-none-match=honoured")
    assert success.diagnostics["s3commit.checksum.verify-etag.effective"] == "true"  # moto validates nothing
    assert capability_cache.cache_file(s3_server.endpoint_url, bucket).is_file()

    def job_in_a_process(directory, dest) -> int:
        env = {**os.environ, capability_cache.DIR_ENV: str(directory)}
        out = subprocess.run([sys.executable, "-c", JOB_IN_A_PROCESS, s3_server.endpoint_url, dest, staging_dir],
                             env=env, capture_output=True, text=True, check=True, cwd=os.getcwd()).stdout
        return int(json.loads(out.splitlines()[-1])["requests"])

    assert job_in_a_process(cold, f"s3://{bucket}/c") == total(second)  # the disk cache: no probe
    assert job_in_a_process(tmp_path / "elsewhere", f"s3://{bucket}/d") == total(first)  # nothing known: probes
    assert list_keys(s3_server.client(), bucket, PROBE_PATH_PREFIX) == []


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_an_old_cache_entry_is_probed_again_and_age_zero_keeps_nothing_on_disk(s3_server, cold):
    bucket = fresh_bucket(s3_server)
    store = S3Store(replace(store_options_for(s3_server), capabilities_max_age=60))
    first = capability_cache.known(store, bucket)
    assert first is not None
    path = capability_cache.cache_file(endpoint_of(store), bucket)
    stale = replace(first, probed_at=first.probed_at - 120)
    path.write_bytes(stale.to_json())
    capability_cache.forget()
    again = capability_cache.known(S3Store(store.options), bucket)
    assert again is not None and again.probed_at > stale.probed_at

    path.unlink()
    capability_cache.forget()
    transient = S3Store(replace(store_options_for(s3_server), capabilities_max_age=0))
    assert capability_cache.known(transient, bucket) is not None
    assert not path.exists()


# --- decisions ------------------------------------------------------------------------------------------------


def test_damage_in_transit_is_caught_with_the_endpoint_given_only_through_the_environment_or_a_profile(
        s3_server, s3_bucket, cold, monkeypatch, tmp_path, staging_dir):
    """moto validates no checksum: the ETag check must be on, decided from the probe of the endpoint boto3 resolved
    (the option is empty), for the endpoint in AWS_ENDPOINT_URL and in a profile's endpoint_url."""
    if server_name(s3_server) != "moto":
        pytest.skip("moto is the server that validates no checksum")
    for how in ("environment", "profile"):
        with SimulatorServer(upstream=s3_server.raw_endpoint_url) as proxy:
            monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
            monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
            monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
            if how == "environment":
                monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
            else:
                config = tmp_path / f"config-{how}"
                config.write_text(f"[profile lake]\nendpoint_url = {proxy.url}\nregion = us-east-1\n")
                monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
                monkeypatch.setenv("AWS_PROFILE", "lake")
            store = S3Store(StoreOptions(region="us-east-1", path_style=True))
            assert store.options.endpoint_url is None and endpoint_of(store) == proxy.url
            committer = create_committer("magic", f"s3://{s3_bucket}/{how}", store=store, part_size=5 * 1024 * 1024)
            committer.setup_job()  # probes the store boto3 resolved
            proxy.simulator.injector.script("UploadPart", "corrupt", 1)
            attempt = committer.setup_task(committer.new_task_attempt_id(0))
            data = os.urandom(6 * 1024 * 1024)
            with attempt.open("part-00000.bin") as out:
                out.write(data)
            success = committer.commit_job([committer.commit_task(attempt)])
            assert proxy.simulator.snapshot().faults_of("corrupt") == 1
            assert store.counters.snapshot()["retries"].get("UploadPart") == 1, how  # caught, sent again
            assert store.objects.get_object(s3_bucket, f"{how}/part-00000.bin") == data, how
            assert success.diagnostics["s3commit.checksum.verify-etag.effective"] == "true"
            monkeypatch.delenv("AWS_PROFILE", raising=False)
            monkeypatch.delenv("AWS_CONFIG_FILE", raising=False)
    assert_no_pending_uploads(s3_server.client(), s3_bucket)


def seen(server, bucket: str, **changes: Finding) -> None:
    """Make ``bucket`` known to honour what ``server`` does, but for ``changes``."""
    store = S3Store(store_options_for(server))
    found = capability_cache.known(store, bucket)
    assert found is not None
    findings = {**found.findings, **{k.replace("_", "-"): v for k, v in changes.items()}}
    capability_cache.remember(Capabilities(found.endpoint, bucket, time.time(), findings))


def test_verify_etag_asked_for_explicitly_is_refused_where_etags_are_no_md5s(s3_server, s3_bucket, cold):
    seen(s3_server, s3_bucket, part_etag_md5=Finding(Outcome.NO, detail="ETag 1-abc"))
    store = S3Store(replace(store_options_for(s3_server), verify_etag=True))
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    with pytest.raises(ConfigError, match=r"verify-etag is true.*not the MD5"):
        committer.setup_job()
    assert list_keys(s3_server.client(), s3_bucket, "out/") == []


def test_a_store_without_upload_listing_loses_the_sweep_with_one_warning_and_nothing_listed(
        s3_server, s3_bucket, cold, staging_dir, caplog):
    seen(s3_server, s3_bucket, list_uploads=Finding(Outcome.NO, "NotImplemented"))
    store = S3Store(store_options_for(s3_server))
    one_file_job(store, f"s3://{s3_bucket}/out", staging_dir)
    assert store.counters.snapshot()["requests"].get("ListMultipartUploads", 0) == 0
    warnings = [r.getMessage() for r in caplog.records if "orphan-upload sweep" in r.getMessage()]
    assert len(warnings) == 1 and "does not honour" in warnings[0]
    # (on rclone, which ignores conditional writes, the commit lease's own warning comes beside it)


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_doctor_ends_on_sigterm_and_removes_what_it_made(s3_server, s3_bucket, tmp_path):
    if server_name(s3_server) != "moto":
        pytest.skip("the simulator slows the probe down on moto only")
    # Each request pays S3-like latency through a proxy of this test's own, so SIGTERM lands mid-probe.
    config = SimulatorConfig(profile=get_profile("s3-standard"))
    with SimulatorServer(upstream=s3_server.raw_endpoint_url, config=config) as proxy:
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               capability_cache.DIR_ENV: str(tmp_path)}
        doctor = subprocess.Popen([sys.executable, "-m", "s3commit.cli", "doctor", f"s3://{s3_bucket}/t",
                                   "--endpoint-url", proxy.url, "--region", "us-east-1"], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while proxy.simulator.snapshot().requests.get("CreateMultipartUpload", 0) < 3:
            assert time.monotonic() < deadline, "the probe never started"
            time.sleep(0.05)
        doctor.send_signal(signal.SIGTERM)
        _out, err = doctor.communicate(timeout=60)
    assert doctor.returncode == 130, err
    assert left_under(s3_server, s3_bucket, "") == ([], [])


@pytest.mark.slow
@pytest.mark.seaweedfs
@pytest.mark.rclone
def test_the_compatibility_table_in_the_docs_is_what_the_three_servers_answer_now():
    from testbed import compat

    text = compat.DOCUMENT.read_text()
    now = compat.replaced(text, compat.render(compat.measure()))
    assert compat.measured_rows(now) == compat.measured_rows(text), (
        "docs/operations.md's measured table is out of date: run python -m testbed.compat")


@pytest.mark.slow
@pytest.mark.seaweedfs
def test_a_role_that_may_only_read_is_told_denied_not_missing(seaweedfs_server):
    from testbed.seaweed import READER_KEY, READER_SECRET

    bucket = seaweedfs_server.create_bucket(f"readonly-{uuid.uuid4().hex[:8]}")
    reader = S3Store(replace(store_options_for(seaweedfs_server), access_key=READER_KEY, secret_key=READER_SECRET))
    found = probe(reader, bucket, "t")
    assert {str(f).split(" ")[0] for f in found.findings.values()} == {"denied"}
    assert "grant the permission" in found.rows()[0][3]
    assert left_under(seaweedfs_server, bucket, "") == ([], [])


def test_what_moto_in_process_honours_is_never_kept_for_aws(cold, monkeypatch, staging_dir):
    """Inside mock_aws, the endpoint is AWS's own: what moto honours is known in memory only, apart from AWS's."""
    import boto3
    from moto import mock_aws

    from s3commit.testing import atomic_conditional_writes

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    atomic_conditional_writes()  # as on S3 (a suite asks for it): the probe's racing PUTs have one winner
    with mock_aws():
        boto3.client("s3").create_bucket(Bucket="mocked")
        store = S3Store(StoreOptions())
        success = one_file_job(store, "s3://mocked/t", staging_dir)
        assert success.diagnostics["s3commit.capabilities"].startswith("put-if-none-match=honoured")
    assert not list(cold.glob("*.json"))  # nothing on disk for https://s3...amazonaws.com
    assert all(key[0].startswith(capability_cache.IN_PROCESS_MOCK) for key in capability_cache._memory)


# --- snapshot destinations on a store that ignores conditional writes (rclone serve s3) ----------------------------


def hand_enabled_snapshot_destination(server, bucket: str, dest: str) -> None:
    """What `s3commit snapshot enable` would have written, copied there by hand (or from another store): the
    settings and an empty snapshot 0 (rclone ignores If-None-Match, so these are what the enable refused)."""
    import s3commit.model.snapshot_log as log

    uri = S3Uri.parse(dest)
    settings = log.SnapshotSettings(scheme="s3a", retention=24 * 3600, enabled_ms=int(time.time() * 1000),
                                    enabled_by="a copy by hand")
    client = server.client()
    client.put_object(Bucket=bucket, Key=f"{uri.prefix}_spark_metadata/{log.SETTINGS_NAME}", Body=settings.to_json())
    client.put_object(Bucket=bucket, Key=f"{uri.prefix}_spark_metadata/0.compact",
                      Body=log.Snapshot.of(0, ()).to_entry("s3a", bucket, uri.key))


def ids_written(store, dest: str, ids: range, mode: str = "append") -> dict:
    import pandas as pd

    import s3commit.arrow

    return s3commit.arrow.write_dataset(pd.DataFrame({"id": list(ids), "day": [i % 2 for i in ids]}), dest,
                                        partitioning=["day"], mode=mode, store=store)


@pytest.mark.slow
@pytest.mark.rclone
def test_enabling_snapshots_where_conditional_writes_are_ignored_is_refused_naming_why(rclone_server, cold, capsys,
                                                                                      monkeypatch):
    import s3commit

    bucket = fresh_bucket(rclone_server)  # nothing known of it: enable's own probe finds what rclone ignores
    store = S3Store(store_options_for(rclone_server))
    dest = f"s3://{bucket}/t"
    ids_written(store, dest, range(10))
    client = rclone_server.client()
    before = list_keys(client, bucket, "")
    assert len([k for k in before if k.endswith(".parquet")]) == 2

    with pytest.raises(ConfigError, match=r"not seen to honour conditional writes.*published with If-None-Match"):
        s3commit.enable_snapshots(dest, store=store)
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    status = cli_main(["snapshot", "enable", dest, "--endpoint-url", rclone_server.endpoint_url, "--region",
                       "us-east-1"])
    assert status == 2
    assert f"the store of {dest} was not seen to honour conditional writes" in capsys.readouterr().err

    # Nothing written: no log, no lease, no probe's leftovers; the table is a plain directory as before.
    assert list_keys(client, bucket, "t/_spark_metadata/") == []
    assert list_keys(client, bucket, "") == before
    assert left_under(rclone_server, bucket, "")[1] == []
    with pytest.raises(ConfigError, match="is not a snapshot destination"):
        s3commit.current_files(dest, store=store)


@pytest.mark.slow
@pytest.mark.rclone
def test_a_write_to_a_hand_copied_snapshot_log_where_conditional_writes_are_ignored_is_refused_naming_why(
        rclone_server):
    """A log copied by hand onto a store that ignores If-None-Match (``enable`` refuses such a store): the commit
    is refused before anything changes, naming why; the job's uploads are aborted and the log is as it was."""
    import s3commit

    bucket = rclone_server.create_bucket(f"hand-{uuid.uuid4().hex[:8]}")
    store = S3Store(store_options_for(rclone_server))
    dest = f"s3://{bucket}/t"
    hand_enabled_snapshot_destination(rclone_server, bucket, dest)
    log_before = list_keys(rclone_server.client(), bucket, "t/_spark_metadata/")
    with pytest.raises(ConfigError, match=r"keeps a snapshot log .* not seen to honour conditional writes"):
        ids_written(store, dest, range(10))
    assert list_keys(rclone_server.client(), bucket, "t/_spark_metadata/") == log_before
    assert s3commit.current_files(dest, store=store).id == 0
    assert not [k for k in list_keys(rclone_server.client(), bucket, "t/") if k.endswith(".parquet")]
    assert left_under(rclone_server, bucket, "")[1] == []


@pytest.mark.slow
@pytest.mark.rclone
def test_racing_writers_to_a_hand_copied_snapshot_log_where_conditional_writes_are_ignored_lose_no_commit(
        rclone_server):
    """Two appends at once, 8 rounds: each either is refused or its rows are in the snapshot both leave."""
    import threading

    import s3commit
    import s3commit.arrow

    for round_ in range(8):
        bucket = rclone_server.create_bucket(f"race-{uuid.uuid4().hex[:8]}")
        dest = f"s3://{bucket}/t"
        hand_enabled_snapshot_destination(rclone_server, bucket, dest)
        barrier, outcome = threading.Barrier(2), {}

        def write(n: int, dest: str = dest, barrier: threading.Barrier = barrier, outcome: dict = outcome) -> None:
            barrier.wait()
            try:
                outcome[n] = ids_written(S3Store(store_options_for(rclone_server)), dest, range(n * 100, n * 100 + 5))
            except ConfigError as err:
                outcome[n] = err

        threads = [threading.Thread(target=write, args=(n,)) for n in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        committed = [n for n, result in outcome.items() if isinstance(result, dict)]
        store = S3Store(store_options_for(rclone_server))
        if not committed:
            assert s3commit.current_files(dest, store=store).id == 0
            continue
        read = sorted(s3commit.arrow.dataset(dest, store=store).to_table().column("id").to_pylist())
        expected = sorted(i for n in committed for i in range(n * 100, n * 100 + 5))
        snapshots = sorted(outcome[n]["metrics"]["committer_snapshot"] for n in committed)
        assert (read, snapshots) == (expected, list(range(1, len(committed) + 1))), (
            f"round {round_}: both jobs reported snapshot {snapshots}; the log's readers read {read}")
