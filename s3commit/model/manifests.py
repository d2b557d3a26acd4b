"""The persistent formats: ``.pending``, ``.pendingset``, ``_SUCCESS`` and the commit journal.

Field names and versions follow Hadoop S3A exactly (``SinglePendingCommit`` v2, ``PendingSet`` v3,
``SuccessData`` ``org.apache.hadoop.fs.s3a.commit.files.SuccessData/1``), so Hadoop tools can read what we
write and we can read theirs. These files are the wire format between processes (tasks, the driver, the
JVM, the CLI): ``validate()`` runs on every load and before every save, unknown fields are ignored, and
every error names the file and the rule it broke. Pure: no I/O.

Part ETags come in two forms under the same version 2 of ``.pending``: a list of strings (``List<String>``: Hadoop
3.3 and 3.4.1) or a list of objects ``{"etag", "checksumAlgorithm", "checksum"}`` (``List<UploadEtag>``: hadoop-aws
3.4.2 and 3.5.0, checked with javap). Each Hadoop's Jackson reads only its own form. s3commit reads both and
writes the form it is asked for (:class:`EtagForm`, a parameter of ``to_json``/``to_dict``; objects by default, with
the part checksums it sent where it recorded them): the store's ``StoreOptions.etag_form`` says which, and a Spark
sidecar sets it to the form of its JVM's S3A (:meth:`EtagForm.of_hadoop`).
"""

from __future__ import annotations

import enum
import json
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from s3commit.errors import ManifestError
from s3commit.model import checksums, json_text

PENDING_VERSION = 2
PENDINGSET_VERSION = 3
SUCCESS_NAME = "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
JOURNAL_FORMAT = "s3commit.CommitJournal/1"
SUCCESS_FILENAME_LIMIT = 100
"""``_SUCCESS`` lists at most this many file names (Hadoop's ``SUCCESS_MARKER_FILE_LIMIT``)."""
ETAG_OBJECTS_SINCE = (3, 4, 2)
"""The first Hadoop whose S3A writes and reads part ETags as objects (``List<UploadEtag>``, ``{"etag": ...,
"checksumAlgorithm": ..., "checksum": ...}``): 3.4.2 and 3.5.0 have the class ``UploadEtag``, 3.4.1 and older read and
write strings (checked with javap on each hadoop-aws jar from Maven Central, 2026-11-27). Hadoop's readers each take
one form only: S3A 3.5.0's ``PendingSet.load`` refuses strings ("no String-argument constructor"), an S3A that reads
strings refuses objects. s3commit reads both."""
COMPLETED_KEY = "s3commit.completed"
"""``extraData`` key of a pendingset's entry whose upload its task commit completed already (value
:data:`COMPLETED_AT_TASK_COMMIT`): on a snapshot destination, where the log, not a listing, says what is committed.
A job commit sends no Complete for it; an abort, the sweep of a dead job or a losing attempt's successor deletes the
object. Hadoop's S3A, and s3commit before it, ignore the entry and complete the upload again, which S3 answers as
done (the upload is gone, the object is the one its parts make)."""
COMPLETED_AT_TASK_COMMIT = "task-commit"
KEY_THERE_AT_TASK_COMMIT = "key-there"
""":data:`COMPLETED_KEY`'s value for an entry its task commit left pending because its key was there: the job
commit completes it, unless the key is a file of the destination's current snapshot (a rewrite in place under
its readers, refused)."""
HADOOP_VERSION_ENV = "S3COMMIT_HADOOP_VERSION"
"""Set by the JVM for its sidecar: the Hadoop inside that Spark (``VersionInfo.getVersion()``)."""


class EtagForm(enum.Enum):
    """How a ``.pending`` entry's part ETags are written (both are read)."""

    OBJECTS = "objects"
    """``[{"etag", "checksumAlgorithm", "checksum"}, ...]``: hadoop-aws 3.4.2 and later (``List<UploadEtag>``); the
    default."""
    STRINGS = "strings"
    """``["<etag>", ...]``: hadoop-aws 3.4.1 and older (``List<String>``)."""

    @classmethod
    def of_hadoop(cls, hadoop_version: str | None) -> EtagForm:
        """The form the S3A of ``hadoop_version`` reads and writes (None or unparsable: the newest, objects)."""
        return cls.OBJECTS if etags_as_objects(hadoop_version) else cls.STRINGS


