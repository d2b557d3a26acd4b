"""Layouts: where a job's scratch data lives, and how a magic path maps to its final key.

Pure functions over ``/``-separated keys (Hadoop's ``MagicCommitPaths`` rules, Hadoop 3.4+ layout):

    dest/__magic_job-U/job-U/00/tasks/<taskAttemptId>/__base/<relative path>     magic path of a file
    dest/__magic_job-U/job-U/00/tasks/<taskAttemptId>/__base/<relative>.pending
    dest/__magic_job-U/job-U/00/tasks/<taskAttemptId>/__abs/<dir>/__base/<name>  a file for <dir>/<name>,
                                                             outside the destination (same bucket)
    dest/__magic_job-U/job-U/00/<taskId>.pendingset                              last attempt wins
    dest/_SUCCESS

Staging committers keep their pendingsets in the same shape under ``dest/__staging_job-U``.
No I/O here; every rule has a unit test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from s3commit.errors import ConfigError

MAGIC_PATH_PREFIX = "__magic_job-"
"""A key element starting with this marks a magic path (Hadoop 3.4+: one directory per job)."""
STAGING_PATH_PREFIX = "__staging_job-"
"""The staging committers' job directory (pendingsets, journal); never holds data."""
PROBE_PATH_PREFIX = "__s3commit_probe-"
"""A capability probe's scratch directory (:mod:`s3commit.store.probe`): deleted when the probe ends."""
LEASE_NAME = "__s3commit_lease"
"""The destination's commit lease (:mod:`s3commit.commit.lease`): held while a job commits there."""
WRITING_NAME = "__s3commit_writing"
"""An RDD write's claim on a new destination (:func:`s3commit.commit.ownership.claim_output`), while it runs."""
SCRATCH_PREFIXES = (MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX, PROBE_PATH_PREFIX, LEASE_NAME, WRITING_NAME)
"""Key elements that are never user data: no overwrite deletes them, no conflict check counts them. Each begins
``__`` (:func:`is_scratch_key` relies on it)."""
JOB_ID_PREFIX = "job-"
BASE = "__base"
"""Under the magic element, everything after ``__base`` is kept in the final key."""
ABSOLUTE = "__abs"
"""Under the magic element, ``__abs/<dir>/__base/<name>`` is a file for ``<dir>/<name>``: an absolute location
outside the destination in the same bucket (Spark's custom partition locations). An s3commit extension of
Hadoop's layout."""
TASKS = "tasks"
PENDING_SUFFIX = ".pending"
PENDINGSET_SUFFIX = ".pendingset"
SUCCESS_MARKER = "_SUCCESS"
JOURNAL_FILE = "_commit-journal.json"
"""The job commit engine's journal, in the job attempt directory."""
BATCH_JOURNAL_FILE = "_batch-journal.json"
"""A streaming sink batch's journal (:mod:`s3commit.committers.sink_batches`), in the job attempt directory: its own
name, so a job abort never reads it as an interrupted job commit's journal."""
UPLOAD_MARKER_SUFFIX = ".upload"
"""Suffix of the record a magic writer leaves when an upload starts (see config ``track-uploads``)."""

_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_TASK_ATTEMPT = re.compile(r"^attempt_(?P<jt>[A-Za-z0-9]+)_(?P<job>\d+)_(?P<type>[mr])_(?P<task>\d+)_(?P<n>\d+)$")


def split_elements(path: str) -> list[str]:
    """Split a key into its elements, dropping empty ones (``a//b/`` -> ``[a, b]``)."""
    return [e for e in path.split("/") if e]


def is_scratch_key(key: str) -> bool:
    """A key inside any job's scratch directory (ours or a concurrent job's), a probe's, or a commit lease: never
    user data."""
    # Each scratch element begins "__": most keys are ruled out by one search (an overwrite asks it of every old key).
    return "__" in key and any(e.startswith(SCRATCH_PREFIXES) for e in split_elements(key))


def is_magic_path(elements: list[str]) -> bool:
    """True if any element starts with ``__magic_job-``."""
    return any(e.startswith(MAGIC_PATH_PREFIX) for e in elements)


def magic_element_index(elements: list[str]) -> int:
    for i, element in enumerate(elements):
        if element.startswith(MAGIC_PATH_PREFIX):
            return i
    raise ValueError(f"No {MAGIC_PATH_PREFIX} element in path {'/'.join(elements)!r}")


