"""Snapshot destinations: the formats of their log (issue 55; DESIGN.md section 27).

A destination that opts in keeps a log of committed snapshots under ``<dest>/_spark_metadata/``, in the format of
Spark's file sink log (``FileStreamSinkLog``), so that stock Spark reads it instead of listing the directory:

    <dest>/_spark_metadata/s3commit-snapshots.json   the settings (:class:`SnapshotSettings`): this log is s3commit's
    <dest>/_spark_metadata/<N>.compact               snapshot N: "v1", then one JSON line per live data file

Every entry is a compaction batch holding every live file. Spark's reader (``MetadataLogFileIndex`` over
``CompactibleFileStreamLog``, checked in Spark 3.5.9 and 4.3.0) takes the greatest batch id it lists and, when
that batch is a compaction batch, reads that one file alone; with every entry a ``.compact`` file the interval it
derives (the difference of the two latest compaction ids, or ``id + 1`` for a single one) makes every id a
compaction batch. Spark 3.1+ no longer applies ``delete`` entries, so a snapshot never relies on them: it lists its
files whole. A file's line holds Spark's fields (``path`` as a URI, ``size``, ``isDir``, ``modificationTime``,
``blockReplication``, ``blockSize``, ``action``) and ``s3commitJob``, the job that committed it (Spark ignores
fields it does not know). Names Spark cannot parse as a batch id (the settings) are ignored by its reader.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import quote, unquote, urlsplit

from s3commit.errors import ManifestError
from s3commit.model import json_text

LOG_DIR = "_spark_metadata"
"""Spark's file sink log's directory (``FileStreamSink.metadataDir``): a Structured Streaming file sink's log, and a
snapshot destination's, which Spark's batch reader looks for."""
SETTINGS_NAME = "s3commit-snapshots.json"
"""The settings object in the log's directory; its presence makes the log s3commit's snapshot log."""
SETTINGS_FORMAT = "s3commit-snapshots/1"
MANIFEST_DIR = "_symlink_format_manifest"
"""Where a snapshot destination's symlink manifests are: ``<dest>/_symlink_format_manifest/<partition>/manifest``,
one URI of a live file a line (Delta's layout, read through Hive's ``SymlinkTextInputFormat``)."""
SPARK_LOG_VERSION = "v1"
"""The first line of every entry (``FileStreamSinkLog.VERSION``)."""
COMPACT_SUFFIX = ".compact"
"""A compaction batch's log file: every live entry of the batches up to it (Spark's ``CompactibleFileStreamLog``)."""
BLOCK_SIZE = 32 * 1024 * 1024
"""The block size each file's line gives Spark for splitting reads (S3A's ``fs.s3a.block.size`` default)."""
DEFAULT_RETENTION = 24 * 3600.0
"""Seconds a replaced file stays after the snapshot that dropped it was superseded (``s3commit.snapshot.retention``):
reads planned on an older snapshot finish within it."""
LOG_SCHEMES = ("s3a", "s3", "s3n")
_URI_SAFE = "/=:@!$&'()*+,;-._~"
"""Characters Hadoop's ``Path.toUri()`` leaves as they are in a path; the rest are percent-encoded."""


def entry_name(snapshot_id: int) -> str:
    """The entry's name in the log's directory."""
    return f"{snapshot_id}{COMPACT_SUFFIX}"


def entry_id(name: str) -> int | None:
    """The snapshot id of an entry name, or None for any other name in the log's directory."""
    stem = name[:-len(COMPACT_SUFFIX)] if name.endswith(COMPACT_SUFFIX) else name
    return int(stem) if stem.isdigit() else None


def manifests(snapshot: Snapshot, scheme: str, bucket: str, dest_key: str) -> dict[str, bytes]:
    """The symlink manifests of ``snapshot``: partition directory (relative, ``""`` for files at the top) -> the
    manifest's text, one URI a line, with the log's scheme (the one the table's readers resolve)."""
    prefix = f"{dest_key.strip('/')}/" if dest_key.strip("/") else ""
    by_dir: dict[str, list[str]] = {}
    for f in snapshot.files:
        by_dir.setdefault(f.relative.rpartition("/")[0], []).append(f"{scheme}://{bucket}/{prefix}{f.relative}")
    return {d: ("\n".join(uris) + "\n").encode() for d, uris in by_dir.items()}


def manifest_key(dest_key: str, partition: str) -> str:
    """Where the manifest of ``partition`` (relative; ``""`` for the top) is."""
    prefix = f"{dest_key.strip('/')}/" if dest_key.strip("/") else ""
    return f"{prefix}{MANIFEST_DIR}/{partition + '/' if partition else ''}manifest"


