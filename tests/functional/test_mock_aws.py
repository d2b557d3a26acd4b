"""s3commit inside moto's in-process mock (``with moto.mock_aws():``), as a user's existing test suite runs it:
a bucket made with ``boto3.client("s3")``, s3commit left to resolve endpoint and credentials as boto3 does.

Every committer with single-part and multi-part files, append and overwrite; a small file's single PUT; each
checksum algorithm; ``s3commit.arrow`` and ``s3commit.dask`` (threaded scheduler); ``recover`` and the CLI.
What needs another process (Spark's sidecars, Dask's worker processes) is refused before anything is written,
naming the fixtures to use instead; a request that leaves on a real connection keeps its part buffer.
(The committer contract runs under the mock in ``tests/contract/test_contract_mock_aws.py``; Ray's refusal is
in ``tests/engines/test_ray.py``.)
"""

from __future__ import annotations

import hashlib
import json

import pytest

moto = pytest.importorskip("moto")

import boto3  # noqa: E402

from s3commit import S3Store, StoreOptions, cli, create_committer  # noqa: E402
from s3commit.commit.engine import CommitEngine, OverwritePlan  # noqa: E402
from s3commit.commit.manifest_store import load_pendingset  # noqa: E402
from s3commit.commit.recovery import RecoveryAction, recover  # noqa: E402
from s3commit.commit.upload_actions import commit_upload  # noqa: E402
from s3commit.config.options import MIB  # noqa: E402
from s3commit.store.moto_inprocess import InProcessMockError, answered_here  # noqa: E402
from s3commit.testing import atomic_conditional_writes  # noqa: E402
from s3commit.testing.assertions import (  # noqa: E402
    assert_no_pending_uploads,
    list_keys,
    parquet_column,
    visible_keys,
)
from tests.conftest import STAGING_AND_MAGIC, racing_conditional_puts, store_options_for  # noqa: E402

