"""Private block directories: where the JVM hands the sidecar finished parts as files.

A directory is ``<base>/s3commit-sidecar-<pid>-<random>``, mode 0700, made by the sidecar (``<base>`` is a
directory named by ``fs.s3a.buffer.dir``, else ``S3COMMIT_BUFFER_DIR``, else the first of YARN's container
directories, ``LOCAL_DIRS``, as S3A's default, else the system temp directory).
The JVM writes a block file there and sends its name; the sidecar accepts only plain names of regular
files inside a directory it made, uploads the part and deletes the file (:class:`s3commit.transfer.parts.FilePart`),
whatever the outcome. Files left by a sidecar that died (with their JVM's streams) are swept when a sidecar
next makes a directory in the same base: every ``s3commit-sidecar-*`` directory of this user whose owner is gone
is deleted. A sidecar holds an exclusive ``flock`` on ``<directory>/.owner`` for its life (the kernel drops it when
the process dies, however it dies); the sweep takes a directory only if it can take that lock, never by a process
id, which another PID namespace (a container sharing ``fs.s3a.buffer.dir``) may give a live sidecar too.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time

from s3commit.errors import ConfigError

log = logging.getLogger(__name__)

BUFFER_DIR_ENV = "S3COMMIT_BUFFER_DIR"
PREFIX = "s3commit-sidecar-"
_DIR_NAME = re.compile(rf"^{PREFIX}(\d+)-")
_BLOCK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}\.block$")


def default_base() -> str:
    """``S3COMMIT_BUFFER_DIR``; else the first directory of ``LOCAL_DIRS`` (a YARN container's local disks, where
    S3A's default ``fs.s3a.buffer.dir`` points); else the system temp directory."""
    local = [d for d in os.environ.get("LOCAL_DIRS", "").split(",") if d.strip() and os.path.isdir(d.strip())]
    return os.environ.get(BUFFER_DIR_ENV) or (local[0].strip() if local else tempfile.gettempdir())


OWNER_LOCK = ".owner"
"""The lock file a sidecar holds in each directory it made."""
UNCLAIMED_AGE = 86400.0
"""Seconds after which a directory with no lock file (made by an older s3commit) is taken as abandoned."""


def claim_directory(path: str) -> int:
    """Hold ``path``'s owner lock for the life of this process; returns the file descriptor that holds it."""
    fd = os.open(os.path.join(path, OWNER_LOCK), os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _abandoned(path: str, info: os.stat_result) -> bool:
    """True if no live process holds ``path``'s owner lock (taking it, briefly, proves it)."""
    try:
        fd = os.open(os.path.join(path, OWNER_LOCK), os.O_RDWR)
    except FileNotFoundError:
        return time.time() - info.st_mtime > UNCLAIMED_AGE
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held: its sidecar lives
    finally:
        os.close(fd)
    return True


def sweep(base: str) -> int:
    """Delete the block directories of this user's sidecars that are gone; returns how many."""
    removed = 0
    try:
        names = os.listdir(base)
    except OSError:
        return 0
    for name in names:
        if not _DIR_NAME.match(name):
            continue
        path = os.path.join(base, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or not _abandoned(path, info):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    if removed:
        log.info("removed %d block directories of sidecars that are gone, under %s", removed, base)
    return removed


class BlockDirectory:
    """One private directory of block files."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._owner = claim_directory(path)

    @classmethod
    def create(cls, base: str | None = None) -> BlockDirectory:
        base = base or default_base()
        os.makedirs(base, exist_ok=True)
        sweep(base)
        return cls(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base))  # mkdtemp makes it 0700

    def block(self, name: str) -> str:
        """The path of block file ``name``, which must be a regular file directly in this directory."""
        if not isinstance(name, str) or not _BLOCK_NAME.match(name):
            raise ConfigError(f"{name!r} is not a block file name")
        path = os.path.join(self.path, name)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            raise ConfigError(f"block file {path} does not exist") from None
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"block file {path} is not a regular file")
        return path

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.close(self._owner)


class BlockDirectories:
    """The block directories of one sidecar: the default one, and one per ``fs.s3a.buffer.dir`` asked for."""

    def __init__(self, default: BlockDirectory | None = None) -> None:
        self._default = default
        self._by_base: dict[str, BlockDirectory] = {}
        self._lock = threading.Lock()

    @property
    def default(self) -> BlockDirectory:
        with self._lock:
            if self._default is None:
                self._default = BlockDirectory.create()
            return self._default

    @property
    def path(self) -> str:
        return self.default.path

    def for_buffer_dir(self, buffer_dir: str) -> BlockDirectory:
        """The directory for a ``fs.s3a.buffer.dir`` value (comma-separated: the first usable one wins)."""
        candidates = [d.strip() for d in buffer_dir.split(",") if d.strip()]
        if not candidates:
            return self.default
        with self._lock:
            for base in candidates:
                found = self._by_base.get(base)
                if found is not None:
                    return found
            for base in candidates:
                try:
                    made = BlockDirectory.create(base)
                except (OSError, ValueError) as err:
                    log.warning("fs.s3a.buffer.dir %s is not usable: %s", base, err)
                    continue
                self._by_base[base] = made
                return made
        raise ConfigError(f"none of fs.s3a.buffer.dir={buffer_dir!r} can hold block files")

    def find(self, directory: str) -> BlockDirectory:
        """The directory this sidecar made at ``directory`` (a request names where its block is)."""
        with self._lock:
            known = [d for d in (self._default, *self._by_base.values()) if d is not None]
        for candidate in known:
            if os.path.realpath(candidate.path) == os.path.realpath(directory):
                return candidate
        raise ConfigError(f"{directory} is not a block directory of this sidecar")

    def remove(self) -> None:
        with self._lock:
            known = [d for d in (self._default, *self._by_base.values()) if d is not None]
        for directory in known:
            with contextlib.suppress(OSError):
                directory.remove()
