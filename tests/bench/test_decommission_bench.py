"""The decommissioning benchmark's reading of Spark's event log (the cluster run itself is too long for a test:
``s3commit bench --sections decommission``)."""

from __future__ import annotations

import json

from benchmarks.decommission_bench import stages_of
from benchmarks.main import _decommission
from benchmarks.report import _decommission_lines


def task_end(stage: int, attempt: int, *, written: int = 0, local: int = 0, remote: int = 0,
             reason: str = "Success") -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Stage Attempt ID": attempt,
            "Task End Reason": {"Reason": reason},
            "Task Metrics": {"Shuffle Write Metrics": {"Shuffle Bytes Written": written},
                             "Shuffle Read Metrics": {"Local Bytes Read": local, "Remote Bytes Read": remote}}}


def stage_completed(stage: int, attempt: int, start_ms: int, end_ms: int) -> dict:
    return {"Event": "SparkListenerStageCompleted", "Stage Info": {
        "Stage ID": stage, "Stage Attempt ID": attempt, "Submission Time": start_ms, "Completion Time": end_ms}}


def test_map_tasks_run_again_and_stage_times_come_from_the_event_log(tmp_path):
    # job 0: map stage 0 (2 tasks), reduce stage 1; job 1: stage 0 run again for the lost output (attempt 1, one
    # task, one failed task not counted), then stage 2 reading the shuffle. A rolled log is a directory.
    events = [{"Event": "SparkListenerJobStart", "Job ID": 0, "Stage IDs": [0, 1]},
              task_end(0, 0, written=100), task_end(0, 0, written=120), stage_completed(0, 0, 1000, 4000),
              task_end(1, 0, local=150, remote=70), stage_completed(1, 0, 4000, 5500),
              {"Event": "SparkListenerJobStart", "Job ID": 1, "Stage IDs": [0, 2]},
              task_end(0, 1, written=100), task_end(0, 1, reason="TaskKilled"), stage_completed(0, 1, 6000, 7250),
              task_end(2, 0, local=220), stage_completed(2, 0, 7250, 8000)]
    rolled = tmp_path / "eventlog_v2_app-1"
    rolled.mkdir()
    (rolled / "appstatus_app-1.inprogress").write_text("")
    (rolled / "events_2_app-1").write_text("\n".join(json.dumps(e) for e in events[6:]))
    (rolled / "events_1_app-1").write_text("\n".join(json.dumps(e) for e in events[:6]))
    jobs = stages_of(rolled)
    assert [(s["stage"], s["attempt"], s["tasks"], s["seconds"]) for s in jobs[1]] == [(0, 1, 1, 1.25), (2, 0, 1, 0.75)]
    assert jobs[0][0]["written"] == 220 and jobs[0][1]["read_local"] + jobs[0][1]["read_remote"] == 220
    single = tmp_path / "app-1"
    single.write_text("\n".join(json.dumps(e) for e in events))
    assert stages_of(single) == jobs


def test_a_quick_run_skips_the_cluster_and_says_how_to_run_it():
    skipped = _decommission(None, "bucket", True, "/tmp")
    assert "--sections decommission" in skipped["skipped"]
    assert "--sections decommission" in "\n".join(_decommission_lines(skipped))
