"""What the sidecar does for the JVM: the table of operations, assembled from one module per concern.

- :mod:`s3commit.bridge.registry`: ``conf.register``, the Hadoop configurations (store, options, threads);
- :mod:`s3commit.bridge.files`: ``fs.stat``, ``fs.list``, ``fs.delete``, ``fs.mkdirs``, ``fs.rename``;
- :mod:`s3commit.bridge.data_path`: the data path, ``fs.open_write`` ... ``fs.close_write`` and ``fs.read``;
- :mod:`s3commit.bridge.commits`: ``job.*`` and ``task.*``, the committer lifecycle;
- :mod:`s3commit.bridge.sink`: ``stream.*`` (the file sink's batch commits) and ``ckpt.exists``;
- here: ``stats`` (the S3 requests this sidecar made) and ``health`` (what it holds, for tests and tools).

Thin by design: each request maps onto the store, the writers or a committer; retries and error translation
stay in the store, parsing of configuration in :mod:`s3commit.config.options`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from s3commit.bridge.blocks import BlockDirectories
from s3commit.bridge.commits import CommitOps
from s3commit.bridge.data_path import Streams
from s3commit.bridge.files import FileOps
from s3commit.bridge.operations import check_handlers
from s3commit.bridge.protocol import Body
from s3commit.bridge.registry import Configurations
from s3commit.bridge.reply import Reply, error_header, error_type
from s3commit.bridge.sink import StreamOps
from s3commit.commit.process_state import ProcessState
from s3commit.committers import Committer, create_committer
from s3commit.config.s3a_keys import unsupported
from s3commit.model.manifests import EtagForm

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], Body | None], Reply]

__all__ = ["BridgeHandlers", "Handler", "Reply", "error_header", "error_type"]


class BridgeHandlers:
    """Request handlers, keyed by ``op``; safe to call from many threads. Manifests are written with part ETags in
    ``etag_form`` (the sidecar passes the form of its JVM's S3A)."""

    def __init__(self, *, blocks: BlockDirectories | None = None,
                 committer_factory: Callable[..., Committer] = create_committer,
                 etag_form: EtagForm = EtagForm.OBJECTS, process: ProcessState | None = None) -> None:
        self.blocks = blocks or BlockDirectories()
        #: What the sidecar keeps across the jobs it serves (its magic task attempts, the liveness records it keeps
        #: fresh): its own, handed to every committer and writer it makes.
        self.process = process if process is not None else ProcessState()
        self.confs = Configurations(etag_form=etag_form)
        self.files = FileOps(self.confs)
        self.streams = Streams(self.confs, self.blocks, process=self.process)
        self.commits = CommitOps(self.confs, self.streams, process=self.process, factory=committer_factory)
        self.streaming = StreamOps(self.confs, self.streams, process=self.process)
        self.ops: dict[str, Handler] = {
            "conf.register": self.conf_register,
            **self.files.ops(), **self.streams.ops(), **self.commits.ops(), **self.streaming.ops(),
            "stats": self.stats, "health": self.health,
        }
        check_handlers(self.ops)  # the table in operations.json, and nothing else

    def conf_register(self, req: dict[str, Any], _: Body | None) -> Reply:
        """Remember a Hadoop configuration (``fs.s3a.*``, ``s3commit.*``...); returns its id, the options
        of the JVM's streams (parsed here, so the Java side keeps no defaults of its own) and the S3A keys it
        sets that s3commit does not support (the JVM names them in a warning, once each)."""
        conf = req.get("conf") or {}
        conf_id = self.confs.register(conf)
        return Reply({"conf_id": conf_id, "streams": self.confs.get(conf_id).streams.to_wire(),
                      "unsupported": unsupported(conf)})

    def stats(self, _req: dict[str, Any], _: Body | None) -> Reply:
        """The S3 requests this sidecar has made, by operation (counted at the client: a retried request
        counts once per attempt), with the bytes uploaded and copied."""
        return Reply(self.confs.counters())

    def health(self, _req: dict[str, Any], _: Body | None) -> Reply:
        """What this sidecar holds: configurations, open write handles, remembered task attempts, threads."""
        import threading

        return Reply({"pid": os.getpid(), "configurations": len(self.confs), "write_handles": len(self.streams),
                      "magic_attempts": len(self.process.tasks), "threads": threading.active_count(),
                      "rss_bytes": _rss_bytes()})

    def close(self) -> None:
        self.streams.close()
        self.confs.close()
        self.process.end()


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
