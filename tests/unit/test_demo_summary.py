"""The demo's summary (``s3commit.demo.report``) with S3A's magic committer beside and without it, and the choice of
whether S3A is shown (``s3commit.demo.spark_engine.s3a_plan``: ``--peers``), without a JVM."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from s3commit import demo
from s3commit.demo import s3a, spark_engine
from s3commit.demo.measure import RunReport
from s3commit.demo.report import print_report
from s3commit.demo.s3a_write import LABEL


def report(label: str, tasks: float, commit: float, requests: dict[str, int], copied: int = 0) -> RunReport:
    run = RunReport(label, files=4, bytes=4_000_000, bytes_copied=copied, requests=requests)
    run.phases = {"tasks (write)": tasks, "job commit": commit}
    run.success = {"committer": "magic", "filenames": [f"day=01/part-{i}" for i in range(4)],
                   "metrics": {"committer_commits_completed": 4}}
    return run


MAGIC = report("magic", 2.0, 0.5, {"CompleteMultipartUpload": 4, "UploadPart": 4})
V1 = report("FileOutputCommitter-v1", 2.5, 5.0, {"CopyObject": 8, "PutObject": 4}, copied=8_000_000)
S3A = report(LABEL, 6.0, 1.5, {"CompleteMultipartUpload": 4, "HeadObject": 40, "UploadPart": 4})


def summary(reports: list[RunReport], notes: list[str] | None = None) -> str:
    out = io.StringIO()
    print_report(reports, notes=notes or [], out=out)
    return out.getvalue()


def test_summary_with_s3a_shows_its_column_and_compares_magic_with_each_other_write():
    text = summary([MAGIC, V1, S3A])
    assert re.search(rf"^ +magic +FileOutputCommitter-v1 +{LABEL}$", text, re.M)
    assert re.search(r"^  job commit +0\.50 +5\.00 +1\.50$", text, re.M)
    assert re.search(r"^  total +2\.50 +7\.50 +7\.50$", text, re.M)
    assert re.search(r"^  HeadObject +0 +0 +40$", text, re.M)
    assert re.search(r"^  CompleteMultipartUpload +4 +0 +4$", text, re.M)
    assert f"{LABEL}: 4 files, 4.0 MB written, 0.0 MB copied server-side" in text
    assert "job commit: magic 0.50s vs FileOutputCommitter-v1 5.00s (10.0x); whole write 3.0x" in text
    assert f"job commit: magic 0.50s vs {LABEL} 1.50s (3.0x); whole write 3.0x" in text
    assert f"_SUCCESS of the {LABEL} job:" in text
    assert "not shown" not in text


def test_summary_without_s3a_says_in_one_line_how_to_get_it():
    text = summary([MAGIC, V1], [spark_engine.NOT_SHOWN])
    assert LABEL not in text
    assert re.search(r"^  job commit +0\.50 +5\.00$", text, re.M)
    shown = [line for line in text.splitlines() if "not shown" in line]
    assert shown == [spark_engine.NOT_SHOWN]
    assert "`s3commit demo --peers s3a`" in shown[0] and "S3A's magic committer" in shown[0]


JARS = [Path("/cache/hadoop-aws.jar")]


def test_peers_none_shows_nothing_and_says_nothing(monkeypatch):
    monkeypatch.setattr(s3a, "cached_s3a_jars", lambda: pytest.fail("looked for the jars"))
    assert spark_engine.s3a_plan("none", embedded=True) == (None, None)


def test_peers_auto_uses_cached_jars_only(monkeypatch):
    monkeypatch.setattr(s3a, "s3a_jars", lambda: pytest.fail("resolved the jars without --peers s3a"))
    monkeypatch.setattr(s3a, "cached_s3a_jars", lambda: JARS)
    assert spark_engine.s3a_plan("auto", embedded=True) == (JARS, None)
    monkeypatch.setattr(s3a, "cached_s3a_jars", lambda: None)
    assert spark_engine.s3a_plan("auto", embedded=True) == (None, spark_engine.NOT_SHOWN)


def test_peers_s3a_resolves_the_jars_once_when_not_cached(monkeypatch):
    resolved = []
    monkeypatch.setattr(s3a, "cached_s3a_jars", lambda: None)
    monkeypatch.setattr(s3a, "s3a_cache_dir", lambda: Path("/cache"))
    monkeypatch.setattr(s3a, "s3a_jars", lambda: resolved.append(1) or JARS)
    assert spark_engine.s3a_plan("s3a", embedded=True) == (JARS, None)
    assert resolved == [1]
    monkeypatch.setattr(s3a, "cached_s3a_jars", lambda: JARS)
    assert spark_engine.s3a_plan("s3a", embedded=True) == (JARS, None)
    assert resolved == [1]


def test_s3a_not_shown_says_why(monkeypatch):
    def unsupported() -> None:
        raise s3a.S3AJarsError("no S3A jars are known for Hadoop 9.9.9")

    monkeypatch.setattr(s3a, "cached_s3a_jars", unsupported)
    jars, note = spark_engine.s3a_plan("auto", embedded=True)
    assert jars is None and note == "S3A's magic committer is not shown: no S3A jars are known for Hadoop 9.9.9"
    jars, note = spark_engine.s3a_plan("auto", embedded=False)
    assert jars is None and note is not None and "embedded S3 only" in note


@pytest.mark.parametrize(("args", "said"), [
    (["--peers", "s3a", "--bucket", "b"], "--peers s3a writes beside on the embedded S3 only"),
    (["--peers", "s3a", "--engine", "python"], "--peers s3a needs the Spark engine"),
])
def test_peers_s3a_refuses_what_it_cannot_do(args, said, capsys):
    with pytest.raises(SystemExit) as exited:
        demo.main(args)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err


def test_a_spark_writes_phases_take_its_job_commit_from_spark_and_the_rest_outside_the_tasks_apart():
    from s3commit.demo.measure import SETUP_AND_DRIVER, spark_duration, write_phases

    phases = write_phases(3.0, 2.0, 0.4)
    assert phases == {"tasks (write)": 2.0, "job commit": 0.4, SETUP_AND_DRIVER: pytest.approx(0.6)}
    assert sum(phases.values()) == pytest.approx(3.0)  # the whole write, nothing counted twice
    # no metric (a Spark that does not measure it): everything outside the tasks, as before
    assert write_phases(3.0, 2.0, None) == {"tasks (write)": 2.0, "job commit": 1.0}
    # the commit never exceeds the time outside the tasks (the two clocks differ by milliseconds)
    assert write_phases(3.0, 2.0, 1.2)["job commit"] == pytest.approx(1.0)
    # Spark's own printing of a driver-side duration (Utils.msDurationToString)
    assert [spark_duration(text) for text in ("51 ms", "12.3 s", "2.1 m", "1.05 h")] == \
        pytest.approx([0.051, 12.3, 126.0, 3780.0])
    assert spark_duration("total (min, med, max)\n5 ms (1 ms, 2 ms, 2 ms)") is None


def test_the_summary_shows_the_phase_outside_the_tasks_and_the_job_commit():
    from s3commit.demo.measure import SETUP_AND_DRIVER

    magic = report("magic", 2.0, 0.4, {"CompleteMultipartUpload": 4})
    magic.phases[SETUP_AND_DRIVER] = 0.3
    v1 = report("FileOutputCommitter-v1", 2.5, 5.0, {"CopyObject": 8})
    v1.phases[SETUP_AND_DRIVER] = 0.3
    text = summary([magic, v1])
    assert re.search(r"^  setup, driver +0\.30 +0\.30$", text, re.M)
    assert re.search(r"^  total +2\.70 +7\.80$", text, re.M)
    assert "job commit: magic 0.40s vs FileOutputCommitter-v1 5.00s (12.5x)" in text