def etags_as_objects(hadoop_version: str | None) -> bool:
    """Whether the S3A of ``hadoop_version`` writes part ETags as objects (None or unparsable: the newest form)."""
    if not hadoop_version:
        return True
    numbers = []
    for piece in hadoop_version.split("-")[0].split(".")[:3]:
        if not piece.isdigit():
            return True
        numbers.append(int(piece))
    return tuple(numbers) >= ETAG_OBJECTS_SINCE


def empty_iostatistics() -> dict[str, dict[str, Any]]:
    """Hadoop's ``IOStatisticsSnapshot`` JSON shape, empty."""
    return {"counters": {}, "gauges": {}, "minimums": {}, "maximums": {}, "meanstatistics": {}}


_EMPTY_STATISTICS = empty_iostatistics()
"""The empty statistics read entries share (never modified: a manifest's values are read-only)."""
_NO_EXTRA_DATA: Mapping[str, str] = {}
"""The empty ``extraData`` read entries share (never modified)."""


def java_date(millis: int) -> str:
    """``java.util.Date.toString()`` in UTC, as Hadoop writes it (no expectation of parseability)."""
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(millis / 1000))


def now_millis() -> int:
    return int(time.time() * 1000)


def _parse(data: bytes | str, source: str | None) -> dict[str, Any]:
    if not data:
        raise ManifestError("no data (empty file)", source=source)
    try:
        value = json_text.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ManifestError(f"not valid JSON ({err})", source=source) from err
    if not isinstance(value, dict):
        raise ManifestError(f"expected a JSON object, got {type(value).__name__}", source=source)
    return value


def _check(condition: bool, message: str, source: str | None) -> None:
    if not condition:
        raise ManifestError(message, source=source)


def _str_map(value: Any, what: str, source: str | None) -> dict[str, str]:
    if value is None:
        return {}
    _check(isinstance(value, dict), f"{what} is not a JSON object", source)
    _check(all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()),
           f"{what} keys and values must be strings", source)
    return dict(value)


def _field(obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any,
           source: str | None) -> Any:
    value = obj.get(name, default)
    if value is None:
        return default
    if kind is int and isinstance(value, bool):
        raise ManifestError(f"field {name!r} must be an integer, got a boolean", source=source)
    _check(isinstance(value, kind), f"field {name!r} has the wrong type ({type(value).__name__})", source)
    return value


_PENDING_FIELDS: tuple[tuple[str, str, type, Any], ...] = (
    ("bucket", "bucket", str, ""), ("destination_key", "destinationKey", str, ""), ("upload_id", "uploadId", str, ""),
    ("length", "length", int, 0), ("uri", "uri", str, ""), ("created", "created", int, 0), ("saved", "saved", int, 0),
    ("job_id", "jobId", str, ""), ("task_id", "taskId", str, ""), ("text", "text", str, ""))
"""A ``.pending`` entry's scalar fields: attribute, JSON name, type, default (the part ETags follow ``uploadId``)."""
_PENDING_KINDS = tuple(kind for _, _, kind, _ in _PENDING_FIELDS)


def _etags(value: Any, source: str | None) -> tuple[str, ...]:
    """The part ETags of a ``.pending`` entry, in either of Hadoop's forms: strings, or 3.5's objects (their
    ``etag``; any checksum in them is Hadoop's, and s3commit records its own in ``extraData``)."""
    _check(value is not None, "No etag list", source)
    _check(isinstance(value, list), "etags is not a list", source)
    etags: tuple[Any, ...] = tuple([entry.get("etag") if type(entry) is dict else entry for entry in value])
    if not all(type(etag) is str and etag for etag in etags):
        for number, etag in enumerate(etags, start=1):
            if not (isinstance(etag, str) and etag):
                raise ManifestError(f"Empty etag for part {number}", source=source)
    return etags  # every one a string, checked above