def final_destination(elements: list[str]) -> list[str]:
    """Where a file written to a magic path ends up (Hadoop's ``finalDestination``).

    Not magic: unchanged. Magic: the parents of the magic element, then everything after the first
    ``__base`` below it, or (no ``__base``) just the file name. A ``__base`` above the magic element is
    ignored. ``__abs/<dir>/__base/<name>`` below it ends up at ``<dir>/<name>`` (from the bucket's root).
    """
    if not is_magic_path(elements):
        return list(elements)
    index = magic_element_index(elements)
    parents, children = elements[:index], elements[index + 1:]
    if not children:
        raise ValueError(f"No path found under the prefix {MAGIC_PATH_PREFIX}")
    if ABSOLUTE in children and BASE in children[children.index(ABSOLUTE):]:
        start = children.index(ABSOLUTE)
        end = children.index(BASE, start)
        directory, name = children[start + 1:end], children[end + 1:]
        if not directory or len(name) != 1:
            raise ValueError(f"{ABSOLUTE} needs a directory, then {BASE}, then one file name")
        return directory + name
    if BASE in children:
        kept = children[children.index(BASE) + 1:]
        if not kept:
            raise ValueError(f"No path found under {BASE}")
        return parents + kept
    return [*parents, children[-1]]


def is_magic_file_key(key: str) -> bool:
    """A key whose writes are deferred: magic, and not one of the committer's own manifests."""
    elements = split_elements(key)
    return (is_magic_path(elements) and not key.endswith((PENDING_SUFFIX, PENDINGSET_SUFFIX,
                                                          UPLOAD_MARKER_SUFFIX))
            and bool(elements) and elements[-1] not in (JOURNAL_FILE, BATCH_JOURNAL_FILE))


def magic_key_to_final(key: str) -> str:
    return "/".join(final_destination(split_elements(key)))


def task_attempt_id_of_magic_key(key: str) -> str:
    """The task attempt id in ``.../__magic_job-U/job-U/AA/tasks/<taID>/__base/...``."""
    elements = split_elements(key)
    children = elements[magic_element_index(elements) + 1:]
    if len(children) < 4 or children[2] != TASKS:
        raise ValueError(f"{key!r} is not under a magic task attempt directory")
    return children[3]


def job_id_of_magic_key(key: str) -> str:
    elements = split_elements(key)
    return elements[magic_element_index(elements)][len(MAGIC_PATH_PREFIX):]


def check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not _JOB_ID.match(job_id):
        raise ConfigError(
            f"job id {job_id!r} must be 1-128 characters of letters, digits, '_', '-', '.' "
            "(a UUID is typical)"
        )
    return job_id


@dataclass(frozen=True)
class TaskAttemptId:
    """Hadoop's ``attempt_<jobTracker>_<job:04d>_<m|r>_<task:06d>_<attempt>``."""

    job_tracker: str
    job: int
    task_type: str
    task: int
    attempt: int

    @classmethod
    def parse(cls, text: str) -> TaskAttemptId:
        match = _TASK_ATTEMPT.match(text or "")
        if not match:
            raise ConfigError(
                f"task attempt id {text!r} is not of the form attempt_<jobTracker>_<job>_m_<task>_<attempt> "
                "(e.g. attempt_20261122_0000_m_000003_0)"
            )
        return cls(match["jt"], int(match["job"]), match["type"], int(match["task"]), int(match["n"]))

    @classmethod
    def of(cls, task: int, attempt: int = 0, *, job_tracker: str = "s3commit", job: int = 0) -> TaskAttemptId:
        return cls(job_tracker, job, "m", task, attempt)

    @property
    def task_id(self) -> str:
        """``task_<jobTracker>_<job>_<m|r>_<task>``: the same for every attempt of one task."""
        return f"task_{self.job_tracker}_{self.job:04d}_{self.task_type}_{self.task:06d}"

    def __str__(self) -> str:
        return f"attempt_{self.job_tracker}_{self.job:04d}_{self.task_type}_{self.task:06d}_{self.attempt}"


