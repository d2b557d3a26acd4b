"""pytest fixtures for code that talks to S3: a test server per session, a fresh bucket per test.

Registered as the ``s3commit`` pytest plugin (entry point ``pytest11``), so any project with s3commit
installed can use them without a ``conftest.py``:

- ``s3_server`` (session): an :class:`~s3commit.testing.server.S3TestServer` with no latency and no faults.
- ``s3_sim`` (function): the same server with its simulator returned to its start-up configuration (no
  latency, faults or throttling, no scripted faults, zeroed stats) before and after the test; for tests
  that configure the simulator or assert on its stats.
- ``s3_bucket`` (function): the name of a new, empty bucket with a unique name. It is not deleted after
  the test (the server's state goes away with the session).
- ``s3_client`` (function): a boto3 S3 client for ``s3_server`` (no botocore retries).
- ``s3_env`` (function): sets the ``AWS_*`` environment variables so that boto3's *default* resolution
  (``boto3.client("s3")``, and child processes) reaches ``s3_server``; returns them as a dict.
- ``seaweedfs_server``, ``rclone_server`` (session): the other S3 implementations, started on first use.

Nothing is imported until a fixture is used: loading the plugin costs pytest nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from s3commit.testing.server import S3TestServer

# Variables that could send boto3 to real AWS credentials or another profile instead of the server's.
_CREDENTIAL_OVERRIDES = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[S3TestServer]:
    """An S3 test server (moto behind the simulator, profile ``none``) shared by the whole session."""
    from s3commit.testing.server import S3TestServer

    with S3TestServer() as server:
        yield server


@pytest.fixture(scope="session")
def s3_server(moto_server: S3TestServer) -> S3TestServer:
    """The S3 server of the tests: ``moto_server`` unless a directory parametrises it over several servers
    (``tests/contract/conftest.py`` adds SeaweedFS)."""
    return moto_server


@pytest.fixture
def s3_sim(s3_server: S3TestServer) -> Iterator[S3TestServer]:
    """``s3_server`` with a clean simulator (start-up configuration, zeroed stats) during the test and after.

    Use it in tests that configure latency, faults or throttling, so that no other test inherits them.
    """
    s3_server.reset_simulator()
    yield s3_server
    s3_server.reset_simulator()


@pytest.fixture
def s3_bucket(s3_server: S3TestServer) -> str:
    """A new bucket with a unique name (``test-<12 hex>``), created on ``s3_server``."""
    return s3_server.create_bucket(f"test-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def s3_client(s3_server: S3TestServer) -> Any:
    """A boto3 S3 client for ``s3_server`` (path-style, dummy credentials, botocore retries off)."""
    return s3_server.client()


@pytest.fixture
def s3_env(s3_server: S3TestServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point boto3's default endpoint, credentials and region at ``s3_server`` for this test."""
    env = s3_server.env()
    for name in _CREDENTIAL_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


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
            yield request.getfixturevalue("moto_server")
            return
        yield request.getfixturevalue(f"{request.param}_server")

    return s3_server


@pytest.fixture(scope="session")
def seaweedfs_server() -> Iterator[Any]:
    """A SeaweedFS server for the session (the second S3 implementation; slow tier)."""
    from s3commit.testing.seaweed import SeaweedServer

    with SeaweedServer() as server:
        yield server


@pytest.fixture(scope="session")
def rclone_server() -> Iterator[Any]:
    """rclone's ``serve s3`` for the session (the third S3 implementation; slow tier)."""
    from s3commit.testing.rclone import RcloneServer

    with RcloneServer() as server:
        yield server
