"""The benchmark's paired ratio: each run against the baseline measured beside it."""

import pytest

from benchmarks.main import paired_median


def test_paired_median_compares_each_run_with_its_own_baseline():
    # the server slow for one run of the baseline alone: median/median would say 0.5, the pairs 1.0
    assert paired_median([10.0, 10.0, 20.0], [10.0, 20.0, 20.0]) == 1.0
    assert paired_median([11.0, 30.0, 9.0], [10.0, 20.0, 10.0]) == pytest.approx(1.1)


def test_paired_median_needs_one_baseline_per_run():
    with pytest.raises(ValueError):
        paired_median([1.0, 2.0], [1.0])


def test_every_path_takes_every_place_in_the_data_path_rounds():
    from benchmarks.datapath import round_order

    entries = ("bare clients", "magic", "directory")
    orders = [round_order(entries, number) for number in range(1, 4)]
    assert orders[0] == entries  # round 1 as listed
    for place in range(3):
        assert {order[place] for order in orders} == set(entries)
    assert round_order(entries, 4) == entries


def test_the_scale_table_names_its_store_each_commit_and_the_stores_capacity_over_the_clients_rate_where_measured():
    from benchmarks.scale_bench import scale_markdown

    case = {"files": 10_000, "overwrite": False, "writes_per_second": None, "seconds": 2.27, "floor_seconds": 1.953,
            "ratio": 1.16, "completes_per_cpu_second": 10_926, "slowdowns_answered": 0, "failures": 0,
            "concurrency": {"low": 256, "high": 256, "final": 256}, "peak_rss_mib": 102, "exact": True}
    go = scale_markdown({"profile": "s3-standard", "rate": 3500.0, "store": "go", "lean": True,
                         "cases": [{**case, "committer": "magic", "capacity_headroom": 5.71},
                                   {**case, "committer": "magic", "overwrite": True},
                                   {**case, "committer": "directory", "writes_per_second": 3500.0}]})
    assert "the Go store" in go[0] and "lean requests" in go[0]
    rows = go[4:go.index("", 4)]
    assert rows[0].startswith("| 10,000 | magic | no |") and rows[0].endswith("| 102 | yes | 5.71x |")
    assert rows[1].startswith("| 10,000 | magic, overwrite | no |") and rows[1].endswith("| yes | - |")
    assert rows[2].startswith("| 10,000 | directory | yes |")
    wire = scale_markdown({"profile": "s3-standard", "rate": 3500.0, "store": "wire", "cases": [case]})
    row = wire[4]
    assert "S3Wire" in wire[0] and row.startswith("| 10,000 | magic | no |") and row.endswith("| yes | - |")


def test_the_scale_plot_draws_each_commit_throttled_and_not_beside_its_floor(tmp_path):
    pytest.importorskip("matplotlib")
    from benchmarks.scale_bench import scale_plot

    def case(files: int, committer: str, overwrite: bool, rate: float | None) -> dict[str, object]:
        floor = files * 0.05 / 256 if rate is None else (files * (2 if overwrite else 1)) / rate
        return {"files": files, "committer": committer, "overwrite": overwrite, "writes_per_second": rate,
                "seconds": floor * 1.1, "floor_seconds": floor}

    cases = [case(files, committer, overwrite, rate) for files in (100, 1000) for rate in (None, 3500.0)
             for committer, overwrite in (("magic", False), ("magic", True), ("directory", False))]
    out = tmp_path / "scale.png"
    scale_plot({"profile": "s3-standard", "rate": 3500.0, "store": "go", "cases": cases}, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    scale_plot({"profile": "s3-standard", "rate": 3500.0, "store": "wire",
                "cases": [c for c in cases if c["writes_per_second"] is None]}, tmp_path / "one.png")
    assert (tmp_path / "one.png").stat().st_size > 0