@dataclass(frozen=True, kw_only=True)
class PendingUpload:
    """One uncompleted multipart upload: Hadoop's ``SinglePendingCommit`` (``.pending``, version 2).

    ``uri`` is the magic path for the magic committer and the final URI for staging; ``destination_key``
    is what gets completed.
    """

    bucket: str
    destination_key: str
    upload_id: str
    etags: tuple[str, ...]
    length: int
    uri: str
    created: int = 0
    saved: int = 0
    job_id: str = ""
    task_id: str = ""
    text: str = ""
    extra_data: Mapping[str, str] = field(default_factory=dict)
    iostatistics: Mapping[str, Any] = field(default_factory=empty_iostatistics)
    filename: str | None = None

    @property
    def part_count(self) -> int:
        return len(self.etags)

    @property
    def dest_uri(self) -> str:
        return f"s3://{self.bucket}/{self.destination_key}"

    @property
    def completed_at_task_commit(self) -> bool:
        """Whether the task commit completed this upload already (:data:`COMPLETED_KEY`)."""
        return self.extra_data.get(COMPLETED_KEY) == COMPLETED_AT_TASK_COMMIT

    @property
    def key_there_at_task_commit(self) -> bool:
        """Whether its task commit, completing uploads, found the key there (:data:`KEY_THERE_AT_TASK_COMMIT`)."""
        return self.extra_data.get(COMPLETED_KEY) == KEY_THERE_AT_TASK_COMMIT

    def as_key_there(self) -> PendingUpload:
        """This entry, recorded as left pending by its task commit because its key was there."""
        return replace(self, extra_data={**self.extra_data, COMPLETED_KEY: KEY_THERE_AT_TASK_COMMIT})

    @classmethod
    def completed_files(cls, bucket: str, files: Iterable[tuple[str, int, str]], *, job_id: str,
                        task_id: str) -> tuple[PendingUpload, ...]:
        """Entries of uploads a task commit completed, from what its message carries (key, length, upload id each):
        no part ETags (the objects are complete). Made from one template entry, field values copied in place of
        ``__init__`` (a job of 100,000 files makes as many, on the driver, at its commit)."""
        template = cls(bucket=bucket, destination_key="-", upload_id="-", etags=(), length=0, uri="-",
                       job_id=job_id, task_id=task_id, extra_data={COMPLETED_KEY: COMPLETED_AT_TASK_COMMIT})
        fields = template.__dict__
        made = []
        for key, length, upload_id in files:
            entry = object.__new__(cls)
            entry.__dict__.update(fields, destination_key=key, length=length, upload_id=upload_id,
                                  uri=f"s3a://{bucket}/{key}")
            made.append(entry)
        return tuple(made)

    def as_completed(self) -> PendingUpload:
        """This entry, recorded as completed by its task commit."""
        return replace(self, extra_data={**self.extra_data, COMPLETED_KEY: COMPLETED_AT_TASK_COMMIT})

    def validate(self, source: str | None = None, *, etags_checked: bool = False) -> PendingUpload:
        # Per entry (a commit may read 100,000 twice): one test where all is well, each check in turn otherwise,
        # and each message formatted only when its check fails. ``etags_checked``: each part ETag is a string that
        # is not empty (as read: ``_etags``).
        src = source or self.filename
        key = self.destination_key
        if not (self.bucket and key and key[0] != "/" and self.upload_id and self.length >= 0 and self.uri
                and self.etags and (etags_checked or all(type(etag) is str and etag for etag in self.etags))):
            _check(bool(self.bucket), "Empty bucket", src)
            _check(bool(key), "Empty destination", src)
            _check(not key.startswith("/"), "destinationKey must not start with '/'", src)
            _check(bool(self.upload_id), "Empty uploadId", src)
            _check(self.length >= 0, f"Invalid length: {self.length}", src)
            _check(bool(self.uri), "Empty uri", src)
            _check(len(self.etags) > 0, f"No upload parts for {self.dest_uri} (empty etag list)", src)
            for i, etag in enumerate(self.etags):
                _check(isinstance(etag, str) and bool(etag), f"Empty etag for part {i + 1} of {self.dest_uri}", src)
        if self.extra_data:
            checksums.recorded(self.extra_data, len(self.etags), src or self.dest_uri)  # refuses a mismatch
        return self

    def etags_json(self, etag_form: EtagForm = EtagForm.OBJECTS) -> list[Any]:
        """The part ETags as written in ``etag_form``: objects carry each part's recorded checksum."""
        if etag_form is EtagForm.STRINGS:
            return list(self.etags)
        algorithm, values = checksums.recorded(self.extra_data, len(self.etags), self.filename)
        return [{"etag": etag, "checksumAlgorithm": algorithm, "checksum": values[i] if algorithm else None}
                for i, etag in enumerate(self.etags)]

    def to_dict(self, *, etag_form: EtagForm = EtagForm.OBJECTS) -> dict[str, Any]:
        self.validate()
        return {
            "version": PENDING_VERSION,
            "filename": self.filename,
            "uri": self.uri,
            "uploadId": self.upload_id,
            "bucket": self.bucket,
            "destinationKey": self.destination_key,
            "created": self.created,
            "saved": self.saved,
            "date": java_date(self.saved or self.created),
            "jobId": self.job_id,
            "taskId": self.task_id,
            "text": self.text,
            "etags": self.etags_json(etag_form),
            "extraData": dict(self.extra_data),
            "iostatistics": dict(self.iostatistics),
            "length": self.length,
            "partCount": self.part_count,
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], *, source: str | None = None) -> PendingUpload:
        """The entry ``obj`` (as read from JSON, for this entry alone: its ``extraData`` is held, not copied)."""
        version = obj.get("version")
        _check(version == PENDING_VERSION,
               f"Wrong version: {version} (a .pending file must have version {PENDING_VERSION})", source)
        # Per entry (a commit of 100,000 files reads as many, twice where they are not all held): one test of the
        # fields' types where all is well, set in place of the frozen dataclass's ``__init__``; else each field
        # checked in turn, in the order of the messages (the part ETags follow ``uploadId``).
        get = obj.get
        values: dict[str, Any] = {
            "bucket": get("bucket"), "destination_key": get("destinationKey"), "upload_id": get("uploadId"),
            "length": get("length"), "uri": get("uri"), "created": get("created"), "saved": get("saved"),
            "job_id": get("jobId"), "task_id": get("taskId"), "text": get("text")}
        if tuple(map(type, values.values())) != _PENDING_KINDS:
            for attribute, name, kind, default in _PENDING_FIELDS:
                values[attribute] = _field(obj, name, kind, default, source)
                if attribute == "upload_id":
                    _etags(get("etags"), source)
        values["etags"] = _etags(get("etags"), source)
        extra = get("extraData")
        if extra is None or (type(extra) is dict and not extra):
            values["extra_data"] = _NO_EXTRA_DATA
        elif type(extra) is dict and all(type(value) is str for value in extra.values()):
            values["extra_data"] = extra  # (a JSON object's keys are strings; this one was read for this entry alone)
        else:
            values["extra_data"] = _str_map(extra, "extraData", source)  # raises, naming what is wrong
        statistics = get("iostatistics")
        if statistics is not None and type(statistics) is not dict:
            _field(obj, "iostatistics", dict, None, source)  # raises, naming the field
        # Most entries' statistics are empty: one shared value in place of six dicts each, which, held for a
        # while in 100,000 entries, would make the garbage collector's full passes the commit's largest cost.
        values["iostatistics"] = _EMPTY_STATISTICS if statistics is None or statistics == _EMPTY_STATISTICS \
            else statistics
        values["filename"] = source
        upload = object.__new__(cls)
        upload.__dict__.update(values)
        return upload.validate(source, etags_checked=True)

    def to_json(self, *, etag_form: EtagForm = EtagForm.OBJECTS) -> bytes:
        """The ``.pending`` file's bytes, its part ETags in ``etag_form``."""
        return json.dumps(self.to_dict(etag_form=etag_form), separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str, *, source: str | None = None) -> PendingUpload:
        return cls.from_dict(_parse(data, source), source=source)


