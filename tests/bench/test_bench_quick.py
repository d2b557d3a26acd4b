"""The benchmark's smoke run: it must run and write its results (timings are never asserted)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from benchmarks import main
from benchmarks.main import OPT_IN, SECTIONS
from testbed import CHILD_TIMEOUT

COMMITTERS = {"magic", "magic-no-checksums", "directory", "partitioned", "rename-v1", "rename-v2"}


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_quick_commit_scaling_and_memory_sections_write_results(tmp_path, capsys):
    assert main(["--quick", "--sections", "commit,scaling,memory", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "quick.json").read_text())
    committers = results["commit"]["committers"]
    assert set(committers) == COMMITTERS
    for name, run in committers.items():
        assert run["files"] == 40 and run["job_commit_seconds"] > 0, name
        if name.startswith("rename"):
            assert run["bytes_copied"] > 0, name
        else:
            assert run["bytes_copied"] == 0, name
    assert committers["rename-v1"]["bytes_copied"] == 2 * 40 * 64 * 1024  # every byte copied twice
    assert committers["magic"]["requests"]["CompleteMultipartUpload"] == 40
    assert committers["magic-no-checksums"]["requests"] == committers["magic"]["requests"]  # the same requests
    assert set(results["commit"]["ratios"]) == {"job_commit_rename_v1_over_magic", "total_rename_v1_over_magic",
                                                "magic_task_commit_64MiB_over_1MiB",
                                                "magic_job_commit_over_bare_pool",
                                                "magic_job_commit_client_cpu_over_bare_pool",
                                                "magic_no_checksums_job_commit_over_bare_pool",
                                                "magic_no_checksums_job_commit_client_cpu_over_bare_pool",
                                                "rename_v1_job_commit_over_bare_pool"}
    assert results["commit"]["bare_pool_seconds"] > 0
    assert len(results["commit"]["bare_pool_runs"]) == len(results["commit"]["bare_pool_checksum_runs"]) == 1
    assert all(cpu > 0 for cpu in results["commit"]["bare_pool_cpu_runs"] + committers["magic"]["job_commit_cpu_runs"])
    assert committers["magic"]["job_commit_runs"] == [committers["magic"]["job_commit_seconds"]]  # quick: 1 run
    assert results["memory"]["completed"] == results["memory"]["uploads"] == 2000
    assert "## Commit phase" in (tmp_path / "quick.md").read_text()
    scaling = results["scaling"]
    assert [row["files"] for row in scaling["files_curve"]["magic"]] == [20, 60]
    assert scaling["server_ceiling"]["completes_per_second"] > 0
    assert set(scaling["ratios"]) == {"magic_job_commit_over_bare_pool", "magic_job_commit_over_bound"}


def _quick(tmp_path, sections: str) -> dict:
    """``main --quick --sections ...`` in a child Python (each section starts its own Spark, Dask or Ray and must not
    meet another test's), its own time budget, its results."""
    code = ("import sys; from benchmarks import main; "
            f"sys.exit(main(['--quick', '--sections', {sections!r}, '--out', {str(tmp_path)!r}]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=CHILD_TIMEOUT,
                            check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return json.loads((tmp_path / "quick.json").read_text())


def test_every_default_section_has_its_quick_test():
    # main runs SECTIONS less OPT_IN by default; each has a quick run here, a few sections at a time (all at once
    # outgrew one test's budget on a busy machine). decommission says it is skipped in a quick run (a standalone
    # cluster, three applications); test_decommission_bench tests how its results are read.
    tested = {"commit", "scaling", "memory", "spark", "small-files", "datapath", "datapath-moto", "sidecar",
              "engines", "streaming", "lease", "decommission"}
    assert set(SECTIONS) - set(OPT_IN) == tested


@pytest.mark.slow
def test_quick_spark_sections(tmp_path):
    pytest.importorskip("pyspark")
    results = _quick(tmp_path, "spark,small-files")
    assert "skipped" not in results["spark"]
    assert results["spark"]["magic"]["bytes_copied"] == 0
    assert results["spark"]["FileOutputCommitter-v1"]["bytes_copied"] > 0
    small = results["small-files"]
    assert "skipped" not in small and small["magic"]["bytes_copied"] == 0
    assert {"tasks_magic_over_v1", "requests_per_file_magic"} <= set(small["ratios"])


@pytest.mark.slow
def test_quick_datapath_sections(tmp_path):
    pytest.importorskip("pyspark")
    results = _quick(tmp_path, "datapath,datapath-moto")
    datapath = results["datapath"]
    assert "skipped" not in datapath
    for label in ("magic", "directory", "FileOutputCommitter-v1"):
        assert datapath[label]["read"]["lines"] == 2 * 12, label  # every line read back
        # parts upload concurrently
        assert datapath[label]["write"]["max_parts_in_flight"] >= 2, (label, datapath[label]["write"])
    assert datapath["magic"]["write"]["copy_bytes"] == 0
    assert datapath["FileOutputCommitter-v1"]["write"]["copy_bytes"] > 0
    assert {"write_magic_over_bare", "read_magic_over_bare", "sidecar_over_bare_cpu_write",
            "sidecar_over_bare_cpu_read", "jvm_marginal_cpu_per_gib_write", "jvm_marginal_cpu_per_gib_read",
            "magic_task_phase_over_directory_task_phase"} <= set(datapath["ratios"])
    assert {"bare", "bare-tuned", "crt"} <= set(datapath)  # boto3's defaults, boto3 tuned, awscrt's client
    assert datapath["gil"]["write"]["samples"] >= 0 and "gil_held_cpu_per_gib" in datapath["gil"]["read"]
    assert "## Data path" in (tmp_path / "quick.md").read_text()
    on_moto = results["datapath-moto"]  # the same paths on a server that keeps moto's own costs
    assert on_moto["moto_costs"] is True and "skipped" not in on_moto
    assert all(on_moto[label]["read"]["lines"] == 2 * 12 for label in ("magic", "directory"))
    assert "read_magic_over_bare" in on_moto["ratios"] and "gil" not in on_moto and "jvm_marginal" not in on_moto
    assert "## Data path on moto's own costs" in (tmp_path / "quick.md").read_text()


@pytest.mark.slow
def test_quick_sidecar_section(tmp_path):
    pytest.importorskip("pyspark")
    results = _quick(tmp_path, "sidecar")
    sidecar = results["sidecar"]
    for server in ("moto", "seaweedfs"):
        medians = sidecar[server]["median_cpu_per_gib"]
        assert {"sidecar", "boto3", "boto3-no-crt", "crt"} <= set(medians), server
        assert all(medians[name]["write"] > 0 and medians[name]["read"] > 0 for name in medians), server
        assert {"write", "read"} == set(sidecar[server]["gil"]), server
        assert [row["tasks"] for row in sidecar[server]["concurrency"]] == [1, 2], server
    assert "## The sidecar's CPU and GIL per GiB" in (tmp_path / "quick.md").read_text()


@pytest.mark.slow
def test_quick_engines_section(tmp_path):
    pytest.importorskip("pyarrow")
    pytest.importorskip("dask")
    results = _quick(tmp_path, "engines")
    engines = results["engines"]
    assert "skipped" not in engines
    assert engines["validates_checksum"] and not engines["md5_check"]  # the server checks checksums, as S3
    assert {"one column", "16 partitions", "16 partitions, append", "20 partitions", "20 partitions, append",
            "1 GiB, one file", "1 GiB, one file, append"} == set(engines["shapes"])
    for shape, compared in [*engines["shapes"].items(), ("dask", engines["dask"])]:
        assert compared["bytes"] > 0, shape
        for name, path in compared["paths"].items():
            assert len(path["seconds"]) == 1 and path["cpu_per_gib"] > 0 and path["paired_cpu_ratio"] > 0, name
    assert "s3commit.arrow, MD5 ETag check" in engines["shapes"]["16 partitions"]["paths"]
    assert {"s3commit.dask", "dask (pyarrow S3FileSystem)"} <= set(engines["dask"]["paths"])
    if importlib.util.find_spec("ray") is None:
        assert "not installed" in engines["ray"]["skipped"]
    else:  # the slow tier installs Ray
        assert set(engines["ray"]["paths"]) == {"ray (write_parquet, pyarrow S3FileSystem)",
                                                "s3commit.ray CommitDatasink"}
        assert engines["ray"]["bytes"] > 0
        assert all(path["cpu_per_gib"] > 0 for path in engines["ray"]["paths"].values())
    assert "## Python engines" in (tmp_path / "quick.md").read_text()


@pytest.mark.slow
def test_quick_streaming_section_compares_checkpoint_managers_and_sink_protocols(tmp_path):
    pytest.importorskip("pyspark")
    streaming = _quick(tmp_path, "streaming")["streaming"]
    ours, spark_rename = streaming["checkpoint"]["s3commit"], streaming["checkpoint"]["Spark rename (FileContext)"]
    # Every batch: offsets and commits, each one LIST (exists) and one PUT; Spark's renames copy both files.
    assert ours["requests_per_batch"] == {"ListObjectsV2": 2.0, "PutObject": 2.0}
    assert ours["bytes_copied_per_batch"] == 0 and spark_rename["bytes_copied_per_batch"] > 0
    assert spark_rename["requests_per_batch"]["CopyObject"] == 2.0
    sink = streaming["sink"]["s3commit"]
    assert sink["bytes_copied_per_batch"] == 0 and "CopyObject" not in sink["requests_per_batch"]
    assert set(streaming["ratios"]) >= {"checkpoint_time_rename_over_s3commit", "sink_requests_s3commit_over_manifest"}
    assert "## Structured Streaming" in (tmp_path / "quick.md").read_text()


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_quick_lease_section_counts_what_the_lease_adds(tmp_path):
    assert main(["--quick", "--sections", "lease", "--out", str(tmp_path)]) == 0
    lease = json.loads((tmp_path / "quick.json").read_text())["lease"]
    # The PUT that creates or takes it and the PUT that frees it: the job's setup read it (one GET, not counted here).
    assert lease["overhead"]["small"]["lease_requests"] == 2
    assert lease["appenders"]["jobs"] == 2 and len(lease["appenders"]["lease_wait_ms"]) == 2
    assert "## The commit lease" in (tmp_path / "quick.md").read_text()


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_quick_scale_section_commits_exactly_on_the_store_that_is_not_the_limit(tmp_path):
    from testbed.go_store import GoStoreError, build_go_store

    try:
        build_go_store()
        store = "go"
    except GoStoreError:
        store = "wire"  # (the section runs on the Python wire then, and says so)
    assert main(["--quick", "--sections", "scale", "--out", str(tmp_path)]) == 0
    scale = json.loads((tmp_path / "quick.json").read_text())["scale"]
    assert scale["store"] == store and scale["lean"] is True and scale["read_ahead"] is (store == "go")
    [case] = scale["cases"]
    assert (case["files"], case["committer"], case["overwrite"], case["writes_per_second"]) == (1000, "magic", False,
                                                                                              None)
    assert case["exact"] and case["failures"] == 0 and case["floor_seconds"] > 0
    if store == "go":
        capacity = case["store_capacity"]
        assert case["capacity_headroom"] > 0 and capacity["answered"] == 40_000
        rounds = capacity["rounds_answers_per_cpu_second"]  # the median of three reported
        assert len(rounds) == 3 and capacity["answers_per_cpu_second"] == sorted(rounds)[1]
    assert "## The job commit at scale" in (tmp_path / "quick.md").read_text()


@pytest.mark.slow
def test_the_scale_sections_commits_each_end_exact_throttled_and_not():
    from benchmarks.scale_bench import SECTION_KINDS, _runs
    from testbed.go_store import GoStoreError, build_go_store

    try:
        build_go_store()
    except GoStoreError as err:
        pytest.skip(f"the Go store is not available: {err}")
    # A rate each commit of 600 files exceeds once a second's burst is taken: each meets SlowDown (the overwrite's
    # Completes and deletes too) and must end exact, none failed.
    scale = _runs([600], throttled=[False, True], rate=200.0, kinds=list(SECTION_KINDS), lean=True, store="go",
                  ahead=True)
    cases = {(c["committer"], c["overwrite"], bool(c["writes_per_second"])): c for c in scale["cases"]}
    assert set(cases) == {(committer, overwrite, throttled) for committer, overwrite in SECTION_KINDS
                          for throttled in (False, True)}
    for where, case in cases.items():
        assert case["exact"] and case["failures"] == 0 and case["retries"] >= case["slowdowns_answered"], where
        assert case["peak_rss_mib"] > 0 and case["floor_seconds"] > 0, where
        assert case["read_ahead"] and case["preloaded"] == 6, where  # (as the section runs them: every pendingset)
    assert all(cases[(committer, overwrite, True)]["slowdowns_answered"] > 0 for committer, overwrite in SECTION_KINDS)
    assert cases[("magic", True, False)]["slowdowns_answered"] == 0
