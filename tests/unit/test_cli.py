"""The ``s3commit`` command line without S3: argument checks, exit codes, durations, ``show`` of local
manifests, ``uploads`` filtering against a fake store, delegation of ``demo``/``bench``."""

from __future__ import annotations

import importlib
import io
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from s3commit import cli
from s3commit.cli import args as cli_args
from s3commit.cli.uploads import Progress
from s3commit.errors import ConfigError
from s3commit.model.manifests import CommitJournal
from s3commit.model.object_info import UploadInfo

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_python_dash_m_s3commit_runs_the_command():
    root = str(Path(cli.__file__).resolve().parents[2])  # this checkout's s3commit, first on the path
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "s3commit", "--help"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: s3commit ") and "recover" in done.stdout


# --- durations ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("30m", 1800), ("12h", 43200), ("2d", 172800), ("1w", 604800), ("1d12h", 129600),
    ("1.5h", 5400), (" 2D ", 172800),
])
def test_durations_are_parsed_into_seconds(text, seconds):
    assert cli.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2", "d", "2x", "2 days", "-1d", "1d junk"])
def test_a_string_that_is_not_a_duration_is_refused_with_examples(text):
    with pytest.raises(ConfigError, match=r"is not a duration \(examples: 90s, 30m, 12h, 2d"):
        cli.parse_duration(text)


def test_ages_are_shown_in_their_largest_unit():
    assert [cli.format_age(s) for s in (5, 125, 7200, 3 * 86400, None)] == ["5s", "2m", "2h", "3d", "?"]


# --- usage errors: exit code 2, before any S3 request ----------------------------------------------------


