"""What the test servers honour, told to :mod:`s3commit.store.capability_cache` for every bucket they create.

A test server is probed once, when it starts, on a bucket of its own (:func:`probe_server`); each bucket created
after is then known to honour the same (:func:`know_bucket`), as a user's bucket is once its first job has probed
it (the cache of a day). So the probe's requests land in no test's counts, latency or faults; tests of the probe
itself start from a cold cache (``capability_cache.forget()`` and another ``S3COMMIT_CAPABILITIES_DIR``).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from s3commit.store.capabilities import Capabilities, Outcome

PROBE_ATTEMPTS = 3
"""A probe whose check could not tell (``failed``: a timeout or a 500 on a loaded machine) is made again."""

_seen: dict[str, Capabilities] = {}
"""What each server (by endpoint) was seen to honour."""


def probe_server(server: Any) -> Capabilities:
    """Probe ``server`` (anything with ``endpoint_url``, ``env()`` and ``create_bucket``) on a new bucket of its
    own, deleted afterwards."""
    from s3commit.config.options import StoreOptions
    from s3commit.store.capability_cache import known
    from s3commit.store.s3store import S3Store

    env = server.env()  # the credentials and region the server checks
    bucket = server.create_bucket(f"s3commit-known-{uuid.uuid4().hex[:10]}")
    store = S3Store(StoreOptions(endpoint_url=server.endpoint_url, region=env["AWS_DEFAULT_REGION"], path_style=True,
                                 access_key=env["AWS_ACCESS_KEY_ID"], secret_key=env["AWS_SECRET_ACCESS_KEY"]))
    found = None
    for _ in range(PROBE_ATTEMPTS):
        found = known(store, bucket, refresh=True)
        if found is not None and not any(f.outcome is Outcome.FAILED for f in found.findings.values()):
            break
    # The probe removed what it wrote: no bucket of ours stays behind.
    store.requests.client.delete_bucket(Bucket=bucket)
    if found is None:
        raise RuntimeError(f"the test server at {server.endpoint_url} could not be probed")
    failed = {name: f for name, f in found.findings.items() if f.outcome is Outcome.FAILED}
    if failed:  # every later bucket would inherit a finding the probe could not make (a loaded machine's timeout)
        raise RuntimeError(f"the test server at {server.endpoint_url} could not be probed in {PROBE_ATTEMPTS} "
                           f"attempts: " + "; ".join(f"{name}: {f.code} {f.detail}" for name, f in failed.items()))
    _seen[found.endpoint] = found
    return found


def know_bucket(server: Any, bucket: str) -> None:
    """Tell ``capability_cache`` that ``bucket`` honours what ``server`` was seen to (nothing if never probed)."""
    from s3commit.store.capability_cache import remember

    found = _seen.get(str(server.endpoint_url).rstrip("/"))
    if found is not None and found.bucket != bucket:
        remember(dataclasses.replace(found, bucket=bucket))
