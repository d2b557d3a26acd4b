"""The sidecar's filesystem metadata calls: stat, list, delete, mkdirs, rename.

S3 has no directories: a "directory" is a key prefix (or an empty ``dir/`` marker that ``mkdirs`` writes).
A listing is streamed to the JVM as NDJSON records, page by page as S3 returns them, so a directory of a
million objects needs no large message. ``rename`` is what rename costs on S3, a COPY of every object and
then a DELETE: it exists only so that Spark's rename-based protocols can run (as the baseline s3commit is
measured against). Retries and error translation are the store's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from s3commit.bridge.protocol import Body, ndjson
from s3commit.bridge.registry import Configurations
from s3commit.bridge.reply import Reply
from s3commit.errors import ConfigError, NotFoundError, S3CommitError
from s3commit.model.object_info import ObjectInfo
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store


def status(path: str, *, size: int, directory: bool, mtime: float = 0.0) -> dict[str, Any]:
    """A file status as the JVM reads it (``length``, ``dir``, ``mtime`` in milliseconds)."""
    return {"path": path, "length": size, "dir": directory, "mtime": int(mtime * 1000)}


def _mtime(info: ObjectInfo) -> float:
    return info.last_modified.timestamp() if info.last_modified else 0.0


class FileOps:
    """``fs.stat``, ``fs.list``, ``fs.delete``, ``fs.mkdirs``, ``fs.rename``."""

    def __init__(self, confs: Configurations) -> None:
        self.confs = confs

    def ops(self) -> dict[str, Any]:
        return {"fs.stat": self.stat, "fs.list": self.list, "fs.delete": self.delete,
                "fs.mkdirs": self.mkdirs, "fs.rename": self.rename}

    def _store(self, req: dict[str, Any]) -> S3Store:
        return self.confs.get(req.get("conf_id")).store

    def stat(self, req: dict[str, Any], _: Body | None) -> Reply:
        return Reply(self.status_of(self._store(req), req["path"]))

    @staticmethod
    def status_of(store: S3Store, path: str) -> dict[str, Any]:
        uri = S3Uri.from_location(path)
        if not uri.key:
            store.head_bucket(uri.bucket)
            return status(path, size=0, directory=True)
        try:
            info = store.objects.head_object(uri.bucket, uri.key)
            return status(path, size=info.size, directory=False, mtime=_mtime(info))
        except NotFoundError:
            pass
        for _info in store.objects.list_objects(uri.bucket, uri.prefix):
            return status(path, size=0, directory=True)
        raise NotFoundError(f"No such file or directory: {path}", operation="getFileStatus",
                            bucket=uri.bucket, key=uri.key)

    def list(self, req: dict[str, Any], _: Body | None) -> Reply:
        """The entries directly under a directory, streamed (NDJSON). A file lists as itself; a path that
        does not exist is ``FileNotFound`` (checked before anything is streamed)."""
        store, path = self._store(req), req["path"]
        uri = S3Uri.from_location(path)
        scheme = path.split("://", 1)[0]
        entries = self._entries(store, uri, scheme)
        first = next(entries, None)
        if first is None:  # empty: a file lists as itself, a missing path fails here, before any record
            itself = self.status_of(store, path) if uri.key else None
            return Reply({}, stream=ndjson([itself] if itself is not None and not itself["dir"] else []))

        def records() -> Iterator[dict[str, Any]]:
            yield first
            yield from entries

        return Reply({}, stream=ndjson(records()))

    @staticmethod
    def _entries(store: S3Store, uri: S3Uri, scheme: str) -> Iterator[dict[str, Any]]:
        for info in store.objects.list_objects(uri.bucket, uri.prefix, delimiter="/"):
            if info.key == uri.prefix:
                continue  # the directory's own marker
            entry_path = f"{scheme}://{uri.bucket}/{info.key.rstrip('/')}"
            yield status(entry_path, size=max(info.size, 0), directory=info.is_prefix or info.key.endswith("/"),
                         mtime=_mtime(info))

    def delete(self, req: dict[str, Any], _: Body | None) -> Reply:
        store, uri = self._store(req), S3Uri.from_location(req["path"])
        try:
            store.objects.head_object(uri.bucket, uri.key)
            store.objects.delete_object(uri.bucket, uri.key)
            return Reply({"deleted": True})
        except NotFoundError:
            pass
        children = [i.key for i in store.objects.list_objects(uri.bucket, uri.prefix)]
        if not children:
            return Reply({"deleted": False})
        if not req.get("recursive") and any(k != uri.prefix for k in children):
            raise S3CommitError(f"{req['path']} is a non-empty directory and the delete is not recursive")
        store.objects.delete_objects(uri.bucket, children)
        return Reply({"deleted": True})

    def mkdirs(self, req: dict[str, Any], _: Body | None) -> Reply:
        store, uri = self._store(req), S3Uri.from_location(req["path"])
        if uri.key:
            store.objects.put_object(uri.bucket, uri.prefix, b"")
        return Reply({"created": True})

    def rename(self, req: dict[str, Any], _: Body | None) -> Reply:
        """Rename as S3 does it: COPY every object, then DELETE the sources (O(bytes), not atomic)."""
        store = self._store(req)
        src, dst = S3Uri.from_location(req["src"]), S3Uri.from_location(req["dst"])
        if src.bucket != dst.bucket:
            raise ConfigError(f"cannot rename across buckets: {src} -> {dst}")
        try:
            info = store.objects.head_object(src.bucket, src.key)
        except NotFoundError:
            info = None
        if info is not None:
            target = dst
            if any(True for _ in store.objects.list_objects(dst.bucket, dst.prefix)):
                target = dst.child(src.key.rsplit("/", 1)[-1])  # into an existing directory
            store.objects.copy_object(src.bucket, src.key, target.key, size=info.size)
            store.objects.delete_object(src.bucket, src.key)
            return Reply({"renamed": True})
        sources = list(store.objects.list_objects(src.bucket, src.prefix))
        if not sources:
            return Reply({"renamed": False})
        for obj in sources:
            store.objects.copy_object(src.bucket, obj.key, dst.prefix + obj.key[len(src.prefix):], size=obj.size)
        store.objects.delete_objects(src.bucket, (o.key for o in sources))
        return Reply({"renamed": True})