@dataclass(frozen=True, kw_only=True)
class PendingSet:
    """All pending uploads of one task attempt: Hadoop's ``PendingSet`` (``.pendingset``, version 3)."""

    commits: tuple[PendingUpload, ...]
    job_id: str = ""
    extra_data: Mapping[str, str] = field(default_factory=dict)
    iostatistics: Mapping[str, Any] = field(default_factory=empty_iostatistics)

    @property
    def task_attempt_id(self) -> str:
        return self.extra_data.get("task.attempt.id", "")

    @property
    def total_length(self) -> int:
        return sum(c.length for c in self.commits)

    def validate(self, source: str | None = None, *, entries_checked: bool = False) -> PendingSet:
        """Check every entry (``entries_checked``: each was, as it was read) and that no destination is written
        twice."""
        seen: set[tuple[str, str]] = set()
        for commit in self.commits:
            if not entries_checked:
                _check(isinstance(commit, PendingUpload), "Collection element is not a PendingUpload", source)
                commit.validate(source)
            where = (commit.bucket, commit.destination_key)
            if where in seen:
                raise ManifestError(f"Destination {commit.dest_uri} is written to by more than one pending commit",
                                    source=source)
            seen.add(where)
        return self

    def to_dict(self, *, etag_form: EtagForm = EtagForm.OBJECTS) -> dict[str, Any]:
        self.validate()
        commits = []
        for c in self.commits:
            entry = c.to_dict(etag_form=etag_form)
            entry["filename"] = None  # set on load by readers; the persisted value is meaningless
            commits.append(entry)
        return {
            "version": PENDINGSET_VERSION,
            "jobId": self.job_id,
            "commits": commits,
            "extraData": dict(self.extra_data),
            "iostatistics": dict(self.iostatistics),
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], *, source: str | None = None) -> PendingSet:
        version = obj.get("version")
        _check(version == PENDINGSET_VERSION,
               f"Wrong version: {version} (a .pendingset file must have version {PENDINGSET_VERSION})", source)
        commits = obj.get("commits")
        if commits is None:
            commits = []
        _check(isinstance(commits, list), "commits is not a list", source)
        if not all(type(c) is dict for c in commits):
            for i, c in enumerate(commits):
                _check(isinstance(c, dict), f"commit {i} is not a JSON object", source)
        entry = PendingUpload.from_dict
        return cls(
            commits=tuple([entry(c, source=source) for c in commits]),
            job_id=_field(obj, "jobId", str, "", source),
            extra_data=_str_map(obj.get("extraData"), "extraData", source),
            iostatistics=_field(obj, "iostatistics", dict, empty_iostatistics(), source),
        ).validate(source, entries_checked=True)

    def to_json(self, *, etag_form: EtagForm = EtagForm.OBJECTS) -> bytes:
        """The ``.pendingset`` file's bytes, its commits' part ETags in ``etag_form``."""
        return json.dumps(self.to_dict(etag_form=etag_form), separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str, *, source: str | None = None) -> PendingSet:
        return cls.from_dict(_parse(data, source), source=source)

    def with_job(self, job_id: str, task_attempt_id: str) -> PendingSet:
        """Stamp every commit with the job and task attempt, as Hadoop's magic task commit does."""
        commits = tuple(replace(c, job_id=job_id, task_id=task_attempt_id) for c in self.commits)
        extra = {**self.extra_data, "task.attempt.id": task_attempt_id}
        return replace(self, commits=commits, job_id=job_id, extra_data=extra)