@pytest.mark.parametrize(("argv", "words"), [
    (["recover", "s3://b/out"], "one of the arguments --job --release-lease is required"),
    (["recover", "s3://b/out", "--job", "../x"], "job id '../x' must be"),
    (["uploads", "list", "hdfs://nn/path"], "valid schemes are: s3, s3a"),
    (["uploads", "list", "s3://b/p", "--older-than", "soon"], "'soon' is not a duration"),
    (["uploads"], "required: ACTION"),
    ([], "required: COMMAND"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_bad_command_lines_exit_with_code_2_and_say_why(argv, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert words in capsys.readouterr().err


def test_force_without_abort_is_a_usage_error(capsys):
    code, _, err = run(capsys, "recover", "s3://b/out", "--job", "j1", "--force")
    assert code == cli.EXIT_USAGE
    assert "--force only applies to --abort" in err


def test_a_bucket_wide_abort_is_refused_without_yes(capsys, monkeypatch):
    monkeypatch.setattr(cli_args, "store_from_args", lambda args: pytest.fail("no S3 request may be made"))
    code, _, err = run(capsys, "uploads", "abort", "s3://bucket")
    assert code == cli.EXIT_USAGE
    assert "refusing to abort pending uploads in the whole bucket 'bucket': give a prefix" in err


def test_version_and_help_state_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "Exit codes: 0 ok, 1 failed or refused, 2 usage or bad input, 3 nothing to do" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.startswith("s3commit ")


# --- show, on local files --------------------------------------------------------------------------------


def test_show_summarises_a_success_marker(capsys):
    code, out, _ = run(capsys, "show", str(GOLDEN / "_SUCCESS"))
    assert code == 0
    assert "committer   magic" in out
    assert "job id      0b5c2f7e-1a2b-4c3d-9e8f-001122334455 (spark.sql.sources.writeJobUUID)" in out
    assert "on driver-1" in out


def test_show_json_of_a_success_marker_is_the_validated_manifest(capsys):
    code, out, _ = run(capsys, "show", str(GOLDEN / "_SUCCESS"), "--json")
    data = json.loads(out)
    assert code == 0 and data["kind"] == "success"
    assert data["manifest"]["jobId"] == "0b5c2f7e-1a2b-4c3d-9e8f-001122334455"
    assert data["manifest"]["name"] == "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"


def test_show_lists_a_pendingsets_uploads(capsys):
    code, out, _ = run(capsys, "show", str(GOLDEN / "task.pendingset"))
    assert code == 0
    assert out.startswith("pendingset ")
    assert "uploads       " in out and "parts, upload " in out


def test_show_describes_a_pending_upload(capsys):
    code, out, _ = run(capsys, "show", str(GOLDEN / "magic.pending"), "--json")
    data = json.loads(out)
    assert code == 0 and data["kind"] == "pending"
    assert data["manifest"]["version"] == 2


def test_show_recognises_a_manifest_by_content_whatever_its_name(capsys, tmp_path):
    copy = tmp_path / "downloaded.json"
    copy.write_bytes((GOLDEN / "task.pendingset").read_bytes())
    code, out, _ = run(capsys, "show", str(copy), "--json")
    assert code == 0 and json.loads(out)["kind"] == "pendingset"


def test_show_explains_a_zero_byte_success_marker(capsys, tmp_path):
    marker = tmp_path / "_SUCCESS"
    marker.write_bytes(b"")
    code, out, _ = run(capsys, "show", str(marker))
    assert code == 0
    assert "0-byte _SUCCESS" in out and "rename-based committer" in out


def test_show_of_a_commit_journal_says_how_to_recover(capsys, tmp_path):
    journal = CommitJournal(job_id="job-1", committer="magic", bucket="b", dest_key="out",
                            pendingsets=("out/__magic_job-job-1/job-job-1/00/t.pendingset",), delete_paths=("",),
                            delete_outside=("custom/p=1",))
    path = tmp_path / "_commit-journal.json"
    path.write_bytes(journal.to_json())
    code, out, _ = run(capsys, "show", str(path))
    assert code == 0
    assert "overwrite    delete (all of dest), delete s3://b/custom/p=1" in out
    assert "s3commit recover s3://b/out --job job-1" in out


def test_show_of_a_file_that_is_no_manifest_is_bad_input(capsys, tmp_path):
    other = tmp_path / "data.csv"
    other.write_text("a,b\n1,2\n")
    code, _, err = run(capsys, "show", str(other))
    assert code == cli.EXIT_USAGE
    assert "not a _SUCCESS, .pendingset, .pending, commit journal or commit lease" in err


def test_show_of_a_corrupt_pendingset_is_bad_input_naming_the_rule(capsys, tmp_path):
    bad = tmp_path / "t.pendingset"
    bad.write_text(json.dumps({"version": 1, "commits": []}))
    code, _, err = run(capsys, "show", str(bad))
    assert code == cli.EXIT_USAGE
    assert "Wrong version: 1" in err


def test_show_of_a_missing_file_is_not_found(capsys, tmp_path):
    code, _, err = run(capsys, "show", str(tmp_path / "nope" / "_SUCCESS"))
    assert code == cli.EXIT_NOTHING
    assert "no such file" in err


# --- uploads, against a fake store -----------------------------------------------------------------------


NOW = datetime.now(timezone.utc)


class FakeUploads:
    """Lists a fixed set of uploads -- including one outside the prefix, as a store ignoring Prefix would."""

    def __init__(self):
        self.listed = [
            UploadInfo("out/a.txt", "u-old", NOW - timedelta(days=3)),
            UploadInfo("out/b.txt", "u-new", NOW - timedelta(hours=1)),
            UploadInfo("out/c-job42.txt", "u-job", NOW - timedelta(days=5)),
            UploadInfo("out/d.txt", "u-unknown-age", None),
            UploadInfo("out-2/e.txt", "u-outside", NOW - timedelta(days=9)),
        ]
        self.aborted = []

    def list_multipart_uploads(self, bucket, prefix):
        return iter(self.listed)

    def abort_multipart_upload(self, bucket, key, upload_id):
        self.aborted.append(upload_id)


class NoObjects:
    def list_objects(self, bucket, prefix, *, delimiter=None):
        return iter(())


class FakeStore:
    """The store as the uploads commands use it: its bucket, its uploads, and no objects."""

    def __init__(self):
        self.uploads = FakeUploads()
        self.objects = NoObjects()

    def head_bucket(self, bucket):
        pass


@pytest.fixture
def fake(monkeypatch):
    store = FakeStore()
    monkeypatch.setattr(cli_args, "store_from_args", lambda args: store)
    return store.uploads


def test_uploads_list_never_shows_uploads_outside_the_prefix(fake, capsys):
    code, out, _ = run(capsys, "uploads", "list", "s3://b/out", "--json")
    assert code == 0
    assert sorted(u["upload_id"] for u in json.loads(out)["uploads"]) == ["u-job", "u-new", "u-old", "u-unknown-age"]


def test_uploads_list_older_than_skips_young_uploads_and_those_of_unknown_age(fake, capsys):
    code, out, _ = run(capsys, "uploads", "list", "s3://b/out", "--older-than", "2d", "--json")
    data = json.loads(out)
    assert code == 0
    assert sorted(u["upload_id"] for u in data["uploads"]) == ["u-job", "u-old"]
    assert all(u["age_seconds"] > 2 * 86400 for u in data["uploads"])


def test_uploads_list_by_job_matches_the_job_id_in_the_key(fake, capsys):
    code, out, _ = run(capsys, "uploads", "list", "s3://b/out", "--job", "job42")
    assert code == 0
    assert "out/c-job42.txt" in out and "1 pending uploads under s3://b/out (of job job42)" in out


def test_uploads_list_says_when_there_is_nothing(fake, capsys):
    fake.listed = []
    code, out, _ = run(capsys, "uploads", "list", "s3://b/out")
    assert code == 0
    assert out.strip() == "no pending uploads under s3://b/out"


def test_uploads_abort_with_yes_aborts_only_what_matches(fake, capsys):
    code, out, _ = run(capsys, "uploads", "abort", "s3://b/out", "--older-than", "2d", "--yes")
    assert code == 0
    assert sorted(fake.aborted) == ["u-job", "u-old"]
    assert "aborted 2 pending uploads under s3://b/out (older than 2d)" in out


def test_uploads_abort_with_nothing_matching_exits_3(fake, capsys):
    code, out, _ = run(capsys, "uploads", "abort", "s3://b/out", "--older-than", "30d", "--yes")
    assert code == cli.EXIT_NOTHING
    assert "nothing to abort" in out
    assert fake.aborted == []


def test_uploads_abort_asks_on_a_terminal_and_does_nothing_unless_confirmed(fake, capsys, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, _, err = run(capsys, "uploads", "abort", "s3://b/out")
    assert code == cli.EXIT_FAILED
    assert "abort 4 pending uploads under s3://b/out? [y/N]" in err and "nothing was aborted" in err
    assert "also aborts uploads of jobs running right now" in err
    assert fake.aborted == []
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert run(capsys, "uploads", "abort", "s3://b/out")[0] == 0
    assert len(fake.aborted) == 4


def test_uploads_abort_refuses_without_a_terminal_to_ask_on(fake, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, _, err = run(capsys, "uploads", "abort", "s3://b/out")
    assert code == cli.EXIT_USAGE
    assert "stdin is not a terminal; pass --yes" in err
    assert fake.aborted == []


def test_uploads_abort_dry_run_changes_nothing(fake, capsys):
    code, out, _ = run(capsys, "uploads", "abort", "s3://b/out", "--dry-run")
    assert code == 0
    assert "dry run: would abort 4 pending uploads" in out
    assert fake.aborted == []


def test_progress_is_reported_on_long_runs(capsys):
    progress = Progress(250, quiet=False, every=100, seconds=3600)
    for i in range(250):
        progress.step(i != 7)
    err = capsys.readouterr().err.splitlines()
    assert err == ["aborted 99/250 uploads (1 failed) ...", "aborted 199/250 uploads (1 failed) ..."]


# --- demo and bench delegate ----------------------------------------------------------------------------


def test_demo_and_bench_pass_every_argument_to_their_module(capsys, monkeypatch):
    calls = []

    class Module:
        @staticmethod
        def main(argv):
            calls.append(argv)
            return 5

    monkeypatch.setattr(importlib, "import_module", lambda name: Module)
    assert cli.main(["bench", "--help", "--rows", "10"]) == 5
    assert cli.main(["demo"]) == 5
    assert calls == [["--help", "--rows", "10"], []]


def test_a_missing_delegate_module_gets_a_clear_message(capsys, monkeypatch):
    def missing(name):
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(importlib, "import_module", missing)
    code, _, err = run(capsys, "bench")
    assert code == cli.EXIT_FAILED
    assert "`s3commit bench` is not available in this installation (no module benchmarks)" in err
