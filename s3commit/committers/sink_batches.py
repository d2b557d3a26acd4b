"""Structured Streaming's file sink, committed through the magic machinery: a batch's data files stay pending
uploads until the batch is in the sink's log, so a failed or killed batch leaves no visible file.

Spark's file sink (``FileStreamSink``) counts a batch as committed once its entry is in the sink's log
(``<sink>/_spark_metadata/<batch>``, written without overwrite); Spark's own protocol writes the data files at
their final keys first, so a batch that fails leaves them visible to any reader that lists the directory.
Here each batch is one magic job, ``b<batch>-<uuid>`` (the batch id is in the job id, so a listing alone tells
which batch a job directory belongs to), and its commit runs in this order (the driver's
``S3StreamingCommitProtocol.commitJob``):

1. :meth:`BatchCommit.prepare`: load and validate the tasks' pendingsets, then record the batch's journal
   (``If-None-Match: *``) in the job directory, naming them;
2. the JVM writes the batch's log entry through the checkpoint manager (``If-None-Match: *``): **the commit
   point**. If another run of the query committed the batch first, this write fails and the batch is rolled
   back (:meth:`BatchCommit.roll_back`);
3. :meth:`BatchCommit.finish`: complete every upload, delete the job directory and abort this job's orphan
   uploads, the journal last.

:func:`recover_sink` settles the batch jobs a run left behind (its driver killed, its network gone), and is
safe to run at any time, concurrently with a live writer, because it decides only what the log has decided:

- the log has the job's batch and names the job's files: **finish** it (completion is idempotent);
- the log has the job's batch and names other files (another run committed it): **roll it back** (abort its
  uploads, delete its directory); such a job can never commit, so aborting it cannot hurt its owner;
- the log does not have the batch yet: **leave it** (its owner may be running); the next run of the query
  redoes the batch, and once that is committed the old job is rolled back.

A batch job is found by its directory under the sink or, for a task killed while it wrote (no ``.pending``
yet, nothing in the job directory), by an upload in progress whose file name carries the job id.

This module knows nothing of the JVM; the sidecar's ``stream.*`` operations (:mod:`s3commit.bridge.sink`)
call it. The job directory, pendingsets and orphan sweep are the magic committer's; the steps are the job
commit engine's (:class:`~s3commit.commit.engine.CommitEngine`, its commit point the sink's log); only when they
run, and what the log decides, are this module's.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from s3commit.commit.engine import CommitEngine, CommitPoint
from s3commit.commit.process_state import ProcessState
from s3commit.committers.magic import MagicCommitter
from s3commit.config.options import CommitterOptions
from s3commit.errors import ConfigError, NotFoundError, S3CommitError
from s3commit.model.batch_journal import BatchJournal
from s3commit.model.manifests import PendingUpload
from s3commit.model.paths import MAGIC_PATH_PREFIX
from s3commit.model.snapshot_log import COMPACT_SUFFIX, SETTINGS_NAME
from s3commit.model.snapshot_log import LOG_DIR as SINK_LOG_DIR
from s3commit.model.task_message import TaskCommitMessage
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_BATCH_JOB = re.compile(rf"^b(?P<batch>\d{{1,18}})-{_UUID}$")
"""A batch job's id: ``b<batch>-`` and a whole UUID. A plain UUID never matches, even one whose first group is a ``b``
and seven digits (``b5173623-d4e8-...``: about one random job id in 400), so another job in the sink's directory is
never taken for a batch."""
_JOB_IN_NAME = re.compile(rf"-(b\d{{1,18}}-{_UUID})")
"""A batch job's id in a file name the JVM made (``part-00003-b12-<uuid>.c000.snappy.parquet``)."""


def batch_job_id(batch_id: int) -> str:
    """The job id of one attempt at committing ``batch_id``: ``b<batch>-<uuid>`` (the JVM makes the same)."""
    if batch_id < 0:
        raise ConfigError(f"batch id {batch_id} is negative")
    return f"b{batch_id}-{uuid.uuid4()}"


def batch_of_job(job_id: str) -> int | None:
    """The batch id of a streaming batch job (``b<batch>-<uuid>``), or None for any other job id."""
    match = _BATCH_JOB.match(job_id)
    return int(match["batch"]) if match else None


