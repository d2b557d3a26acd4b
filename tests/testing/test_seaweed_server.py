"""The SeaweedFS test server itself: it starts on 127.0.0.1 only, checks signatures, and leaves nothing
running when it stops."""

from __future__ import annotations

import os
import time
from pathlib import Path

import botocore.exceptions
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.seaweedfs]


def listening_addresses(pid: int) -> set[str]:
    """The local addresses of the TCP sockets ``pid`` listens on (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                    found.add(fields[1].split(":")[0])
    return found


def test_seaweedfs_binds_loopback_only_checks_signatures_and_stops_completely():
    from testbed.seaweed import SeaweedServer

    with SeaweedServer() as server:
        pid = server.pid
        # 0100007F is 127.0.0.1 in /proc/net/tcp's byte order; nothing listens on another address.
        assert listening_addresses(pid) == {"0100007F"}
        bucket = server.create_bucket("seaweed-check")
        server.client().put_object(Bucket=bucket, Key="k", Body=b"v")
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            server.client(secret_key="not-the-secret").get_object(Bucket=bucket, Key="k")
        assert refused.value.response["Error"]["Code"] in ("SignatureDoesNotMatch", "AccessDenied")
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}") or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
