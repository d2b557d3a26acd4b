"""The project's own server fixtures (not shipped): the second and third S3 servers, and parametrising a module's
``s3_server`` over them. ``tests/conftest.py`` registers them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

SERVERS = ["moto", pytest.param("seaweedfs", marks=[pytest.mark.slow, pytest.mark.seaweedfs])]
"""The test servers a module or directory runs on by default: moto (default tier) and SeaweedFS (slow tier)."""
ALL_SERVERS = [*SERVERS, pytest.param("rclone", marks=[pytest.mark.slow, pytest.mark.rclone])]
"""Also rclone's ``serve s3`` (slow tier), the store that ignores conditions and checksums: for what depends on
what a store honours (the capability probe, the commit lease)."""


def every_server_fixture(servers: list[Any] | None = None) -> Any:
    """An ``s3_server`` fixture parametrised over ``servers`` (default :data:`SERVERS`; :data:`ALL_SERVERS` adds
    rclone), for a module or ``conftest.py`` to opt in with ``s3_server = every_server_fixture()``: each test runs on
    each server (one server each per session)."""

    @pytest.fixture(scope="session", params=servers or SERVERS)
    def s3_server(request: pytest.FixtureRequest) -> Iterator[Any]:
        if request.param == "moto":
            yield request.getfixturevalue("s3commit_server")
            return
        yield request.getfixturevalue(f"{request.param}_server")

    return s3_server


@pytest.fixture(scope="session")
def seaweedfs_server() -> Iterator[Any]:
    """A SeaweedFS server for the session (the second S3 implementation; slow tier)."""
    from testbed.seaweed import SeaweedServer

    with SeaweedServer() as server:
        yield server


@pytest.fixture(scope="session")
def rclone_server() -> Iterator[Any]:
    """rclone's ``serve s3`` for the session (the third S3 implementation; slow tier)."""
    from testbed.rclone import RcloneServer

    with RcloneServer() as server:
        yield server
