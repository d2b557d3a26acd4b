"""The ``s3commit`` pytest plugin's fixtures under their unprefixed names of earlier releases, for a suite that asks.

The plugin (:mod:`s3commit.testing.fixtures`, loaded by the ``pytest11`` entry point wherever s3commit is
installed) registers only ``s3commit_``-prefixed names. A suite that wants the short names loads this module as a
pytest plugin, in its root ``conftest.py``::

    pytest_plugins = ["s3commit.testing.unprefixed"]

or on the command line (``pytest -p s3commit.testing.unprefixed``, or in ``addopts``). It then has:

- ``s3_server`` (session): ``s3commit_server``, unless a ``conftest.py`` or module overrides it (e.g. to run on
  several servers); ``s3_sim``, ``s3_bucket``, ``s3_client`` and ``s3_env`` follow it;
- ``moto_server`` (session): ``s3commit_server``, whatever ``s3_server`` is overridden with;
- ``s3_sim``, ``s3_bucket``, ``s3_client``, ``s3_env``: ``s3commit_sim``, ``s3commit_bucket``, ``s3commit_client``,
  ``s3commit_env`` for ``s3_server``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from s3commit.testing.fixtures import _clean_simulator, _new_bucket, _point_boto3_at

if TYPE_CHECKING:
    from s3commit.testing.server import S3TestServer


@pytest.fixture(scope="session")
def moto_server(s3commit_server: S3TestServer) -> S3TestServer:
    """Alias of ``s3commit_server``: the moto server, whatever ``s3_server`` is overridden with."""
    return s3commit_server


@pytest.fixture(scope="session")
def s3_server(s3commit_server: S3TestServer) -> S3TestServer:
    """Alias of ``s3commit_server``, unless a ``conftest.py`` or module overrides it (e.g. with several servers)."""
    return s3commit_server


@pytest.fixture
def s3_sim(s3_server: S3TestServer) -> Iterator[S3TestServer]:
    """``s3commit_sim`` for ``s3_server``."""
    yield from _clean_simulator(s3_server)


@pytest.fixture
def s3_bucket(s3_server: S3TestServer) -> str:
    """``s3commit_bucket`` on ``s3_server``."""
    return _new_bucket(s3_server)


@pytest.fixture
def s3_client(s3_server: S3TestServer) -> Any:
    """``s3commit_client`` for ``s3_server``."""
    return s3_server.client()


@pytest.fixture
def s3_env(s3_server: S3TestServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """``s3commit_env`` for ``s3_server``."""
    return _point_boto3_at(s3_server, monkeypatch)