class SinkLog:
    """The file sink's log as S3 holds it: ``<sink>/_spark_metadata/<batch>`` and ``<batch>.compact`` files,
    each ``v<version>`` then one JSON file status per line. Read only; listed once, on first use."""

    def __init__(self, store: S3Store, sink: S3Uri) -> None:
        self.store = store
        self.sink = sink
        self.prefix = f"{sink.prefix}{SINK_LOG_DIR}/"
        self._files: dict[int, str] | None = None

    def files(self) -> dict[int, str]:
        """Batch id -> key of its log file (a compaction batch's ``.compact`` file)."""
        if self._files is None:
            found: dict[int, str] = {}
            for info in self.store.objects.list_objects(self.sink.bucket, self.prefix, delimiter="/"):
                name = info.key[len(self.prefix):]
                number = name[:-len(COMPACT_SUFFIX)] if name.endswith(COMPACT_SUFFIX) else name
                if info.size >= 0 and number.isdigit():
                    found[int(number)] = info.key
            self._files = found
        return self._files

    def latest(self) -> int | None:
        files = self.files()
        return max(files) if files else None

    def entry_names(self, batch_id: int, token: str) -> bool | None:
        """Whether the log's entry for ``batch_id`` names a file whose path contains ``token`` (a job id):
        read from the batch's own file, or from the first compaction at or after it (which holds the
        entries of every earlier batch). None if the log has no such file to read."""
        files = self.files()
        key = files.get(batch_id)
        if key is None:
            later = sorted(b for b, k in files.items() if b > batch_id and k.endswith(COMPACT_SUFFIX))
            if not later:
                return None
            key = files[later[0]]
        try:
            body = self.store.objects.get_object(self.sink.bucket, key)
        except NotFoundError:  # deleted by a compaction since the listing
            return None
        return any(token in line for line in body.decode("utf-8", "replace").splitlines()[1:])


class BatchCommit:
    """One attempt at committing one batch of a file sink: :meth:`prepare`, then (the JVM writes the log entry)
    :meth:`finish`, or :meth:`roll_back`. The steps are the commit engine's, with the sink's log as the commit point
    (:class:`~s3commit.commit.engine.CommitPoint` ``SINK_LOG``); this class decides when.

    Args:
        store: the S3 store.
        sink: the sink's directory (``s3://bucket/path``).
        job_id: ``b<batch>-<uuid>`` (:func:`batch_job_id`).
        options: committer options (threads, rate limit, orphan sweep).
    """

    def __init__(self, store: S3Store, sink: str | S3Uri, job_id: str, *,
                 options: CommitterOptions | None = None, process: ProcessState | None = None) -> None:
        batch_id = batch_of_job(job_id)
        if batch_id is None:
            raise ConfigError(f"{job_id!r} is not a streaming batch job id (b<batch>-<uuid>)")
        self.batch_id = batch_id
        self.store = store
        self.options = options or CommitterOptions()
        self.committer = MagicCommitter(sink, job_id=job_id, store=store, options=self.options, process=process)
        self.sink = self.committer.dest
        self.job_id = job_id
        self.layout = self.committer.layout
        self.engine = CommitEngine(store, dest=self.sink, layout=self.layout, job_id=job_id,
                                   committer="magic-streaming", options=self.options, job_id_source="spark-streaming",
                                   point=CommitPoint.SINK_LOG)
        self.pendingsets: tuple[str, ...] | None = None
        self.files = 0
        self.bytes = 0

    def prepare(self, messages: Iterable[TaskCommitMessage]) -> list[PendingUpload]:
        """Validate the committed tasks' pendingsets and journal them; returns the uploads (the batch's files,
        for its log entry). Nothing becomes visible."""
        accepted: dict[str, set[str]] = {}
        for message in messages:
            if message.job_id != self.job_id:
                raise ConfigError(f"task commit message of job {message.job_id} given to batch job {self.job_id}")
            if message.pendingset_key is not None:
                accepted.setdefault(message.pendingset_key, set()).add(message.task_attempt_id)
        keys = sorted(accepted)
        self._refuse_snapshot_destination()
        uploads = self.engine.prepare(keys, accepted)
        self.pendingsets = tuple(keys)
        self.files = len(uploads)
        self.bytes = sum(u.length for u in uploads)
        return uploads

    def _refuse_snapshot_destination(self) -> None:
        """A snapshot destination's log is s3commit's (``_spark_metadata/<n>.compact``, every entry whole): a file
        sink's batches there would be read by no one, or make Spark read the sink's batch instead of the table.
        Asked once a sink in a process (its first batch here): a sink's directory, whose log is not s3commit's, can
        never be made a snapshot destination later (``snapshot enable`` refuses it)."""
        sink = self.engine.dest
        settings = f"{sink.prefix}{SINK_LOG_DIR}/{SETTINGS_NAME}"

        def snapshot_destination() -> bool:
            try:
                self.engine.store.objects.head_object(sink.bucket, settings)
            except NotFoundError:
                return False
            return True

        if not self.committer.process.snapshot_destination(str(sink), "", snapshot_destination):
            return
        raise ConfigError(f"{sink} is a snapshot destination (s3://{sink.bucket}/{settings}): a Structured "
                          "Streaming file sink cannot write there, its log would be the snapshots' log. Write the "
                          "stream to another path, or `s3commit snapshot disable` it first")

    def journal(self) -> BatchJournal | None:
        """The job's journal, or None if it has none (it never reached its commit, or finished)."""
        return self.engine.batch_journal()

    def finish(self) -> int:
        """The log has the batch: complete every upload, then clean up (the engine's :meth:`~CommitEngine.finish`:
        idempotent, completed uploads count as done; a clean-up that had begun is finished). Returns how many uploads
        were completed.

        Raises:
            SinkRecoveryError: an upload could not be completed; the journal is kept, so that the next
                :func:`recover_sink` finishes the batch.
        """
        return self.engine.finish(self.pendingsets)

    def roll_back(self) -> None:
        """Abort every upload of this batch job and delete its directory (the batch did not commit here)."""
        self.committer.abort_job()


