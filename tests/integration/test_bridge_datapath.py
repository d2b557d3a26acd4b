"""The data path through a real sidecar process, driven as the JVM drives it: parts handed over as block
files or bodies and uploaded in the background, the in-flight bound, aborts that leave nothing, block files
that never outlive their part, and object ranges streamed back."""

from __future__ import annotations

import json
import os
import time

import pytest

from s3commit.bridge.client import BridgeClient, start_sidecar
from s3commit.testing._sim.profiles import LatencyProfile
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
PART = 5 * MIB


@pytest.fixture(scope="module")
def buffer_base(tmp_path_factory):
    return str(tmp_path_factory.mktemp("buffers"))


@pytest.fixture(scope="module")
def sidecar(buffer_base):
    process = start_sidecar(env={"S3COMMIT_BUFFER_DIR": buffer_base})
    yield process
    process.stop()


@pytest.fixture
def client(sidecar):
    with sidecar.connect() as connection:
        yield connection


def register(client: BridgeClient, server, **extra: str) -> str:
    conf = {"fs.s3a.endpoint": server.endpoint_url, "fs.s3a.path.style.access": "true",
            "fs.s3a.access.key": "testing", "fs.s3a.secret.key": "testing", "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.multipart.size": "5M", "fs.s3a.attempts.maximum": "2", "s3commit.retry.initial-delay": "0.01",
            **extra}
    header, _ = client.call("conf.register", conf=conf)
    return str(header["conf_id"])


def hand_over(client: BridgeClient, opened: dict, part: bytes, *, mode: str, last: bool, number: int) -> dict:
    """One part, as S3OutputStream hands it over: a block file in the sidecar's directory, or a body."""
    op = "fs.close_write" if last else "fs.write_block"
    if mode == "disk" and len(part) > 0:
        name = f"h{opened['handle']}-p{number}-test.block"
        with open(os.path.join(opened["blocks_dir"], name), "wb") as f:
            f.write(part)
        header, _ = client.call(op, handle=opened["handle"], block=name)
    else:
        header, _ = client.call(op, part, handle=opened["handle"], length=len(part))
    return header


def write_file(client: BridgeClient, conf_id: str, path: str, data: bytes, *, mode: str = "disk") -> dict:
    opened = client.call("fs.open_write", conf_id=conf_id, path=path)[0]
    assert opened["ok"], opened
    size = opened["part_size"]
    parts = [data[i:i + size] for i in range(0, len(data), size)] or [b""]
    if len(parts[-1]) == size and len(data) > 0:
        parts.append(b"")  # a file ending on a part boundary closes with an empty last hand-over
    for number, part in enumerate(parts[:-1], 1):
        assert hand_over(client, opened, part, mode=mode, last=False, number=number)["ok"]
    closed = hand_over(client, opened, parts[-1], mode=mode, last=True, number=len(parts))
    assert closed["ok"], closed
    return closed


def blocks_left(sidecar) -> list[str]:
    return [n for n in os.listdir(sidecar.blocks_dir) if n.endswith(".block")]


@pytest.mark.parametrize("mode", ["disk", "array"])
@pytest.mark.parametrize("size", [0, 1, PART - 1, PART, PART + 1, 3 * PART, 3 * PART + 12345],
                         ids=["empty", "one-byte", "under-a-part", "exactly-one-part", "one-part-and-a-byte",
                              "three-parts", "three-parts-and-some"])