def is_batch_name(name: str) -> bool:
    """True for every name Spark's log reader takes as a batch (``<n>`` or ``<n>.compact``)."""
    return entry_id(name) is not None


class SnapshotFile(NamedTuple):
    """One live data file of a snapshot: its key relative to the destination, its size and modification time (ms),
    and the job that committed it (empty for the files a destination held when its log was enabled). A named
    tuple: a snapshot of 100,000 files makes as many."""

    relative: str
    size: int
    modified_ms: int
    job: str = ""


@dataclass(frozen=True, kw_only=True)
class SnapshotSettings:
    """A snapshot destination's settings: the scheme its entries' paths carry (the one its Spark readers use),
    the retention of replaced files (seconds), when and by which s3commit the log was enabled."""

    scheme: str = "s3a"
    retention: float = DEFAULT_RETENTION
    enabled_ms: int = 0
    enabled_by: str = ""
    symlink_manifests: bool = False
    """Keep ``_symlink_format_manifest/<partition>/manifest`` files current at every commit (Trino, Athena, Hive and
    Presto read a table through them with Hive's ``SymlinkTextInputFormat``)."""

    def to_json(self) -> bytes:
        return json.dumps({"name": SETTINGS_FORMAT, "scheme": self.scheme, "retentionSeconds": self.retention,
                           "enabled": self.enabled_ms, "enabledBy": self.enabled_by,
                           "symlinkManifests": self.symlink_manifests}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, source: str) -> SnapshotSettings:
        try:
            obj = json.loads(data)
        except ValueError as err:
            raise ManifestError(f"{source}: the snapshot settings are not JSON ({err})") from err
        if not isinstance(obj, dict) or obj.get("name") != SETTINGS_FORMAT:
            raise ManifestError(f"{source}: not s3commit's snapshot settings (name={obj.get('name')!r}, "
                                f"expected {SETTINGS_FORMAT!r})" if isinstance(obj, dict) else
                                f"{source}: not s3commit's snapshot settings")
        scheme, retention = obj.get("scheme", "s3a"), obj.get("retentionSeconds", DEFAULT_RETENTION)
        if scheme not in LOG_SCHEMES or not isinstance(retention, (int, float)) or retention < 0:
            raise ManifestError(f"{source}: bad snapshot settings (scheme {scheme!r}, retentionSeconds "
                                f"{retention!r})")
        return cls(scheme=scheme, retention=float(retention), enabled_ms=int(obj.get("enabled", 0)),
                   enabled_by=str(obj.get("enabledBy", "")), symlink_manifests=obj.get("symlinkManifests") is True)


