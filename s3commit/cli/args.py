"""What the ``s3commit`` commands share on the way in: exit codes, argument types, the S3 connection options and
the store they build, and the two errors that are not failures of S3."""

from __future__ import annotations

import argparse

from s3commit.config.options import RetryPolicy, StoreOptions
from s3commit.config.values import parse_duration
from s3commit.errors import ConfigError, S3CommitError
from s3commit.model.paths import check_job_id
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOTHING = 3
EXIT_INTERRUPTED = 130


class UsageError(S3CommitError):
    """A command line that cannot be run as given (exit code 2)."""


class NothingToDo(S3CommitError):
    """Nothing matched or nothing needed doing (exit code 3)."""


def duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def job_arg(text: str) -> str:
    try:
        return check_job_id(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def uri_arg(text: str) -> S3Uri:
    try:
        return S3Uri.parse(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def common_parser() -> argparse.ArgumentParser:
    """The options every S3 command takes: the connection, verbosity."""
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
    return common


def store_from_args(args: argparse.Namespace) -> S3Store:
    """The store the connection options describe."""
    if args.max_attempts < 1:
        raise UsageError(f"--max-attempts must be >= 1, got {args.max_attempts}")
    path_style = args.path_style if args.path_style is not None else bool(args.endpoint_url)
    return S3Store(StoreOptions(endpoint_url=args.endpoint_url, region=args.region, path_style=path_style,
                                retry=RetryPolicy(max_attempts=args.max_attempts)))
