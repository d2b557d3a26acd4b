"""``s3commit uploads list|abort|sweep``: the pending multipart uploads under a prefix, optionally only one job's
(:class:`~s3commit.commit.job_uploads.JobUploads`) or only old ones, listed or aborted in parallel with progress;
``list`` of a destination also says which jobs write there, alive or dead; ``sweep`` (:mod:`s3commit.cli.jobs`)
sweeps the dead ones."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from s3commit.cli import args as cli_args
from s3commit.cli import jobs
from s3commit.cli.args import (
    EXIT_FAILED,
    EXIT_NOTHING,
    EXIT_OK,
    NothingToDo,
    UsageError,
    duration_arg,
    job_arg,
    uri_arg,
)
from s3commit.cli.output import error, format_age, print_json, say
from s3commit.commit.sweep import job_statuses
from s3commit.errors import S3CommitError, short_upload_id
from s3commit.model.object_info import UploadInfo
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import run_each, window_for

PROGRESS_EVERY = 100
"""``uploads abort`` reports progress on stderr after this many aborts (and at least every few seconds)."""
PROGRESS_SECONDS = 5.0


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    uploads = commands.add_parser("uploads", help="list or abort pending multipart uploads",
                                  description="List or abort multipart uploads that were started and never "
                                              "completed or aborted (they are billed, and invisible in listings).")
    actions = uploads.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, help_text in (("list", "list pending uploads under a prefix"),
                            ("abort", "abort pending uploads under a prefix")):
        sub = actions.add_parser(name, parents=[common], help=help_text, description=help_text)
        sub.add_argument("uri", type=uri_arg,
                         help="s3://bucket/prefix: uploads of keys under prefix/ (never outside it)")
        sub.add_argument("--older-than", type=duration_arg, metavar="AGE",
                         help="only uploads started longer ago than AGE (90s, 30m, 12h, 2d, 1w)")
        sub.add_argument("--job", type=job_arg,
                         help="only uploads of this job, whose destination the prefix is: the key carries the job "
                              "id, or the job's directory there records the upload (bucket, key and id)")
        sub.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "abort":
            sub.add_argument("-y", "--yes", action="store_true",
                             help="do not ask for confirmation (required for a bucket-wide abort)")
            sub.add_argument("--dry-run", action="store_true", help="show what would be aborted; change nothing")
            sub.add_argument("--threads", type=int, default=16, help="parallel aborts (default %(default)s)")
        sub.set_defaults(handler=run_list if name == "list" else run_abort)
    jobs.add_sweep_parser(actions, common)



@dataclass(frozen=True)
class _Selection:
    uri: S3Uri
    uploads: list[UploadInfo]
    now: datetime

    def age(self, upload: UploadInfo) -> float | None:
        if upload.initiated is None:
            return None
        initiated = upload.initiated if upload.initiated.tzinfo else upload.initiated.replace(tzinfo=timezone.utc)
        return max(0.0, (self.now - initiated).total_seconds())

    def describe(self, args: argparse.Namespace) -> str:
        filters = []
        if args.older_than is not None:
            filters.append(f"older than {format_age(args.older_than)}")
        if args.job:
            filters.append(f"of job {args.job}")
        return f"under {self.uri}" + (f" ({', '.join(filters)})" if filters else "")

    def to_json(self, **extra: Any) -> dict[str, Any]:
        return {"uri": str(self.uri), "count": len(self.uploads), **extra, "uploads": [
            {"key": u.key, "upload_id": u.upload_id,
             "initiated": u.initiated.isoformat() if u.initiated else None, "age_seconds": self.age(u)}
            for u in self.uploads]}


def _select(store: S3Store, args: argparse.Namespace) -> _Selection:
    from s3commit.commit.job_uploads import JobUploads

    uri: S3Uri = args.uri
    prefix = uri.prefix
    store.head_bucket(uri.bucket)
    # With --job, the prefix is taken as the job's destination: its job directory holds the job's records.
    job = JobUploads(store, uri, args.job) if args.job else None
    records = job.read_records() if job is not None else None
    now = datetime.now(timezone.utc)
    selection = _Selection(uri, [], now)
    for upload in store.uploads.list_multipart_uploads(uri.bucket, prefix):
        if not upload.key.startswith(prefix):
            continue  # a store that ignores Prefix must not make us touch anything outside it
        if job is not None and records is not None and not job.belongs(upload, records):
            continue
        if args.older_than is not None:
            age = selection.age(upload)
            if age is None or age < args.older_than:
                continue  # an upload of unknown age is never "old enough"
        selection.uploads.append(upload)
    return selection


def _print_uploads(selection: _Selection) -> None:
    for upload in sorted(selection.uploads, key=lambda u: (u.initiated is None, u.initiated or selection.now)):
        started = upload.initiated.strftime("%Y-%m-%d %H:%M:%S") if upload.initiated else "?"
        print(f"{started}  {format_age(selection.age(upload)):>5}  {short_upload_id(upload.upload_id, width=16)}  "
              f"s3://{selection.uri.bucket}/{upload.key}")


def run_list(args: argparse.Namespace) -> int:
    store = cli_args.store_from_args(args)
    selection = _select(store, args)
    # A destination (not a whole bucket): which jobs write there, alive or dead, for the uploads listed.
    found = job_statuses(store, args.uri, liveness=jobs.DEFAULT_LIVENESS) if args.uri.key else []
    if args.json:
        print_json(selection.to_json(**(jobs.jobs_json(store, args.uri, found) if found else {})))
        return EXIT_OK
    if not selection.uploads:
        say(f"no pending uploads {selection.describe(args)}")
    else:
        _print_uploads(selection)
        ages = [a for u in selection.uploads if (a := selection.age(u)) is not None]
        oldest = f" (oldest started {format_age(max(ages))} ago)" if ages else ""
        say(f"{len(selection.uploads)} pending uploads {selection.describe(args)}{oldest}", quiet=args.quiet)
    if found:
        say("\n".join(jobs.jobs_lines(store, args.uri, found)), quiet=args.quiet)
    return EXIT_OK


def _confirm(question: str) -> bool:
    stdin = sys.stdin
    if stdin is None or not stdin.isatty():
        raise UsageError("refusing to abort uploads without confirmation: stdin is not a terminal; pass --yes")
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    return stdin.readline().strip().lower() in ("y", "yes")


class Progress:
    """Progress of a long run on stderr: every ``every`` items and at least every ``seconds``."""

    def __init__(self, total: int, *, quiet: bool, every: int = PROGRESS_EVERY,
                 seconds: float = PROGRESS_SECONDS) -> None:
        self.total, self.quiet, self.every, self.seconds = total, quiet, every, seconds
        self.done = self.failed = 0
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def step(self, ok: bool) -> None:
        with self._lock:
            self.done += 1
            self.failed += 0 if ok else 1
            now = time.monotonic()
            due = self.done % self.every == 0 or now - self._last >= self.seconds
            if due and self.done < self.total and not self.quiet:
                self._last = now
                print(f"aborted {self.done - self.failed}/{self.total} uploads"
                      + (f" ({self.failed} failed)" if self.failed else "") + " ...", file=sys.stderr, flush=True)


def _abort_all(store: S3Store, bucket: str, uploads: Iterable[UploadInfo], *, threads: int,
               progress: Progress) -> list[tuple[UploadInfo, BaseException]]:
    """Abort every upload on ``threads`` threads; return the ones S3 refused, with why."""

    def abort(upload: UploadInfo) -> None:
        try:
            store.uploads.abort_multipart_upload(bucket, upload.key, upload.upload_id)
        except S3CommitError:
            progress.step(False)
            raise
        progress.step(True)

    with ThreadPoolExecutor(max(1, threads), thread_name_prefix="s3commit-abort") as pool:
        failures = run_each(pool, uploads, abort, window=window_for(threads))
    for failure in failures:
        if not isinstance(failure.error, S3CommitError):
            raise failure.error  # a bug, not a refusal by S3
    return [(f.item, f.error) for f in failures]


def run_abort(args: argparse.Namespace) -> int:
    uri: S3Uri = args.uri
    if not uri.key and not args.yes:
        raise UsageError(f"refusing to abort pending uploads in the whole bucket {uri.bucket!r}: give a prefix "
                         f"(s3://{uri.bucket}/path) or pass --yes")
    store = cli_args.store_from_args(args)
    selection = _select(store, args)
    what = selection.describe(args)
    if not selection.uploads:
        if args.json:
            print_json(selection.to_json(aborted=0, failed=0, dry_run=args.dry_run))
            return EXIT_NOTHING
        raise NothingToDo(f"no pending uploads {what}: nothing to abort")
    if args.dry_run:
        if args.json:
            print_json(selection.to_json(aborted=0, failed=0, dry_run=True))
        else:
            _print_uploads(selection)
            say(f"dry run: would abort {len(selection.uploads)} pending uploads {what}")
        return EXIT_OK
    if not args.yes:
        if args.older_than is None and not args.job:
            print("warning: without --older-than or --job this also aborts uploads of jobs running right now",
                  file=sys.stderr)
        if not _confirm(f"abort {len(selection.uploads)} pending uploads {what}?"):
            error("not confirmed; nothing was aborted")
            return EXIT_FAILED
    progress = Progress(len(selection.uploads), quiet=args.quiet or args.json)
    failures = _abort_all(store, uri.bucket, selection.uploads, threads=args.threads, progress=progress)
    aborted = len(selection.uploads) - len(failures)
    if args.json:
        print_json(selection.to_json(aborted=aborted, failed=len(failures), dry_run=False,
                                      failures=[{"key": u.key, "upload_id": u.upload_id, "error": str(e)}
                                                for u, e in failures]))
    else:
        say(f"aborted {aborted} pending uploads {what}" + (f"; {len(failures)} failed" if failures else ""),
             quiet=args.quiet)
        for upload, err in failures[:10]:
            error(f"could not abort s3://{uri.bucket}/{upload.key}: {err}")
    return EXIT_FAILED if failures else EXIT_OK
