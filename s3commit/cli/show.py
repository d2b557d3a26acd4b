"""``s3commit show``: recognise a manifest (``_SUCCESS``, ``.pendingset``, ``.pending`` or commit journal) in
S3 or in a local file, by name or by content, and print a human summary or the validated manifest as JSON.

Exit codes and errors are :mod:`s3commit.cli.app`'s.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from s3commit.cli import args as cli_args
from s3commit.cli.args import EXIT_OK, UsageError
from s3commit.cli.output import format_bytes, json_text
from s3commit.errors import ManifestError, short_upload_id
from s3commit.model.lease_record import LEASE_FORMAT, LeaseState
from s3commit.model.manifests import (
    JOURNAL_FORMAT,
    PENDING_VERSION,
    PENDINGSET_VERSION,
    SUCCESS_NAME,
    CommitJournal,
    PendingSet,
    PendingUpload,
    SuccessData,
    java_date,
)
from s3commit.model.paths import JOURNAL_FILE, LEASE_NAME
from s3commit.model.uri import S3Uri


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "show", parents=[common], help="show a _SUCCESS, .pendingset, .pending, commit journal or commit lease, "
                                       "or the jobs writing to a destination",
        description="Show a manifest: s3://bucket/key or a local file. Human summary by default. A destination "
                    "ending in / (s3://bucket/table/): the jobs writing there (alive, dead, committing) and the "
                    "recent commits.")
    parser.add_argument("target", help="s3://bucket/key of the manifest, a local file path, or s3://bucket/dest/")
    parser.add_argument("--json", action="store_true", help="print the parsed manifest as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    target: str = args.target
    if "://" in target and target.endswith("/"):
        # A destination: the jobs writing there, alive, dead or committing, and the recent commits.
        from s3commit.cli import jobs
        from s3commit.commit.sweep import job_statuses

        uri, store = S3Uri.parse(target), cli_args.store_from_args(args)
        from s3commit.cli import snapshot
        from s3commit.commit.snapshot_admin import snapshot_history

        found = job_statuses(store, uri, liveness=jobs.DEFAULT_LIVENESS)
        state, history = snapshot_history(uri, store=store)
        if args.json:
            print(json_text({"kind": "jobs", "source": str(uri), **jobs.jobs_json(store, uri, found),
                             **({"snapshotDestination": snapshot.history_json(state, history)} if state.enabled
                                else {})}))
        else:
            print("\n".join(jobs.jobs_lines(store, uri, found)
                            + (snapshot.history_lines(uri, state, history) if state.enabled else [])))
        return EXIT_OK
    if "://" in target:
        uri = S3Uri.parse(target)
        if not uri.key:
            raise UsageError(f"{target} names a bucket, not a manifest object (end a destination with / to see "
                             "the jobs writing there)")
        source, data = str(uri), cli_args.store_from_args(args).objects.get_object(uri.bucket, uri.key)
    else:
        with open(target, "rb") as f:
            source, data = target, f.read()
    print(show(source, data, as_json=args.json))
    return EXIT_OK


def _kind_of(source: str, data: bytes) -> str:
    name = source.rstrip("/").rsplit("/", 1)[-1]
    if name == "_SUCCESS":
        return "success"
    if name.endswith(".pendingset"):
        return "pendingset"
    if name.endswith(".pending"):
        return "pending"
    if name == JOURNAL_FILE:
        return "journal"
    if name == LEASE_NAME:
        return "lease"
    try:  # any other name: recognise the content
        obj = json.loads(data)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        if obj.get("name") == SUCCESS_NAME:
            return "success"
        if obj.get("name") == JOURNAL_FORMAT:
            return "journal"
        if obj.get("version") == PENDINGSET_VERSION and "commits" in obj:
            return "pendingset"
        if obj.get("version") == PENDING_VERSION and "uploadId" in obj:
            return "pending"
        if obj.get("format") == LEASE_FORMAT:
            return "lease"
    raise ManifestError("not a _SUCCESS, .pendingset, .pending, commit journal or commit lease (by name or by content)",
                        source=source)


def show(source: str, data: bytes, *, as_json: bool = False) -> str:
    """What ``s3commit show`` prints for the manifest ``data`` read from ``source``.

    Raises:
        ManifestError: not a manifest, or an invalid one.
    """
    kind = _kind_of(source, data)
    if kind == "success" and not data:
        if as_json:
            return json_text({"kind": "success", "source": source, "empty": True, "manifest": None})
        return (f"{source}: a 0-byte _SUCCESS. It was written by a rename-based committer (FileOutputCommitter "
                "or s3commit's rename baseline), not by an S3A or s3commit MPU committer: there is no summary.")
    manifest: Any
    if kind == "success":
        manifest = SuccessData.from_json(data, source=source)
        body = manifest.to_dict()
    elif kind == "pendingset":
        manifest = PendingSet.from_json(data, source=source)
        body = manifest.to_dict()
    elif kind == "pending":
        manifest = PendingUpload.from_json(data, source=source)
        body = manifest.to_dict()
    elif kind == "lease":
        manifest = LeaseState.from_json(data, source=source)
        body = json.loads(manifest.to_json())
    else:
        manifest = CommitJournal.from_json(data, source=source)
        body = json.loads(manifest.to_json())
    if as_json:
        return json_text({"kind": kind, "source": source, "manifest": body})
    return "\n".join(_summary(kind, source, manifest))


def _summary(kind: str, source: str, m: Any) -> list[str]:
    if kind == "success":
        s: SuccessData = m
        metrics = s.metrics
        lines = [f"_SUCCESS {source}",
                 f"  committer   {s.committer or '?'}",
                 f"  job id      {s.job_id or '?'} ({s.job_id_source or '?'})",
                 f"  written     {java_date(s.timestamp) if s.timestamp else '?'} on {s.hostname or '?'}",
                 f"  success     {s.success}"]
        if "committer_files" in metrics:
            lines.append(f"  files       {metrics['committer_files']}"
                         + (f" (first {len(s.filenames)} listed)" if len(s.filenames) < metrics["committer_files"]
                            else ""))
        if "committer_bytes_committed" in metrics:
            lines.append(f"  bytes       {format_bytes(int(metrics['committer_bytes_committed']))}")
        durations = {k: v for k, v in metrics.items() if k.startswith("duration_")}
        if durations:
            lines.append("  timings     " + ", ".join(f"{k[9:-3]} {v} ms" for k, v in sorted(durations.items())))
        requests = {k[3:]: v for k, v in metrics.items() if k.startswith("op_")}
        if requests:
            lines.append("  requests    " + ", ".join(f"{k} {v}" for k, v in sorted(requests.items())))
        for key, value in sorted(s.diagnostics.items()):
            lines.append(f"  {key} = {value}")
        lines += [f"    {name}" for name in s.filenames]
        return lines
    if kind == "pendingset":
        p: PendingSet = m
        # S3A writes no extraData into a pendingset (it has no getter): its commits name the task attempt.
        attempt = p.task_attempt_id or next((c.task_id for c in p.commits if c.task_id), "")
        lines = [f"pendingset {source}",
                 f"  job id        {p.job_id or '(none)'}",
                 f"  task attempt  {attempt or '(none)'}",
                 f"  uploads       {len(p.commits)}, {format_bytes(p.total_length)}"]
        lines += [f"    s3://{c.bucket}/{c.destination_key}  {format_bytes(c.length)}, {c.part_count} parts, "
                  f"upload {short_upload_id(c.upload_id, width=16)}" for c in p.commits]
        return lines
    if kind == "pending":
        u: PendingUpload = m
        return [f"pending upload {source}",
                f"  destination  s3://{u.bucket}/{u.destination_key}",
                f"  upload id    {u.upload_id}",
                f"  length       {format_bytes(u.length)} in {u.part_count} parts",
                f"  written as   {u.uri}",
                f"  saved        {java_date(u.saved or u.created) if (u.saved or u.created) else '?'}"]
    if kind == "lease":
        state: LeaseState = m
        dest = source.rsplit("/", 1)[0] if "/" in source.removeprefix("s3://") else source
        recent = ", ".join(c.job_id for c in state.recent[:5]) + (" ..." if len(state.recent) > 5 else "")
        lines = [f"commit lease {source}"]
        if state.holder is None:
            lines.append("  held by      nobody (free)")
        else:
            h = state.holder
            lines += [f"  held by      job {h.job_id} ({h.operation})",
                      f"  where        host {h.host}, process {h.pid}",
                      f"  since        {h.taken} (renewed {h.renewed} times)",
                      f"  duration     {h.duration:g} s after its last renewal (the store's clock)",
                      f"  journal      {h.journal or '(none)'}"]
        lines.append(f"  committed    {len(state.recent)} recent jobs" + (f": {recent}" if recent else ""))
        if state.holder is not None:
            lines.append("  Other jobs' commits to this destination wait for it. If its job is gone it expires by "
                         f"itself; to release it now: `s3commit recover {dest} --release-lease --yes`.")
        return lines
    j: CommitJournal = m
    plan = ", ".join([*(f"delete {p or '(all of dest)'}" for p in j.delete_paths),
                      *(f"delete s3://{j.bucket}/{p}" for p in j.delete_outside)])
    if j.replace_partitions:
        plan = ", ".join(x for x in (plan, "replace written partitions") if x)
    return [f"commit journal {source}",
            f"  job id       {j.job_id} ({j.committer} committer)",
            f"  destination  s3://{j.bucket}/{j.dest_key}",
            f"  started      {java_date(j.created) if j.created else '?'}",
            f"  pendingsets  {len(j.pendingsets)}",
            f"  overwrite    {plan or 'none'}",
            f"  _SUCCESS     {'yes' if j.success_marker else 'no'}",
            "  An interrupted commit: finish it with `s3commit recover s3://"
            f"{j.bucket}/{j.dest_key} --job {j.job_id}` (or roll it back with --abort)."]
