"""The ``s3commit`` command: operate on jobs, pending uploads and manifests.

::

    s3commit recover s3://bucket/dest --job <uuid> [--abort] [--force] [--json]
    s3commit uploads list  s3://bucket/prefix [--older-than 2d] [--job <uuid>] [--json]
    s3commit uploads abort s3://bucket/prefix [--older-than 2d] [--job <uuid>] [--yes] [--dry-run] [--json]
    s3commit show s3://bucket/dest/_SUCCESS | ....pendingset | ....pending | <local file> [--json]
    s3commit demo ...      (delegates to s3commit.demo)
    s3commit bench ...     (delegates to s3commit.bench)

Endpoint, region and credentials come from boto3's own resolution (environment, profiles, instance
roles), overridable with ``--endpoint-url`` and ``--region``. Credentials are never printed.

Exit codes (stable; scripts may rely on them):

==  =========================================================================================
0   success (``uploads list`` also when nothing matched)
1   the operation failed, was refused (it would lose data) or was not confirmed; S3 errors
2   usage error or bad input: bad arguments, a bad URI, a corrupt or foreign manifest
3   nothing to do or not found: no journal to recover, no upload matched, no such object or bucket
130 interrupted (Ctrl-C)
==  =========================================================================================

Errors go to stderr as one line ``s3commit: error: <what failed, on which object, what state is left>``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TextIO

from s3commit.cli_show import short_id as _short_id
from s3commit.config import CommitterOptions, RetryPolicy, StoreOptions
from s3commit.errors import ConfigError, ManifestError, NotFoundError, S3CommitError
from s3commit.paths import check_job_id
from s3commit.store import S3Store, UploadInfo
from s3commit.uri import S3Uri

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOTHING = 3
EXIT_INTERRUPTED = 130

PROGRESS_EVERY = 100
"""``uploads abort`` reports progress on stderr after this many aborts (and at least every few seconds)."""
PROGRESS_SECONDS = 5.0

log = logging.getLogger("s3commit.cli")

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class UsageError(S3CommitError):
    """A command line that cannot be run as given (exit code 2)."""


class NothingToDo(S3CommitError):
    """Nothing matched or nothing needed doing (exit code 3)."""


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``2d``, ``1w``, ``1d12h`` -> seconds.

    Raises:
        ConfigError: not a duration.
    """
    value = str(text).strip().lower()
    pos, total = 0, 0.0
    for match in _DURATION.finditer(value):
        if value[pos:match.start()].strip():
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not value or pos == 0 or value[pos:].strip():
        raise ConfigError(f"{text!r} is not a duration (examples: 90s, 30m, 12h, 2d, 1w, 1d12h)")
    return total


