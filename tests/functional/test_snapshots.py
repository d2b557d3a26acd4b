"""Snapshot destinations (issue 55) on the in-memory S3: enable, commits of every kind publishing the next snapshot,
what a reader of the log sees, retention and vacuum on the store's clock, disable, and the refusals."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

import s3commit
from s3commit import create_committer
from s3commit.cli.app import main as cli_main
from s3commit.commit.process_state import ProcessState
from s3commit.commit.snapshots import SnapshotLog, hidden, next_snapshot
from s3commit.config.options import CommitterOptions
from s3commit.errors import ConfigError, ManifestError
from s3commit.model.snapshot_log import Snapshot, SnapshotFile
from s3commit.model.uri import S3Uri
from s3commit.testing.memory import MemoryS3

BUCKET = "b"
DEST = f"s3://{BUCKET}/t"
URI = S3Uri.parse(DEST)
DAY = 24 * 3600


def write(s3: MemoryS3, files: dict[str, bytes], committer: str = "magic", options: dict[str, Any] | None = None,
          driver_process: ProcessState | None = None, driver_store: s3commit.S3Store | None = None,
          **commit_args: Any) -> s3commit.SuccessData:
    """One job: a driver and an executor process, one task writing ``files``; returns its ``_SUCCESS``."""
    job_id = str(uuid.uuid4())
    opts = CommitterOptions(threads=4, **(options or {}))
    driver = create_committer(committer, DEST, job_id=job_id, store=driver_store or s3.store(), options=opts,
                              process=driver_process or ProcessState())
    driver.setup_job()
    executor = create_committer(committer, DEST, job_id=job_id, store=s3.store(), options=opts,
                                process=ProcessState())
    attempt = executor.setup_task(executor.new_task_attempt_id(0))
    for relative, body in files.items():
        with attempt.open(relative) as out:
            out.write(body)
    return driver.commit_job([executor.commit_task(attempt)], **commit_args)


def current(s3: MemoryS3) -> dict[str, bytes]:
    """What a reader of the log reads: the current snapshot's files, each read from the store."""
    snapshot = SnapshotLog(s3.store(), URI).current()
    assert snapshot is not None
    objects = s3.objects(BUCKET, "t/")
    return {f.relative: objects[f"t/{f.relative}"] for f in snapshot.files}


def test_enable_makes_the_files_there_snapshot_0_and_is_idempotent(s3):
    write(s3, {"p=0/a": b"a0", "p=1/a": b"a1"})
    first = s3commit.enable_snapshots(DEST, store=s3.store())
    assert first.id == 0 and sorted(f.relative for f in first.files) == ["p=0/a", "p=1/a"]
    assert {f.size for f in first.files} == {2}
    again = s3commit.enable_snapshots(DEST, store=s3.store())
    assert again == first
    assert sorted(k for k in s3.objects(BUCKET, "t/_spark_metadata/")) == [
        "t/_spark_metadata/0.compact", "t/_spark_metadata/s3commit-snapshots.json"]


@pytest.mark.parametrize("commit_args, expected", [
    ({}, {"p=0/a": b"a0", "p=1/a": b"a1", "p=1/b": b"b1"}),
    ({"delete_paths": [""]}, {"p=1/b": b"b1"}),
    ({"replace_partitions": True}, {"p=0/a": b"a0", "p=1/b": b"b1"}),
], ids=["append", "overwrite", "dynamic-overwrite"])
def test_a_commit_publishes_the_next_snapshot_and_deletes_nothing(s3, commit_args, expected):
    write(s3, {"p=0/a": b"a0", "p=1/a": b"a1"})
    s3commit.enable_snapshots(DEST, store=s3.store())
    success = write(s3, {"p=1/b": b"b1"}, **commit_args)
    assert current(s3) == expected
    assert success.metrics["committer_snapshot"] == 1
    assert success.metrics["committer_files_replaced"] == 3 - len(expected)
    assert success.metrics["committer_objects_deleted_by_overwrite"] == 0
    # The replaced files stay for the retention horizon: readers that planned on snapshot 0 still read them.
    assert {"t/p=0/a", "t/p=1/a", "t/p=1/b"} <= set(s3.objects(BUCKET, "t/"))
    assert s3.uploads(BUCKET) == []


@pytest.mark.parametrize("committer, options", [("directory", {"conflict_mode": "replace"}),
                                                ("partitioned", {"conflict_mode": "replace"})])