@dataclass(frozen=True)
class Snapshot:
    """Snapshot ``id`` of a destination: its live files, in key order."""

    id: int
    files: tuple[SnapshotFile, ...] = field(default=())

    @classmethod
    def of(cls, snapshot_id: int, files: Iterable[SnapshotFile]) -> Snapshot:
        return cls(snapshot_id, tuple(sorted(files, key=lambda f: f.relative)))

    @property
    def relatives(self) -> frozenset[str]:
        return frozenset(f.relative for f in self.files)

    @property
    def size(self) -> int:
        """The bytes of every file in the snapshot."""
        return sum(f.size for f in self.files)

    def to_entry(self, scheme: str, bucket: str, dest_key: str) -> bytes:
        """The entry Spark reads: the version line, then one line per file with its absolute URI (the JSON of
        ``{"path", "size", "isDir", "modificationTime", "blockReplication", "blockSize", "action", "s3commitJob"}``,
        written by hand: a URI as :func:`_uri_path` makes it needs no JSON escape). A line's tail after its size is
        made once per (modification time, job): a job's files share one."""
        prefix = f"{dest_key.strip('/')}/" if dest_key.strip("/") else ""
        head = f'{{"path":"{scheme}://{bucket}/{_uri_path(prefix)}'
        # One match over every name at once: where all are plain (the usual case) none is quoted one by one.
        plain = _PLAIN.fullmatch("".join(f.relative for f in self.files)) is not None
        tails: dict[tuple[int, str], str] = {}
        lines = [SPARK_LOG_VERSION]
        append = lines.append
        for relative, size, modified, job in self.files:
            tail = tails.get((modified, job))
            if tail is None:
                tail = tails[(modified, job)] = (
                    f',"isDir":false,"modificationTime":{modified},"blockReplication":1,"blockSize":{BLOCK_SIZE},'
                    f'"action":"add","s3commitJob":{json.dumps(job)}}}')
            append(f'{head}{relative if plain else _uri_path(relative)}","size":{size}{tail}')
        return "\n".join(lines).encode()

    def dropped_from(self, entry: bytes, scheme: str, bucket: str, dest_key: str) -> int:
        """How many files ``entry`` (an earlier snapshot's, as written) lists that this snapshot does not: what it
        replaced, counted from the entry's paths alone (no line parsed)."""
        mine = {file_uri(scheme, bucket, dest_key, f.relative) for f in self.files}
        return sum(1 for uri in entry_uris(entry) if uri not in mine)

    @classmethod
    def from_entry(cls, snapshot_id: int, data: bytes, bucket: str, dest_key: str, *, source: str) -> Snapshot:
        """Parse an entry; every file must be a data file of this destination, added once.

        Raises:
            ManifestError: not a version-1 entry, a malformed line, a ``delete`` action (never written by s3commit),
                or a path outside the destination.
        """
        text = data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        if lines[0].strip() != SPARK_LOG_VERSION:
            raise ManifestError(f"{source}: not a version-1 file sink log entry (first line {lines[0][:20]!r})")
        prefix = f"{dest_key.strip('/')}/" if dest_key.strip("/") else ""
        numbered = [(number, line) for number, line in enumerate(lines[1:], start=2) if line.strip()]
        try:  # the lines as one JSON array: one parse in C, not one a line
            objs = json_text.loads("[" + ",".join(line for _, line in numbered) + "]")
        except ValueError:
            objs = None  # which line is bad: parsed one by one below, to name it
        files: dict[str, SnapshotFile] = {}
        for index, (number, line) in enumerate(numbered):
            try:
                obj = objs[index] if objs is not None else json.loads(line)
                netloc, key = _bucket_and_key(obj["path"])
                size, modified, action = int(obj["size"]), int(obj.get("modificationTime", 0)), obj["action"]
            except (ValueError, KeyError, TypeError) as err:
                raise ManifestError(f"{source}: line {number} is not a file entry ({err})") from err
            if action != "add" or obj.get("isDir"):
                raise ManifestError(f"{source}: line {number} is a {action!r} entry"
                                    f"{' of a directory' if obj.get('isDir') else ''}; a snapshot lists files only")
            if netloc != bucket or not key.startswith(prefix) or key == prefix:
                raise ManifestError(f"{source}: line {number} names {obj['path']}, outside s3://{bucket}/{prefix}")
            relative = key[len(prefix):]
            if relative in files:
                raise ManifestError(f"{source}: line {number} lists {relative} a second time")
            files[relative] = SnapshotFile(relative, size, modified, str(obj.get("s3commitJob", "")))
        return cls.of(snapshot_id, files.values())


_PATHS = re.compile(rb'^\{"path":"([^"\\]*)"', re.MULTILINE)
"""The path of each line of an entry as s3commit writes it (``path`` its first field, a URI needing no escape)."""
_PLAIN = re.compile(r"[A-Za-z0-9/=:@!$&'()*+,;\-._~]*")
"""Paths :func:`quote` leaves as they are with :data:`_URI_SAFE` (and no JSON string needs to escape)."""


def file_uri(scheme: str, bucket: str, dest_key: str, relative: str) -> bytes:
    """The path an entry gives the file ``relative`` (to the destination ``dest_key``), as :func:`entry_uris` finds
    it."""
    prefix = f"{dest_key.strip('/')}/" if dest_key.strip("/") else ""
    return f"{scheme}://{bucket}/{_uri_path(prefix + relative)}".encode()


def entry_uris(entry: bytes) -> set[bytes]:
    """The paths an entry (as s3commit writes it) lists, found without parsing its lines."""
    return set(_PATHS.findall(entry))


def _uri_path(key: str) -> str:
    """``key`` as the path of a URI, as Hadoop's ``Path.toUri()`` writes it."""
    return key if _PLAIN.fullmatch(key) else quote(key, safe=_URI_SAFE)


def _bucket_and_key(uri: str) -> tuple[str, str]:
    """The bucket (netloc) and key of an ``s3a://bucket/key`` URI, percent-decoded; :func:`urlsplit`'s answer,
    taken by hand where the URI has no query, fragment or escape (every line s3commit writes for a plain name)."""
    if not isinstance(uri, str):
        raise TypeError(f"path is {type(uri).__name__}, not a string")
    scheme, sep, rest = uri.partition("://")
    if not sep or "?" in rest or "#" in rest or "%" in rest or not scheme.isalnum():
        split = urlsplit(uri)
        return split.netloc, unquote(split.path.lstrip("/"))
    netloc, _, path = rest.partition("/")
    return netloc, path.lstrip("/")
