"""``s3commit recover``: finish or roll back an interrupted job commit (the engine is
:mod:`s3commit.commit.recovery`)."""

from __future__ import annotations

import argparse
from typing import Any

from s3commit.cli import args as cli_args
from s3commit.cli.args import EXIT_NOTHING, EXIT_OK, NothingToDo, UsageError, job_arg, uri_arg
from s3commit.cli.output import format_age, print_json, say
from s3commit.config.options import CommitterOptions


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    recover = commands.add_parser(
        "recover", parents=[common], help="finish or roll back an interrupted job commit",
        description="Finish (default) or roll back (--abort) a job commit that was interrupted after it wrote "
                    "its journal. Run it only once the job's driver is gone. Idempotent.")
    recover.add_argument("dest", type=uri_arg, help="the job's destination, s3://bucket/path")
    which = recover.add_mutually_exclusive_group(required=True)
    which.add_argument("--job", type=job_arg, help="the job id (UUID)")
    which.add_argument("--release-lease", action="store_true",
                       help="delete the destination's commit lease instead (its holder must be gone: needs --yes)")
    recover.add_argument("--yes", action="store_true", help="confirm --release-lease")
    recover.add_argument("--abort", action="store_true", help="roll back instead of finishing")
    recover.add_argument("--force", action="store_true",
                         help="with --abort: roll back even if an overwrite may already have deleted old data")
    recover.add_argument("--threads", type=int, default=CommitterOptions().threads, help="parallel requests")
    recover.add_argument("--rate-limit", type=float, default=0.0, metavar="PER_SECOND",
                         help="at most this many Complete requests per second (0: unlimited)")
    recover.add_argument("--json", action="store_true", help="print the report as JSON")
    recover.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from s3commit.commit.recovery import recover

    if args.release_lease:
        return _release_lease(args)
    if args.force and not args.abort:
        raise UsageError("--force only applies to --abort")
    options = CommitterOptions(threads=args.threads, rate_limit=args.rate_limit)
    report = recover(cli_args.store_from_args(args), args.dest, args.job, abort=args.abort, force=args.force,
                     options=options)
    if args.json:
        print_json(report.to_dict())
    else:
        say(report.message)
        if report.journal_age_seconds is not None and not args.quiet:
            say(f"(the commit journal was written {format_age(report.journal_age_seconds)} ago by the "
                f"{report.committer} committer)")
    return EXIT_OK if report.changed else EXIT_NOTHING


def _release_lease(args: argparse.Namespace) -> int:
    from s3commit.commit.lease import release_by_hand

    if not args.yes:
        raise UsageError("--release-lease deletes the commit lease other jobs wait for: if its holder is alive, two "
                         "commits to the destination may then interleave. Check it with `s3commit show "
                         f"{args.dest}/__s3commit_lease`, then add --yes")
    holder = release_by_hand(cli_args.store_from_args(args), args.dest)
    if holder is None:
        raise NothingToDo(f"no commit lease is held on {args.dest}")
    say(f"released the commit lease on {args.dest}, held by {holder.describe()}")
    return EXIT_OK
