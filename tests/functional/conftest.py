"""Fixtures of the functional tests."""

from __future__ import annotations

import pytest

from s3commit.testing.memory import MemoryS3


@pytest.fixture
def s3() -> MemoryS3:
    """S3 in memory (:class:`MemoryS3`) with the bucket ``b``: the snapshot tests' store."""
    s3 = MemoryS3()
    s3.create_bucket("b")
    return s3
