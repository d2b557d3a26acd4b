"""Helpers for the tests of ``s3commit.testing``; the server fixtures themselves come from its plugin."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def raw_client(s3_server: Any) -> Any:
    """A client straight to moto: sets up state without touching the simulator's stats or faults."""
    return s3_server.client(raw=True)


@pytest.fixture
def sim_client(s3_sim: Any) -> Any:
    """A client through the simulator (no botocore retries), with the simulator reset around the test."""
    return s3_sim.client()