@dataclass(frozen=True, kw_only=True)
class SuccessData:
    """The ``_SUCCESS`` JSON summary (Hadoop ``SuccessData``; compatible with the manifest committer)."""

    committer: str
    job_id: str
    job_id_source: str = "s3commit"
    success: bool = True
    timestamp: int = field(default_factory=now_millis)
    hostname: str = field(default_factory=socket.gethostname)
    description: str = ""
    metrics: Mapping[str, int] = field(default_factory=dict)
    diagnostics: Mapping[str, str] = field(default_factory=dict)
    filenames: tuple[str, ...] = ()
    iostatistics: Mapping[str, Any] = field(default_factory=empty_iostatistics)
    state: str | None = None
    stage: str | None = None

    def validate(self, source: str | None = None) -> SuccessData:
        _check(len(self.filenames) <= SUCCESS_FILENAME_LIMIT,
               f"filenames lists {len(self.filenames)} entries; at most {SUCCESS_FILENAME_LIMIT}", source)
        return self

    def to_dict(self) -> dict[str, Any]:
        self.validate()
        return {
            "name": SUCCESS_NAME,
            "success": self.success,
            "timestamp": self.timestamp,
            "date": java_date(self.timestamp),
            "hostname": self.hostname,
            "committer": self.committer,
            "description": self.description,
            "jobId": self.job_id,
            "jobIdSource": self.job_id_source,
            "metrics": dict(self.metrics),
            "diagnostics": dict(self.diagnostics),
            "filenames": list(self.filenames),
            "iostatistics": dict(self.iostatistics),
            "state": self.state,
            "stage": self.stage,
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], *, source: str | None = None) -> SuccessData:
        name = obj.get("name")
        _check(name is not None, "Incompatible file format: no 'name' field", source)
        _check(name == SUCCESS_NAME, f"Incompatible file format: {name}", source)
        metrics = obj.get("metrics") or {}
        _check(isinstance(metrics, dict), "metrics is not a JSON object", source)
        filenames = obj.get("filenames") or []
        _check(isinstance(filenames, list) and all(isinstance(f, str) for f in filenames),
               "filenames must be a list of strings", source)
        return cls(
            committer=_field(obj, "committer", str, "", source),
            job_id=_field(obj, "jobId", str, "", source),
            job_id_source=_field(obj, "jobIdSource", str, "", source),
            success=_field(obj, "success", bool, True, source),
            timestamp=_field(obj, "timestamp", int, 0, source),
            hostname=_field(obj, "hostname", str, "", source),
            description=_field(obj, "description", str, "", source),
            metrics={str(k): v for k, v in metrics.items()},
            diagnostics=_str_map(obj.get("diagnostics"), "diagnostics", source),
            filenames=tuple(filenames),
            iostatistics=_field(obj, "iostatistics", dict, empty_iostatistics(), source),
            state=obj.get("state"),
            stage=obj.get("stage"),
        ).validate(source)

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str, *, source: str | None = None) -> SuccessData:
        return cls.from_dict(_parse(data, source), source=source)


