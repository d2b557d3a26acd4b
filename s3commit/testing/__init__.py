"""S3 for tests, benchmarks and demos: moto on 127.0.0.1 behind a simulator of S3's latency and faults.

- :class:`S3TestServer` (``server``): starts the server process; boto3 clients, env vars, control API.
- :class:`SimulatorServer`, :class:`SimulatorConfig`: the proxy itself, usable in-process.
- :class:`LatencyProfile`, :class:`ThrottleSpec`: S3's latency, bandwidth and rate limits.
- :class:`FaultSpec`, :class:`FaultKind`, :class:`FaultInjector`: seeded and scripted faults.
- :class:`S3Operation`, :func:`classify_request`: which S3 operation a request is.
- :class:`StatsSnapshot`: request/byte/fault/delay counters.
  (The simulator's modules are private, under ``_sim``: import these names from here.)
- :class:`MemoryS3` (``memory``): S3 in memory, whose stores' processes can die at their Nth request.
- :class:`S3Wire`, :func:`wire_of` (``memory_wire``): that S3 behind a real botocore client (everything but the
  socket), with S3's latency and per-prefix limits: the test store that answers faster than the client sends.
- :func:`assert_no_pending_uploads`, :func:`list_keys`, :func:`count_requests` (``assertions``).
- pytest fixtures ``s3commit_server``, ``s3commit_sim``, ``s3commit_bucket``, ``s3commit_client``,
  ``s3commit_env`` (``fixtures``, registered as the ``s3commit`` pytest plugin); the unprefixed names of earlier
  releases (``s3_server``, ``s3_bucket``...) only where a suite loads the plugin ``s3commit.testing.unprefixed``.
- :func:`atomic_conditional_writes`: moto's conditional writes made atomic in this process, as on S3, for a suite
  that tests inside moto's in-process mock (``mock_aws``). Nothing patches moto unless asked.

The public test API: the layer above every runtime package (which never imports it). SeaweedFS, rclone and the
Spark standalone cluster the project's own tests use are repository tooling (``testbed/``), not shipped.
May import: every runtime package (the simulator tells the store's capability cache what the test servers honour:
:mod:`._sim.store_hints`); never the demo. No runtime package imports this one. Names are imported
lazily, so importing this package (which pytest does for the plugin in every session) costs nothing, and ``python -m
s3commit.testing.server`` does not import the module it runs twice.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from s3commit.testing._sim.classify import RequestTarget, S3Operation, classify_request
    from s3commit.testing._sim.config import SimulatorConfig
    from s3commit.testing._sim.faults import Fault, FaultInjector, FaultKind, FaultSpec
    from s3commit.testing._sim.moto_patches import atomic_conditional_writes
    from s3commit.testing._sim.profiles import (
        PROFILES,
        LatencyProfile,
        ProfileName,
        Throttle,
        ThrottleSpec,
        get_profile,
    )
    from s3commit.testing._sim.simulator import SimulatorServer
    from s3commit.testing._sim.stats import StatsSnapshot
    from s3commit.testing.assertions import (
        ListedUpload,
        RequestCounter,
        assert_no_pending_uploads,
        count_requests,
        list_keys,
        list_pending_uploads,
    )
    from s3commit.testing.memory import MemoryS3, ProcessStopped
    from s3commit.testing.memory_wire import S3Wire, wire_of
    from s3commit.testing.server import S3TestServer, S3TestServerError

_EXPORTS = {
    "RequestCounter": "assertions",
    "assert_no_pending_uploads": "assertions",
    "count_requests": "assertions",
    "list_keys": "assertions",
    "list_pending_uploads": "assertions",
    "ListedUpload": "assertions",
    "RequestTarget": "_sim.classify",
    "S3Operation": "_sim.classify",
    "classify_request": "_sim.classify",
    "Fault": "_sim.faults",
    "FaultInjector": "_sim.faults",
    "FaultKind": "_sim.faults",
    "FaultSpec": "_sim.faults",
    "atomic_conditional_writes": "_sim.moto_patches",
    "PROFILES": "_sim.profiles",
    "LatencyProfile": "_sim.profiles",
    "ProfileName": "_sim.profiles",
    "Throttle": "_sim.profiles",
    "ThrottleSpec": "_sim.profiles",
    "get_profile": "_sim.profiles",
    "MemoryS3": "memory",
    "ProcessStopped": "memory",
    "S3Wire": "memory_wire",
    "wire_of": "memory_wire",
    "S3TestServer": "server",
    "S3TestServerError": "server",
    "SimulatorConfig": "_sim.config",
    "SimulatorServer": "_sim.simulator",
    "StatsSnapshot": "_sim.stats",
}

__all__ = [
    "PROFILES",
    "Fault",
    "FaultInjector",
    "FaultKind",
    "FaultSpec",
    "LatencyProfile",
    "ListedUpload",
    "MemoryS3",
    "ProcessStopped",
    "ProfileName",
    "RequestCounter",
    "RequestTarget",
    "S3Operation",
    "S3TestServer",
    "S3TestServerError",
    "S3Wire",
    "SimulatorConfig",
    "SimulatorServer",
    "StatsSnapshot",
    "Throttle",
    "ThrottleSpec",
    "assert_no_pending_uploads",
    "atomic_conditional_writes",
    "classify_request",
    "count_requests",
    "get_profile",
    "list_keys",
    "list_pending_uploads",
    "wire_of",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
