"""engines.common.write_parquet_partitions: the Dask and Ray sinks' split of one task's rows into hive partitions,
in Arrow."""

import io

import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.dataset as ds  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from s3commit.engines import common  # noqa: E402


class FakeAttempt:
    """The files an attempt was given, by relative path, as written when closed."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def open(self, path: str) -> io.BytesIO:
        files = self.files

        class File(io.BytesIO):
            def close(self) -> None:
                if not self.closed:
                    files[path] = self.getvalue()
                super().close()

        return File()


def table():
    return pa.table({"id": list(range(9)), "day": ["b", "a", None, "a", "b", None, "a", "c", "a"],
                     "hour": [1, 2, 3, 2, 1, 3, 9, 1, 2], "text": [f"row {i}" for i in range(9)]})


def test_each_value_combination_is_one_file_in_value_order_without_the_partition_columns():
    attempt = FakeAttempt()
    common.write_parquet_partitions(attempt, table(), ["day", "hour"], "part-0.parquet", {})
    assert list(attempt.files) == ["day=a/hour=2/part-0.parquet", "day=a/hour=9/part-0.parquet",
                                   "day=b/hour=1/part-0.parquet", "day=c/hour=1/part-0.parquet",
                                   f"day={common.NULL_PARTITION}/hour=3/part-0.parquet"]
    rows = {path: pq.read_table(io.BytesIO(data)) for path, data in attempt.files.items()}
    assert rows["day=a/hour=2/part-0.parquet"].column_names == ["id", "text"]
    assert rows["day=a/hour=2/part-0.parquet"]["id"].to_pylist() == [1, 3, 8]  # the rows' order kept
    assert sum(t.num_rows for t in rows.values()) == 9
    assert {t.schema for t in rows.values()} == {pa.schema([("id", pa.int64()), ("text", pa.string())])}


def test_a_null_value_reads_back_as_null_through_pyarrows_hive_partitioning(tmp_path):
    attempt = FakeAttempt()
    common.write_parquet_partitions(attempt, table(), ["day"], "part-0.parquet", {"compression": "zstd"})
    for path, data in attempt.files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    back = ds.dataset(tmp_path, partitioning="hive").to_table().sort_by("id")
    assert back["day"].to_pylist() == table()["day"].to_pylist()
    assert back["id"].to_pylist() == list(range(9))


def test_no_partition_columns_write_one_file_and_an_empty_table_with_partitions_writes_none():
    attempt = FakeAttempt()
    common.write_parquet_partitions(attempt, table(), [], "part-0.parquet", {})
    assert list(attempt.files) == ["part-0.parquet"]
    assert pq.read_table(io.BytesIO(attempt.files["part-0.parquet"])).equals(table())
    empty = FakeAttempt()
    common.write_parquet_partitions(empty, table().slice(0, 0), ["day"], "part-0.parquet", {})
    assert empty.files == {}
