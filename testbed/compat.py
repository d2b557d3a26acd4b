"""The measured part of the compatibility table in docs/operations.md: each test server (moto, SeaweedFS, rclone's
``serve s3``) asked by ``s3commit doctor --json``, the answers rendered as Markdown between two markers.

``python -m testbed.compat`` rewrites the table; ``--check`` exits 1 if the document's rows differ from
what the servers answer now (the slow tier runs it, so the table is never typed by hand).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from s3commit.store.capabilities import CHECK_BY_NAME

TABLE_BEGIN = "<!-- compat:measured begin (python -m testbed.compat) -->"
TABLE_END = "<!-- compat:measured end -->"
DOCUMENT = Path(__file__).resolve().parents[1] / "docs" / "operations.md"


def _version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return "?"
    found = re.search(r"v?(\d+\.\d+(?:\.\d+)?)", out)
    return found.group(1) if found else "?"


def doctor(server: Any) -> dict[str, Any]:
    """``s3commit doctor --json`` on a new bucket of ``server``, run as a user runs it (a process of its own)."""
    bucket = server.create_bucket(f"compat-{uuid.uuid4().hex[:10]}")
    env = {**os.environ, **server.env()}
    done = subprocess.run([sys.executable, "-m", "s3commit.cli", "doctor", f"s3://{bucket}/warehouse", "--json"],
                          env=env, capture_output=True, text=True, timeout=300)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"s3commit doctor failed on {server.endpoint_url}: {done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def measure() -> dict[str, tuple[str, dict[str, Any]]]:
    """Each server's name with its version, and its doctor report."""
    import moto

    from s3commit.testing.server import S3TestServer
    from testbed.rclone import RcloneServer, rclone_binary
    from testbed.seaweed import SeaweedServer, weed_binary

    reports: dict[str, tuple[str, dict[str, Any]]] = {}
    for name, version, make in (("moto", moto.__version__, S3TestServer),
                                ("SeaweedFS", _version([weed_binary(), "version"]), SeaweedServer),
                                ("rclone serve s3", _version([rclone_binary(), "version"]), RcloneServer)):
        with make() as server:
            reports[name] = (version, doctor(server))
    return reports


def render(reports: dict[str, tuple[str, dict[str, Any]]]) -> str:
    names = list(reports)
    lines = ["| capability (what the probe sends) | " + " | ".join(f"{n} {v}" for n, (v, _) in reports.items()) + " |",
             "|---|" + "---|" * len(names)]
    found = {name for _v, report in reports.values() for name in report["findings"]}
    checks = [name for name in CHECK_BY_NAME if name in found]  # the probe's order
    for check in checks:
        cells = []
        for report in (r for _v, r in reports.values()):
            finding = report["findings"].get(check)
            cells.append("-" if finding is None else finding["outcome"] + (f" ({finding['code']})"
                                                                           if finding["code"] else ""))
        lines.append(f"| `{check}` ({CHECK_BY_NAME[check].request}) | " + " | ".join(cells) + " |")
    lines.append("| every committer feature safe (exit status 0) | "
                 + " | ".join("yes" if report["safe"] else "no" for _v, report in reports.values()) + " |")
    return "\n".join(lines)


def measured_rows(text: str) -> list[str]:
    """The table's rows in ``text`` but its header (which names the servers' versions: a new release that answers
    the same is not a difference)."""
    table = text[text.index(TABLE_BEGIN) + len(TABLE_BEGIN):text.index(TABLE_END)].strip().splitlines()
    return table[1:]


def replaced(text: str, table: str) -> str:
    start, end = text.index(TABLE_BEGIN) + len(TABLE_BEGIN), text.index(TABLE_END)
    return f"{text[:start]}\n{table}\n{text[end:]}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.compat", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the document differs (change nothing)")
    parser.add_argument("--document", type=Path, default=DOCUMENT)
    args = parser.parse_args(argv)
    text = args.document.read_text()
    new = replaced(text, render(measure()))
    if args.check:
        if measured_rows(new) != measured_rows(text):
            print(f"{args.document}: the measured compatibility table differs from what the servers answer now; "
                  "run python -m testbed.compat", file=sys.stderr)
            return 1
        return 0
    args.document.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
