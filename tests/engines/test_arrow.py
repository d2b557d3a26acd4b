"""pandas and pyarrow through ``s3commit.arrow.write_dataset``: pyarrow's dataset writer, committed as one job."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from s3commit.arrow import write_dataset  # noqa: E402
from s3commit.errors import CommitConflictError, ConfigError  # noqa: E402
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys, parquet_column  # noqa: E402


def frame(rows: int = 100, offset: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"id": range(offset, offset + rows), "day": [f"d{i % 3}" for i in range(rows)],
                         "v": [i * 0.5 for i in range(rows)]})




def data_keys(s3_client, bucket: str, prefix: str = "t/") -> list[str]:
    return sorted(k for k in list_keys(s3_client, bucket, prefix) if k.endswith(".parquet"))


@pytest.mark.parametrize("committer", ["magic", "directory"])
def test_a_partitioned_dataframe_is_committed_exactly_with_pyarrows_writer(store, s3_client, s3_bucket, staging_dir,
                                                                           committer):
    success = write_dataset(frame(), f"s3://{s3_bucket}/t", partitioning=["day"], committer=committer,
                            store=store, staging_dir=staging_dir, max_rows_per_group=10, compression="zstd")
    keys = data_keys(s3_client, s3_bucket)
    assert sorted(k.split("/")[1] for k in keys) == ["day=d0", "day=d1", "day=d2"]
    assert success["committer"] == committer and sorted(success["filenames"]) == [f"/{k}" for k in keys]
    assert parquet_column(s3_client, s3_bucket, "t/") == list(range(100))
    meta = pq.read_metadata(pa.BufferReader(s3_client.get_object(Bucket=s3_bucket, Key=keys[0])["Body"].read()))
    assert meta.num_row_groups >= 2 and meta.row_group(0).column(0).compression == "ZSTD"  # options passed
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_tables_readers_and_batch_iterables_are_accepted(store, s3_client, s3_bucket):
    table = pa.Table.from_pandas(frame(30), preserve_index=False)
    write_dataset(table, f"s3://{s3_bucket}/t", store=store)
    write_dataset(table.to_reader(), f"s3://{s3_bucket}/t", store=store)
    write_dataset(iter(table.to_batches(max_chunksize=7)), f"s3://{s3_bucket}/t", store=store)
    assert parquet_column(s3_client, s3_bucket, "t/") == sorted(list(range(30)) * 3)  # append: three jobs, three files


def test_overwrite_replaces_only_after_the_new_files_and_a_failed_overwrite_keeps_the_old(store, s3_client,
                                                                                         s3_bucket):
    dest = f"s3://{s3_bucket}/t"
    write_dataset(frame(50), dest, partitioning=["day"], store=store)

    def failing():
        yield pa.RecordBatch.from_pandas(frame(10, 1000), preserve_index=False)
        raise RuntimeError("the source failed mid-write")

    with pytest.raises(RuntimeError, match="mid-write"):
        write_dataset(failing(), dest, partitioning=["day"], mode="overwrite", store=store)
    assert parquet_column(s3_client, s3_bucket, "t/") == list(range(50))  # the old data, untouched
    assert_no_pending_uploads(s3_client, s3_bucket)
    write_dataset(frame(20, 500), dest, partitioning=["day"], mode="overwrite", store=store)
    assert parquet_column(s3_client, s3_bucket, "t/") == list(range(500, 520))


def test_overwrite_partitions_replaces_only_the_partitions_written(store, s3_client, s3_bucket):
    dest = f"s3://{s3_bucket}/t"
    write_dataset(frame(30), dest, partitioning=["day"], store=store)
    new = pd.DataFrame({"id": [900, 901], "day": ["d1", "d1"], "v": [0.0, 0.0]})
    write_dataset(new, dest, partitioning=["day"], mode="overwrite-partitions", store=store)
    kept = [i for i in range(30) if i % 3 != 1]
    assert parquet_column(s3_client, s3_bucket, "t/") == sorted([*kept, 900, 901])


def test_mode_error_and_bad_input_are_refused_before_anything_is_written(store, s3_client, s3_bucket):
    dest = f"s3://{s3_bucket}/t"
    with pytest.raises(ConfigError, match=r"partition column.*nope"):
        write_dataset(frame(), dest, partitioning=["nope"], store=store)
    with pytest.raises(ConfigError, match="mode 'upsert' is not valid"):
        write_dataset(frame(), dest, mode="upsert", store=store)
    with pytest.raises(ConfigError, match="scheme"):
        write_dataset(frame(), "/tmp/local", store=store)
    with pytest.raises(ConfigError, match="cannot write a int"):
        write_dataset(42, dest, store=store)
    assert list_keys(s3_client, s3_bucket) == []
    write_dataset(frame(), dest, mode="error", store=store)  # empty destination: fine
    with pytest.raises(CommitConflictError, match="already holds data"):
        write_dataset(frame(), dest, mode="error", store=store)
    assert parquet_column(s3_client, s3_bucket, "t/") == list(range(100))
    assert_no_pending_uploads(s3_client, s3_bucket)
