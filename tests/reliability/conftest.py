"""Fixtures of the reliability tests: the CLI run in-process, and the tally printed at the end of the run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from s3commit import cli


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(s3_server, s3_env, capsys) -> Callable[..., CliResult]:
    """Run ``s3commit <args>`` in this process against the test server; returns exit code, stdout, stderr.

    Credentials and region come from the environment (``s3_env``), the endpoint from ``--endpoint-url``,
    as an operator would pass them.
    """

    def run(*args: str, endpoint: bool = True) -> CliResult:
        capsys.readouterr()
        argv = [*args, "--endpoint-url", s3_server.endpoint_url, "--max-attempts", "3"] if endpoint else list(args)
        code = cli.main(argv)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def tally(request) -> Counter[str]:
    """Counts the reliability tests report at the end of the run (jobs, faults, crashes, orphans...)."""
    counts: Counter[str] | None = getattr(request.config, "_s3commit_reliability_tally", None)
    if counts is None:
        counts = Counter()
        request.config._s3commit_reliability_tally = counts  # type: ignore[attr-defined]
    return counts


def pytest_terminal_summary(terminalreporter, config) -> None:
    counts = getattr(config, "_s3commit_reliability_tally", None)
    if counts:
        terminalreporter.write_sep("-", "reliability tally")
        for name, value in sorted(counts.items()):
            terminalreporter.write_line(f"{name}: {value}")