def test_files_of_every_shape_arrive_exact(sidecar, client, s3_server, s3_bucket, s3_client, mode, size):
    conf_id = register(client, s3_server)
    data = os.urandom(size)
    closed = write_file(client, conf_id, f"s3a://{s3_bucket}/f", data, mode=mode)
    assert closed["length"] == size
    got = s3_client.get_object(Bucket=s3_bucket, Key="f")
    assert got["Body"].read() == data
    if "-" in got["ETag"]:  # a multipart object: as many parts as the data needs, no empty one at the end
        assert int(got["ETag"].strip('"').rsplit("-", 1)[1]) == max(1, -(-size // PART))
    assert blocks_left(sidecar) == []
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_parts_upload_in_the_background_up_to_the_active_blocks_bound(sidecar, client, s3_sim, s3_bucket,
                                                                      s3_client):
    # Each part takes 2.5 s to upload: the hand-overs of parts 1..4 return at once (queued; one that waited for
    # an upload would take the whole 2.5 s, a bound that holds on a loaded machine, where four hand-overs of
    # 5 MiB took up to 1.5 s), the 5th waits for a slot, and never more than fs.s3a.fast.upload.active.blocks
    # parts are at S3 at one time.
    upload_seconds = 2.5
    s3_sim.configure(profile=LatencyProfile(name="slow-parts", first_byte_seconds={"UploadPart": upload_seconds}))
    conf_id = register(client, s3_sim, **{"fs.s3a.fast.upload.active.blocks": "4"})
    opened = client.call("fs.open_write", conf_id=conf_id, path=f"s3a://{s3_bucket}/big")[0]
    data = os.urandom(8 * PART + 7)
    started = time.monotonic()
    for n in range(4):
        hand_over(client, opened, data[n * PART:(n + 1) * PART], mode="disk", last=False, number=n + 1)
    queued = time.monotonic() - started
    for n in range(4, 8):
        hand_over(client, opened, data[n * PART:(n + 1) * PART], mode="disk", last=False, number=n + 1)
    assert hand_over(client, opened, data[8 * PART:], mode="disk", last=True, number=9)["length"] == len(data)
    assert queued < upload_seconds, "the first four hand-overs waited for uploads"
    assert s3_sim.stats().max_in_flight["UploadPart"] == 4
    assert s3_client.get_object(Bucket=s3_bucket, Key="big")["Body"].read() == data
    assert blocks_left(sidecar) == []


def test_an_abort_mid_file_leaves_no_object_no_upload_and_no_block_file(sidecar, client, s3_server, s3_bucket,
                                                                       s3_client):
    conf_id = register(client, s3_server)
    opened = client.call("fs.open_write", conf_id=conf_id, path=f"s3a://{s3_bucket}/gone")[0]
    for n in range(1, 3):
        hand_over(client, opened, os.urandom(PART), mode="disk", last=False, number=n)
    # a block file written but not yet handed over is the JVM's to delete; one handed over is the sidecar's
    assert client.call("fs.abort_write", handle=opened["handle"])[0]["ok"]
    assert list_keys(s3_client, s3_bucket, "") == []
    assert_no_pending_uploads(s3_client, s3_bucket)
    assert blocks_left(sidecar) == []
    again = client.call("fs.write_block", handle=opened["handle"], block="x.block")[0]
    assert again["ok"] is False and "unknown or closed write handle" in again["error"]["message"]


def test_a_part_that_cannot_be_uploaded_fails_the_file_and_leaves_nothing(sidecar, client, s3_sim, s3_bucket,
                                                                          s3_client):
    # One part at a time, so that both faults meet the two attempts of part 1.
    conf_id = register(client, s3_sim, **{"fs.s3a.fast.upload.active.blocks": "1"})
    opened = client.call("fs.open_write", conf_id=conf_id, path=f"s3a://{s3_bucket}/broken")[0]
    s3_sim.fail_next("UploadPart", "500", count=2)
    hand_over(client, opened, os.urandom(PART), mode="disk", last=False, number=1)
    deadline = time.monotonic() + 10
    reply, number = {"ok": True}, 1
    while reply.get("ok") and time.monotonic() < deadline:  # the failure surfaces on a later call
        number += 1  # a new block each time: the abort deletes the blocks it was handed, whatever their name
        reply = hand_over(client, opened, os.urandom(PART), mode="disk", last=False, number=number)
        time.sleep(0.05)
    assert reply["ok"] is False and "UploadPart" in reply["error"]["message"]
    assert list_keys(s3_client, s3_bucket, "") == []
    assert_no_pending_uploads(s3_client, s3_bucket)
    assert blocks_left(sidecar) == []


def test_a_magic_file_is_an_upload_left_pending_with_its_manifest(sidecar, client, s3_server, s3_bucket,
                                                                  s3_client):
    conf_id = register(client, s3_server, **{"fs.s3a.committer.magic.track.commits.in.memory.enabled": "false"})
    job = "3f1c9a52-0000-4000-8000-000000000001"
    magic = (f"s3a://{s3_bucket}/t/__magic_job-{job}/job-{job}/00/tasks/attempt_202611230000_0001_m_000001_0"
             f"/__base/part-00001-{job}.txt")
    data = os.urandom(2 * PART + 3)
    write_file(client, conf_id, magic, data)
    keys = list_keys(s3_client, s3_bucket, "t/")
    assert [k for k in keys if not k.endswith(".pending")] == []
    pending = json.loads(s3_client.get_object(Bucket=s3_bucket, Key=next(k for k in keys))["Body"].read())
    assert pending["destinationKey"] == f"t/part-00001-{job}.txt" and pending["length"] == len(data)
    uploads = s3_client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", [])
    assert [u["Key"] for u in uploads] == [f"t/part-00001-{job}.txt"]
    s3_client.abort_multipart_upload(Bucket=s3_bucket, Key=uploads[0]["Key"], UploadId=uploads[0]["UploadId"])


def test_an_attempt_that_ends_releases_the_writers_it_left_open(sidecar, client, s3_server, s3_bucket,
                                                               s3_client):
    conf_id = register(client, s3_server)
    job = "3f1c9a52-0000-4000-8000-000000000002"
    attempt = "attempt_202611230000_0001_m_000002_0"
    dest = f"s3://{s3_bucket}/t2"
    magic = f"s3a://{s3_bucket}/t2/__magic_job-{job}/job-{job}/00/tasks/{attempt}/__base/part-00002-{job}.txt"
    opened = client.call("fs.open_write", conf_id=conf_id, path=magic)[0]
    hand_over(client, opened, os.urandom(PART), mode="disk", last=False, number=1)
    assert client.call("health")[0]["write_handles"] >= 1
    assert client.call("task.abort", conf_id=conf_id, dest=dest, job_id=job, task_attempt_id=attempt)[0]["ok"]
    reply = client.call("fs.close_write", b"", handle=opened["handle"], length=0)[0]
    assert reply["ok"] is False and "unknown or closed write handle" in reply["error"]["message"]
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_block_names_outside_the_sidecars_directory_are_refused(sidecar, client, s3_server, s3_bucket, tmp_path):
    conf_id = register(client, s3_server)
    outside = tmp_path / "secret.block"
    outside.write_bytes(b"x" * PART)
    for name in ("../secret.block", str(outside), "not-a-block.txt"):
        opened = client.call("fs.open_write", conf_id=conf_id, path=f"s3a://{s3_bucket}/x")[0]
        reply = client.call("fs.write_block", handle=opened["handle"], block=name)[0]
        assert reply["ok"] is False and reply["error"]["type"] == "IllegalArgument", name
    link = os.path.join(sidecar.blocks_dir, "link.block")
    os.symlink(outside, link)
    opened = client.call("fs.open_write", conf_id=conf_id, path=f"s3a://{s3_bucket}/x")[0]
    assert client.call("fs.write_block", handle=opened["handle"], block="link.block")[0]["ok"] is False
    assert outside.exists()  # never followed, never deleted
    os.unlink(link)


def test_buffer_dir_gets_a_private_block_directory(sidecar, client, s3_server, s3_bucket, s3_client, tmp_path):
    (tmp_path / "a-file").write_text("not a directory")
    conf_id = register(client, s3_server, **{"fs.s3a.buffer.dir": f"{tmp_path}/a-file/sub,{tmp_path}/blocks"})
    opened = client.call("fs.open_write", conf_id=conf_id, path=f"s3a://{s3_bucket}/buffered")[0]
    assert opened["blocks_dir"].startswith(f"{tmp_path}/blocks/s3commit-sidecar-{sidecar.pid}-")
    assert oct(os.stat(opened["blocks_dir"]).st_mode & 0o777) == "0o700"
    data = os.urandom(PART + 5)
    name = "h-test.block"
    with open(os.path.join(opened["blocks_dir"], name), "wb") as f:
        f.write(data[:PART])
    assert client.call("fs.write_block", handle=opened["handle"], block=name)[0]["ok"]
    assert client.call("fs.close_write", data[PART:], handle=opened["handle"], length=5)[0]["ok"]
    assert s3_client.get_object(Bucket=s3_bucket, Key="buffered")["Body"].read() == data
    assert os.listdir(opened["blocks_dir"]) == [".owner"]  # its owner lock, held while the sidecar lives


def test_a_starting_sidecar_sweeps_the_block_directories_of_dead_ones(tmp_path):
    import subprocess
    import sys

    from s3commit.bridge.blocks import claim_directory

    # A sidecar that died held its directory's owner lock until it died: the lock file is there, nobody holds it.
    leftover = tmp_path / "s3commit-sidecar-12345-abcd"
    leftover.mkdir(mode=0o700)
    (leftover / "h1-p1-x.block").write_bytes(b"x" * 1000)
    dead = subprocess.run([sys.executable, "-c", "from s3commit.bridge.blocks import claim_directory; "
                           f"claim_directory({str(leftover)!r})"], check=True)
    del dead
    # A live sidecar in another PID namespace (a container sharing the directory) may show any process id, even
    # one that is gone here: its lock, not its id, keeps its directory.
    alive = tmp_path / "s3commit-sidecar-999999-live"
    alive.mkdir(mode=0o700)
    held = claim_directory(str(alive))
    process = start_sidecar(env={"S3COMMIT_BUFFER_DIR": str(tmp_path)})
    try:
        assert not leftover.exists() and alive.exists()
        assert os.path.dirname(process.blocks_dir) == str(tmp_path)
    finally:
        process.stop()
        os.close(held)
    assert not os.path.exists(process.blocks_dir)  # a sidecar that exits removes its own


def test_ranges_stream_back_exact_and_bad_ranges_are_refused(sidecar, client, s3_server, s3_bucket, s3_client):
    conf_id = register(client, s3_server)
    data = os.urandom(3 * MIB + 17)
    s3_client.put_object(Bucket=s3_bucket, Key="r", Body=data)
    for offset, length in [(0, len(data)), (1, 1), (MIB - 3, 2 * MIB + 20), (len(data) - 1, 1), (5, 0)]:
        header, got = client.call("fs.read", conf_id=conf_id, path=f"s3a://{s3_bucket}/r", offset=offset,
                                  length=length)
        assert header["ok"] and got == data[offset:offset + length], (offset, length)
    header, _ = client.call("fs.read", conf_id=conf_id, path=f"s3a://{s3_bucket}/r", offset=-1, length=3)
    assert header["ok"] is False and header["error"]["type"] == "IllegalArgument"
    header, _ = client.call("fs.read", conf_id=conf_id, path=f"s3a://{s3_bucket}/r", offset=len(data), length=3)
    assert header["ok"] is False
