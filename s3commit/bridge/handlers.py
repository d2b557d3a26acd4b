"""What the sidecar does for the JVM: filesystem calls and committer lifecycle calls.

Thin by design: each request maps onto :class:`~s3commit.store.S3Store`, the writers, or a committer from
:func:`~s3commit.committers.create_committer`. Configuration arrives once per Hadoop configuration
(``conf.register``) and is parsed by :mod:`s3commit.config`; retries and error translation stay in the
store. Task attempts live here between ``task.setup`` and ``task.commit``/``task.abort``, because the files
of a task are written through this same process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from s3commit.committers import Committer, TaskAttempt, TaskCommitMessage, create_committer, open_magic_file
from s3commit.config import CommitterOptions, StoreOptions, committer_name_from_conf
from s3commit.errors import CommitConflictError, CommitStateError, ConfigError, NotFoundError, S3CommitError
from s3commit.paths import is_magic_file_key
from s3commit.store import S3Store
from s3commit.uri import S3Uri
from s3commit.writer import MultipartWriter

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], bytes], tuple[dict[str, Any], bytes]]


def error_type(err: BaseException) -> str:
    """The Java exception family the client raises for ``err``."""
    if isinstance(err, FileNotFoundError):
        return "FileNotFound"
    if isinstance(err, CommitConflictError | FileExistsError):
        return "FileAlreadyExists"
    if isinstance(err, ConfigError):
        return "IllegalArgument"
    if isinstance(err, CommitStateError):
        return "IllegalState"
    return "IO"


def _uri(text: str) -> S3Uri:
    return S3Uri.from_location(text)


def _engine_path(path: str) -> str:
    """A committer's path as Hadoop names it: ``s3a://`` for S3, ``file://`` for a local directory."""
    if path.startswith("s3://"):
        return "s3a://" + path[len("s3://"):]
    if path.startswith("/"):
        return "file://" + path
    return path


def _status(uri: str, *, size: int, directory: bool, mtime: float = 0.0) -> dict[str, Any]:
    return {"path": uri, "length": size, "dir": directory, "mtime": int(mtime * 1000)}


