"""S3 for tests, benchmarks and demos: moto on 127.0.0.1 behind a simulator of S3's latency and faults.

- :class:`S3TestServer` (``server``): starts the server process; boto3 clients, env vars, control API.
- :class:`SimulatorServer`, :class:`SimulatorConfig` (``simulator``): the proxy itself, usable in-process.
- :class:`LatencyProfile`, :class:`ThrottleSpec` (``profiles``): S3's latency, bandwidth and rate limits.
- :class:`FaultSpec`, :class:`FaultKind`, :class:`FaultInjector` (``faults``): seeded and scripted faults.
- :class:`S3Operation`, :func:`classify_request` (``classify``): which S3 operation a request is.
- :class:`StatsSnapshot` (``stats``): request/byte/fault/delay counters.
- :func:`assert_no_pending_uploads`, :func:`list_keys`, :func:`count_requests` (``assertions``).
- pytest fixtures ``s3_server``, ``s3_sim``, ``s3_bucket``, ``s3_client``, ``s3_env`` (``fixtures``, registered
  as the ``s3commit`` pytest plugin).

Nothing here depends on the rest of s3commit. Names are imported lazily, so importing this package (which
pytest does for the plugin in every session) costs nothing, and ``python -m s3commit.testing.server`` does
not import the module it runs twice.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from s3commit.testing.assertions import (
        ListedUpload,
        RequestCounter,
        assert_no_pending_uploads,
        count_requests,
        list_keys,
        list_pending_uploads,
    )
    from s3commit.testing.classify import RequestTarget, S3Operation, classify_request
    from s3commit.testing.faults import Fault, FaultInjector, FaultKind, FaultSpec
    from s3commit.testing.profiles import (
        PROFILES,
        LatencyProfile,
        ProfileName,
        Throttle,
        ThrottleSpec,
        get_profile,
    )
    from s3commit.testing.server import S3TestServer, S3TestServerError
    from s3commit.testing.simulator import SimulatorConfig, SimulatorServer
    from s3commit.testing.stats import StatsSnapshot

_EXPORTS = {
    "RequestCounter": "assertions",
    "assert_no_pending_uploads": "assertions",
    "count_requests": "assertions",
    "list_keys": "assertions",
    "list_pending_uploads": "assertions",
    "ListedUpload": "assertions",
    "RequestTarget": "classify",
    "S3Operation": "classify",
    "classify_request": "classify",
    "Fault": "faults",
    "FaultInjector": "faults",
    "FaultKind": "faults",
    "FaultSpec": "faults",
    "PROFILES": "profiles",
    "LatencyProfile": "profiles",
    "ProfileName": "profiles",
    "Throttle": "profiles",
    "ThrottleSpec": "profiles",
    "get_profile": "profiles",
    "S3TestServer": "server",
    "S3TestServerError": "server",
    "SimulatorConfig": "simulator",
    "SimulatorServer": "simulator",
    "StatsSnapshot": "stats",
}

__all__ = [
    "PROFILES",
    "Fault",
    "FaultInjector",
    "FaultKind",
    "FaultSpec",
    "LatencyProfile",
    "ListedUpload",
    "ProfileName",
    "RequestCounter",
    "RequestTarget",
    "S3Operation",
    "S3TestServer",
    "S3TestServerError",
    "SimulatorConfig",
    "SimulatorServer",
    "StatsSnapshot",
    "Throttle",
    "ThrottleSpec",
    "assert_no_pending_uploads",
    "classify_request",
    "count_requests",
    "get_profile",
    "list_keys",
    "list_pending_uploads",
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
