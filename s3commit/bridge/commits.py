"""The sidecar's committer calls: job and task setup, commit and abort, for the JVM's commit protocols.

Every call builds its committer from the request (configuration id, destination, job id; the committer from
``fs.s3a.committer.name``) and releases its threads when it returns: the sidecar keeps no committer or task attempt
between calls. What it keeps from ``job.setup`` to ``job.commit``/``job.abort`` is the job's liveness
(:mod:`s3commit.commit.liveness`): the driver's sidecar renews the job's record while the job runs. A task attempt
is rebuilt from its id (a magic attempt has no local state; a staging attempt's files are in its local directory on
this host), so a sidecar started after another died serves the next call of the same job as if nothing had happened.

``job.commit`` takes the committed tasks' messages as its request body, one JSON record per line, read as a
stream: a job of 100,000 tasks is no larger a message than one of ten. Messages of tasks that wrote nothing
carry no pendingset and cost nothing to keep.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

from s3commit.bridge.data_path import Streams
from s3commit.bridge.protocol import Body
from s3commit.bridge.registry import Configurations, Registered
from s3commit.bridge.reply import Reply
from s3commit.commit.process_state import THIS_PROCESS, ProcessState
from s3commit.committers import Committer, create_committer
from s3commit.config.options import committer_name_from_conf
from s3commit.errors import ConfigError
from s3commit.model import json_text
from s3commit.model.task_message import TaskCommitMessage
from s3commit.transfer.parallel import quiet_collector

log = logging.getLogger(__name__)


def _jvm_run() -> str:
    """The JVM this sidecar serves (its parent: host, process id and start time), the same for the next sidecar the
    JVM starts after this one died."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/stat") as handle:
            started = handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        started = "?"
    return f"jvm:{socket.gethostname()}:{parent}:{started}"


JVM_RUN = _jvm_run()


def messages_of(lines: Iterator[bytes]) -> Iterator[tuple[int, TaskCommitMessage]]:
    """Numbered task commit messages from NDJSON records (what ``TaskCommitMessage`` holds, as JSON)."""
    for number, line in enumerate(lines, 1):
        try:
            record = json_text.loads(line)
            message = TaskCommitMessage.from_dict(record)
        except (ValueError, TypeError) as err:
            raise ConfigError(f"task commit message {number} is not valid: {err}") from err
        yield number, message


