"""The S3 client's timestamps (``s3commit.store.client.parse_timestamp``): S3's ISO 8601 form read without dateutil,
every other form as botocore reads it, the same instant either way; and the store's clients parse with it."""

from __future__ import annotations

from datetime import datetime, timezone

import botocore.utils
import pytest

from s3commit.store.client import parse_timestamp
from s3commit.testing import MemoryS3, S3Wire


@pytest.mark.parametrize("value", ["2026-11-29T08:56:01.000Z", "2026-11-29T08:56:01Z",
                                   "2026-11-29T08:56:01.123456+00:00", "2026-11-29T10:56:01+02:00",
                                   "Sun, 29 Nov 2026 08:56:01 GMT", "1700000000"])
def test_every_form_is_the_instant_botocore_reads(value):
    parsed = parse_timestamp(value)
    assert parsed == botocore.utils.parse_timestamp(value) and parsed.tzinfo is not None


def test_a_listing_s_times_are_aware_and_exact():
    s3 = MemoryS3()
    s3.create_bucket("times")
    store = S3Wire(s3).store()
    store.objects.put_object("times", "a/b", b"x")
    listed = list(store.objects.list_objects("times", "a/"))
    assert len(listed) == 1
    when = listed[0].last_modified
    assert isinstance(when, datetime) and when.tzinfo is timezone.utc  # read by fromisoformat, not by dateutil
