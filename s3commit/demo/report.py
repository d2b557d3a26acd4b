"""What ``s3commit demo`` prints: time per phase, requests by type, bytes written and copied, the ratio of the
job commits, and each job's ``_SUCCESS`` summary."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from s3commit.demo.measure import RunReport


def print_report(reports: Sequence[RunReport], *, notes: Sequence[str] = (), out: Any = None) -> None:
    """The summary a user wants: time per phase, requests by type, bytes copied, files, _SUCCESS; to ``out``
    (default: ``sys.stdout`` at the time of the call). The first report is s3commit's: a line compares its job
    commit and whole write with each other report's (FileOutputCommitter v1's, S3A's magic committer's when shown);
    each of ``notes`` is a line after those (e.g. why S3A is not shown)."""
    def line(text: str = "") -> None:
        print(text, file=out or sys.stdout)

    phases = list(dict.fromkeys(p for r in reports for p in r.phases))
    width = max(len(r.label) for r in reports) + 2
    line("Time per phase (seconds)")
    line(" " * 16 + "".join(f"{r.label:>{width}}" for r in reports))
    for phase in [*phases, "total"]:
        values = [r.total if phase == "total" else r.phases.get(phase, 0.0) for r in reports]
        line(f"  {phase:<14}" + "".join(f"{v:>{width}.2f}" for v in values))
    line()
    line("Requests by type")
    ops = sorted({op for r in reports for op in r.requests})
    for op in ops:
        line(f"  {op:<24}" + "".join(f"{r.requests.get(op, 0):>{width}}" for r in reports))
    line(f"  {'total':<24}" + "".join(f"{sum(r.requests.values()):>{width}}" for r in reports))
    line()
    for r in reports:
        line(f"{r.label}: {r.files} files, {r.bytes / 1e6:.1f} MB written, "
             f"{r.bytes_copied / 1e6:.1f} MB copied server-side")
    ours = reports[0]
    for base in reports[1:] if ours.phases.get("job commit") else ():
        line(f"job commit: {ours.label} {ours.phases['job commit']:.2f}s vs {base.label} "
             f"{base.phases['job commit']:.2f}s ({base.phases['job commit'] / ours.phases['job commit']:.1f}x); "
             f"whole write {base.total / ours.total:.1f}x")
    for note in notes:
        line(note)
    for r in reports:
        if r.success:
            line()
            line(f"_SUCCESS of the {r.label} job:")
            fields = ("committer", "jobId", "hostname", "date")
            summary: dict[str, Any] = {k: r.success[k] for k in fields if k in r.success}
            summary["files listed"] = len(r.success.get("filenames", []))
            summary["first files"] = r.success.get("filenames", [])[:3]
            summary["metrics"] = {k: v for k, v in r.success.get("metrics", {}).items()
                                  if k.startswith(("committer_", "duration_"))}
            line(json.dumps(summary, indent=2))
