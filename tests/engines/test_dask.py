"""Dask through ``s3commit.dask.to_parquet``: one attempt per partition execution, one job commit."""

from __future__ import annotations

import os
import signal

import pytest

dask = pytest.importorskip("dask")
pytest.importorskip("dask.dataframe")
pa = pytest.importorskip("pyarrow")

import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402

from s3commit.dask import to_parquet  # noqa: E402
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys, parquet_column  # noqa: E402


def frame(rows: int = 200, partitions: int = 4, offset: int = 0):
    pdf = pd.DataFrame({"id": range(offset, offset + rows), "day": [f"d{i % 2}" for i in range(rows)]})
    return dd.from_pandas(pdf, npartitions=partitions)




def data_keys(s3_client, bucket: str) -> list[str]:
    return sorted(k for k in list_keys(s3_client, bucket, "t/") if k.endswith(".parquet"))


@pytest.mark.parametrize("committer", ["magic", "directory"])
def test_each_partition_is_a_task_and_the_job_commits_once(store, s3_client, s3_bucket, staging_dir, committer):
    success = to_parquet(frame(), f"s3://{s3_bucket}/t", partition_on=["day"], committer=committer, store=store,
                         staging_dir=staging_dir, compute_kwargs={"scheduler": "threads"}, compression="zstd")
    keys = data_keys(s3_client, s3_bucket)
    assert len(keys) == 8  # 4 partitions x 2 days, one file each, as Dask writes
    assert sorted(success["filenames"]) == [f"/{k}" for k in keys] and success["committer"] == committer
    assert parquet_column(s3_client, s3_bucket, "t/") == list(range(200))
    assert_no_pending_uploads(s3_client, s3_bucket)
    # each partition's commit told to the job as its task finished: every pendingset read before the job commit
    assert success["metrics"]["committer_pendingsets_preloaded"] == success["metrics"]["committer_pendingsets"] == 4


def explode_on_partition_two(part):
    if 100 <= part["id"].iloc[0] < 150:
        raise RuntimeError("partition 2 fails")
    return part


def test_a_failing_partition_aborts_the_job_and_an_overwrite_keeps_the_old_data(store, s3_client, s3_bucket):
    dest = f"s3://{s3_bucket}/t"
    to_parquet(frame(40, 2), dest, store=store, compute_kwargs={"scheduler": "threads"})
    failing = frame().map_partitions(explode_on_partition_two, meta=frame()._meta)
    with pytest.raises(RuntimeError, match="partition 2 fails"):
        to_parquet(failing, dest, mode="overwrite", store=store, compute_kwargs={"scheduler": "threads"})
    assert parquet_column(s3_client, s3_bucket, "t/") == list(range(40))
    assert not [k for k in list_keys(s3_client, s3_bucket) if "__magic" in k]
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.slow
def test_a_worker_killed_mid_upload_on_a_distributed_cluster_leaves_every_row_exactly_once(store, s3_client,
                                                                                          s3_bucket, tmp_path):
    from distributed import Client, LocalCluster

    marker = str(tmp_path / "killed")
    endpoint, bucket = store.options.endpoint_url, s3_bucket

    def kill_once(part):
        # The first execution of partition 1 arms a killer in its worker process: once partition 1's file is
        # an upload in progress (its write task runs next, on this worker), the process is SIGKILLed.
        if part["id"].iloc[0] != 50:
            return part
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return part
        os.close(fd)

        def killer():
            import time

            import boto3

            s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                              aws_secret_access_key="testing")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
                if any("/part.1-" in u["Key"] for u in uploads):
                    break
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)

        import threading

        threading.Thread(target=killer, daemon=True).start()
        return part

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster):
        ddf = frame(200, 4).map_partitions(kill_once, meta=frame()._meta)
        success = to_parquet(ddf, f"s3://{s3_bucket}/t", partition_on=["day"], store=store)
    assert os.path.exists(marker)
    keys = data_keys(s3_client, s3_bucket)
    assert parquet_column(s3_client, s3_bucket, "t/") == list(range(200))  # exactly once
    assert sorted(success["filenames"]) == [f"/{k}" for k in keys]
    assert not [k for k in list_keys(s3_client, s3_bucket) if "__magic" in k]
    assert_no_pending_uploads(s3_client, s3_bucket)


def snapshot_keys(store, dest: str) -> list[str]:
    """The current snapshot of ``dest`` as ``/key`` names (the form of ``_SUCCESS``'s ``filenames``)."""
    import s3commit
    from s3commit.model.uri import S3Uri

    prefix = S3Uri.parse(dest).prefix
    return sorted(f"/{prefix}{f.relative}" for f in s3commit.current_files(dest, store=store).files)


@pytest.mark.parametrize("committer", ["magic", "directory"])
def test_on_a_snapshot_destination_each_write_publishes_one_snapshot_of_exactly_its_files(
        store, s3_client, s3_bucket, staging_dir, committer):
    import s3commit
    import s3commit.arrow

    dest = f"s3://{s3_bucket}/t"
    assert s3commit.enable_snapshots(dest, store=store).files == ()  # an empty destination: snapshot 0, no file
    threads = {"scheduler": "threads"}

    first = to_parquet(frame(40, 2), dest, partition_on=["day"], committer=committer, store=store,
                       staging_dir=staging_dir, compute_kwargs=threads)
    assert first["metrics"]["committer_snapshot"] == 1 and s3commit.current_files(dest, store=store).id == 1
    old = snapshot_keys(store, dest)
    assert len(old) == 4 and old == sorted(first["filenames"]) == [f"/{k}" for k in data_keys(s3_client, s3_bucket)]
    assert sorted(s3commit.arrow.dataset(dest, store=store).to_table().column("id").to_pylist()) == list(range(40))

    second = to_parquet(frame(30, 3, offset=1000), dest, partition_on=["day"], mode="overwrite",
                        committer=committer, store=store, staging_dir=staging_dir, compute_kwargs=threads)
    assert second["metrics"]["committer_snapshot"] == 2 and second["metrics"]["committer_files_replaced"] == 4
    new = snapshot_keys(store, dest)
    assert len(new) == 6 and new == sorted(second["filenames"]) and not set(new) & set(old)
    # The replaced files are still in the store (the retention horizon): a lister sees both, the log only the new.
    assert [f"/{k}" for k in data_keys(s3_client, s3_bucket)] == sorted(old + new)
    table = s3commit.arrow.dataset(dest, store=store).to_table()
    assert sorted(table.column("id").to_pylist()) == list(range(1000, 1030))
    assert sorted(set(table.column("day").to_pylist())) == ["d0", "d1"]
    assert_no_pending_uploads(s3_client, s3_bucket)
