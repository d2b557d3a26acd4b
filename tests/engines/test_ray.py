"""Ray Data through ``s3commit.ray.CommitDatasink``: tasks commit attempts, the driver commits the job."""

from __future__ import annotations

import os
import signal

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pa = pytest.importorskip("pyarrow")


from s3commit.ray import CommitDatasink  # noqa: E402
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys, parquet_column  # noqa: E402

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def ray_cluster():
    import sys

    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the test's sink class, for the workers
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
             _temp_dir="/tmp/ray-s3commit")
    # Ray 2.60's in-place retry of a task's chain (map and write fused), for every dataset of the module: set
    # before the first dataset runs (set later, in a test, it did not reach the tasks).
    context = ray.data.DataContext.get_current()
    context.retried_map_errors, context.max_map_retries = True, 2
    yield
    ray.shutdown()




def dataset(rows: int = 200, blocks: int = 4):
    return ray.data.range(rows, override_num_blocks=blocks).map_batches(
        lambda b: {"id": b["id"], "day": [f"d{i % 2}" for i in b["id"]]}, batch_format="numpy")


def test_a_partitioned_write_commits_once_with_the_success_data(ray_cluster, store, s3_client, s3_bucket):
    sink = CommitDatasink(f"s3://{s3_bucket}/t", partition_cols=["day"], store=store)
    dataset().write_datasink(sink)
    keys = sorted(k for k in list_keys(s3_client, s3_bucket, "t/") if k.endswith(".parquet"))
    assert {k.split("/")[1] for k in keys} == {"day=d0", "day=d1"}
    assert parquet_column(s3_client, s3_bucket, "t/") == list(range(200))
    assert sink.result is not None and sorted(sink.result["filenames"]) == [f"/{k}" for k in keys]
    assert_no_pending_uploads(s3_client, s3_bucket)