@dataclass(frozen=True)
class JobLayout:
    """Every key of one job's scratch area under the destination key ``dest_key``."""

    dest_key: str
    job_id: str
    app_attempt: int = 0
    dir_prefix: str = MAGIC_PATH_PREFIX

    def _join(self, *parts: str) -> str:
        return "/".join(p for p in (self.dest_key, *parts) if p)

    @property
    def job_dir(self) -> str:
        """``dest/__magic_job-U``: deleted at cleanup."""
        return self._join(f"{self.dir_prefix}{self.job_id}")

    @property
    def job_attempt_dir(self) -> str:
        """``dest/__magic_job-U/job-U/00``: the pendingsets and the journal live here."""
        return f"{self.job_dir}/{JOB_ID_PREFIX}{self.job_id}/{self.app_attempt:02d}"

    @property
    def tasks_dir(self) -> str:
        return f"{self.job_attempt_dir}/{TASKS}"

    def task_attempt_dir(self, task_attempt_id: str) -> str:
        """Deleted on task commit and abort."""
        return f"{self.tasks_dir}/{task_attempt_id}"

    def task_attempt_base(self, task_attempt_id: str) -> str:
        """The work path: files written under it land at ``dest/<relative>`` after job commit."""
        return f"{self.task_attempt_dir(task_attempt_id)}/{BASE}"

    def pendingset_key(self, task_id: str) -> str:
        return f"{self.job_attempt_dir}/{task_id}{PENDINGSET_SUFFIX}"

    @property
    def journal_key(self) -> str:
        return f"{self.job_attempt_dir}/{JOURNAL_FILE}"

    @property
    def batch_journal_key(self) -> str:
        return f"{self.job_attempt_dir}/{BATCH_JOURNAL_FILE}"

    @property
    def success_key(self) -> str:
        return self._join(SUCCESS_MARKER)


def relative_key(relative: str) -> str:
    """Validate a task-relative file path and normalise it to ``a/b/c``.

    Rejects absolute paths, ``.``/``..`` elements, empty names, control characters, and names that would
    be mistaken for the committer's own files.
    """
    if not isinstance(relative, str) or not relative.strip("/"):
        raise ConfigError(f"file path {relative!r} is empty")
    if relative.startswith("/"):
        raise ConfigError(f"file path {relative!r} must be relative to the destination")
    elements = relative.split("/")
    for element in elements:
        if element in ("", ".", ".."):
            raise ConfigError(f"file path {relative!r} has an empty, '.' or '..' element")
        if any(ord(c) < 32 or ord(c) == 127 for c in element):
            raise ConfigError(f"file path {relative!r} contains a control character")
        if element.startswith((MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX)) or element in (BASE, ABSOLUTE):
            raise ConfigError(f"file path {relative!r} uses a name reserved by s3commit ({element!r})")
    key = "/".join(elements)
    if len(key.encode("utf-8")) > 1024:
        raise ConfigError(f"file path {relative[:40]!r}... is longer than S3's 1,024-byte key limit")
    return key


def absolute_relative(dir_key: str, name: str) -> str:
    """The task-relative path of a file bound for ``<dir_key>/<name>``, a location outside the destination
    (``__abs/<dir_key>/__base/<name>``). Both parts are validated like :func:`relative_key`; ``name`` is one
    file name."""
    directory, file_name = relative_key(dir_key.rstrip("/")), relative_key(name)
    if "/" in file_name:
        raise ConfigError(f"file name {name!r} must not contain '/'")
    return f"{ABSOLUTE}/{directory}/{BASE}/{file_name}"


def add_uuid(path: str, uuid: str) -> str:
    """Insert ``-<uuid>`` before the first ``.`` of the last element (Hadoop staging's unique names).

    Unchanged if the file name already carries the uuid as a whole component (:func:`carries_job_id`). Unlike
    Hadoop, a uuid in a parent directory does not count: a partition ``date=2024-06-01/`` is not job
    ``2024-06-01``'s file, and the job's clean-up finds its uploads by the name.
    """
    if not uuid:
        raise ValueError("empty uuid")
    if not path:
        raise ValueError("empty path")
    if path.endswith("/"):
        raise ValueError(f"{path!r} is a directory, not a file")
    if carries_job_id(path, uuid):
        return path
    head, slash, name = path.rpartition("/")
    stem, dot, suffix = name.partition(".")
    return f"{head}{slash}{stem}-{uuid}{dot}{suffix}"


def partition_of(relative: str) -> str | None:
    """The partition directory of a relative file (its parent), ``None`` for a root file."""
    head, _, _ = relative.rpartition("/")
    return head or None


def carries_job_id(key: str, job_id: str) -> bool:
    """Whether a key's file name carries ``job_id`` as a whole component (between the name's ends and ``-``,
    ``_``, ``.``, ``=``), as Spark's and s3commit's names do (``part-00000-<job id>-c000.parquet``): never a
    substring of another word, and never a directory of the key (``date=2024-06-01/`` is a partition, not a job)."""
    name = key.rsplit("/", 1)[-1]
    return re.search(rf"(?:^|[-_.=]){re.escape(job_id)}(?:$|[-_.=])", name) is not None
