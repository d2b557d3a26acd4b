"""Private block directories: where the JVM hands the sidecar finished parts as files.

A directory is ``<base>/s3commit-sidecar-<pid>-<random>``, mode 0700, made by the sidecar (``<base>`` is a
directory named by ``fs.s3a.buffer.dir``, else ``S3COMMIT_BUFFER_DIR``, else the first of YARN's container
directories, ``LOCAL_DIRS``, as S3A's default, else the system temp directory).
The JVM writes a block file there and sends its name; the sidecar accepts only plain names of regular
files inside a directory it made, uploads the part and deletes the file (:class:`s3commit.parts.FilePart`),
whatever the outcome. Files left by a sidecar that died (with their JVM's streams) are swept when a sidecar
next makes a directory in the same base: every ``s3commit-sidecar-<pid>-*`` directory of this user whose
process is gone is deleted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
import tempfile
import threading

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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def sweep(base: str) -> int:
    """Delete the block directories of this user's sidecars that are gone; returns how many."""
    removed = 0
    try:
        names = os.listdir(base)
    except OSError:
        return 0
    for name in names:
        match = _DIR_NAME.match(name)
        if not match or int(match.group(1)) == os.getpid():
            continue
        path = os.path.join(base, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or _alive(int(match.group(1))):
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
