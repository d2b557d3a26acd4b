"""Job summary reports (S3A's ``fs.s3a.committer.summary.report.directory``; ``summary_report_dir`` in
Python): every job commit, successful or not, also writes its ``_SUCCESS`` data as ``summary-<job id>.json``
into that directory (``s3://``, ``s3a://`` or a local path), so operators keep one record per job in one place.
A failed job's report has ``success: false`` and names the failure in ``diagnostics``. Writing a report never
hides the job's own outcome: a failure to write one is logged."""

from __future__ import annotations

import logging
import os
from dataclasses import replace

from s3commit.errors import S3CommitError
from s3commit.model.manifests import SuccessData
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

FAILURE_KEY = "failure"
"""The ``diagnostics`` entry naming why a job failed."""


def report_name(job_id: str) -> str:
    return f"summary-{job_id}.json"


def failed(summary: SuccessData, error: BaseException) -> SuccessData:
    """``summary`` as a failed job's report: ``success`` false, the error named in ``diagnostics``."""
    text = f"{type(error).__name__}: {error}"
    return replace(summary, success=False, diagnostics={**summary.diagnostics, FAILURE_KEY: text[:4000]})


def write_report(store: S3Store, directory: str, summary: SuccessData) -> str | None:
    """Write ``summary`` as ``<directory>/summary-<job id>.json``; returns where, or None if it could not
    (logged: the job's outcome stands)."""
    name = report_name(summary.job_id)
    body = summary.to_json()
    try:
        if directory.startswith(("s3://", "s3a://")):
            uri = S3Uri.from_location(directory.rstrip("/") + "/" + name)
            store.objects.put_object(uri.bucket, uri.key, body, content_type="application/json")
            return f"s3://{uri.bucket}/{uri.key}"
        path = os.path.join(directory.removeprefix("file://"), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(body)
        return path
    except (S3CommitError, OSError, ValueError) as err:
        log.warning("job %s: could not write its summary report to %s: %s", summary.job_id, directory, err)
        return None