def test_the_staging_committers_publish_snapshots_too(s3, committer, options):
    write(s3, {"p=0/a": b"a0", "p=1/a": b"a1"})
    s3commit.enable_snapshots(DEST, store=s3.store())
    write(s3, {"p=1/b": b"b1"}, committer=committer, options=options)
    files = current(s3)
    assert b"b1" in files.values() and b"a1" not in files.values()
    assert (b"a0" in files.values()) is (committer == "partitioned")


def test_vacuum_deletes_replaced_files_once_the_horizon_has_passed_on_the_store_clock(s3):
    write(s3, {"p=0/a": b"a0"})
    s3commit.enable_snapshots(DEST, store=s3.store(), retention=3600)
    write(s3, {"p=0/b": b"b0"}, delete_paths=[""])
    report = s3commit.vacuum_snapshots(DEST, store=s3.store())
    assert (report.deleted, report.retained_snapshots) == (0, 2)
    assert "t/p=0/a" in s3.objects(BUCKET)
    s3.advance(3601)
    report = s3commit.vacuum_snapshots(DEST, store=s3.store())
    assert (report.deleted, report.entries_deleted) == (1, 1)
    assert "t/p=0/a" not in s3.objects(BUCKET) and current(s3) == {"p=0/b": b"b0"}
    assert sorted(s3.objects(BUCKET, "t/_spark_metadata/")) == [
        "t/_spark_metadata/1.compact", "t/_spark_metadata/s3commit-snapshots.json"]


def test_a_later_commit_vacuums_expired_snapshots_without_listing_the_table(s3):
    write(s3, {"p=0/a": b"a0"})
    s3commit.enable_snapshots(DEST, store=s3.store(), retention=60)
    write(s3, {"p=0/b": b"b0"}, delete_paths=[""])
    s3.advance(61)
    client = s3.store()
    write(s3, {"p=0/c": b"c0"})  # an append: snapshot 0 expired 61 s ago, its file a is in no retained snapshot
    assert "t/p=0/a" not in s3.objects(BUCKET)
    assert current(s3) == {"p=0/b": b"b0", "p=0/c": b"c0"}
    assert client is not None


def test_a_full_vacuum_deletes_old_files_in_no_snapshot_and_keeps_young_ones(s3):
    s3commit.enable_snapshots(DEST, store=s3.store(), retention=60)
    s3.store().objects.put_object(BUCKET, "t/p=9/stray", b"x")  # a writer outside s3commit
    report = s3commit.vacuum_snapshots(DEST, store=s3.store())
    assert (report.deleted, report.kept_young) == (0, 1)
    s3.advance(61)
    assert s3commit.vacuum_snapshots(DEST, store=s3.store()).deleted == 1


def test_disable_leaves_a_plain_directory_holding_the_current_snapshot(s3):
    write(s3, {"p=0/a": b"a0", "p=1/a": b"a1"})
    s3commit.enable_snapshots(DEST, store=s3.store())
    write(s3, {"p=1/b": b"b1"}, replace_partitions=True)
    assert s3commit.disable_snapshots(DEST, store=s3.store()) == 1
    data = {k: v for k, v in s3.objects(BUCKET, "t/").items() if not hidden(k[2:])}
    assert data == {"t/p=0/a": b"a0", "t/p=1/b": b"b1"}
    assert not SnapshotLog(s3.store(), URI).state().enabled
    # A plain directory again: the next overwrite deletes at commit, as before.
    success = write(s3, {"p=2/c": b"c2"}, delete_paths=[""])
    assert "committer_snapshot" not in success.metrics
    assert {k for k in s3.objects(BUCKET, "t/") if not hidden(k[2:])} == {"t/p=2/c"}


def test_a_plain_destination_is_unchanged(s3):
    success = write(s3, {"p=0/a": b"a0"})
    write(s3, {"p=0/b": b"b0"}, delete_paths=[""])
    assert "committer_snapshot" not in success.metrics
    assert not any("_spark_metadata" in k for k in s3.objects(BUCKET))


def test_enable_refuses_a_structured_streaming_sinks_log(s3):
    s3.store().objects.put_object(BUCKET, "t/_spark_metadata/0", b'v1\n{"path":"s3a://b/t/x"}')
    with pytest.raises(ConfigError, match="Structured Streaming"):
        s3commit.enable_snapshots(DEST, store=s3.store())


