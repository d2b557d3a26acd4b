"""The jobs under a destination, for people: ``s3commit uploads sweep DEST`` sweeps the dead ones
(:mod:`s3commit.commit.sweep`); ``s3commit uploads list DEST`` and ``s3commit show DEST/`` say which are alive,
dead, committing or committed."""

from __future__ import annotations

import argparse
import socket
from typing import Any

from s3commit.cli import args as cli_args
from s3commit.cli.args import EXIT_FAILED, EXIT_OK, UsageError, duration_arg, uri_arg
from s3commit.cli.output import format_age, print_json, say
from s3commit.commit.lease import read_state
from s3commit.commit.sweep import JobStatus, SweepResult, sweep_dead_jobs
from s3commit.config.options import KEYS
from s3commit.config.values import parse_seconds
from s3commit.model.uri import S3Uri
from s3commit.store.capability_cache import known
from s3commit.store.s3store import S3Store

DEFAULT_LIVENESS = parse_seconds(KEYS["s3commit.job.liveness"].default, what="s3commit.job.liveness")


def add_sweep_parser(actions: Any, common: argparse.ArgumentParser) -> None:
    sweep = actions.add_parser(
        "sweep", parents=[common], help="abort the uploads and delete the directories of dead jobs under a destination",
        description="Sweep the dead jobs under a destination: a job whose liveness record was not renewed for longer "
                    "than its window (judged by the store's clock) has its record taken with If-Match, its pending "
                    "uploads aborted and its job directory deleted. Live jobs are never touched, whatever their age; "
                    "a job whose commit began (its journal) is left to the commit lease or `s3commit recover`. On a "
                    "store that ignores conditional writes, --older-than is required.")
    sweep.add_argument("uri", type=uri_arg, help="s3://bucket/destination: the jobs writing there")
    sweep.add_argument("--older-than", type=duration_arg, metavar="AGE",
                       help="also sweep jobs whose liveness is unknown (no record: an S3A job, an older s3commit) "
                            "when their directory has been quiet this long, and sweep dead jobs only once silent this "
                            "long; required where the store ignores conditional writes (90s, 30m, 12h, 2d)")
    sweep.add_argument("--liveness", type=duration_arg, metavar="AGE", default=DEFAULT_LIVENESS,
                       help="a job silent longer than this is dead (s3commit.job.liveness; default "
                            f"{format_age(DEFAULT_LIVENESS)}; a job that declared a longer window keeps it)")
    sweep.add_argument("--dry-run", action="store_true", help="say what would be swept; change nothing")
    sweep.add_argument("--json", action="store_true", help="machine-readable output")
    sweep.set_defaults(handler=run_sweep)


def conditional_writes(store: S3Store, uri: S3Uri) -> tuple[bool, bool]:
    """Whether the store honours conditional writes, and whether it lists uploads (probed once, cached)."""
    found = known(store, uri.bucket, prefix=uri.prefix)
    if found is None:
        return False, True
    return found.conditional_writes, found.lists_uploads


def run_sweep(args: argparse.Namespace) -> int:
    uri: S3Uri = args.uri
    store = cli_args.store_from_args(args)
    store.head_bucket(uri.bucket)
    conditional, lists_uploads = conditional_writes(store, uri)
    if not conditional and args.older_than is None:
        raise UsageError(f"the store behind s3://{uri.bucket} does not honour conditional writes, so a dead job's "
                         "record cannot be taken safely (a job that comes back could lose its work). Name an age: "
                         f"`s3commit uploads sweep {uri} --older-than 1d` sweeps the jobs silent that long")
    result = sweep_dead_jobs(store, uri, liveness=args.liveness, conditional=conditional,
                             lists_uploads=lists_uploads, older_than=args.older_than, dry_run=args.dry_run,
                             sweeper=f"s3commit uploads sweep on {socket.gethostname()}")
    failed = [s for s, why in result.left if why.startswith("its sweep failed")]
    if args.json:
        print_json(sweep_json(result))
        return EXIT_FAILED if failed else EXIT_OK
    verb = "would sweep" if args.dry_run else "swept"
    for swept in result.swept:
        say(f"{verb}  {swept.status.describe()}: {swept.uploads_aborted} pending uploads"
            f"{' to abort' if args.dry_run else ' aborted'}, {swept.objects_deleted} objects of its directory")
    for status, why in result.left:
        say(f"left   {status.kind} job {status.job_id}: {why}", quiet=args.quiet)
    say(f"{verb} {len(result.swept)} dead jobs under {uri} ({result.uploads_aborted} pending uploads); "
        f"left {len(result.left)}", quiet=args.quiet)
    return EXIT_FAILED if failed else EXIT_OK


def sweep_json(result: SweepResult) -> dict[str, Any]:
    return {"uri": str(result.dest), "dry_run": result.dry_run,
            "swept": [{**s.status.to_dict(), "uploads_aborted": s.uploads_aborted, "objects_deleted": s.objects_deleted}
                      for s in result.swept],
            "left": [{**status.to_dict(), "why": why} for status, why in result.left]}


def jobs_lines(store: S3Store, uri: S3Uri, found: list[JobStatus]) -> list[str]:
    """The jobs under a destination for people: each job directory's state, then the recent commits the
    destination's commit lease remembers."""
    lines = [f"jobs under {uri}:"]
    lines += [f"  {status.describe()}" for status in found] or ["  no job directories"]
    dead = [s for s in found if s.state == "dead"]
    if dead:
        lines.append(f"  {len(dead)} dead: the next job commit here sweeps them (where the store honours conditional "
                     f"writes), or now: s3commit uploads sweep {uri}")
    state = read_state(store, uri)
    if state is not None and state.recent:
        lines.append("  committed recently: " + ", ".join(f"{c.job_id} ({c.at})" for c in state.recent[:5])
                     + (" ..." if len(state.recent) > 5 else ""))
    return lines


def jobs_json(store: S3Store, uri: S3Uri, found: list[JobStatus]) -> dict[str, Any]:
    state = read_state(store, uri)
    return {"jobs": [s.to_dict() for s in found],
            "committed": [{"job_id": c.job_id, "at": c.at, "files": c.files} for c in (state.recent if state else ())]}
