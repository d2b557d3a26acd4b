"""Shared fixtures. The S3 server fixtures (``s3_server``, ``s3_bucket``, ``s3_client``) come from the
``s3commit.testing`` pytest plugin under their unprefixed names (this suite opts in to them:
``s3commit.testing.unprefixed``), SeaweedFS's and rclone's from the test bed (``testbed.fixtures``); these build
s3commit objects on top of them."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

from s3commit import S3Store, StoreOptions
from s3commit.config.options import RetryPolicy
from s3commit.testing.assertions import assert_no_pending_uploads
from testbed.fixtures import rclone_server, seaweedfs_server  # noqa: F401 - registered for every test

pytest_plugins = ["s3commit.testing.unprefixed"]  # s3_server, s3_bucket, s3_client...: the plugin's short names

STAGING_AND_MAGIC = ["magic", "directory", "partitioned"]
MAGIC_IN_DEFAULT_TIER = ["magic", *(pytest.param(name, marks=pytest.mark.slow) for name in STAGING_AND_MAGIC[1:])]
"""The committers, the staging ones in the slow tier: for variants whose staging cases the default tier covers
through another test (the default tier's time budget, README: Tests)."""

# This checkout's test run keeps compiled bytecode (in __pycache__, git-ignored) even where the environment says
# PYTHONDONTWRITEBYTECODE=1, as this project's CI machines do: otherwise every process the suite starts (3 workers,
# every sidecar, server and PySpark worker, each importing s3commit from source) compiled its modules again and
# pytest rewrote every test module's asserts again: 4 min 12 s of the default tier against 3 min 33 s.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# Every sidecar the tests start (in-process or spawned by a JVM, which inherits the environment) checks its
# replies and its handlers' reads against the bridge's operation table too (s3commit.bridge.operations).
os.environ.setdefault("S3COMMIT_BRIDGE_STRICT", "1")
# PySpark's Python workers (and every child process's) run this Python, which has pyarrow and pandas (with the
# connect extra): left to PySpark, they would run whatever python3 is on PATH, which may have neither while the
# driver, seeing pandas, turns Arrow-optimised UDFs on.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Every JVM the tests start and do not configure themselves (a Spark application run as a child process, its
# executors, a standalone cluster's daemons, a packed or distribution Spark) compiles with C1 only, as the suite's
# own SparkSessions do (tests/spark/conftest.py): each lives a minute or two and runs each path a few times, and
# C2's compiler threads take CPU the other workers' cases need (the slow tier is bound by the machine's CPU). A
# user's JAVA_TOOL_OPTIONS is kept; the JVMs print it once on their standard error, which no test reads as an error.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")
# What each test store was seen to honour is kept in this session's own directory (every test server has its own
# port, so nothing is shared with another run), inherited by the sidecars and workers the tests start.
os.environ.setdefault("S3COMMIT_CAPABILITIES_DIR", tempfile.mkdtemp(prefix="s3commit-capabilities-"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A case that needs the simulator (request counts, latency, faults: the ``s3_sim`` fixture or the
    ``simulator`` marker) runs on moto only where its module runs on every server: SeaweedFS and rclone have no
    simulator in front of them (docs/test-servers.md). So does a case marked ``server_independent`` (it ends before
    any request reaches the server: another server would run the same code to the same end)."""
    moto_only = [item for item in items
                 if getattr(getattr(item, "callspec", None), "params", {}).get("s3_server") in ("seaweedfs", "rclone")
                 and ("s3_sim" in getattr(item, "fixturenames", ()) or item.get_closest_marker("simulator")
                      or item.get_closest_marker("server_independent"))]
    if moto_only:
        config.hook.pytest_deselected(items=moto_only)
        items[:] = [item for item in items if item not in moto_only]
    # A tier's longest cases go first (stable otherwise): started late, one of them would run on alone at the end
    # while the other workers idle.
    items.sort(key=lambda item: item.get_closest_marker("longest") is None)


def store_options_for(server, **overrides) -> StoreOptions:
    """The suite's options for ``server``; ``overrides`` set fields as a user would (``dataclasses.replace`` of a
    made ``StoreOptions`` names its checksum algorithm: no longer ``auto``'s)."""
    settings = {"endpoint_url": server.endpoint_url, "region": "us-east-1", "path_style": True,
                "access_key": "testing", "secret_key": "testing",
                "retry": RetryPolicy(max_attempts=5, initial_delay=0.01, max_delay=0.2), **overrides}
    return StoreOptions(**settings)


@pytest.fixture
def store(s3_server) -> S3Store:
    """A store on the test server with fresh counters."""
    return S3Store(store_options_for(s3_server))


@pytest.fixture
def dest(s3_bucket) -> str:
    return f"s3://{s3_bucket}/out"


@pytest.fixture
def staging_dir(tmp_path) -> str:
    return str(tmp_path / "staging")


@pytest.fixture
def no_pending_uploads(s3_client, s3_bucket):
    """After the test: nothing left pending in the bucket."""
    yield
    assert_no_pending_uploads(s3_client, s3_bucket)


def racing_conditional_puts(client, bucket: str, key: str, racers: int = 8) -> list[int]:
    """``racers`` threads PUT ``key`` with ``If-None-Match: *`` at one moment; the racers that won (S3: exactly
    one; every loser is refused with PreconditionFailed)."""
    import threading

    from botocore.exceptions import ClientError

    wins: list[int] = []
    barrier = threading.Barrier(racers)

    def race(n: int) -> None:
        barrier.wait()
        try:
            client.put_object(Bucket=bucket, Key=key, Body=f"racer {n}".encode(), IfNoneMatch="*")
            wins.append(n)
        except ClientError as error:
            assert error.response["Error"]["Code"] == "PreconditionFailed", error

    threads = [threading.Thread(target=race, args=(n,)) for n in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return wins
