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


def test_the_scale_table_names_its_store_and_the_stores_capacity_over_the_clients_rate_where_measured():
    from benchmarks.scale_bench import scale_markdown

    case = {"files": 10_000, "overwrite": False, "writes_per_second": None, "seconds": 2.27, "floor_seconds": 1.953,
            "ratio": 1.16, "completes_per_cpu_second": 10_926, "slowdowns_answered": 0, "failures": 0,
            "concurrency": {"low": 256, "high": 256, "final": 256}, "peak_rss_mib": 102, "exact": True}
    go = scale_markdown({"profile": "s3-standard", "rate": 3500.0, "store": "go",
                         "cases": [{**case, "capacity_headroom": 5.71}]})
    assert "the Go store" in go[0] and go[-2].endswith("| 102 | yes | 5.71x |")
    wire = scale_markdown({"profile": "s3-standard", "rate": 3500.0, "store": "wire", "cases": [case]})
    assert "S3Wire" in wire[0] and wire[-2].endswith("| yes | - |")
