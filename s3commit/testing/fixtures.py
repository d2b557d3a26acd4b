"""pytest fixtures for code that talks to S3: a test server per session, a fresh bucket per test.

Registered as the ``s3commit`` pytest plugin (entry point ``pytest11``), so any project with s3commit
installed can use them without a ``conftest.py``:

- ``s3commit_server`` (session): an :class:`~s3commit.testing.server.S3TestServer` with no latency and no faults.
- ``s3commit_sim`` (function): the same server with its simulator returned to its start-up configuration (no
  latency, faults or throttling, no scripted faults, zeroed stats) before and after the test; for tests
  that configure the simulator or assert on its stats.
- ``s3commit_bucket`` (function): the name of a new, empty bucket with a unique name. It is not deleted after
  the test (the server's state goes away with the session).
- ``s3commit_client`` (function): a boto3 S3 client for the server (no botocore retries).
- ``s3commit_env`` (function): sets the ``AWS_*`` environment variables so that boto3's *default* resolution
  (``boto3.client("s3")``, and child processes) reaches the server; returns them as a dict.

Only these ``s3commit_`` names are registered, so none of them takes a name a suite's own fixtures or another plugin
may use. The unprefixed names of earlier releases (``s3_server``, ``s3_sim``, ``s3_bucket``, ``s3_client``,
``s3_env``, ``moto_server``) are a plugin of their own, loaded only where a suite asks for it:
:mod:`s3commit.testing.unprefixed`.

Nothing is imported until a fixture is used, and nothing is patched: loading the plugin costs pytest nothing.
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
def s3commit_server() -> Iterator[S3TestServer]:
    """An S3 test server (moto behind the simulator, profile ``none``) shared by the whole session."""
    from s3commit.testing.server import S3TestServer

    with S3TestServer() as server:
        yield server


@pytest.fixture
def s3commit_sim(s3commit_server: S3TestServer) -> Iterator[S3TestServer]:
    """``s3commit_server`` with a clean simulator (start-up configuration, zeroed stats) during the test and after.

    Use it in tests that configure latency, faults or throttling, so that no other test inherits them.
    """
    yield from _clean_simulator(s3commit_server)


@pytest.fixture
def s3commit_bucket(s3commit_server: S3TestServer) -> str:
    """A new bucket with a unique name (``test-<12 hex>``), created on ``s3commit_server``."""
    return _new_bucket(s3commit_server)


@pytest.fixture
def s3commit_client(s3commit_server: S3TestServer) -> Any:
    """A boto3 S3 client for ``s3commit_server`` (path-style, dummy credentials, botocore retries off)."""
    return s3commit_server.client()


@pytest.fixture
def s3commit_env(s3commit_server: S3TestServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point boto3's default endpoint, credentials and region at ``s3commit_server`` for this test."""
    return _point_boto3_at(s3commit_server, monkeypatch)


def _clean_simulator(server: S3TestServer) -> Iterator[S3TestServer]:
    server.reset_simulator()
    yield server
    server.reset_simulator()


def _new_bucket(server: S3TestServer) -> str:
    return server.create_bucket(f"test-{uuid.uuid4().hex[:12]}")


def _point_boto3_at(server: S3TestServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = server.env()
    for name in _CREDENTIAL_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env
