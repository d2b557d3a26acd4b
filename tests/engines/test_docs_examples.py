"""The examples of docs/python.md run as written, against the test server (endpoint and credentials from the
environment, as boto3 resolves them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("dask.dataframe")

DOC = Path(__file__).resolve().parents[2] / "docs" / "python.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_doc_has_an_example_per_engine():
    assert len(EXAMPLES) == 3
    assert all(f"s3commit.{engine}" in example
               for engine, example in zip(("arrow", "dask", "ray"), EXAMPLES, strict=True))


@pytest.mark.parametrize("example", [
    pytest.param(EXAMPLES[0], id="pandas"), pytest.param(EXAMPLES[1], id="dask"),
    pytest.param(EXAMPLES[2], id="ray", marks=pytest.mark.slow)])
def test_an_example_runs_and_commits(example, s3_env, s3_server, s3_client, capsys):
    if "docs-examples" not in [b["Name"] for b in s3_client.list_buckets()["Buckets"]]:
        s3_server.create_bucket("docs-examples")
    exec(compile(example, str(DOC), "exec"), {})
    assert "files committed" in capsys.readouterr().out
