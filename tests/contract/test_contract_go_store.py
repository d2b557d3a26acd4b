"""The committer contract (``test_committer_contract.py``, every case, every committer) over the Go store
(``testbed.go_store.GoStore``: the memory model in Go, on a loopback socket): a real ``S3Store`` and botocore client
over HTTP. Skipped, naming the cause, where Go is not installed or the store does not build."""

from __future__ import annotations

import uuid

import pytest

from s3commit.config.options import RetryPolicy
from testbed.go_store import GoStore, GoStoreError, build_go_store
from tests.conftest import STAGING_AND_MAGIC
from tests.contract.test_committer_contract import *  # noqa: F403  (the cases and their fixtures)

try:
    build_go_store()
except GoStoreError as err:
    pytest.skip(f"the Go store is not available: {err}", allow_module_level=True)

pytestmark = [pytest.mark.usefixtures("no_pending_uploads"), pytest.mark.parametrize("name", STAGING_AND_MAGIC)]


@pytest.fixture(scope="module")
def go_store():
    with GoStore() as started:
        yield started


@pytest.fixture(scope="module")
def s3_client(go_store):
    return go_store.client()


@pytest.fixture
def s3_bucket(go_store):
    return go_store.create_bucket(f"contract-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def store(go_store, s3_bucket):
    return go_store.store(retry=RetryPolicy(max_attempts=5, initial_delay=0.01, max_delay=0.2), buckets=(s3_bucket,))
