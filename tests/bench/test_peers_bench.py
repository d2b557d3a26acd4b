"""The ``peers`` section's smoke run (s3commit against Hadoop's S3A): every path writes every shape, complete, through
the committer it names, leaving no upload; the data path moves every byte both ways. Timings are never asserted."""

from __future__ import annotations

import json

import pytest

from benchmarks import main
from benchmarks.peers_bench import shape_paths

pytestmark = [pytest.mark.slow, pytest.mark.s3a, pytest.mark.spark]


@pytest.mark.longest
@pytest.mark.timeout(1500)  # 6 Spark applications (one per path), the data path: 11 min on a slow host
def test_quick_peers_section(tmp_path):
    assert main(["--quick", "--sections", "peers", "--out", str(tmp_path)]) == 0
    peers = json.loads((tmp_path / "quick.json").read_text())["peers"]
    if "skipped" in peers:
        pytest.skip(peers["skipped"])
    committers = {"s3commit-magic": "magic", "s3commit-directory": "directory", "s3a-magic": "magic",
                  "s3a-magic-inmemory": "magic", "s3a-directory": "directory",
                  "s3a-foc-v1": "FileOutputCommitter (0-byte _SUCCESS)"}
    for shape, files in (("demo", 32), ("commit-heavy", 60)):
        spec = peers["sizes"]["shapes"][shape]
        medians = peers[shape]["medians"]
        assert set(medians) == set(shape_paths(spec)), shape  # no snapshot destination here
        for path, run in medians.items():
            assert run["files"] == files and run["uploads_left"] == 0, (shape, path, run)
            assert run["committer"] == committers[path], (shape, path, run["committer"])
            assert run["seconds"] >= run["task_phase_seconds"] > 0, (shape, path)
            assert run["jvm_cpu_seconds"] > 0, (shape, path)
            if path.startswith("s3commit"):
                assert run["sidecar_cpu_seconds"] > 0 and run["sidecars"] >= 1, (shape, path)
            else:
                assert run["sidecars"] == 0, (shape, path)  # no s3commit in S3A's applications
            if path == "s3a-foc-v1":
                assert run["copy_bytes"] > 0  # renames are copies
            else:
                assert run["copy_bytes"] == 0 and run["requests"]["CompleteMultipartUpload"] == files, (shape, path)
    assert "s3a-foc-v1" in peers["demo"]["medians"] and "small" not in peers  # quick: the demo and commit-heavy
    filesystems = {"s3commit": "s3commit.hadoop.S3FileSystem", "s3a": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
    data = peers["datapath"]
    for entry, phases in data["medians"].items():
        assert phases["write"]["uploads_left"] == 0, entry
        if entry in filesystems:
            assert phases["write"]["filesystem"] == filesystems[entry]
            assert phases["write"]["length"] == phases["read"]["bytes"] // 2 == 12 << 20
            assert phases["write"]["file_jvm_cpu_seconds"] > 0  # the same files to file://: the harness's cost
    ratios = peers["ratios"]
    assert {"demo_s3commit_magic_job_commit_over_s3a_magic", "commit_heavy_s3commit_magic_requests_per_file",
            "datapath_write_s3commit_over_fastest_of_s3a_crt", "datapath_read_s3commit_cpu_over_s3a_jvm",
            "datapath_write_s3commit_file_jvm_cpu_per_gib", "datapath_write_s3a_file_jvm_cpu_per_gib"} <= set(ratios)
    assert "## Peers: s3commit against S3A" in (tmp_path / "quick.md").read_text()