def test_the_entry_is_spark_file_sink_log_format_with_uri_paths(s3):
    odd = "p=a b%3A/c.parquet"
    snapshot = Snapshot.of(3, [SnapshotFile(relative=odd, size=5, modified_ms=7, job="j")])
    entry = snapshot.to_entry("s3a", BUCKET, "t")
    version, line = entry.decode().split("\n")
    assert version == "v1"
    assert json.loads(line) == {"path": "s3a://b/t/p=a%20b%253A/c.parquet", "size": 5, "isDir": False,
                                "modificationTime": 7, "blockReplication": 1, "blockSize": 32 * 1024 * 1024,
                                "action": "add", "s3commitJob": "j"}
    assert Snapshot.from_entry(3, entry, BUCKET, "t", source="x") == snapshot
    with pytest.raises(ManifestError, match="outside"):
        Snapshot.from_entry(3, entry, BUCKET, "u", source="x")
    with pytest.raises(ManifestError, match="delete"):
        Snapshot.from_entry(3, entry.replace(b'"add"', b'"delete"'), BUCKET, "t", source="x")


@pytest.mark.parametrize("relative", ["day=2026-11-29/part-00000-c000.snappy.parquet", 'p="q"/back\\slash',
                                      "p=caf\u00e9/\u65e5\u672c.csv", "sp ace/100%.orc", "a?b#c/d", "x/\u0001ctl",
                                      "k=v/p=x+y,z;w@1!$&'()*~.txt", "deep//double"])
def test_entry_lines_are_the_json_of_spark_fields_for_any_name(relative):
    """The hand-written lines are exactly json.dumps of the fields, with the path as Hadoop's Path.toUri() writes
    it, and read back to the same file, whatever characters the name holds."""
    from urllib.parse import quote

    snapshot = Snapshot.of(1, [SnapshotFile(relative, 12, 34, 'job "x"'), SnapshotFile("plain", 1, 2, "")])
    entry = snapshot.to_entry("s3a", BUCKET, "t/sub")
    lines = [json.loads(line) for line in entry.decode().split("\n")[1:]]
    expected = {f.relative: {"path": "s3a://b/" + quote(f"t/sub/{f.relative}", safe="/=:@!$&'()*+,;-._~"),
                             "size": f.size, "isDir": False, "modificationTime": f.modified_ms,
                             "blockReplication": 1, "blockSize": 32 * 1024 * 1024, "action": "add",
                             "s3commitJob": f.job} for f in snapshot.files}
    assert lines == [expected[f.relative] for f in snapshot.files]
    assert Snapshot.from_entry(1, entry, BUCKET, "t/sub", source="x") == snapshot


def test_next_snapshot_replaces_prefixes_and_rewritten_keys():
    base = Snapshot.of(4, [SnapshotFile(relative=r, size=1, modified_ms=0) for r in ("p=1/a", "p=10/a", "x")])
    new = [SnapshotFile(relative="x", size=2, modified_ms=1, job="j")]
    after = next_snapshot(base, added=new, replaced=["p=1"])
    assert after.id == 5 and [(f.relative, f.size) for f in after.files] == [("p=10/a", 1), ("x", 2)]