@dataclass(frozen=True, kw_only=True)
class CommitJournal:
    """What a job commit is about to do, written (If-None-Match: *) before the first Complete.

    With it, ``s3commit recover`` can finish an interrupted commit or roll it back: it names the pendingsets
    to complete, the overwrite plan to apply after completion, and whether to write ``_SUCCESS``.
    """

    job_id: str
    committer: str
    bucket: str
    dest_key: str
    pendingsets: tuple[str, ...]
    delete_paths: tuple[str, ...] = ()
    replace_partitions: bool = False
    success_marker: bool = True
    created: int = field(default_factory=now_millis)
    absolute_dirs: tuple[str, ...] = ()
    """Directories outside the destination (same bucket) the job's tasks declared writing to."""
    delete_outside: tuple[str, ...] = ()
    """Directories outside the destination (same bucket) whose old objects the overwrite deletes."""
    success_beside_cleanup: bool = False
    """``_SUCCESS`` is written beside the job directory's deletion (a commit under the lease): a recovery that finds
    pendingsets deleted and ``_SUCCESS`` not naming the job writes it, from :attr:`files`, :attr:`total_bytes` and
    :attr:`first_files`. Without it the pendingsets are deleted only after ``_SUCCESS`` was written."""
    files: int = 0
    """The files the pendingsets name (as validated before the journal was written)."""
    total_bytes: int = 0
    """Their bytes."""
    first_files: tuple[str, ...] = ()
    """The first keys they name, in order (at most ``SUCCESS_FILENAME_LIMIT``): ``_SUCCESS``'s ``filenames``."""
    accepted_attempts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The task attempts the caller accepted for each pendingset (none named: any): a commit resumed from this journal
    validates its pendingsets as the job's own commit did (one another attempt rewrote since is refused, not
    published)."""

    def validate(self, source: str | None = None) -> CommitJournal:
        _check(bool(self.job_id), "Empty jobId", source)
        _check(bool(self.bucket), "Empty bucket", source)
        for key in self.pendingsets:
            _check(isinstance(key, str) and key.endswith(".pendingset"),
                   f"journal entry {key!r} is not a .pendingset key", source)
        _check(len(self.first_files) <= SUCCESS_FILENAME_LIMIT,
               f"firstFiles lists {len(self.first_files)} keys; at most {SUCCESS_FILENAME_LIMIT}", source)
        named = set(self.pendingsets)
        for key, attempts in self.accepted_attempts.items():
            _check(key in named, f"acceptedAttempts names {key!r}, not one of the journal's pendingsets", source)
            _check(isinstance(attempts, tuple) and all(isinstance(a, str) and a for a in attempts),
                   f"acceptedAttempts of {key!r} must be a list of task attempt ids", source)
        return self

    def to_json(self) -> bytes:
        self.validate()
        return json.dumps({
            "name": JOURNAL_FORMAT, "jobId": self.job_id, "committer": self.committer, "bucket": self.bucket,
            "destKey": self.dest_key, "pendingsets": list(self.pendingsets),
            "deletePaths": list(self.delete_paths), "replacePartitions": self.replace_partitions,
            "successMarker": self.success_marker, "created": self.created,
            "absoluteDirs": list(self.absolute_dirs), "deleteOutside": list(self.delete_outside),
            **({"successBesideCleanup": True, "files": self.files, "bytes": self.total_bytes,
                "firstFiles": list(self.first_files)} if self.success_beside_cleanup else {}),
            **({"acceptedAttempts": {key: list(attempts) for key, attempts in self.accepted_attempts.items()}}
               if self.accepted_attempts else {}),
        }, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str, *, source: str | None = None) -> CommitJournal:
        obj = _parse(data, source)
        _check(obj.get("name") == JOURNAL_FORMAT, f"not a commit journal (name={obj.get('name')!r})", source)
        pendingsets = obj.get("pendingsets") or []
        delete_paths = obj.get("deletePaths") or []
        absolute_dirs = obj.get("absoluteDirs") or []
        delete_outside = obj.get("deleteOutside") or []
        first_files = obj.get("firstFiles") or []
        _check(all(isinstance(v, list) for v in (pendingsets, delete_paths, absolute_dirs, delete_outside, first_files))
               and all(isinstance(d, str) for d in (*delete_paths, *absolute_dirs, *delete_outside, *first_files)),
               "pendingsets, deletePaths, absoluteDirs, deleteOutside and firstFiles must be lists of strings", source)
        accepted = obj.get("acceptedAttempts") or {}
        _check(isinstance(accepted, dict) and all(isinstance(v, list) for v in accepted.values()),
               "acceptedAttempts must map pendingsets to lists of task attempt ids", source)
        return cls(
            job_id=_field(obj, "jobId", str, "", source),
            committer=_field(obj, "committer", str, "", source),
            bucket=_field(obj, "bucket", str, "", source),
            dest_key=_field(obj, "destKey", str, "", source),
            pendingsets=tuple(pendingsets),
            delete_paths=tuple(delete_paths),
            replace_partitions=_field(obj, "replacePartitions", bool, False, source),
            success_marker=_field(obj, "successMarker", bool, True, source),
            created=_field(obj, "created", int, 0, source),
            absolute_dirs=tuple(absolute_dirs),
            delete_outside=tuple(delete_outside),
            success_beside_cleanup=_field(obj, "successBesideCleanup", bool, False, source),
            files=_field(obj, "files", int, 0, source),
            total_bytes=_field(obj, "bytes", int, 0, source),
            first_files=tuple(first_files),
            accepted_attempts={key: tuple(attempts) for key, attempts in accepted.items()},
        ).validate(source)
