"""The committer contract (``test_committer_contract.py``, every case, every committer) inside moto's in-process
mock, as a user's suite written with ``mock_aws`` runs it: no server, the bucket made with a default boto3
client, the store resolving endpoint and credentials as boto3 does. The server-mode runs of the same cases
(moto behind the simulator; SeaweedFS in the slow tier) are beside it, in ``test_committer_contract.py``.
"""

from __future__ import annotations

import uuid

import pytest

moto = pytest.importorskip("moto")

import boto3  # noqa: E402

from s3commit import S3Store, StoreOptions  # noqa: E402
from s3commit.config.options import RetryPolicy  # noqa: E402
from s3commit.testing import atomic_conditional_writes  # noqa: E402
from tests.conftest import MAGIC_IN_DEFAULT_TIER  # noqa: E402
from tests.contract.test_committer_contract import *  # noqa: E402,F403  (the cases and their fixtures)

# magic in the default tier, the staging committers in the slow one (their server-mode runs are in the default tier)
pytestmark = [pytest.mark.usefixtures("no_pending_uploads"), pytest.mark.parametrize("name", MAGIC_IN_DEFAULT_TIER)]


@pytest.fixture(scope="module", autouse=True)
def mocked():
    """``mock_aws`` around the module's tests, their fixtures' set-up and tear-down included: one in-process
    S3 (as the server-mode runs have one server), a new bucket per test; its conditional writes atomic, as on
    S3 (asked for, as a user's suite asks)."""
    atomic_conditional_writes()
    with pytest.MonkeyPatch.context() as env:
        for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
            env.delenv(name, raising=False)  # boto3's default resolution: AWS's own endpoint, which moto takes
        with moto.mock_aws():
            yield


@pytest.fixture(scope="module")
def s3_client(mocked):
    return boto3.client("s3", region_name="us-east-1")


@pytest.fixture
def s3_bucket(s3_client):
    name = f"contract-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="module")
def store(mocked):
    return S3Store(StoreOptions(retry=RetryPolicy(max_attempts=5, initial_delay=0.01, max_delay=0.2)))