def format_age(seconds: float | None) -> str:
    """A short human age: ``45s``, ``12m``, ``5h``, ``3d``."""
    if seconds is None:
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def _duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _job_arg(text: str) -> str:
    try:
        return check_job_id(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _uri_arg(text: str) -> S3Uri:
    try:
        return S3Uri.parse(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


# --- the parser -------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("S3 connection (default: boto3's resolution: environment, profile, role)")
    group.add_argument("--endpoint-url", help="S3 endpoint URL (e.g. http://127.0.0.1:9000 for a local store)")
    group.add_argument("--region", help="AWS region")
    group.add_argument("--path-style", action=argparse.BooleanOptionalAction, default=None,
                       help="path-style addressing (default: on when --endpoint-url is given)")
    group.add_argument("--max-attempts", type=int, default=RetryPolicy().max_attempts, metavar="N",
                       help="attempts per S3 request (retries with backoff; default %(default)s)")
    common.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv: debug)")
    common.add_argument("-q", "--quiet", action="store_true", help="only errors on stderr (no progress)")

    parser = argparse.ArgumentParser(
        prog="s3commit", description="Operate s3commit jobs, pending multipart uploads and manifests on S3.",
        epilog="Exit codes: 0 ok, 1 failed or refused, 2 usage or bad input, 3 nothing to do / not found, "
               "130 interrupted. `s3commit demo` and `s3commit bench` take their own options.")
    from s3commit import __version__

    parser.add_argument("--version", action="version", version=f"s3commit {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    recover = commands.add_parser(
        "recover", parents=[common], help="finish or roll back an interrupted job commit",
        description="Finish (default) or roll back (--abort) a job commit that was interrupted after it wrote "
                    "its journal. Run it only once the job's driver is gone. Idempotent.")
    recover.add_argument("dest", type=_uri_arg, help="the job's destination, s3://bucket/path")
    recover.add_argument("--job", required=True, type=_job_arg, help="the job id (UUID)")
    recover.add_argument("--abort", action="store_true", help="roll back instead of finishing")
    recover.add_argument("--force", action="store_true",
                         help="with --abort: roll back even if an overwrite may already have deleted old data")
    recover.add_argument("--threads", type=int, default=CommitterOptions().threads, help="parallel requests")
    recover.add_argument("--rate-limit", type=float, default=0.0, metavar="PER_SECOND",
                         help="at most this many Complete requests per second (0: unlimited)")
    recover.add_argument("--json", action="store_true", help="print the report as JSON")
    recover.set_defaults(handler=_cmd_recover)

    uploads = commands.add_parser("uploads", help="list or abort pending multipart uploads",
                                  description="List or abort multipart uploads that were started and never "
                                              "completed or aborted (they are billed, and invisible in listings).")
    actions = uploads.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, help_text in (("list", "list pending uploads under a prefix"),
                            ("abort", "abort pending uploads under a prefix")):
        sub = actions.add_parser(name, parents=[common], help=help_text, description=help_text)
        sub.add_argument("uri", type=_uri_arg,
                         help="s3://bucket/prefix: uploads of keys under prefix/ (never outside it)")
        sub.add_argument("--older-than", type=_duration_arg, metavar="AGE",
                         help="only uploads started longer ago than AGE (90s, 30m, 12h, 2d, 1w)")
        sub.add_argument("--job", type=_job_arg,
                         help="only uploads of this job, whose destination the prefix is: the key carries the job "
                              "id, or the job's directory there records the upload (bucket, key and id)")
        sub.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "abort":
            sub.add_argument("-y", "--yes", action="store_true",
                             help="do not ask for confirmation (required for a bucket-wide abort)")
            sub.add_argument("--dry-run", action="store_true", help="show what would be aborted; change nothing")
            sub.add_argument("--threads", type=int, default=16, help="parallel aborts (default %(default)s)")
        sub.set_defaults(handler=_cmd_uploads_list if name == "list" else _cmd_uploads_abort)

    show = commands.add_parser(
        "show", parents=[common], help="show a _SUCCESS, .pendingset, .pending or commit journal",
        description="Show a manifest: s3://bucket/key or a local file. Human summary by default.")
    show.add_argument("target", help="s3://bucket/key of the manifest, or a local file path")
    show.add_argument("--json", action="store_true", help="print the parsed manifest as JSON")
    show.set_defaults(handler=_cmd_show)

    for name, module in (("demo", "s3commit.demo"), ("bench", "s3commit.bench")):
        # Parsed by main() before argparse sees them, so every option reaches the delegate; listed for --help.
        commands.add_parser(name, help=f"run {module} (its own options follow)", add_help=False)
    return parser


# --- entry point ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in ("demo", "bench"):
        return _delegate(args_list[0], args_list[1:])
    parser = build_parser()
    args = parser.parse_args(args_list)
    logger = logging.getLogger("s3commit")
    saved_level = logger.level  # restored on return: main() may run inside a longer-lived process (tests)
    _configure_logging(args.verbose, args.quiet)
    try:
        return _run(args)
    finally:
        logger.setLevel(saved_level)


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except NothingToDo as err:
        _say(str(err), quiet=args.quiet)
        return EXIT_NOTHING
    except (UsageError, ConfigError, ManifestError) as err:
        _error(str(err))
        return EXIT_USAGE
    except NotFoundError as err:  # no such object or bucket
        _error(str(err))
        return EXIT_NOTHING
    except S3CommitError as err:
        _error(str(err))
        return EXIT_FAILED
    except FileNotFoundError as err:  # a local file for `show`
        _error(f"{err.filename}: no such file")
        return EXIT_NOTHING
    except OSError as err:
        _error(f"{type(err).__name__}: {err}")
        return EXIT_FAILED


def _delegate(name: str, argv: list[str]) -> int:
    module_name = f"s3commit.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name == module_name:
            _error(f"`s3commit {name}` is not available in this installation (no module {module_name})")
        else:
            _error(f"`s3commit {name}` needs the module {err.name!r}, which is not installed "
                   f"(try: pip install 's3commit[bench]')")
        return EXIT_FAILED
    entry: Callable[[list[str]], int | None] = module.main
    return int(entry(argv) or 0)


def _configure_logging(verbose: int, quiet: bool) -> None:
    level = logging.ERROR if quiet else {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=logging.WARNING, format="s3commit: %(levelname)s: %(message)s")
    logging.getLogger("s3commit").setLevel(level)


def _error(message: str) -> None:
    print(f"s3commit: error: {message}", file=sys.stderr)


def _say(message: str, *, quiet: bool = False, stream: TextIO | None = None) -> None:
    if not quiet:
        print(message, file=stream or sys.stdout)


def _store(args: argparse.Namespace) -> S3Store:
    if args.max_attempts < 1:
        raise UsageError(f"--max-attempts must be >= 1, got {args.max_attempts}")
    path_style = args.path_style if args.path_style is not None else bool(args.endpoint_url)
    return S3Store(StoreOptions(endpoint_url=args.endpoint_url, region=args.region, path_style=path_style,
                                retry=RetryPolicy(max_attempts=args.max_attempts)))


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


# --- recover ----------------------------------------------------------------------------------------


def _cmd_recover(args: argparse.Namespace) -> int:
    from s3commit.recover import recover

    if args.force and not args.abort:
        raise UsageError("--force only applies to --abort")
    options = CommitterOptions(threads=args.threads, rate_limit=args.rate_limit)
    report = recover(_store(args), args.dest, args.job, abort=args.abort, force=args.force, options=options)
    if args.json:
        _print_json(report.to_dict())
    else:
        _say(report.message)
        if report.journal_age_seconds is not None and not args.quiet:
            _say(f"(the commit journal was written {format_age(report.journal_age_seconds)} ago by the "
                 f"{report.committer} committer)")
    return EXIT_OK if report.changed else EXIT_NOTHING


# --- uploads ----------------------------------------------------------------------------------------


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
    from s3commit.job_uploads import JobUploads

    uri: S3Uri = args.uri
    prefix = uri.prefix
    store.head_bucket(uri.bucket)
    # With --job, the prefix is taken as the job's destination: its job directory holds the job's records.
    job = JobUploads(store, uri, args.job) if args.job else None
    records = job.read_records() if job is not None else None
    now = datetime.now(timezone.utc)
    selection = _Selection(uri, [], now)
    for upload in store.list_multipart_uploads(uri.bucket, prefix):
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
        print(f"{started}  {format_age(selection.age(upload)):>5}  {_short_id(upload.upload_id)}  "
              f"s3://{selection.uri.bucket}/{upload.key}")


def _cmd_uploads_list(args: argparse.Namespace) -> int:
    selection = _select(_store(args), args)
    if args.json:
        _print_json(selection.to_json())
        return EXIT_OK
    if not selection.uploads:
        _say(f"no pending uploads {selection.describe(args)}")
        return EXIT_OK
    _print_uploads(selection)
    ages = [a for u in selection.uploads if (a := selection.age(u)) is not None]
    oldest = f" (oldest started {format_age(max(ages))} ago)" if ages else ""
    _say(f"{len(selection.uploads)} pending uploads {selection.describe(args)}{oldest}", quiet=args.quiet)
    return EXIT_OK


def _confirm(question: str) -> bool:
    stdin = sys.stdin
    if stdin is None or not stdin.isatty():
        raise UsageError("refusing to abort uploads without confirmation: stdin is not a terminal; pass --yes")
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    return stdin.readline().strip().lower() in ("y", "yes")


class _Progress:
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
               progress: _Progress) -> list[tuple[UploadInfo, BaseException]]:
    failures: list[tuple[UploadInfo, BaseException]] = []

    def abort(upload: UploadInfo) -> None:
        try:
            store.abort_multipart_upload(bucket, upload.key, upload.upload_id)
        except S3CommitError as err:
            failures.append((upload, err))
            progress.step(False)
        else:
            progress.step(True)

    with ThreadPoolExecutor(max(1, threads), thread_name_prefix="s3commit-abort") as pool:
        for future in [pool.submit(abort, u) for u in uploads]:
            future.result()
    return failures