class BridgeHandlers:
    """Request handlers, keyed by ``op``; safe to call from many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._confs: dict[str, dict[str, str]] = {}
        self._stores: dict[str, S3Store] = {}
        self._writers: dict[int, MultipartWriter] = {}
        self._attempts: dict[tuple[str, str], tuple[Committer, TaskAttempt]] = {}
        self._next_handle = 1
        self.ops: dict[str, Handler] = {
            "conf.register": self.conf_register,
            "fs.stat": self.fs_stat, "fs.list": self.fs_list, "fs.read": self.fs_read,
            "fs.delete": self.fs_delete, "fs.mkdirs": self.fs_mkdirs, "fs.rename": self.fs_rename,
            "fs.open_write": self.fs_open_write, "fs.write": self.fs_write, "fs.close_write": self.fs_close_write,
            "fs.abort_write": self.fs_abort_write,
            "job.setup": self.job_setup, "job.commit": self.job_commit, "job.abort": self.job_abort,
            "task.setup": self.task_setup, "task.commit": self.task_commit, "task.abort": self.task_abort,
            "task.absolute_path": self.task_absolute_path,
            "stats": self.stats,
        }

    # --- configuration --------------------------------------------------------------------------

    def conf_register(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        """Remember a Hadoop configuration (``fs.s3a.*``, ``s3commit.*``...); returns its id."""
        conf = {str(k): str(v) for k, v in (req.get("conf") or {}).items()}
        conf_id = hashlib.sha256(json.dumps(conf, sort_keys=True).encode()).hexdigest()[:16]
        with self._lock:
            if conf_id not in self._stores:
                self._stores[conf_id] = S3Store(StoreOptions.from_hadoop_conf(conf))
                self._confs[conf_id] = conf
        return {"conf_id": conf_id}, b""

    def _store(self, req: dict[str, Any]) -> S3Store:
        try:
            return self._stores[req["conf_id"]]
        except KeyError:
            raise ConfigError(f"unknown configuration id {req.get('conf_id')!r}: register it first") from None

    def _options(self, req: dict[str, Any]) -> CommitterOptions:
        return CommitterOptions.from_hadoop_conf(self._confs[req["conf_id"]])

    def stats(self, _req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        """The S3 requests this sidecar has made, by operation, summed over its stores (counted at the
        client: a retried request counts once per attempt), with the bytes uploaded and copied."""
        with self._lock:
            snapshots = [store.counters.snapshot() for store in self._stores.values()]
        requests: Counter[str] = Counter()
        for snapshot in snapshots:
            requests.update(snapshot["requests"])
        return {"requests": dict(requests),
                "bytes_uploaded": sum(s["bytes_uploaded"] for s in snapshots),
                "bytes_copied": sum(s["bytes_copied"] for s in snapshots)}, b""

    # --- filesystem -----------------------------------------------------------------------------

    def fs_stat(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        store, uri = self._store(req), _uri(req["path"])
        if not uri.key:
            store.head_bucket(uri.bucket)
            return _status(req["path"], size=0, directory=True), b""
        try:
            info = store.head_object(uri.bucket, uri.key)
            mtime = info.last_modified.timestamp() if info.last_modified else 0.0
            return _status(req["path"], size=info.size, directory=False, mtime=mtime), b""
        except NotFoundError:
            pass
        for _info in store.list_objects(uri.bucket, uri.prefix):
            return _status(req["path"], size=0, directory=True), b""
        raise NotFoundError(f"No such file or directory: {req['path']}", operation="getFileStatus",
                            bucket=uri.bucket, key=uri.key)

    def fs_list(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        store, uri = self._store(req), _uri(req["path"])
        scheme = req["path"].split("://", 1)[0]
        entries = []
        for info in store.list_objects(uri.bucket, uri.prefix, delimiter="/"):
            if info.key == uri.prefix:
                continue  # the directory's own marker
            path = f"{scheme}://{uri.bucket}/{info.key.rstrip('/')}"
            mtime = info.last_modified.timestamp() if info.last_modified else 0.0
            entries.append(_status(path, size=max(info.size, 0), directory=info.is_prefix or info.key.endswith("/"),
                                   mtime=mtime))
        if not entries and uri.key:
            self.fs_stat(req, b"")  # raises FileNotFound for a path that does not exist
        return {"entries": entries}, b""

    def fs_read(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        store, uri = self._store(req), _uri(req["path"])
        start, length = int(req["offset"]), int(req["length"])
        data = store.get_object(uri.bucket, uri.key, start=start, end=start + length)
        return {}, data

    def fs_delete(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        store, uri = self._store(req), _uri(req["path"])
        try:
            store.head_object(uri.bucket, uri.key)
            store.delete_object(uri.bucket, uri.key)
            return {"deleted": True}, b""
        except NotFoundError:
            pass
        children = [i.key for i in store.list_objects(uri.bucket, uri.prefix)]
        if not children:
            return {"deleted": False}, b""
        if not req.get("recursive") and any(k != uri.prefix for k in children):
            raise S3CommitError(f"{req['path']} is a non-empty directory and the delete is not recursive")
        store.delete_objects(uri.bucket, children)
        return {"deleted": True}, b""

    def fs_mkdirs(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        store, uri = self._store(req), _uri(req["path"])
        if uri.key:
            store.put_object(uri.bucket, uri.prefix, b"")
        return {"created": True}, b""

    def fs_rename(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        """Rename as S3 does it: COPY every object, then DELETE the sources (O(bytes), not atomic)."""
        store, src, dst = self._store(req), _uri(req["src"]), _uri(req["dst"])
        if src.bucket != dst.bucket:
            raise ConfigError(f"cannot rename across buckets: {src} -> {dst}")
        try:
            info = store.head_object(src.bucket, src.key)
        except NotFoundError:
            info = None
        if info is not None:
            target = dst
            if any(True for _ in store.list_objects(dst.bucket, dst.prefix)):
                target = dst.child(src.key.rsplit("/", 1)[-1])  # into an existing directory
            store.copy_object(src.bucket, src.key, target.key, size=info.size)
            store.delete_object(src.bucket, src.key)
            return {"renamed": True}, b""
        sources = list(store.list_objects(src.bucket, src.prefix))
        if not sources:
            return {"renamed": False}, b""
        for obj in sources:
            store.copy_object(src.bucket, obj.key, dst.prefix + obj.key[len(src.prefix):], size=obj.size)
        store.delete_objects(src.bucket, (o.key for o in sources))
        return {"renamed": True}, b""

    def fs_open_write(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        """Open a writer: a magic path defers completion to the job commit; any other path is a plain write."""
        store, uri, options = self._store(req), _uri(req["path"]), self._options(req)
        writer: MultipartWriter
        if is_magic_file_key(uri.key):
            writer = open_magic_file(store, uri, options=options)
        else:
            writer = MultipartWriter(store, uri.bucket, uri.key, part_size=options.part_size,
                                     max_in_flight=options.max_in_flight)
        with self._lock:
            handle = self._next_handle
            self._next_handle += 1
            self._writers[handle] = writer
        return {"handle": handle, "magic": is_magic_file_key(uri.key)}, b""

    def _writer(self, req: dict[str, Any]) -> MultipartWriter:
        with self._lock:
            try:
                return self._writers[int(req["handle"])]
            except KeyError:
                raise CommitStateError(f"unknown or closed write handle {req.get('handle')}") from None

    def fs_write(self, req: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
        self._writer(req).write(payload)
        return {}, b""

    def fs_close_write(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        writer = self._writer(req)
        try:
            writer.close()
        finally:
            with self._lock:
                self._writers.pop(int(req["handle"]), None)
        return {"length": writer.tell()}, b""

    def fs_abort_write(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        with self._lock:
            writer = self._writers.pop(int(req["handle"]), None)
        if writer is not None:
            writer.abort()
        return {}, b""

    # --- committers -----------------------------------------------------------------------------

    def _committer(self, req: dict[str, Any]) -> Committer:
        conf = self._confs[req["conf_id"]]
        name = committer_name_from_conf(conf)
        return create_committer(name, req["dest"], job_id=req["job_id"], store=self._store(req),
                                options=self._options(req))

    def job_setup(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        committer = self._committer(req)
        committer.setup_job()
        return {"committer": committer.name}, b""

    def task_setup(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        committer = self._committer(req)
        attempt = committer.setup_task(req["task_attempt_id"])
        with self._lock:
            self._attempts[(committer.job_id, attempt.task_attempt_id)] = (committer, attempt)
        return {"work_path": _engine_path(attempt.work_path)}, b""

    def task_absolute_path(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        """Where the engine writes a file bound for ``absolute_dir/name``, outside the destination."""
        attempt = self._attempt(req, keep=True)[1]
        path = attempt.absolute_work_path(req["absolute_dir"], req["name"])
        return {"path": _engine_path(path)}, b""

    def _attempt(self, req: dict[str, Any], *, keep: bool = False) -> tuple[Committer, TaskAttempt]:
        """The task attempt ``task.setup`` made here; forgotten unless ``keep`` (its commit or abort ends it)."""
        key = (req["job_id"], req["task_attempt_id"])
        with self._lock:
            found = self._attempts.get(key) if keep else self._attempts.pop(key, None)
        if found is None:
            committer = self._committer(req)
            # A task set up through another process: a magic attempt holds no local state, so it can be
            # rebuilt; a staging attempt's files are on that other process's disk.
            if committer.name != "magic":
                raise CommitStateError(f"task attempt {req['task_attempt_id']} was not set up in this sidecar")
            return committer, committer.setup_task(req["task_attempt_id"])
        return found

    def task_commit(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        committer, attempt = self._attempt(req)
        message = committer.commit_task(attempt)
        return {"message": asdict(message)}, b""

    def task_abort(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        committer, attempt = self._attempt(req)
        committer.abort_task(attempt)
        return {}, b""

    def job_commit(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        committer = self._committer(req)
        # No "messages" (Hadoop's commitJob(JobContext) has none): every pendingset in the job directory.
        messages = None if req.get("messages") is None else [
            TaskCommitMessage(**{**m, "absolute_dirs": tuple(m.get("absolute_dirs") or ())})
            for m in req["messages"]]
        success = committer.commit_job(messages, delete_paths=req.get("delete_paths") or (),
                                       replace_partitions=bool(req.get("replace_partitions")))
        return {"success": success.to_dict()}, b""

    def job_abort(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        self._committer(req).abort_job()
        return {}, b""