BUCKET = "bkt1"
BIG = bytes(range(256)) * (6 * MIB // 256)  # two parts of 5 MiB, the last one short


@pytest.fixture
def s3(monkeypatch):
    """Inside ``mock_aws``: a boto3 client made the default way, and the bucket ``bkt1`` made with it; moto's
    conditional writes atomic, as on S3 (asked for, as a user's suite asks)."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)  # boto3's default resolution: AWS's own endpoint
    atomic_conditional_writes()
    with moto.mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def visible(client, prefix="t/"):
    return visible_keys(client, BUCKET, prefix)


def read(client, key):
    return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def one_task_job(name, files, **options):
    """Run a job of one task writing ``files`` ({relative: bytes}); returns the committer and its message."""
    committer = create_committer(name, f"s3://{BUCKET}/t", part_size=5 * MIB, unique_filenames=False, **options)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    for relative, data in files.items():
        with attempt.open(relative) as out:
            out.write(data)
    return committer, committer.commit_task(attempt)


@pytest.mark.parametrize("name", STAGING_AND_MAGIC)
def test_every_committer_writes_appends_and_overwrites_inside_mock_aws(s3, name, tmp_path):
    staging = {} if name == "magic" else {"conflict_mode": "append", "staging_dir": str(tmp_path)}
    # 1. A single-part file and a two-part one.
    committer, message = one_task_job(name, {"a.txt": b"hello", "year=2026/big.bin": BIG}, **staging)
    committer.commit_job([message])
    assert visible(s3) == ["t/_SUCCESS", "t/a.txt", "t/year=2026/big.bin"]
    assert read(s3, "t/a.txt") == b"hello"
    big = s3.head_object(Bucket=BUCKET, Key="t/year=2026/big.bin")
    assert big["ETag"].endswith('-2"') and big["ContentLength"] == len(BIG)
    assert hashlib.sha256(read(s3, "t/year=2026/big.bin")).digest() == hashlib.sha256(BIG).digest()
    # 2. Append: a second job adds its file beside them.
    committer, message = one_task_job(name, {"b.txt": b"more"}, **staging)
    committer.commit_job([message])
    assert visible(s3) == ["t/_SUCCESS", "t/a.txt", "t/b.txt", "t/year=2026/big.bin"]
    # 3. Overwrite: a third job replaces everything, once its own file is complete (DeleteObjects included).
    committer, message = one_task_job(name, {"c.txt": b"new"}, **staging)
    success = committer.commit_job([message], delete_paths=[""])
    assert visible(s3) == ["t/_SUCCESS", "t/c.txt"] and success.filenames == ("/t/c.txt",)
    assert read(s3, "t/c.txt") == b"new"
    assert_no_pending_uploads(s3, BUCKET)


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME", "SHA256", "none"])
def test_parts_and_small_puts_carry_each_checksum_inside_mock_aws(s3, algorithm):
    store = S3Store(StoreOptions(checksum_algorithm=algorithm))
    committer, message = one_task_job("magic", {"big.bin": BIG}, store=store, validate_output=True)
    committer.commit_job([message])
    assert read(s3, "t/big.bin") == BIG
    store.objects.put_object(BUCKET, "small.bin", bytearray(b"a small file's single PUT, from its buffer"))
    assert read(s3, "small.bin") == b"a small file's single PUT, from its buffer"
    assert_no_pending_uploads(s3, BUCKET)


def test_a_store_given_the_users_own_client_writes_inside_mock_aws(s3):
    committer, message = one_task_job("magic", {"big.bin": BIG}, store=S3Store(client=s3))
    committer.commit_job([message])
    assert read(s3, "t/big.bin") == BIG
    assert_no_pending_uploads(s3, BUCKET)


def test_the_store_knows_when_moto_answers_in_this_process(s3_server, monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    assert not answered_here(S3Store().requests.client)  # no mock started
    with moto.mock_aws():
        assert answered_here(S3Store().requests.client)
        assert not answered_here(S3Store(store_options_for(s3_server)).requests.client)  # a server: moto lets it go out


def sent_bodies(store):
    """The bodies the store's client hands to botocore's HTTP layer (or to moto's stubber), in order."""
    seen = []
    store.requests.client.meta.events.register("before-send", lambda request, **_: seen.append(request.body))
    return seen


def test_a_part_sent_on_a_real_connection_keeps_its_buffer_even_while_a_mock_is_started(s3_server, s3_bucket):
    store = S3Store(store_options_for(s3_server))
    seen = sent_bodies(store)
    for mocked in (False, True):
        buffer = bytearray(b"x" * 1024)
        upload_id = store.uploads.create_multipart_upload(s3_bucket, "k")
        if mocked:
            with moto.mock_aws():
                store.uploads.upload_part(s3_bucket, "k", upload_id, 1, buffer)
        else:
            store.uploads.upload_part(s3_bucket, "k", upload_id, 1, buffer)
        assert seen[-1] is buffer  # handed over as it is: no copy
        store.uploads.abort_multipart_upload(s3_bucket, "k", upload_id)


def test_a_part_answered_by_the_mock_is_handed_to_it_as_bytes(s3):
    store = S3Store()
    seen = sent_bodies(store)
    upload_id = store.uploads.create_multipart_upload(BUCKET, "k")
    store.uploads.upload_part(BUCKET, "k", upload_id, 1, bytearray(b"x" * 1024))
    assert type(seen[-1]) is bytes and seen[-1] == b"x" * 1024
    store.uploads.abort_multipart_upload(BUCKET, "k", upload_id)


def test_arrow_write_dataset_inside_mock_aws(s3):
    pa = pytest.importorskip("pyarrow")
    import s3commit.arrow

    table = pa.table({"id": list(range(100)), "day": [f"d{i % 2}" for i in range(100)]})
    s3commit.arrow.write_dataset(table, f"s3://{BUCKET}/arrow", partitioning=["day"])
    s3commit.arrow.write_dataset(table.slice(0, 10), f"s3://{BUCKET}/arrow", mode="overwrite")
    assert parquet_column(s3, BUCKET, "arrow/") == list(range(10))
    assert_no_pending_uploads(s3, BUCKET)


def dask_frame(rows=200, partitions=4):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    return dd.from_pandas(pd.DataFrame({"id": range(rows), "day": [f"d{i % 2}" for i in range(rows)]}),
                          npartitions=partitions)


def test_dask_to_parquet_with_the_threaded_scheduler_inside_mock_aws(s3):
    pytest.importorskip("pyarrow")
    from s3commit.dask import to_parquet

    success = to_parquet(dask_frame(), f"s3://{BUCKET}/dask", partition_on=["day"],
                         compute_kwargs={"scheduler": "threads"})
    assert len(success["filenames"]) == 8
    to_parquet(dask_frame(rows=20, partitions=2), f"s3://{BUCKET}/dask", mode="append")
    assert parquet_column(s3, BUCKET, "dask/") == sorted([*range(200), *range(20)])
    assert_no_pending_uploads(s3, BUCKET)


def interrupted_commit(completed):
    """What a magic job commit leaves when it dies after its journal and ``completed`` of its 4 uploads."""
    committer = create_committer("magic", f"s3://{BUCKET}/t")
    committer.setup_job()
    messages = []
    for task in range(2):
        attempt = committer.setup_task(committer.new_task_attempt_id(task))
        for index in range(2):
            with attempt.open(f"part-{task}-{index}.txt") as out:
                out.write(b"row\n")
        messages.append(committer.commit_task(attempt))
    keys = [m.pendingset_key for m in messages]
    CommitEngine(committer.store, dest=committer.dest, layout=committer.layout, job_id=committer.job_id,
              committer=committer.name, options=committer.options).write_journal(keys, OverwritePlan())
    uploads = [c for key in keys for c in load_pendingset(committer.store, BUCKET, key).commits]
    for commit in uploads[:completed]:
        commit_upload(committer.store, commit)
    return committer


def test_recover_finishes_an_interrupted_commit_inside_mock_aws(s3):
    committer = interrupted_commit(completed=1)
    report = recover(S3Store(), f"s3://{BUCKET}/t", committer.job_id)
    assert report.action is RecoveryAction.FINISHED and (report.completed, report.already_completed) == (3, 1)
    assert visible(s3) == ["t/_SUCCESS", *(f"t/part-{t}-{i}.txt" for t in range(2) for i in range(2))]
    assert_no_pending_uploads(s3, BUCKET)


def test_the_cli_lists_aborts_recovers_and_shows_inside_mock_aws(s3, capsys):
    # 1. An interrupted commit: the operator lists its uploads, rolls it back, then finds nothing pending.
    committer = interrupted_commit(completed=0)
    capsys.readouterr()
    assert cli.main(["uploads", "list", f"s3://{BUCKET}/t", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["uploads"]) == 4
    assert cli.main(["recover", f"s3://{BUCKET}/t", "--job", committer.job_id, "--abort", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["action"] == "rolled-back"
    assert visible(s3) == [] and s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
    # 2. A committed job: show reads its _SUCCESS.
    done, message = one_task_job("magic", {"x.txt": b"x"})
    done.commit_job([message])
    capsys.readouterr()
    assert cli.main(["show", f"s3://{BUCKET}/t/_SUCCESS", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["manifest"]["jobId"] == done.job_id


# --- what needs another process is refused, naming the fixtures ----------------------------------------------

def test_spark_is_refused_inside_mock_aws_naming_the_fixtures(s3, monkeypatch):
    pytest.importorskip("pyspark")
    import s3commit.spark

    monkeypatch.setattr("s3commit.spark.conf.jar_path", lambda: "bridge.jar")  # no jar is needed to check
    with pytest.raises(InProcessMockError, match="Spark's S3 work runs in its sidecars") as caught:
        s3commit.spark.spark_conf(committer="magic")
    assert all(name in str(caught.value) for name in ("mock_aws", "s3_env", "s3_bucket", "s3_server"))


def test_spark_on_a_server_endpoint_is_not_refused_while_a_mock_is_started(s3, s3_server, monkeypatch):
    pytest.importorskip("pyspark")
    import s3commit.spark

    monkeypatch.setattr("s3commit.spark.conf.jar_path", lambda: "bridge.jar")
    conf = s3commit.spark.spark_conf(endpoint_url=s3_server.endpoint_url)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == s3_server.endpoint_url


def test_dask_worker_processes_are_refused_inside_mock_aws_before_anything_is_written(s3):
    pytest.importorskip("pyarrow")
    from s3commit.dask import to_parquet

    with pytest.raises(InProcessMockError, match="Dask's tasks") as caught:
        to_parquet(dask_frame(), f"s3://{BUCKET}/dask", compute_kwargs={"scheduler": "processes"})
    assert "s3_env" in str(caught.value)
    assert list_keys(s3, BUCKET) == [] and s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


@pytest.mark.timeout(120)  # without the refusal, the job would wait for a worker that never comes
def test_a_distributed_cluster_is_refused_unless_its_workers_run_in_this_process(s3):
    pytest.importorskip("pyarrow")
    distributed = pytest.importorskip("distributed")
    from s3commit.dask import to_parquet

    # A cluster whose workers would be processes (its scheduler on TCP; no worker is needed to refuse).
    with distributed.LocalCluster(n_workers=0, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster), pytest.raises(InProcessMockError, match="Dask's tasks"):
        to_parquet(dask_frame(), f"s3://{BUCKET}/dask")
    assert list_keys(s3, BUCKET) == []
    # Workers in this process (processes=False) reach the mock: the write commits.
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None):
        success = to_parquet(dask_frame(), f"s3://{BUCKET}/dask")
    assert len(success["filenames"]) == 4 and parquet_column(s3, BUCKET, "dask/") == list(range(200))


def test_ranged_reads_inside_mock_aws_are_answered_here(s3):
    # The data path's ranged GETs (s3commit.store.ranged_gets) leave botocore's events behind on a real connection;
    # inside the mock no connection is made, so they go through get_object, which moto answers here.
    s3.put_object(Bucket=BUCKET, Key="r.bin", Body=BIG)
    store = S3Store(StoreOptions(region="us-east-1"))
    assert b"".join(store.objects.stream_object(BUCKET, "r.bin", start=10, end=MIB + 5)) == BIG[10:MIB + 5]


def test_racing_conditional_puts_have_exactly_one_winner_inside_mock_aws(s3):
    client = S3Store(StoreOptions()).requests.client  # the store's client, inside the mock the fixture made atomic
    for round_ in range(10):
        wins = racing_conditional_puts(client, BUCKET, f"race-{round_}")
        assert len(wins) == 1, (round_, wins)


def test_moto_is_patched_only_where_a_test_asks():
    # In a fresh process: s3commit's store writing inside mock_aws, with the test API and its plugin imported, leaves
    # moto as it is; s3commit.testing.atomic_conditional_writes() changes it.
    import os
    import subprocess
    import sys

    code = """
import boto3, moto
from moto.s3.responses import S3Response
import s3commit.testing, s3commit.testing.fixtures
from s3commit import S3Store, StoreOptions
with moto.mock_aws():
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="bkt1")
    S3Store(StoreOptions(region="us-east-1")).objects.put_object("bkt1", "k", bytearray(b"x"), if_none_match=True)
    before = getattr(S3Response, "_s3commit_atomic", False)
    s3commit.testing.atomic_conditional_writes()
    print(before, S3Response._s3commit_atomic)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_ENDPOINT_URL", "AWS_PROFILE"))}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["False", "True"], run.stdout + run.stderr
