"""The server process: start-up, options, environment for child processes, reset, and never outliving us."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from s3commit.testing import S3TestServer, S3TestServerError
from s3commit.testing.assertions import list_keys


def _gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie waiting for a reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return state in ("Z", "X")


def _wait_until_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def small_parts_server() -> Iterator[S3TestServer]:
    """A private server (so that reset() wipes nobody else's state) with 1 KiB minimum parts."""
    with S3TestServer(profile="s3-express", seed=3, min_part_size=1024) as server:
        yield server


def test_start_reports_endpoints_and_stop_ends_the_process() -> None:
    # Given: a started server.
    started = time.monotonic()
    server = S3TestServer().start()
    startup = time.monotonic() - started
    pid = server.pid

    # Then: both endpoints answer on loopback, and start-up was quick.
    assert server.endpoint_url.startswith("http://127.0.0.1:")
    assert server.raw_endpoint_url.startswith("http://127.0.0.1:")
    assert server.endpoint_url != server.raw_endpoint_url
    assert server.client().list_buckets()["Buckets"] == []
    assert startup < 30  # typically about 1 s (its capability probe included); generous for loaded CI machines

    # When: stopped.
    server.stop()

    # Then: the process exited by itself (stdin EOF), and the object is unusable but stop() is idempotent.
    assert server.exit_code == 0
    assert _wait_until_gone(pid)
    with pytest.raises(S3TestServerError, match="not running"):
        _ = server.endpoint_url
    server.stop()


def test_server_exits_when_its_parent_process_is_killed(tmp_path: Path) -> None:
    # Given: a parent process that starts a server and then hangs.
    parent_script = tmp_path / "parent.py"
    parent_script.write_text(
        textwrap.dedent("""
        import json, time
        from s3commit.testing import S3TestServer
        server = S3TestServer().start()
        print(json.dumps({"pid": server.pid}), flush=True)
        time.sleep(120)
    """)
    )
    parent = subprocess.Popen([sys.executable, str(parent_script)], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    server_pid = json.loads(parent.stdout.readline())["pid"]
    assert not _gone(server_pid)

    # When: the parent dies without any chance to clean up.
    parent.send_signal(signal.SIGKILL)
    parent.wait()

    # Then: the orphaned server notices and exits.
    assert _wait_until_gone(server_pid), f"server {server_pid} outlived its parent"


def test_server_exits_with_its_parent_even_if_a_forked_sibling_keeps_its_stdin_open(tmp_path: Path) -> None:
    # Given: a parent that starts a server, then forks a child that inherits the server's stdin pipe,
    # so the server never sees end-of-file and must notice the parent's death by its parent pid.
    parent_script = tmp_path / "forking_parent.py"
    parent_script.write_text(
        textwrap.dedent("""
        import json, os, time
        from s3commit.testing import S3TestServer
        server = S3TestServer().start()
        sibling = os.fork()
        if sibling == 0:
            time.sleep(120)
            os._exit(0)
        print(json.dumps({"pid": server.pid, "sibling": sibling}), flush=True)
        time.sleep(120)
    """)
    )
    parent = subprocess.Popen([sys.executable, str(parent_script)], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    pids = json.loads(parent.stdout.readline())
    try:
        # When: the parent is killed.
        parent.send_signal(signal.SIGKILL)
        parent.wait()

        # Then: the server exits although its stdin is still open in the sibling.
        assert _wait_until_gone(pids["pid"]), f"server {pids['pid']} outlived its parent"
    finally:
        os.kill(pids["sibling"], signal.SIGKILL)


def test_start_failure_shows_the_child_stderr(tmp_path: Path) -> None:
    broken = tmp_path / "broken-python"
    # It closes stdout a moment before exiting, as a dying interpreter may: the exit code must still show.
    broken.write_text("#!/bin/sh\necho 'ImportError: no module named moto' >&2\nexec 1>&-\nsleep 0.3\nexit 3\n")
    broken.chmod(0o755)
    with pytest.raises(S3TestServerError, match=r"exited with code 3(.|\n)*no module named moto"):
        S3TestServer(python=str(broken)).start()


def test_start_times_out_with_a_clear_error(tmp_path: Path) -> None:
    hanging = tmp_path / "hanging-python"
    hanging.write_text("#!/bin/sh\necho 'still importing' >&2\nexec sleep 30\n")
    hanging.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(S3TestServerError, match=r"did not start within 0.5s(.|\n)*still importing"):
        S3TestServer(python=str(hanging), startup_timeout=0.5).start()
    assert time.monotonic() - started < 5


def test_invalid_options_are_refused_before_starting() -> None:
    with pytest.raises(ValueError, match="valid values are none, s3-standard, s3-express"):
        S3TestServer(profile="fast")
    with pytest.raises(ValueError, match="min_part_size must be >= 0"):
        S3TestServer(min_part_size=-1)
    with pytest.raises(ValueError, match="loopback"):
        S3TestServer(host="0.0.0.0")


def test_env_lets_a_child_process_reach_the_server(s3_server: S3TestServer, s3_bucket: str) -> None:
    env = s3_server.env()
    assert env["AWS_ENDPOINT_URL_S3"] == env["AWS_ENDPOINT_URL"] == s3_server.endpoint_url
    child = subprocess.run(
        [sys.executable, "-c", f"import boto3; boto3.client('s3').put_object(Bucket={s3_bucket!r}, "
         "Key='from-child', Body=b'hi')"],
        env={**{k: v for k, v in os.environ.items() if k != "AWS_PROFILE"}, **env},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr
    assert list_keys(s3_server.client(), s3_bucket) == ["from-child"]


def test_start_options_set_profile_seed_and_min_part_size(small_parts_server: S3TestServer) -> None:
    config = small_parts_server.simulator_config()
    assert (config["profile"]["name"], config["seed"]) == ("s3-express", 3)

    # Parts of 1 KiB are enough with --min-part-size 1024 (moto's default would refuse them).
    s3 = small_parts_server.client()
    bucket = small_parts_server.create_bucket("small-parts")
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    parts = [
        {"PartNumber": n, "ETag": s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=n,
                                                 Body=b"p" * size)["ETag"]}
        for n, size in ((1, 1024), (2, 10))
    ]  # fmt: skip
    s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id, MultipartUpload={"Parts": parts})
    assert s3.head_object(Bucket=bucket, Key="k")["ContentLength"] == 1034


def test_default_server_keeps_moto_real_minimum_part_size(s3_server: S3TestServer, s3_bucket: str) -> None:
    s3 = s3_server.client()
    upload_id = s3.create_multipart_upload(Bucket=s3_bucket, Key="k")["UploadId"]
    parts = [
        {"PartNumber": n, "ETag": s3.upload_part(Bucket=s3_bucket, Key="k", UploadId=upload_id, PartNumber=n,
                                                 Body=b"p" * 1024)["ETag"]}
        for n in (1, 2)
    ]  # fmt: skip
    with pytest.raises(ClientError, match="EntityTooSmall"):
        s3.complete_multipart_upload(Bucket=s3_bucket, Key="k", UploadId=upload_id, MultipartUpload={"Parts": parts})
    s3.abort_multipart_upload(Bucket=s3_bucket, Key="k", UploadId=upload_id)


def test_reset_forgets_buckets_and_simulator_state(small_parts_server: S3TestServer) -> None:
    # Given: a bucket, traffic and a changed simulator.
    small_parts_server.create_bucket("doomed")
    client: Any = small_parts_server.client()
    client.head_bucket(Bucket="doomed")
    small_parts_server.configure(profile="s3-standard", seed=99)

    # When
    small_parts_server.reset()

    # Then: moto is empty, stats are zero, and the configuration is the start-up one again.
    assert client.list_buckets()["Buckets"] == []
    config = small_parts_server.simulator_config()
    assert (config["profile"]["name"], config["seed"]) == ("s3-express", 3)
    assert small_parts_server.stats().requests == {"ListBuckets": 1}


def test_command_line_server_keeps_serving_without_stdin_until_terminated() -> None:
    # Given: the server started by hand, in the background, with stdin at /dev/null.
    process = subprocess.Popen(
        [sys.executable, "-m", "s3commit.testing", "--profile", "s3-standard"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        ready = json.loads(process.stdout.readline())
        time.sleep(1.0)  # longer than the parent-watch poll interval

        # Then: it still serves (no parent pid or stdin watch was asked for).
        assert process.poll() is None
        host, port = ready["endpoint_url"].removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request("GET", "/__sim/config")
        assert json.loads(connection.getresponse().read())["profile"]["name"] == "s3-standard"
    finally:
        # When: terminated, it exits cleanly.
        process.terminate()
        assert process.wait(timeout=10) == 0


def test_a_server_with_motos_own_costs_answers_as_the_default_one() -> None:
    # Given: the same upload and ranged read on a server keeping moto's costs and on one with S3's.
    def upload_and_read(server: S3TestServer) -> tuple[str, bytes, bytes, str]:
        s3 = server.client()
        bucket = server.create_bucket("costs")
        upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm="CRC32")["UploadId"]
        parts = [
            {"PartNumber": n, "ETag": s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=n,
                                                     Body=bytes([n]) * size, ChecksumAlgorithm="CRC32")["ETag"]}
            for n, size in ((1, 5 << 20), (2, 1000))
        ]  # fmt: skip
        completed = s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                                 MultipartUpload={"Parts": parts})
        ranged = s3.get_object(Bucket=bucket, Key="k", Range=f"bytes={(5 << 20) - 2}-{(5 << 20) + 1}")["Body"].read()
        whole = s3.get_object(Bucket=bucket, Key="k")["Body"].read()
        return completed["ETag"], ranged, hashlib.md5(whole).digest(), completed.get("ChecksumCRC32", "")

    with S3TestServer(moto_costs=True) as moto_costs, S3TestServer() as s3_costs:
        # Then: the server was started with moto's costs, and every answer is the same.
        assert "--moto-costs" in Path(f"/proc/{moto_costs.pid}/cmdline").read_bytes().decode().split("\0")
        assert "--moto-costs" not in Path(f"/proc/{s3_costs.pid}/cmdline").read_bytes().decode().split("\0")
        got = upload_and_read(moto_costs)
        assert got == upload_and_read(s3_costs)
        assert got[1] == b"\x01\x01\x02\x02" and got[0].endswith('-2"')
