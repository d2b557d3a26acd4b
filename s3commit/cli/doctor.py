"""``s3commit doctor``: probe what a store honours and say what s3commit does about each answer.

The probe (:mod:`s3commit.store.probe`) runs afresh in a scratch prefix under the given location and refreshes the cache
jobs read (:mod:`s3commit.store.capability_cache`). Exit status 0: every committer feature is safe on this store; 1:
some is not (each named), or the store could not be probed.
"""

from __future__ import annotations

import argparse
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from s3commit.cli import args as cli_args
from s3commit.cli.args import EXIT_FAILED, EXIT_OK, uri_arg
from s3commit.cli.output import print_json, say


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    doctor = commands.add_parser(
        "doctor", parents=[common], help="probe what the store honours and what s3commit does about it",
        description="Ask the store, in a scratch prefix under the location (deleted afterwards), whether it honours "
                    "conditional writes, validates checksums, lists uploads...; print what s3commit does about each "
                    "answer. Exit status 0 when every committer feature is safe there, 1 when not.")
    doctor.add_argument("location", type=uri_arg, help="s3://bucket/prefix where jobs will write")
    doctor.add_argument("--checksum-algorithm", default="auto", metavar="NAME",
                        help="the checksum jobs send (fs.s3a.create.checksum.algorithm; default %(default)s: "
                             "CRC32C where awscrt is installed, else CRC32; none where the store validates no "
                             "checksum and its part ETags are MD5s, which s3commit then checks)")
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON")
    doctor.set_defaults(handler=run)


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the probe as Ctrl-C does: its scratch objects and uploads are removed first."""
    def interrupt(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args: argparse.Namespace) -> int:
    from s3commit.model.checksums import is_auto, normalise
    from s3commit.store.capability_cache import remember
    from s3commit.store.probe import probe

    algorithm = normalise(args.checksum_algorithm)
    store = cli_args.store_from_args(args)
    with _terminate_as_interrupt():
        found = probe(store, args.location.bucket, args.location.key)
    remember(found, max_age=store.options.capabilities_max_age)
    chosen = found.auto_checksum(algorithm) if is_auto(args.checksum_algorithm) else algorithm
    shown = chosen or ("none: auto sends none here, the parts' MD5 ETags are checked" if algorithm else "none")
    algorithm = chosen
    lost = found.lost_features(algorithm)
    if args.json:
        print_json({**found.to_dict(), "checksum_algorithm": algorithm or "none", "safe": not lost, "lost": lost,
                    "actions": {name: action for name, _request, _result, action in found.rows()}})
        return EXIT_OK if not lost else EXIT_FAILED
    say(f"s3commit doctor: {found.endpoint}, bucket {found.bucket} (checksum {shown})")
    rows = [("capability", "result", "what s3commit does"), *((n, r, a) for n, _q, r, a in found.rows())]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    for name, result, action in rows:
        say(f"  {name.ljust(widths[0])}  {result.ljust(widths[1])}  {action}")
    if lost:
        say("Not safe here: " + "; ".join(lost) + ".")
        return EXIT_FAILED
    say("Every committer feature is safe on this store.")
    return EXIT_OK
