"""The ``s3commit`` command line: its parser, the dispatch to each command's module, and the mapping of errors
to exit codes (listed in :mod:`s3commit.cli`)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from s3commit.cli import doctor, recover, show, snapshot, uploads
from s3commit.cli.args import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOTHING,
    EXIT_USAGE,
    NothingToDo,
    UsageError,
    common_parser,
)
from s3commit.cli.output import error, say
from s3commit.errors import ConfigError, ManifestError, NotFoundError, S3CommitError

log = logging.getLogger("s3commit.cli")


# --- the parser -------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = common_parser()
    parser = argparse.ArgumentParser(
        prog="s3commit", description="Operate s3commit jobs, pending multipart uploads and manifests on S3.",
        epilog="Exit codes: 0 ok, 1 failed or refused, 2 usage or bad input, 3 nothing to do / not found, "
               "130 interrupted. `s3commit demo` and `s3commit bench` take their own options.")
    from s3commit._version import __version__

    parser.add_argument("--version", action="version", version=f"s3commit {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in (recover, uploads, show, snapshot, doctor):
        command.add_parser(commands, common)
    # Parsed by main() before argparse sees them, so every option reaches the delegate; listed for --help.
    commands.add_parser("demo", help="run s3commit.demo (its own options follow)", add_help=False)
    commands.add_parser("bench", help="run a clone's benchmarks/ (its own options follow)", add_help=False)
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
        error("interrupted")
        return EXIT_INTERRUPTED
    except NothingToDo as err:
        say(str(err), quiet=args.quiet)
        return EXIT_NOTHING
    except (UsageError, ConfigError, ManifestError) as err:
        error(str(err))
        return EXIT_USAGE
    except NotFoundError as err:  # no such object or bucket
        error(str(err))
        return EXIT_NOTHING
    except S3CommitError as err:
        error(str(err))
        return EXIT_FAILED
    except FileNotFoundError as err:  # a local file for `show`
        error(f"{err.filename}: no such file")
        return EXIT_NOTHING
    except OSError as err:
        error(f"{type(err).__name__}: {err}")
        return EXIT_FAILED


def _delegate(name: str, argv: list[str]) -> int:
    module_name = f"s3commit.{name}"
    if name == "bench":
        checkout = _checkout_with_benchmarks()
        if checkout is None:
            error("`s3commit bench` runs the benchmarks of a clone of s3commit (benchmarks/ is repository tooling, "
                  f"not installed): none was found at or above {Path.cwd()}; run it from a clone, or run "
                  "`python benchmarks/run.py` there")
            return EXIT_FAILED
        sys.path.insert(0, str(checkout))
        module_name = "benchmarks"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name == module_name:
            error(f"`s3commit {name}` is not available in this installation (no module {module_name})")
        else:
            error(f"`s3commit {name}` needs the module {err.name!r}, which is not installed "
                  f"(try: pip install 's3commit[bench]')")
        return EXIT_FAILED
    entry: Callable[[list[str]], int | None] = module.main
    return int(entry(argv) or 0)


def _checkout_with_benchmarks() -> Path | None:
    """The clone whose ``benchmarks/`` to run: the working directory or one above it, else the clone an editable
    install runs from."""
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents, Path(__file__).resolve().parents[2]):
        if (candidate / "benchmarks" / "run.py").is_file() and (candidate / "s3commit").is_dir():
            return candidate
    return None


def _configure_logging(verbose: int, quiet: bool) -> None:
    level = logging.ERROR if quiet else {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=logging.WARNING, format="s3commit: %(levelname)s: %(message)s")
    logging.getLogger("s3commit").setLevel(level)

