"""The ``peers`` section's choice of shapes and rounds (``--peers-shapes``), and its figures from runs that leave
the reference or the data path out, without a JVM."""

import pytest

from benchmarks.peers_bench import DEFAULT_SHAPES, peers_markdown, peers_sizes, ratios


def test_by_default_the_default_shapes_and_the_data_path_run():
    sizes = peers_sizes(False)
    assert tuple(sizes["shapes"]) == DEFAULT_SHAPES and "commit-10k" not in sizes["shapes"]
    assert sizes["datapath_runs"]


def test_shapes_with_rounds_and_without_the_data_path():
    sizes = peers_sizes(False, "commit-heavy:2, commit-10k:1")
    assert sizes["shapes"]["commit-heavy"]["rounds"] == 2
    ten = sizes["shapes"]["commit-10k"]
    assert (ten["tasks"] * ten["days"], ten["rounds"]) == (10_000, 1)
    assert set(ten["skip"]) == {"s3a-magic-inmemory", "s3a-foc-v1"}  # magic and directory of each side
    assert not sizes["datapath_runs"]
    named = peers_sizes(False, "small,datapath:2")
    assert named["datapath_runs"] and named["datapath_rounds"] == 2 and "rounds" not in named["shapes"]["small"]
    alone = peers_sizes(False, "none")
    assert alone["shapes"] == {} and alone["datapath_runs"]


@pytest.mark.parametrize("shapes", ["huge", "commit-heavy:0", "commit-heavy:two"])
def test_unknown_shapes_and_bad_rounds_are_refused(shapes):
    with pytest.raises(ValueError):
        peers_sizes(False, shapes)


def run(path: str, seconds: float, tasks: float, jvm: float, sidecar: float) -> dict:
    return {"round": 1, "seconds": seconds, "task_phase_seconds": tasks, "job_commit_seconds": seconds - tasks,
            "files": 10_000, "total_requests": 30_000, "requests": {"CompleteMultipartUpload": 10_000},
            "copy_bytes": 0, "uploads_left": 0, "jvm_cpu_seconds": jvm, "sidecar_cpu_seconds": sidecar,
            "committer": "magic" if "magic" in path else "directory", "round_seconds": [seconds]}


def test_figures_without_the_in_memory_reference_or_the_data_path():
    paths = {"s3commit-magic": run("s3commit-magic", 100.0, 60.0, 20.0, 50.0),
             "s3a-magic": run("s3a-magic", 1000.0, 950.0, 200.0, 0.0)}
    block = {"spec": {"rows": 100_000, "tasks": 50, "days": 200}, "runs": {p: [r] for p, r in paths.items()},
             "medians": paths}
    peers = {"commit-10k": block, "settings": {"master": "local[2]", "part_mib": 32, "active_blocks": 4,
                                               "committer_threads": 32},
             "load_average_before": [1.0], "load_average_after": [2.0], "seconds": 1200.0}
    figures = ratios(peers)
    assert figures["commit_10k_s3commit_magic_job_commit_over_s3a_magic"] == pytest.approx(0.8)
    assert figures["commit_10k_s3commit_magic_jvm_cpu_ms_per_file"] == pytest.approx(2.0)
    assert figures["commit_10k_s3commit_magic_sidecar_cpu_ms_per_file"] == pytest.approx(5.0)
    peers["ratios"] = figures
    text = "\n".join(peers_markdown(peers))
    assert "| s3commit magic | 60.00 | 40.00 (0.80x) | 100.00 (0.10x) | 10000 |" in text
    assert "| 2.00 + 5.00 |" in text  # CPU per file, ms: the JVM's and the sidecars'
    assert "The data path was not run" in text


def test_the_snapshot_shapes_run_only_when_named_and_only_their_three_paths():
    from benchmarks.peers_bench import SNAPSHOT_PATHS, SNAPSHOT_SHAPES, shape_paths

    assert not set(SNAPSHOT_SHAPES.values()) & set(peers_sizes(False)["shapes"])
    sizes = peers_sizes(False, "snap-100:1,snap-1k")
    assert not sizes["datapath_runs"]
    for files, name in ((100, "snap-100"), (1000, "snap-1k")):
        spec = sizes["shapes"][name]
        assert spec["tasks"] * spec["days"] == files and spec["rows"] == 10 * files
        assert shape_paths(spec) == ("s3commit-magic", "s3a-magic", "s3commit-magic-snapshot")
    assert sizes["shapes"]["snap-100"]["rounds"] == 1 and "rounds" not in sizes["shapes"]["snap-1k"]
    for name, spec in peers_sizes(False, "demo,small,commit-heavy,commit-10k")["shapes"].items():
        assert not set(shape_paths(spec)) & set(SNAPSHOT_PATHS), name  # the other shapes never write a snapshot


def test_the_snapshot_path_is_also_compared_with_s3commit_magic_and_drawn_beside_the_engine(tmp_path):
    from benchmarks.snapshot_bench import plot, spark_series

    paths = {"s3commit-magic": run("s3commit-magic", 10.0, 8.0, 1.0, 1.0),
             "s3commit-magic-snapshot": run("s3commit-magic-snapshot", 9.0, 8.5, 1.0, 1.0),
             "s3a-magic": run("s3a-magic", 20.0, 18.0, 1.0, 0.0)}
    block = {"spec": {"rows": 1_000, "tasks": 10, "days": 10}, "runs": {p: [r] for p, r in paths.items()},
             "medians": paths}
    figures = ratios({"snap-100": block})
    assert figures["snap_100_s3commit_magic_snapshot_job_commit_over_s3a_magic"] == pytest.approx(0.25)
    assert figures["snap_100_s3commit_magic_snapshot_job_commit_over_s3commit_magic"] == pytest.approx(0.25)
    assert "snap_100_s3commit_magic_job_commit_over_s3commit_magic" not in figures
    series = spark_series({"snap-100": block})
    assert series == {"s3commit-magic": [(100, 2.0)], "s3commit-magic-snapshot": [(100, 0.5)],
                      "s3a-magic": [(100, 2.0)]}
    results = {"date": "today", "peers": {"snap-100": block},
               "commit": [{"files": 100, "variant": "plain", "seconds": 0.4}]}
    plot(results, str(tmp_path / "plot.png"))
    assert (tmp_path / "plot.png").stat().st_size > 0
