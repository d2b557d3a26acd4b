"""The Hadoop configurations the JVM registered: each is parsed once into a store and committer options.

A configuration's id is a hash of its keys, so the JVM can register the same keys again and get the same
id: that is how it recovers when a new sidecar (started after the last one died) answers
``UnknownConfiguration``. Every store made here saves manifests with part ETags in the form the sidecar was given
(its JVM's S3A's, :class:`~s3commit.model.manifests.EtagForm`). The table is bounded (least recently used out),
so a session that cycles through many configurations does not grow; an evicted id is simply registered again.
Nothing here outlives the process, and nothing here cannot be rebuilt from a request.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from s3commit.config.jvm_streams import StreamOptions
from s3commit.config.options import CommitterOptions, StoreOptions
from s3commit.errors import S3CommitError
from s3commit.model.manifests import EtagForm
from s3commit.store.s3store import S3Store

LIMIT = 64
"""Configurations kept at once."""


class UnknownConfiguration(S3CommitError):
    """The configuration id is not (or no longer) known here: register it again."""


@dataclass
class Registered:
    """One registered configuration: its keys, its store, its committer options and its upload threads."""

    conf_id: str
    conf: dict[str, str]
    store: S3Store
    _options: CommitterOptions | None = None
    _pool: ThreadPoolExecutor | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def options(self) -> CommitterOptions:
        """Committer options (parsed on first use: a bad value fails the request that needs it)."""
        if self._options is None:
            self._options = CommitterOptions.from_hadoop_conf(self.conf)
        return self._options

    @property
    def streams(self) -> StreamOptions:
        """How the JVM's streams read and buffer with this configuration."""
        return StreamOptions.from_hadoop_conf(self.conf)

    @property
    def upload_pool(self) -> ThreadPoolExecutor:
        """Threads for part uploads of every file written with this configuration. Each file has at most
        ``fs.s3a.fast.upload.active.blocks`` parts queued or uploading (the writer's bound)."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.store.options.max_pool_connections,
                                                thread_name_prefix=f"s3commit-parts-{self.conf_id[:6]}")
            return self._pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)


def conf_id_of(conf: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(conf, sort_keys=True).encode()).hexdigest()[:16]


class Configurations:
    """conf id -> :class:`Registered`, least recently used out past :data:`LIMIT`; every store writes part ETags in
    ``etag_form``."""

    def __init__(self, limit: int = LIMIT, *, etag_form: EtagForm = EtagForm.OBJECTS) -> None:
        self._limit = limit
        self.etag_form = etag_form
        self._lock = threading.Lock()
        self._table: OrderedDict[str, Registered] = OrderedDict()
        self._retired: Counter[str] = Counter()
        self._retired_bytes = {"bytes_uploaded": 0, "bytes_copied": 0}

    def register(self, conf: dict[str, Any]) -> str:
        """Remember ``conf``; returns its id. Raises ConfigError for a value that cannot be parsed."""
        keys = {str(k): str(v) for k, v in conf.items()}
        StreamOptions.from_hadoop_conf(keys)  # a bad stream option fails the registration, by name
        conf_id = conf_id_of(keys)
        with self._lock:
            found = self._table.get(conf_id)
            if found is not None:
                self._table.move_to_end(conf_id)
                return conf_id
            options = replace(StoreOptions.from_hadoop_conf(keys), etag_form=self.etag_form)
            self._table[conf_id] = Registered(conf_id, keys, S3Store(options))
            while len(self._table) > self._limit:
                _, evicted = self._table.popitem(last=False)
                self._retire(evicted)
        return conf_id

    def _retire(self, evicted: Registered) -> None:
        # Its writers (if any are still open) keep their own references; only the table forgets it.
        snapshot = evicted.store.counters.snapshot()
        self._retired.update(snapshot["requests"])
        for name in self._retired_bytes:
            self._retired_bytes[name] += snapshot[name]

    def get(self, conf_id: Any) -> Registered:
        with self._lock:
            found = self._table.get(str(conf_id))
            if found is None:
                raise UnknownConfiguration(f"unknown configuration id {conf_id!r}: register it first")
            self._table.move_to_end(found.conf_id)
            return found

    def __len__(self) -> int:
        with self._lock:
            return len(self._table)

    def counters(self) -> dict[str, Any]:
        """S3 requests made through every configuration so far, by operation, and bytes moved."""
        with self._lock:
            live = list(self._table.values())
            requests = Counter(self._retired)
            totals = dict(self._retired_bytes)
        for registered in live:
            snapshot = registered.store.counters.snapshot()
            requests.update(snapshot["requests"])
            for name in totals:
                totals[name] += snapshot[name]
        return {"requests": dict(requests), **totals}

    def close(self) -> None:
        with self._lock:
            live = list(self._table.values())
        for registered in live:
            registered.close()