def _cmd_uploads_abort(args: argparse.Namespace) -> int:
    uri: S3Uri = args.uri
    if not uri.key and not args.yes:
        raise UsageError(f"refusing to abort pending uploads in the whole bucket {uri.bucket!r}: give a prefix "
                         f"(s3://{uri.bucket}/path) or pass --yes")
    store = _store(args)
    selection = _select(store, args)
    what = selection.describe(args)
    if not selection.uploads:
        if args.json:
            _print_json(selection.to_json(aborted=0, failed=0, dry_run=args.dry_run))
            return EXIT_NOTHING
        raise NothingToDo(f"no pending uploads {what}: nothing to abort")
    if args.dry_run:
        if args.json:
            _print_json(selection.to_json(aborted=0, failed=0, dry_run=True))
        else:
            _print_uploads(selection)
            _say(f"dry run: would abort {len(selection.uploads)} pending uploads {what}")
        return EXIT_OK
    if not args.yes:
        if args.older_than is None and not args.job:
            print("warning: without --older-than or --job this also aborts uploads of jobs running right now",
                  file=sys.stderr)
        if not _confirm(f"abort {len(selection.uploads)} pending uploads {what}?"):
            _error("not confirmed; nothing was aborted")
            return EXIT_FAILED
    progress = _Progress(len(selection.uploads), quiet=args.quiet or args.json)
    failures = _abort_all(store, uri.bucket, selection.uploads, threads=args.threads, progress=progress)
    aborted = len(selection.uploads) - len(failures)
    if args.json:
        _print_json(selection.to_json(aborted=aborted, failed=len(failures), dry_run=False,
                                      failures=[{"key": u.key, "upload_id": u.upload_id, "error": str(e)}
                                                for u, e in failures]))
    else:
        _say(f"aborted {aborted} pending uploads {what}" + (f"; {len(failures)} failed" if failures else ""),
             quiet=args.quiet)
        for upload, err in failures[:10]:
            _error(f"could not abort s3://{uri.bucket}/{upload.key}: {err}")
    return EXIT_FAILED if failures else EXIT_OK


# --- show -------------------------------------------------------------------------------------------


def _cmd_show(args: argparse.Namespace) -> int:
    from s3commit.cli_show import show

    target: str = args.target
    if "://" in target:
        uri = S3Uri.parse(target)
        if not uri.key:
            raise UsageError(f"{target} names a bucket, not a manifest object")
        source, data = str(uri), _store(args).get_object(uri.bucket, uri.key)
    else:
        with open(target, "rb") as f:
            source, data = target, f.read()
    print(show(source, data, as_json=args.json))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
