"""Shared helpers for the reliability tests: run a job, look at what a destination holds, check invariants.

The invariants every reliability test ends on (issue 5): the destination holds exactly the job's output or
none of it (old data intact), no multipart upload is pending, no job directory is left.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from s3commit import S3Store, StoreOptions
from s3commit.committers import Committer
from s3commit.config.options import RetryPolicy
from s3commit.model.paths import add_uuid, is_scratch_key
from s3commit.model.task_message import TaskCommitMessage
from s3commit.testing.assertions import held_leases, list_keys, list_pending_uploads

COMMITTERS = ["magic", "directory", "partitioned"]


def store_options(server: Any, **overrides: Any) -> StoreOptions:
    """Options for a store on the test server: fast retries (tests must not sleep for seconds)."""
    values: dict[str, Any] = {
        "endpoint_url": server.endpoint_url, "region": "us-east-1", "path_style": True,
        "access_key": "testing", "secret_key": "testing",
        "retry": RetryPolicy(max_attempts=7, initial_delay=0.005, max_delay=0.05),
    }
    values.update(overrides)
    return StoreOptions(**values)


def make_store(server: Any, **overrides: Any) -> S3Store:
    return S3Store(store_options(server, **overrides))


def is_scratch(key: str) -> bool:
    """A job directory's key, a probe's, or a commit lease: never output (``assert_clean`` wants none left)."""
    return is_scratch_key(key)


def user_keys(client: Any, bucket: str, prefix: str = "out/") -> list[str]:
    """Visible output under ``prefix``: everything but job directories and ``_SUCCESS``."""
    return [k for k in list_keys(client, bucket, prefix) if not is_scratch(k) and not k.endswith("/_SUCCESS")]


def scratch_keys(client: Any, bucket: str, prefix: str = "") -> list[str]:
    return [k for k in list_keys(client, bucket, prefix) if is_scratch(k)]


def read(client: Any, bucket: str, key: str) -> bytes:
    return bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())


def success_json(client: Any, bucket: str, prefix: str = "out") -> dict[str, Any] | None:
    try:
        body = read(client, bucket, f"{prefix}/_SUCCESS")
    except client.exceptions.NoSuchKey:
        return None
    return json.loads(body) if body else {}


def final_key(committer: str, dest_key: str, relative: str, job_id: str) -> str:
    """Where ``relative`` lands for ``committer`` (staging inserts the job id into the file name)."""
    name = relative if committer == "magic" else add_uuid(relative, job_id)
    return f"{dest_key}/{name}"


@dataclass
class JobSpec:
    """A small job: ``tasks`` tasks writing ``files`` files each; file names carry the job id if asked."""

    tasks: int = 3
    files: int = 3
    job_id_in_names: bool = False
    payload: bytes = b"x" * 100
    relatives: list[str] = field(default_factory=list)

    def name(self, committer: Committer, task: int, index: int) -> str:
        suffix = f"-{committer.job_id}" if self.job_id_in_names else ""
        return f"part={task % 2}/part-{task:05d}-{index}{suffix}.txt"

    def body(self, task: int, index: int) -> bytes:
        return f"t{task}f{index}:".encode() + self.payload


def run_tasks(committer: Committer, spec: JobSpec) -> list[TaskCommitMessage]:
    """Set up the job, run and commit every task; returns the task commit messages (job not committed)."""
    committer.setup_job()
    messages = []
    spec.relatives = []
    for task in range(spec.tasks):
        attempt = committer.setup_task(committer.new_task_attempt_id(task))
        for index in range(spec.files):
            relative = spec.name(committer, task, index)
            spec.relatives.append(relative)
            with attempt.open(relative) as out:
                out.write(spec.body(task, index))
        messages.append(committer.commit_task(attempt))
    return messages


def expected_objects(committer: Committer, spec: JobSpec) -> dict[str, bytes]:
    """Final key -> content, for every file of a job run by :func:`run_tasks`."""
    result = {}
    for task in range(spec.tasks):
        for index in range(spec.files):
            relative = spec.name(committer, task, index)
            result[final_key(committer.name, committer.dest.key, relative, committer.job_id)] = spec.body(task, index)
    return result


def assert_clean(client: Any, bucket: str, *, prefix: str = "") -> None:
    """No pending upload and no job directory anywhere under ``prefix``."""
    pending = list_pending_uploads(client, bucket, prefix)
    assert pending == [], f"pending uploads left: {[str(p) for p in pending]}"
    left = [k for k in scratch_keys(client, bucket, prefix) if not k.endswith("/__s3commit_lease")]
    assert left == [], f"job directory objects left: {left}"
    assert held_leases(client, bucket, prefix) == [], "a commit lease is still held"


def assert_all_or_nothing(client: Any, bucket: str, expected: dict[str, bytes], *, old: Sequence[str] = (),
                          replaced: bool = False, prefix: str = "out/") -> str:
    """The destination holds the job's output in full ("all") or none of it, the ``old`` data intact
    ("nothing"). With ``replaced`` the full output replaces the old data."""
    visible = user_keys(client, bucket, prefix)
    if visible == sorted(old):
        return "nothing"
    full = sorted(set(expected) | (set() if replaced else set(old)))
    assert visible == full, f"partial output: differs from the full output by {sorted(set(visible) ^ set(full))[:10]}"
    for key, body in expected.items():
        assert read(client, bucket, key) == body, f"{key} has the wrong content"
    return "all"