class CommitOps:
    """``job.setup``, ``job.task_committed``, ``job.commit``, ``job.abort``, ``task.setup``, ``task.commit``,
    ``task.abort``, ``task.absolute_path``."""

    def __init__(self, confs: Configurations, streams: Streams, *, process: ProcessState = THIS_PROCESS,
                 factory: Callable[..., Committer] = create_committer) -> None:
        self.confs = confs
        self.streams = streams
        self.process = process
        self.factory = factory

    def ops(self) -> dict[str, Any]:
        return {"job.setup": self.job_setup, "job.commit": self.job_commit, "job.abort": self.job_abort,
                "job.task_committed": self.job_task_committed,
                "task.setup": self.task_setup, "task.commit": self.task_commit, "task.abort": self.task_abort,
                "task.absolute_path": self.task_absolute_path}

    def _committer(self, req: dict[str, Any], *, job_op: bool = False) -> Committer:
        registered: Registered = self.confs.get(req.get("conf_id"))
        name = committer_name_from_conf(registered.conf)
        committer = self.factory(name, req["dest"], job_id=req["job_id"], store=registered.store,
                                 options=registered.options, process=self.process)
        # The job's run is the JVM's (a request re-sent to a new sidecar of the same JVM is the same run), and an
        # RDD write's claim on its destination (``exclusive``, on job requests) goes with its commit or abort.
        committer.run_token = JVM_RUN
        committer.exclusive = job_op and bool(req.get("exclusive"))
        # The job's liveness record is renewed by this process from job.setup to job.commit/job.abort (the
        # committer object lives for one call).
        committer.liveness_with_object = False
        return committer

    # --- job ---------------------------------------------------------------------------------------

    def job_setup(self, req: dict[str, Any], _: Body | None) -> Reply:
        committer = self._committer(req, job_op=True)
        try:
            committer.setup_job(exclusive=committer.exclusive)
        finally:
            committer.close()
        return Reply({"committer": committer.name})

    def job_commit(self, req: dict[str, Any], body: Body | None) -> Reply:
        # The messages become many objects at once (a PendingUpload a file): the collector's full passes, each a
        # scan of the sidecar's whole heap, are held off while they are read and committed (quiet_collector).
        with quiet_collector():
            return self._job_commit(req, body)

    def _job_commit(self, req: dict[str, Any], body: Body | None) -> Reply:
        committer = self._committer(req, job_op=True)
        # The lease's requests go while the messages are read (the CPU of 10,000 files' entries): commit_job takes it.
        committer.take_lease_ahead()
        try:
            kept, received = self._messages(committer, body)
        except BaseException:
            committer.drop_lease_ahead()
            raise
        try:
            success = committer.commit_job(kept, delete_paths=req.get("delete_paths") or (),
                                           replace_partitions=bool(req.get("replace_partitions")))
        finally:
            self.forget_job(committer.job_id)
        return Reply({"success": success.to_dict(), "messages": received})

    @staticmethod
    def _messages(committer: Committer, body: Body | None) -> tuple[list[TaskCommitMessage] | None, int]:
        """The task commit messages that matter (those with a pendingset or directories outside the destination;
        the rest are counted, not kept) and how many were received; ``None`` and -1 where no body came: the job
        commit then reads every pendingset in the job directory (Hadoop's OutputCommitter)."""
        if body is None:
            return None, -1
        kept: list[TaskCommitMessage] = []
        received = 0
        for number, message in messages_of(body.lines()):
            received = number
            if message.job_id != committer.job_id:
                raise ConfigError(f"task commit message {number} is of job {message.job_id}, not of job "
                                  f"{committer.job_id}")
            if message.pendingset_key is not None or message.absolute_dirs:
                kept.append(message)
        return kept, received

    def job_task_committed(self, req: dict[str, Any], _: Body | None) -> Reply:
        """A task of the job committed (the driver's ``onTaskCommit``, ``message``: its commit message as JSON): its
        pendingset is read from now on, for the job's commit (:meth:`Committer.task_committed`). Answered at once:
        the read goes on in this process, and ``job.commit`` takes what ended by then."""
        committer = self._committer(req)
        try:
            record = json_text.loads(str(req["message"]))
            message = TaskCommitMessage.from_dict(record)
        except (ValueError, TypeError) as err:
            raise ConfigError(f"the task commit message reported to job {committer.job_id} is not valid: "
                              f"{err}") from err
        return Reply({"preloading": committer.task_committed(message)})

    def job_abort(self, req: dict[str, Any], _: Body | None) -> Reply:
        committer = self._committer(req, job_op=True)
        try:
            committer.abort_job()
        finally:
            self.forget_job(committer.job_id)
        return Reply({})

    def forget_job(self, job_id: str) -> None:
        """Forget a job that ended: abort its write handles still open here, close its magic attempts."""
        self.streams.forget_job(job_id)
        self.process.tasks.end_job(job_id)

    # --- task --------------------------------------------------------------------------------------

    def task_setup(self, req: dict[str, Any], _: Body | None) -> Reply:
        committer = self._committer(req)
        try:
            attempt = committer.setup_task(req["task_attempt_id"])
        finally:
            committer.close()
        return Reply({"work_path": engine_path(attempt.work_path)})

    def task_absolute_path(self, req: dict[str, Any], _: Body | None) -> Reply:
        """Where the engine writes a file bound for ``absolute_dir/name``, outside the destination."""
        committer = self._committer(req)
        attempt = committer.attach_task(req["task_attempt_id"])
        return Reply({"path": engine_path(attempt.absolute_work_path(req["absolute_dir"], req["name"]))})

    def task_commit(self, req: dict[str, Any], _: Body | None) -> Reply:
        committer = self._committer(req)
        attempt_id = str(req["task_attempt_id"])
        self.streams.forget_attempt(committer.job_id, attempt_id)
        try:
            message = committer.commit_task(committer.attach_task(attempt_id))
        finally:
            committer.close()
        return Reply({"message": asdict(message)})

    def task_abort(self, req: dict[str, Any], _: Body | None) -> Reply:
        committer = self._committer(req)
        attempt_id = str(req["task_attempt_id"])
        self.streams.forget_attempt(committer.job_id, attempt_id)
        try:
            committer.abort_task(committer.attach_task(attempt_id))
        finally:
            committer.close()
        return Reply({})


def engine_path(path: str) -> str:
    """A committer's path as Hadoop names it: ``s3a://`` for S3, ``file://`` for a local directory."""
    if path.startswith("s3://"):
        return "s3a://" + path[len("s3://"):]
    if path.startswith("/"):
        return "file://" + path
    return path