class FlakySink(CommitDatasink):
    """Its write task 1 fails part way on its first execution, after a file of it is an upload."""

    def __init__(self, *args, marker: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.marker = marker

    def write(self, blocks, ctx):
        if int(ctx.task_idx) != 1 or os.path.exists(self.marker):
            return super().write(blocks, ctx)
        open(self.marker, "w").close()

        def then_fail():
            yield from blocks
            raise RuntimeError("write task 1 fails part way, first execution")

        return super().write(then_fail(), ctx)


def test_a_write_task_retried_as_a_new_task_writes_every_row_once(ray_cluster, store, s3_client, s3_bucket,
                                                                   tmp_path):
    # Ray's own retry of a task whose exception is retryable: the write task runs again, a new attempt; the
    # failed execution aborted its own upload.
    sink = FlakySink(f"s3://{s3_bucket}/u", store=store, marker=str(tmp_path / "flaky"))
    dataset().write_datasink(sink, ray_remote_args={"retry_exceptions": True, "max_retries": 2})
    assert os.path.exists(tmp_path / "flaky")
    assert parquet_column(s3_client, s3_bucket, "u/") == list(range(200))
    assert not [k for k in list_keys(s3_client, s3_bucket) if "__magic" in k]
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_task_re_run_in_place_with_the_same_task_context_writes_every_row_once(ray_cluster, store, s3_client,
                                                                                 s3_bucket, tmp_path):
    marker = str(tmp_path / "in-place")

    def fails_once(batch):
        # In the chain of the write task that holds row 60: its first execution fails after its sink has
        # opened the attempt (the map runs as the sink pulls blocks), so the re-run's write() is a new attempt.
        if 60 in batch["id"] and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("first execution of the chain fails")
        return batch

    sink = CommitDatasink(f"s3://{s3_bucket}/t", store=store)
    dataset().map_batches(fails_once, batch_format="numpy").write_datasink(sink)
    assert os.path.exists(marker)
    assert parquet_column(s3_client, s3_bucket, "t/") == list(range(200))
    assert len(sink.result["filenames"]) == 4  # one file per task: the failed execution's was aborted
    assert not [k for k in list_keys(s3_client, s3_bucket) if "__magic" in k]
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_killed_worker_leaves_every_row_exactly_once(ray_cluster, store, s3_client, s3_bucket, tmp_path):
    marker = str(tmp_path / "killed")

    def kill_once(batch):
        if 110 in batch["id"] and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return batch

    ds = dataset().map_batches(kill_once, batch_format="numpy")
    ds.write_datasink(CommitDatasink(f"s3://{s3_bucket}/t", store=store), ray_remote_args={"max_retries": 3})
    assert os.path.exists(marker)
    assert parquet_column(s3_client, s3_bucket, "t/") == list(range(200))
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_failed_write_aborts_the_job_and_an_overwrite_keeps_the_old_data(ray_cluster, store, s3_client,
                                                                          s3_bucket):
    dest = f"s3://{s3_bucket}/t"
    dataset(40, 2).write_datasink(CommitDatasink(dest, store=store))

    def always_fails(batch):
        if 150 in batch["id"]:
            raise ValueError("this block is bad")
        return batch

    with pytest.raises(Exception, match="this block is bad"):
        dataset().map_batches(always_fails, batch_format="numpy").write_datasink(
            CommitDatasink(dest, mode="overwrite", store=store))
    assert parquet_column(s3_client, s3_bucket, "t/") == list(range(40))
    assert not [k for k in list_keys(s3_client, s3_bucket) if "__magic" in k]
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_the_sink_is_refused_inside_mock_aws_naming_the_fixtures(monkeypatch):
    # Ray's write tasks run in worker processes, which moto's in-process mock does not reach: the sink is
    # refused when it is made, before Ray starts or anything is written.
    moto = pytest.importorskip("moto")
    from s3commit.store.moto_inprocess import InProcessMockError

    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with moto.mock_aws(), pytest.raises(InProcessMockError, match="Ray Data's write tasks") as caught:
        CommitDatasink("s3://bkt1/t")
    assert all(name in str(caught.value) for name in ("mock_aws", "s3_env", "s3_bucket", "s3_server"))


def test_on_a_snapshot_destination_each_write_publishes_one_snapshot_of_exactly_its_files(ray_cluster, store,
                                                                                          s3_client, s3_bucket):
    import s3commit
    import s3commit.arrow

    def snapshot_keys():
        return sorted(f"/t/{f.relative}" for f in s3commit.current_files(dest, store=store).files)

    def parquet_keys():
        return sorted(f"/{k}" for k in list_keys(s3_client, s3_bucket, "t/") if k.endswith(".parquet"))

    dest = f"s3://{s3_bucket}/t"
    assert s3commit.enable_snapshots(dest, store=store).files == ()  # an empty destination: snapshot 0, no file
    first = CommitDatasink(dest, partition_cols=["day"], store=store)
    dataset(40, 2).write_datasink(first)
    assert first.result is not None and first.result["metrics"]["committer_snapshot"] == 1
    old = snapshot_keys()
    assert old == sorted(first.result["filenames"]) == parquet_keys() and len(old) >= 2
    assert sorted(s3commit.arrow.dataset(dest, store=store).to_table().column("id").to_pylist()) == list(range(40))

    second = CommitDatasink(dest, partition_cols=["day"], mode="overwrite", store=store)
    dataset(30, 3).map_batches(lambda b: {"id": b["id"] + 1000, "day": b["day"]}, batch_format="numpy") \
        .write_datasink(second)
    assert second.result is not None and second.result["metrics"]["committer_snapshot"] == 2
    assert second.result["metrics"]["committer_files_replaced"] == len(old)
    new = snapshot_keys()
    assert new == sorted(second.result["filenames"]) and not set(new) & set(old)
    # The replaced files are still in the store (the retention horizon): a lister sees both, the log only the new.
    assert parquet_keys() == sorted(old + new)
    table = s3commit.arrow.dataset(dest, store=store).to_table()
    assert sorted(table.column("id").to_pylist()) == list(range(1000, 1030))
    assert sorted(set(table.column("day").to_pylist())) == ["d0", "d1"]
    assert_no_pending_uploads(s3_client, s3_bucket)
