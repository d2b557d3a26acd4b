"""The committer contract (``test_committer_contract.py``, every case, every committer: 54 cases in ~5 s) over the
memory store behind botocore's wire (``s3commit.testing.S3Wire``): a real ``S3Store`` and botocore client, no socket,
no server."""

from __future__ import annotations

import uuid

import pytest

from s3commit.config.options import RetryPolicy
from s3commit.testing import MemoryS3, S3Wire
from tests.conftest import STAGING_AND_MAGIC
from tests.contract.test_committer_contract import *  # noqa: F403  (the cases and their fixtures)

pytestmark = [pytest.mark.usefixtures("no_pending_uploads"), pytest.mark.parametrize("name", STAGING_AND_MAGIC)]


@pytest.fixture(scope="module")
def wire():
    return S3Wire(MemoryS3())


@pytest.fixture(scope="module")
def s3_client(wire):
    return wire.client()


@pytest.fixture
def s3_bucket(wire):
    return wire.s3.create_bucket(f"contract-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def store(wire, s3_bucket):
    return wire.store(retry=RetryPolicy(max_attempts=5, initial_delay=0.01, max_delay=0.2))