def test_the_cli_enables_shows_lists_and_vacuums(s3, capsys, monkeypatch):
    write(s3, {"p=0/a": b"a0"})
    store = s3.store()
    monkeypatch.setattr("s3commit.cli.args.store_from_args", lambda args: store)
    assert cli_main(["snapshot", "enable", DEST, "--retention", "1h"]) == 0
    write(s3, {"p=0/b": b"b0"}, delete_paths=[""])
    capsys.readouterr()
    assert cli_main(["snapshot", "files", DEST]) == 0
    assert capsys.readouterr().out.split() == ["s3://b/t/p=0/b"]
    assert cli_main(["snapshot", "show", DEST, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [s["id"] for s in shown["snapshots"]] == [1, 0] and shown["retentionSeconds"] == 3600
    assert cli_main(["snapshot", "vacuum", DEST, "--horizon", "0s"]) == 0
    assert "1 files" in capsys.readouterr().out
    assert cli_main(["snapshot", "disable", DEST]) == 0
    assert cli_main(["snapshot", "files", DEST]) == 3  # nothing: not a snapshot destination


def test_arrow_dataset_reads_the_current_snapshot_only(s3):
    pa = pytest.importorskip("pyarrow")
    import s3commit.arrow

    table = pa.table({"id": list(range(10)), "day": [i % 2 for i in range(10)]})
    s3commit.arrow.write_dataset(table, DEST, partitioning=["day"], store=s3.store())
    s3commit.enable_snapshots(DEST, store=s3.store())
    newer = pa.table({"id": list(range(100, 103)), "day": [1, 1, 1]})
    s3commit.arrow.write_dataset(newer, DEST, partitioning=["day"], mode="overwrite-partitions", store=s3.store())
    read = s3commit.arrow.dataset(DEST, store=s3.store()).to_table()
    assert sorted(zip(read["id"].to_pylist(), read["day"].to_pylist(), strict=True)) == (
        [(i, 0) for i in range(0, 10, 2)] + [(i, 1) for i in range(100, 103)])
    with pytest.raises(ConfigError, match="not a snapshot destination"):
        s3commit.arrow.dataset(f"s3://{BUCKET}/other", store=s3.store())


def manifests_of(s3: MemoryS3) -> dict[str, list[str]]:
    return {k.removeprefix("t/_symlink_format_manifest/"): v.decode().split()
            for k, v in s3.objects(BUCKET, "t/_symlink_format_manifest/").items()}


def test_symlink_manifests_follow_every_commit_partition_by_partition(s3):
    write(s3, {"p=0/a": b"a0", "p=1/a": b"a1"})
    s3commit.enable_snapshots(DEST, store=s3.store(), symlink_manifests=True)
    assert manifests_of(s3) == {"p=0/manifest": ["s3a://b/t/p=0/a"], "p=1/manifest": ["s3a://b/t/p=1/a"]}
    write(s3, {"p=1/b": b"b1", "p=2/c": b"c2"}, replace_partitions=True)
    assert manifests_of(s3) == {"p=0/manifest": ["s3a://b/t/p=0/a"], "p=1/manifest": ["s3a://b/t/p=1/b"],
                                "p=2/manifest": ["s3a://b/t/p=2/c"]}
    write(s3, {"p=2/d": b"d2"}, delete_paths=[""])
    assert manifests_of(s3) == {"p=2/manifest": ["s3a://b/t/p=2/d"]}
    s3commit.disable_snapshots(DEST, store=s3.store())
    assert manifests_of(s3) == {}


def test_symlink_manifests_can_be_turned_on_later(s3):
    write(s3, {"a": b"a"})
    s3commit.enable_snapshots(DEST, store=s3.store())
    assert manifests_of(s3) == {}
    s3commit.enable_snapshots(DEST, store=s3.store(), symlink_manifests=True)
    assert manifests_of(s3) == {"manifest": ["s3a://b/t/a"]}


def test_a_streaming_sink_refuses_a_snapshot_destination(s3):
    from s3commit.committers.sink_batches import BatchCommit, batch_job_id

    s3commit.enable_snapshots(DEST, store=s3.store())
    batch = BatchCommit(s3.store(), DEST, batch_job_id(0), options=CommitterOptions(), process=ProcessState())
    with pytest.raises(ConfigError, match="snapshot destination"):
        batch.prepare([])


def test_show_dest_lists_the_snapshots(s3, capsys, monkeypatch):
    write(s3, {"p=0/a": b"a0"})
    store = s3.store()
    monkeypatch.setattr("s3commit.cli.args.store_from_args", lambda args: store)
    s3commit.enable_snapshots(DEST, store=store)
    capsys.readouterr()
    assert cli_main(["show", f"{DEST}/"]) == 0
    out = capsys.readouterr().out
    assert "snapshot destination" in out and "snapshot     0" in out
    assert cli_main(["show", f"{DEST}/", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["snapshotDestination"]["snapshots"][0]["id"] == 0


def test_two_jobs_committing_at_once_end_as_a_serial_order_of_snapshots(s3):
    import threading

    write(s3, {"p=0/a": b"a0", "p=1/a": b"a1"})
    s3commit.enable_snapshots(DEST, store=s3.store())
    jobs = {"x": ({"p=0/x": b"x0"}, {"replace_partitions": True}), "y": ({"p=1/y": b"y1", "p=2/y": b"y2"}, {})}
    errors: list[BaseException] = []

    def run(name: str) -> None:
        try:
            write(s3, jobs[name][0], **jobs[name][1])
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(n,)) for n in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    log = SnapshotLog(s3.store(), URI)
    state = log.state()
    assert [i for i, _ in state.entries] == [0, 1, 2]
    # x replaces p=0, y appends: both orders end the same, and each intermediate snapshot is one job's whole commit.
    assert current(s3) == {"p=0/x": b"x0", "p=1/a": b"a1", "p=1/y": b"y1", "p=2/y": b"y2"}
    middle = log.read(1).relatives
    assert middle in ({"p=0/x", "p=1/a"}, {"p=0/a", "p=1/a", "p=1/y", "p=2/y"})


def test_a_driver_reads_the_settings_once_while_their_etag_stays_the_same(s3):
    """A long-lived driver (a sidecar) reads the log's settings at its first commit; later commits see the same
    ETag in the log's listing and read none, until the settings change."""
    write(s3, {"p=0/a": b"a"})
    s3commit.enable_snapshots(DEST, store=s3.store())
    driver, store = ProcessState(), s3.store()
    settings_key = "t/_spark_metadata/s3commit-snapshots.json"

    def settings_reads(files: dict[str, bytes]) -> int:
        client = store.requests.client
        before = len(client.requests)
        write(s3, files, driver_process=driver, driver_store=store)
        return sum(1 for r in client.requests[before:] if r.operation == "get_object" and r.key == settings_key)

    assert settings_reads({"p=1/a": b"1"}) == 1
    assert settings_reads({"p=2/a": b"2"}) == 0
    s3commit.disable_snapshots(DEST, store=s3.store())
    s3commit.enable_snapshots(DEST, store=s3.store(), retention=60)  # new settings, a new ETag
    assert settings_reads({"p=3/a": b"3"}) == 1
    assert SnapshotLog(s3.store(), URI).state().settings.retention == 60
    assert sorted(current(s3)) == ["p=0/a", "p=1/a", "p=2/a", "p=3/a"]


@pytest.mark.parametrize("ahead", [False, True], ids=["in-the-commit", "lease-taken-ahead"])
def test_a_log_read_before_the_lease_is_confirmed_when_another_commit_of_this_process_came_between(s3, monkeypatch,
                                                                                                  ahead):
    """A commit reads the log while it takes the lease, and trusts that read only where it takes the lease on the
    ETag this process remembered before the read began. Here another job of the same driver process commits in
    between (after this commit's read, before its lease): it frees the lease at a new ETag, which this commit takes
    with one PUT, but its read is stale; confirmed under the lease, it publishes after the other job's snapshot.
    ``lease-taken-ahead``: as the sidecar commits, the lease's taking and the log's read begun before the task
    messages are read (``take_lease_ahead``): the read is sent before the commit is even called."""
    import threading

    from s3commit.commit.lease import CommitLease
    from s3commit.testing.memory import Request

    write(s3, {"p=0/a": b"a0"})
    s3commit.enable_snapshots(DEST, store=s3.store())
    driver = ProcessState()
    listed, other_done = threading.Event(), threading.Event()

    def notice(request: Request) -> None:
        if request.operation == "list_objects_v2" and request.key == "t/_spark_metadata/":
            listed.set()
        return None

    def job(files: dict[str, bytes], store: s3commit.S3Store) -> tuple[Any, Any]:
        opts = CommitterOptions(threads=4)
        committer = create_committer("magic", DEST, job_id=str(uuid.uuid4()), store=store, options=opts,
                                     process=driver)
        committer.setup_job()  # reads the lease free: this process remembers its ETag
        executor = create_committer("magic", DEST, job_id=committer.job_id, store=s3.store(), options=opts,
                                    process=ProcessState())
        attempt = executor.setup_task(executor.new_task_attempt_id(0))
        for relative, body in files.items():
            with attempt.open(relative) as out:
                out.write(body)
        return committer, executor.commit_task(attempt)

    late, late_message = job({"p=1/late": b"l"}, s3.store(fail=notice))
    other, other_message = job({"p=2/other": b"o"}, s3.store())
    acquire = CommitLease._acquire  # the taking itself (begun before the commit reads the log: acquire_ahead)

    def acquire_after_the_other(self: CommitLease) -> CommitLease:
        if self.job_id == late.job_id:
            assert other_done.wait(30)
        return acquire(self)

    monkeypatch.setattr(CommitLease, "_acquire", acquire_after_the_other)

    def commit_other() -> None:
        assert listed.wait(30)  # the late job's log read is answered first
        other.commit_job([other_message])
        other_done.set()

    thread = threading.Thread(target=commit_other)
    thread.start()
    if ahead:
        late.take_lease_ahead()
        assert listed.wait(30)  # read ahead, before commit_job
    success = late.commit_job([late_message])
    thread.join()
    assert success.metrics["committer_lease_requests"] == 1  # taken with one PUT, on the other job's release
    assert [i for i, _ in SnapshotLog(s3.store(), URI).state().entries] == [0, 1, 2]
    assert success.metrics["committer_snapshot"] == 2
    assert current(s3) == {"p=0/a": b"a0", "p=1/late": b"l", "p=2/other": b"o"}
