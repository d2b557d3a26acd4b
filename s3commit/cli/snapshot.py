"""``s3commit snapshot``: make a destination a snapshot destination (readers see whole jobs), return it to a plain
directory, list its snapshots, print the files of the current one, vacuum replaced files
(:mod:`s3commit.commit.snapshot_admin`).

Exit codes and errors are :mod:`s3commit.cli.app`'s.
"""

from __future__ import annotations

import argparse
from typing import Any

from s3commit.cli import args as cli_args
from s3commit.cli.args import EXIT_OK, NothingToDo, duration_arg, uri_arg
from s3commit.cli.output import format_bytes, json_text, say
from s3commit.commit.snapshot_admin import SnapshotSummary
from s3commit.commit.snapshots import LogState
from s3commit.model.uri import S3Uri


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "snapshot", help="snapshot destinations: readers see whole jobs (enable, disable, show, files, vacuum)",
        description="A snapshot destination keeps a log of committed snapshots in _spark_metadata/, which Spark "
                    "reads instead of listing the directory: every reader that goes by it sees exactly one "
                    "committed job's output, also while a commit runs or after one failed. docs/snapshots.md.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    enable = actions.add_parser("enable", parents=[common], help="make DEST a snapshot destination (its files "
                                                                  "become snapshot 0)")
    enable.add_argument("--retention", type=duration_arg, default=None, metavar="DURATION",
                        help="how long replaced files stay readable (default s3commit.snapshot.retention, 24h)")
    enable.add_argument("--scheme", default="s3a", choices=("s3a", "s3", "s3n"),
                        help="the scheme of the paths Spark reads from the log (default s3a)")
    enable.add_argument("--symlink-manifests", action="store_true",
                        help="keep _symlink_format_manifest/<partition>/manifest current at every commit, for "
                             "Trino, Athena, Hive and Presto (SymlinkTextInputFormat)")
    actions.add_parser("disable", parents=[common],
                       help="return DEST to a plain directory (replaced files deleted, then the log)")
    actions.add_parser("show", parents=[common], help="list DEST's snapshots, newest first")
    actions.add_parser("files", parents=[common], help="print the files of DEST's current snapshot, one URI a line")
    vacuum = actions.add_parser("vacuum", parents=[common], help="delete the files in no retained snapshot")
    vacuum.add_argument("--horizon", type=duration_arg, default=None, metavar="DURATION",
                        help="keep snapshots superseded less than this ago (default: the destination's retention)")
    for sub in actions.choices.values():
        sub.add_argument("dest", type=uri_arg, help="the destination, s3://bucket/path")
        sub.add_argument("--json", action="store_true", help="print the result as JSON")
        sub.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from s3commit.commit import snapshot_admin

    store, dest = cli_args.store_from_args(args), args.dest
    if args.action == "enable":
        first = snapshot_admin.enable_snapshots(dest, store=store, retention=args.retention, scheme=args.scheme,
                                                symlink_manifests=args.symlink_manifests)
        return _print(args, {"kind": "snapshot-enable", "dest": str(dest), "snapshot": first.id,
                             "files": len(first.files), "bytes": first.size},
                      f"{dest} is a snapshot destination: snapshot {first.id} lists {len(first.files)} files "
                      f"({format_bytes(first.size)})")
    if args.action == "disable":
        deleted = snapshot_admin.disable_snapshots(dest, store=store)
        return _print(args, {"kind": "snapshot-disable", "dest": str(dest), "deleted": deleted},
                      f"{dest} is a plain directory again: {deleted} replaced files and the log deleted")
    if args.action == "vacuum":
        report = snapshot_admin.vacuum_snapshots(dest, store=store, horizon=args.horizon)
        return _print(args, {"kind": "snapshot-vacuum", "dest": str(dest), **vars(report)},
                      f"vacuum of {dest}: {report.deleted} files and {report.entries_deleted} log entries deleted; "
                      f"{report.retained_snapshots} snapshots retained, {report.kept_young} files in no snapshot "
                      "kept as younger than the horizon")
    state, history = snapshot_admin.snapshot_history(dest, store=store)
    if not state.enabled:
        raise NothingToDo(f"{dest} is not a snapshot destination (`s3commit snapshot enable {dest}` makes it one)")
    if args.action == "files":
        current = snapshot_admin.current_files(dest, store=store)
        if args.json:
            print(json_text({"kind": "snapshot-files", "dest": str(dest), "snapshot": current.id,
                             "files": [{"uri": _file_uri(dest, f.relative), "size": f.size, "job": f.job}
                                       for f in current.files]}))
        else:
            print("\n".join(_file_uri(dest, f.relative) for f in current.files))
        return EXIT_OK
    if args.json:
        print(json_text({"kind": "snapshots", "dest": str(dest), **history_json(state, history)}))
    else:
        print("\n".join(history_lines(dest, state, history)))
    return EXIT_OK


def history_json(state: LogState, history: list[SnapshotSummary]) -> dict[str, Any]:
    """A snapshot destination's settings and snapshots, as ``snapshot show --json`` and ``show DEST/ --json`` say."""
    assert state.settings is not None
    return {"scheme": state.settings.scheme, "retentionSeconds": state.settings.retention,
            "symlinkManifests": state.settings.symlink_manifests,
            "snapshots": [{"id": h.id, "committed": h.committed.isoformat() if h.committed else None,
                           "files": h.files, "bytes": h.bytes, "jobs": list(h.jobs)} for h in history]}


def history_lines(dest: S3Uri, state: LogState, history: list[SnapshotSummary]) -> list[str]:
    """The same for people: one line a snapshot, newest first, with the job whose files are newest in it."""
    assert state.settings is not None
    lines = [f"{dest}: snapshot destination (paths as {state.settings.scheme}://, replaced files kept "
             f"{state.settings.retention:g} s{', symlink manifests' if state.settings.symlink_manifests else ''})"]
    for h in history:
        when = h.committed.strftime("%Y-%m-%d %H:%M:%S") if h.committed else "?"
        lines.append(f"  snapshot {h.id:>5}  {when}  {h.files:>7} files  {format_bytes(h.bytes):>10}  "
                     f"{h.jobs[0] if h.jobs else '(empty)'}")
    return lines


def _file_uri(dest: S3Uri, relative: str) -> str:
    return f"s3://{dest.bucket}/{dest.prefix}{relative}"


def _print(args: argparse.Namespace, data: dict[str, Any], line: str) -> int:
    if args.json:
        print(json_text(data))
    else:
        say(line, quiet=args.quiet)
    return EXIT_OK