@dataclass
class SinkRecovery:
    """What :func:`recover_sink` found and did, by batch job id."""

    finished: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    undecided: dict[str, int] = field(default_factory=dict)
    """Jobs of batches the log has not decided yet, with their batch ids (left alone)."""
    failed: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"finished": self.finished, "rolled_back": self.rolled_back, "undecided": self.undecided,
                "failed": self.failed}


def batch_jobs(store: S3Store, sink: S3Uri) -> list[str]:
    """The streaming batch jobs with a trace under the sink: a job directory (one LIST), or an upload in progress
    whose file name carries the job id (one ListMultipartUploads): a task killed while it wrote has nothing in
    the job directory yet (its ``.pending`` is written when the file closes)."""
    prefix = f"{sink.prefix}{MAGIC_PATH_PREFIX}"
    found: dict[str, None] = {}
    for info in store.objects.list_objects(sink.bucket, prefix, delimiter="/"):
        if info.size < 0:  # a common prefix: one job's directory
            job_id = info.key[len(prefix):].rstrip("/")
            if batch_of_job(job_id) is not None:
                found[job_id] = None
    try:
        for upload in store.uploads.list_multipart_uploads(sink.bucket, sink.prefix):
            match = _JOB_IN_NAME.search(upload.key.rsplit("/", 1)[-1])
            if match:
                found[match[1]] = None
    except S3CommitError as err:
        # Listing uploads needs s3:ListBucketMultipartUploads, which some roles lack: the job directories
        # still tell most of the story (the uploads of a task killed mid-write then wait for a lifecycle rule).
        log.warning("cannot list the uploads under %s to find killed batches: %s", sink, err)
    return list(found)


def recover_sink(store: S3Store, sink: str | S3Uri, *, options: CommitterOptions | None = None,
                 exclude: Iterable[str] = (), jobs: Sequence[str] | None = None,
                 process: ProcessState | None = None) -> SinkRecovery:
    """Settle the batch jobs left under a sink as its log decides (see the module docstring).

    Args:
        exclude: job ids to leave alone (the caller's own, running batch).
        jobs: the job ids to look at; None lists them (one LIST).
        process: the process state the batches' committers use (the sidecar's own; default this process's).
    """
    target = sink if isinstance(sink, S3Uri) else S3Uri.from_location(sink)
    report = SinkRecovery()
    skip = set(exclude)
    candidates = [j for j in (batch_jobs(store, target) if jobs is None else jobs) if j not in skip]
    if not candidates:
        return report
    sink_log = SinkLog(store, target)
    for job_id in candidates:
        batch = batch_of_job(job_id)
        assert batch is not None
        latest = sink_log.latest()
        if latest is None or batch > latest:
            report.undecided[job_id] = batch
            continue
        commit = BatchCommit(store, target, job_id, options=options, process=process)
        started = time.monotonic()
        try:
            named = sink_log.entry_names(batch, job_id)
            if named is None:
                log.warning("batch job %s: the log of %s has batch %d but no file to read its entry from; "
                            "leaving the job alone", job_id, target, batch)
                report.undecided[job_id] = batch
            elif named:
                completed = commit.finish()
                report.finished.append(job_id)
                log.info("batch job %s: batch %d is in the log of %s; completed %d uploads in %.0f ms", job_id,
                         batch, target, completed, (time.monotonic() - started) * 1000)
            else:
                commit.roll_back()
                report.rolled_back.append(job_id)
                log.info("batch job %s: batch %d of %s was committed by another job; rolled back", job_id,
                         batch, target)
        except S3CommitError as err:
            report.failed[job_id] = str(err)
            log.warning("batch job %s of %s could not be settled: %s", job_id, target, err)
    return report

