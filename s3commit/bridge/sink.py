"""The sidecar's Structured Streaming calls: the file sink's batch commits and the checkpoint's existence test.

**File sink** (``S3StreamingCommitProtocol`` in the jar; the order and the recovery rules are
:mod:`s3commit.committers.sink_batches`'s):

- ``stream.task_setup``, ``stream.task_commit``, ``stream.task_abort``: a batch's tasks, always through the
  magic committer (whatever ``fs.s3a.committer.name`` says: the sink's guarantees rest on its layout);
- ``stream.prepare``: the driver hands over the tasks' messages (NDJSON body, as ``job.commit``); the
  pendingsets are validated and journaled, and the batch's files come back (NDJSON: ``key``, ``length``)
  for the JVM to write the batch's log entry;
- ``stream.finish`` after the log entry is written, ``stream.abort`` when it lost (or the batch failed);
- ``stream.recover``: settle the batch jobs left under a sink (finish, roll back, or leave undecided).

A prepared batch is kept here until it finishes or aborts (a bounded table), so finishing needs no second
read of its pendingsets; a sidecar started after the last one died reads them again from the journal.

**Checkpoint**: ``ckpt.exists`` answers "is there a file or a directory at this path" with one LIST
(``fs.stat`` needs a HEAD and, for a missing file, a LIST too): Spark asks it before every log entry.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from s3commit.bridge.commits import CommitOps, messages_of
from s3commit.bridge.data_path import Streams
from s3commit.bridge.protocol import Body, ndjson
from s3commit.bridge.registry import Configurations, Registered
from s3commit.bridge.reply import Reply
from s3commit.commit.process_state import THIS_PROCESS, ProcessState
from s3commit.committers import Committer
from s3commit.committers.magic import MagicCommitter
from s3commit.committers.sink_batches import BatchCommit, recover_sink
from s3commit.model.uri import S3Uri

PREPARED_LIMIT = 64
"""Prepared batches kept between ``stream.prepare`` and ``stream.finish``/``stream.abort``."""


class _SinkTaskOps(CommitOps):
    """``task.*`` of :class:`CommitOps`, with the magic committer whatever the configuration names."""

    def _committer(self, req: dict[str, Any], *, job_op: bool = False) -> Committer:
        registered: Registered = self.confs.get(req.get("conf_id"))
        return MagicCommitter(req["dest"], job_id=req["job_id"], store=registered.store,
                              options=registered.options, process=self.process)


class StreamOps:
    """``stream.*`` (the file sink's batch commits) and ``ckpt.exists``."""

    def __init__(self, confs: Configurations, streams: Streams, *, process: ProcessState = THIS_PROCESS) -> None:
        self.confs = confs
        self.process = process
        self.tasks = _SinkTaskOps(confs, streams, process=process)
        self._lock = threading.Lock()
        self._prepared: OrderedDict[str, BatchCommit] = OrderedDict()

    def ops(self) -> dict[str, Any]:
        return {"stream.task_setup": self.tasks.task_setup, "stream.task_commit": self.tasks.task_commit,
                "stream.task_abort": self.tasks.task_abort, "stream.prepare": self.prepare,
                "stream.finish": self.finish, "stream.abort": self.abort, "stream.recover": self.recover,
                "ckpt.exists": self.exists}

    def _batch(self, req: dict[str, Any], *, take: bool = False) -> BatchCommit:
        job_id = str(req["job_id"])
        with self._lock:
            found = self._prepared.pop(job_id, None) if take else self._prepared.get(job_id)
        if found is not None:
            return found
        registered = self.confs.get(req.get("conf_id"))
        return BatchCommit(registered.store, req["dest"], job_id, options=registered.options, process=self.process)

    def prepare(self, req: dict[str, Any], body: Body | None) -> Reply:
        batch = self._batch(req)
        messages = [m for _, m in messages_of(body.lines())] if body is not None else []
        uploads = batch.prepare(messages)
        with self._lock:
            self._prepared[batch.job_id] = batch
            while len(self._prepared) > PREPARED_LIMIT:
                self._prepared.popitem(last=False)

        def records() -> Iterator[dict[str, Any]]:
            for upload in uploads:
                yield {"key": upload.destination_key, "length": upload.length}

        return Reply({"files": batch.files, "bytes": batch.bytes}, stream=ndjson(records()))

    def finish(self, req: dict[str, Any], _: Body | None) -> Reply:
        batch = self._batch(req, take=True)
        completed = batch.finish()
        return Reply({"completed": completed})

    def abort(self, req: dict[str, Any], _: Body | None) -> Reply:
        batch = self._batch(req, take=True)
        batch.roll_back()
        self.tasks.forget_job(batch.job_id)
        return Reply({})

    def recover(self, req: dict[str, Any], _: Body | None) -> Reply:
        registered = self.confs.get(req.get("conf_id"))
        report = recover_sink(registered.store, req["dest"], options=registered.options,
                              exclude=[str(j) for j in req.get("exclude") or ()], process=self.process)
        return Reply(report.to_dict())

    def exists(self, req: dict[str, Any], _: Body | None) -> Reply:
        """A file at the path, or anything under ``path/``: one LIST (prefix = the key, delimiter ``/``), which
        lists the object itself and the directory's common prefix, whichever there is."""
        store = self.confs.get(req.get("conf_id")).store
        uri = S3Uri.from_location(req["path"])
        if not uri.key:
            store.head_bucket(uri.bucket)
            return Reply({"exists": True})
        key = uri.key.rstrip("/")
        for info in store.objects.list_objects(uri.bucket, key, delimiter="/"):
            if info.key == key or info.key == key + "/":
                return Reply({"exists": True})
            if info.size >= 0 and info.key > key + "/":
                break  # objects come in key order: past everything the path could name
        return Reply({"exists": False})
