"""The ``s3commit`` command: operate on jobs, pending uploads and manifests.

::

    s3commit recover s3://bucket/dest --job <uuid> [--abort] [--force] [--json]
    s3commit uploads list  s3://bucket/prefix [--older-than 2d] [--job <uuid>] [--json]
    s3commit uploads abort s3://bucket/prefix [--older-than 2d] [--job <uuid>] [--yes] [--dry-run] [--json]
    s3commit show s3://bucket/dest/_SUCCESS | ....pendingset | ....pending | <local file> [--json]
    s3commit doctor s3://bucket/prefix [--checksum-algorithm auto] [--json]
    s3commit demo ...      (delegates to s3commit.demo)
    s3commit bench ...     (delegates to benchmarks)

``python -m s3commit`` (or ``python -m s3commit.cli``) runs the same command where the script is not on the PATH.

Endpoint, region and credentials come from boto3's own resolution (environment, profiles, instance
roles), overridable with ``--endpoint-url`` and ``--region``. Credentials are never printed.

Exit codes (stable; scripts may rely on them):

==  =========================================================================================
0   success (``uploads list`` also when nothing matched; ``doctor``: every committer feature is safe there)
1   the operation failed, was refused (it would lose data) or was not confirmed; S3 errors; ``doctor``: a
    committer feature is not safe on this store
2   usage error or bad input: bad arguments, a bad URI, a corrupt or foreign manifest
3   nothing to do or not found: no journal to recover, no upload matched, no such object or bucket
130 interrupted (Ctrl-C)
==  =========================================================================================

Errors go to stderr as one line ``s3commit: error: <what failed, on which object, what state is left>``.

One module per command (:mod:`~s3commit.cli.recover`, :mod:`~s3commit.cli.uploads`, :mod:`~s3commit.cli.show`,
:mod:`~s3commit.cli.doctor`),
the parser and dispatch in :mod:`~s3commit.cli.app`, what they share in :mod:`~s3commit.cli.args` (arguments, the
store, exit codes) and :mod:`~s3commit.cli.output` (printing and formatting).

May import: :mod:`s3commit.committers` and every layer below it (the recovery engine is
:mod:`s3commit.commit.recovery`); ``demo`` and ``bench`` are delegated by name, never imported here.
"""

from s3commit.cli.app import build_parser, main
from s3commit.cli.args import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NOTHING, EXIT_OK, EXIT_USAGE
from s3commit.cli.output import format_age
from s3commit.config.values import parse_duration

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_NOTHING", "EXIT_OK", "EXIT_USAGE", "build_parser",
           "format_age", "main", "parse_duration"]
