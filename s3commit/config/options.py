"""Configuration: every knob defined once, with its default and what it risks.

Plain Python callers pass keyword-only options; Spark (through the JVM bridge) passes Hadoop-style string
keys, parsed here by :meth:`CommitterOptions.from_hadoop_conf` and :meth:`StoreOptions.from_hadoop_conf`.
Where S3A has a key with the same meaning we use it, so an existing S3A configuration works unchanged;
new knobs use the ``s3commit.`` prefix. Pure: no I/O.

A default is written once, as text, in :data:`KEYS` (what users read). An options field that a key sets is
declared with :func:`setting` (the key and how its text is parsed): its default is that parse of the key's
default, and :func:`settings` reads the same keys from a configuration, so the two cannot disagree.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from s3commit.config import connection
from s3commit.config.connection import CredentialChain, Proxy
from s3commit.config.values import (
    MIB,
    parse_bool,
    parse_float,
    parse_int,
    parse_optional,
    parse_seconds,
    parse_size,
    parse_text,
)
from s3commit.errors import ConfigError
from s3commit.model.checksums import automatic, is_auto, normalise
from s3commit.model.manifests import EtagForm

MIN_PART_SIZE = 5 * MIB
"""S3's minimum size of every part but the last."""
MAX_PART_SIZE = 5 * 1024 * MIB
"""S3's maximum part size."""
MAX_PARTS = 10_000
"""S3's maximum number of parts in one upload (part numbers 1..10000)."""


class ValuedEnum(enum.Enum):
    @classmethod
    def parse(cls, value: Any, *, what: str) -> Any:
        if isinstance(value, cls):
            return value
        text = str(value).strip().lower()
        for member in cls:
            if member.value == text:
                return member
        valid = ", ".join(m.value for m in cls)
        raise ConfigError(f"{value!r} is not a valid {what}. Valid values are: {valid}")


class CommitterName(ValuedEnum):
    """The committers ``create_committer`` knows."""

    MAGIC = "magic"
    DIRECTORY = "directory"
    PARTITIONED = "partitioned"
    RENAME_V1 = "rename-v1"
    RENAME_V2 = "rename-v2"


class ConflictMode(ValuedEnum):
    """Staging committers' policy when the destination already has data (Hadoop's ``conflict-mode``)."""

    FAIL = "fail"
    APPEND = "append"
    REPLACE = "replace"


@dataclass(frozen=True)
class Key:
    """One configuration key: its name, default, and why it exists / what it risks."""

    name: str
    default: str
    why: str


KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key("fs.s3a.committer.name", "magic",
            "Which committer: magic (stream to S3, complete at job commit), directory or partitioned "
            "(stage on local disk, upload at task commit). Unknown names fail before any task runs."),
        Key("fs.s3a.committer.threads", "32",
            "Threads uploading at task commit and reading, rolling back and deleting at job commit. The job commit's "
            "Completes too where it is set to another value than this default, or with "
            "s3commit.store.concurrency.adaptive=false; at the default, as many Completes are in flight as the "
            "store's adaptive limit allows. Negative means ×cores."),
        Key("fs.s3a.committer.staging.conflict-mode", "append",
            "Staging committers: fail, append or replace when output exists. replace deletes the old "
            "objects after the new ones are complete; the new keys are kept."),
        Key("fs.s3a.committer.staging.unique-filenames", "true",
            "Staging committers: insert the job UUID into file names so appends never overwrite."),
        Key("fs.s3a.endpoint", "", "S3 endpoint URL; empty uses boto3's resolution (AWS_ENDPOINT_URL...)."),
        Key("fs.s3a.endpoint.region", "", "Region; empty uses boto3's resolution."),
        Key("fs.s3a.path.style.access", "false", "Path-style addressing (needed by most S3 emulators)."),
        Key("fs.s3a.access.key", "", "Access key; empty uses boto3's credential chain. Never logged."),
        Key("fs.s3a.secret.key", "", "Secret key; never logged or written to any manifest."),
        Key("fs.s3a.session.token", "", "Session token; never logged."),
        Key("fs.s3a.multipart.size", "64M",
            "Part size (>= 5M). Larger parts mean fewer requests but more memory per active block; "
            "a file needs more than 10,000 parts fails before data is lost."),
        Key("fs.s3a.fast.upload.active.blocks", "4",
            "Parts of one file in flight at once; memory per open file is this × part size."),
        Key("mapreduce.fileoutputcommitter.marksuccessfuljobs", "true",
            "Write the _SUCCESS JSON summary at job commit."),
        Key("mapreduce.outputcommitter.factory.scheme.s3a", "s3commit.hadoop.S3CommitterFactory",
            "Set by configure(): Hadoop's new-API OutputFormats (RDD saveAsNewAPIHadoopFile/Dataset) commit "
            "s3a:// output through s3commit. Hadoop's FileOutputCommitterFactory restores renames."),
        Key("mapred.output.committer.class", "s3commit.hadoop.S3MapRedCommitter",
            "Set by configure(): the old mapred API's committer (RDD saveAsTextFile, saveAsHadoopFile, "
            "saveAsSequenceFile). One class for every destination: non-S3 output gets FileOutputCommitter."),
        Key("fs.AbstractFileSystem.s3a.impl", "s3commit.hadoop.S3AbstractFileSystem",
            "Set by configure() with s3commit's FileSystem: Hadoop's FileContext binding for s3a:// (a pip "
            "PySpark has none). Spark's default checkpoint manager needs it; its renames are COPY + DELETE."),
        Key("spark.sql.streaming.checkpointFileManagerClass", "s3commit.spark.S3CheckpointFileManager",
            "A Spark SQL key, set by configure(streaming=True): checkpoint files on s3a:// written in place, "
            "one PUT (or an upload completed) each, If-None-Match where Spark forbids overwriting; other file "
            "systems get Spark's own manager. Unset, Spark renames (a COPY per checkpoint file on S3)."),
        Key("spark.sql.streaming.commitProtocolClass", "s3commit.spark.S3StreamingCommitProtocol",
            "A Spark SQL key, set by configure(streaming=True): the file sink's data files stay pending uploads "
            "until the batch is in the sink's log (about 1.3 times the requests of Spark's protocol per batch). "
            "Spark's ManifestFileCommitProtocol makes a failed batch's files visible to plain listers."),
        Key("spark.executor.extraClassPath", "the bridge jar", "Spark keys, set by configure() (after the entries "
            "given): Spark's own threads resolve fs.s3a.impl through the JVM's classpath, not spark.jars."),
        Key("spark.driver.extraClassPath", "the bridge jar", "The same on the driver (effective as its JVM starts)."),
        Key("spark.plugins", "s3commit.spark.S3CommitPlugin", "Set by configure(): registers the bridge's classes "
            "for Spark's own threads where the jar is not on a JVM's classpath when it starts."),
        Key("spark.storage.decommission.fallbackStorage.path", "", "Set by configure(fallback_storage=) with Spark's "
            "decommissioning keys: a leaving executor's shuffle blocks go to S3; no map task runs again."),
        Key("fs.s3a.committer.uuid", "",
            "Hadoop committers only: the job id of this write (S3A's key). Empty: the Hadoop job's tracker "
            "id, unique per Spark RDD write. Set it per write, never for a session: jobs sharing it collide."),
        Key("fs.s3a.encryption.algorithm", "", "Server-side encryption: SSE-S3 (AES256) or SSE-KMS."),
        Key("fs.s3a.encryption.key", "", "KMS key id for SSE-KMS."),
        Key("fs.s3a.create.storage.class", "", "Storage class of every object written (e.g. STANDARD_IA)."),
        Key("fs.s3a.acl.default", "", "Canned ACL of every object written (e.g. bucket-owner-full-control)."),
        Key("fs.s3a.create.checksum.algorithm", "auto",
            "Checksum sent with every part and single-PUT object, recorded in the .pending and passed at "
            "Complete: CRC32, CRC32C or CRC64NVME (these two need s3commit[crt]), SHA256, none, or auto: CRC32C "
            "where s3commit[crt] (awscrt) is installed (0.08 s of CPU per GiB), else CRC32 (0.47 s); none on a store "
            "seen to ignore it whose part ETags are MD5s (the ETag check is the check there)."),
        Key("s3commit.checksum.verify-etag", "auto",
            "Compare each part's and single-PUT object's ETag with the MD5 of the bytes sent (not with SSE-KMS): "
            "catches damage in transit on a server that validates no checksum. About 1.5 s of CPU per GiB. auto: "
            "on exactly where the store was seen (s3commit doctor's probe) not to validate the checksum sent and "
            "its part ETags are MD5s, or could not be probed; off where it validates (AWS S3, SeaweedFS); true or "
            "false to choose."),
        Key("s3commit.signing.payload", "auto",
            "Whether SigV4 signs the SHA-256 of each part and single-PUT object body over plain http (about 0.7 s of "
            "CPU per GiB). auto: sent UNSIGNED-PAYLOAD where damage in transit is caught otherwise (the store was "
            "seen to validate the checksum sent, or to give MD5 part ETags that the ETag check compares), signed "
            "elsewhere; https is botocore's rule (unsigned with a checksum). signed: always signed, also over https "
            "(an attacker on a plain-http path can then not swap a body for one with the same CRC)."),
        Key("s3commit.capabilities.cache", "86400",
            "Seconds what a store was seen to honour (its probe: about 60 small requests in a scratch prefix, once "
            "per endpoint and bucket) is kept on local disk for later processes; 0: probe once per process. "
            "`s3commit doctor` always probes afresh."),
        Key("fs.s3a.attempts.maximum", "7", "Attempts per S3 request (tenacity owns retries)."),
        Key("s3commit.store.concurrency.adaptive", "true",
            "Adapt how many requests a process has in flight to each prefix (its first path element) to the "
            "store's throttling: 0.7 times as many after a 503 SlowDown (once per round of requests), one more per "
            "round answered without one, up to s3commit.store.concurrency.max; shared by every request of the "
            "process to that prefix (Completes, deletes, _SUCCESS, parts). Job commits then have up to that many "
            "Completes in flight unless fs.s3a.committer.threads is set to another value than its default. false: "
            "fs.s3a.committer.threads bound the Completes again, and the limit stays at its maximum."),
        Key("s3commit.store.concurrency.max", "256",
            "Most requests a process has in flight to one prefix, and where the adaptive limit starts: S3 takes about "
            "3,500 writes/s per prefix, 175 in flight at 50 ms each. The S3 client's connection pool holds at least "
            "this many connections (fs.s3a.connection.maximum if larger)."),
        Key("s3commit.store.lean-requests", "true",
            "Send each CompleteMultipartUpload (a job commit's request per file) through s3commit's own lean request "
            "path: built, SigV4-signed and parsed by s3commit, sent through the S3 client's connection pool, at a "
            "fraction of botocore's CPU per request; retries, errors and counters as every request's. botocore "
            "still sends it where the lean path does not apply (anonymous or non-SigV4 signing, S3 Express, moto's "
            "in-process mock), and takes over a bucket's Completes where the store refuses one the lean path built "
            "(a signature it does not accept, a region it redirects: logged once). false: botocore sends every "
            "Complete."),
        Key("s3commit.retry.initial-delay", "0.1", "First backoff delay in seconds (jittered, doubling)."),
        Key("s3commit.retry.max-delay", "10", "Largest single backoff delay in seconds."),
        Key("fs.s3a.committer.magic.track.commits.in.memory.enabled", "true",
            "Magic committer: keep each task attempt's pending uploads in the memory of the process writing them "
            "(a file's close returns while its last part uploads; the task commit is one PUT). False: a .pending "
            "per file, listed, read and deleted at task commit (Hadoop's default). A process that dies loses "
            "only its uncommitted attempts: their tasks fail and run again."),
        Key("s3commit.committer.validate.output", "false",
            "After completing, HEAD every committed object and check its size (and checksum where the server "
            "returns one) against its manifest; a mismatch fails the job, which rolls back. One HEAD a file."),
        Key("fs.s3a.committer.summary.report.directory", "",
            "A directory (s3a://, s3:// or local) where every job commit also writes summary-<job id>.json: "
            "the _SUCCESS data, after a success and after a failure (naming it)."),
        Key("s3commit.commit.journal", "true",
            "Record a journal before the first Complete so `s3commit recover` can finish or roll back an "
            "interrupted job commit. Costs one PUT per job."),
        Key("s3commit.commit.rate-limit", "0",
            "Upper bound on Complete requests per second at job commit (0: unbounded). Use it to stay "
            "under a prefix's throttle on very large jobs."),
        Key("s3commit.magic.track-uploads", "auto",
            "Record each upload's id in the job directory as soon as it starts (one extra PUT per file) "
            "so a crashed task's uploads can be found and aborted. auto: only when the file name does not "
            "carry the job UUID (Spark's names always do)."),
        Key("s3commit.staging.dir", "", "Local directory for staging committers (default: the temp dir)."),
        Key("s3commit.commit.lease", "auto",
            "Serialize job commits to one destination with a lease object (__s3commit_lease, taken with "
            "If-None-Match, renewed and released with If-Match): concurrent jobs never delete each other's files. "
            "auto: on where the store honours conditional writes (its probe), else off with a warning; on: refuse "
            "to commit without it; off."),
        Key("s3commit.commit.lease.wait", "1200",
            "Seconds a job commit waits for another job's lease on its destination before it fails cleanly (its "
            "uploads aborted, nothing of it visible), naming the holder."),
        Key("s3commit.commit.lease.duration", "120",
            "Seconds a lease lives unless renewed (its holder renews it every quarter of this); a holder silent "
            "longer is taken over, judged by the store's clock, and its interrupted commit settled first."),
        Key("s3commit.snapshot.retention", "24h",
            "On a snapshot destination (`s3commit snapshot enable`): how long a file an overwrite replaced stays in "
            "the store after the snapshot that dropped it was superseded, so that reads planned on it finish; "
            "vacuum deletes it after. The default of `snapshot enable`, recorded in the destination's log. A number "
            "of seconds or a duration (90s, 10m, 1h)."),
        Key("s3commit.snapshot.complete-at-task-commit", "true",
            "On a snapshot destination: each task commit completes its attempt's uploads (in parallel, with "
            "If-None-Match, where the store honours it on Complete) and records them in its pendingset, so that the "
            "job commit is its journal, the log entry and _SUCCESS, whatever the number of files. A key that exists "
            "stays pending for the job commit. Plain listers see completed files before the job commits (readers of "
            "the log do not); the files of aborted and dead jobs are deleted by the abort, the sweep or vacuum."),
        Key("s3commit.job.liveness", "10m",
            "How long a job may stay silent before others judge it dead. From job setup until it commits or aborts, "
            "a job's driver renews its liveness record (its owner record, _owner.json in its job directory) every "
            "quarter of this, with If-Match; a job silent longer (judged by the store's clock) is swept by the next "
            "job commit on its destination, or by `s3commit uploads sweep`: its uploads aborted, its directory "
            "deleted. A number of seconds or a duration (90s, 10m, 1h)."),
        Key("s3commit.job.sweep", "true",
            "At job commit, sweep the dead jobs under the destination (see s3commit.job.liveness) where the store "
            "honours conditional writes; never on a store that does not (use `s3commit uploads sweep DEST "
            "--older-than AGE` there)."),
        Key("s3commit.abort.orphans", "true",
            "At job commit/abort, abort uploads under the destination that provably belong to this job "
            "(never another job's)."),
        Key("fs.s3a.fast.upload.buffer", "disk",
            "Where a part waits to be uploaded: disk (a block file in a private directory, handed to the "
            "sidecar by name; bounded heap, needs local disk of active.blocks+1 parts per open file) or array / "
            "bytebuffer (the JVM heap, sent over the socket; part size x (active.blocks+1) of heap per file)."),
        Key("fs.s3a.buffer.dir", "",
            "Comma-separated local directories for block files (the first usable one); empty: "
            "S3COMMIT_BUFFER_DIR, else YARN's LOCAL_DIRS, else the temp directory. Each sidecar makes a private "
            "0700 directory there."),
        Key("fs.s3a.experimental.input.fadvise", "normal",
            "Read policy: sequential (prefetch blocks ahead), random (fetch what is asked, rounded up to the "
            "readahead range), normal (sequential until the first backward seek). openFile() may override it "
            "per file (fs.option.openfile.read.policy)."),
        Key("fs.s3a.readahead.range", "64K",
            "Random reads fetch at least this much: larger saves requests on small reads, wastes bytes on seeks."),
        Key("fs.s3a.prefetch.block.size", "8M",
            "Sequential reads fetch blocks ahead of the reader, the first of this size (later ones grow up to "
            "s3commit.prefetch.max-block-size while the stream reads in order)."),
        Key("fs.s3a.prefetch.block.count", "8",
            "Most blocks fetched ahead in parallel per sequential stream (within s3commit.prefetch.max-ahead): "
            "a store gives each connection a share of its bandwidth, so a long read goes as fast as its GETs "
            "in flight."),
        Key("s3commit.prefetch.max-block-size", "8M",
            "A sequential stream's blocks double from fs.s3a.prefetch.block.size up to this while it reads in "
            "order (fewer GETs, each a larger share of s3commit.prefetch.max-ahead: fewer in flight); a seek out "
            "of the blocks in hand starts again from the block size. At or below fs.s3a.prefetch.block.size (the "
            "default): blocks never grow."),
        Key("s3commit.prefetch.max-ahead", "64M",
            "Most bytes a sequential stream fetches ahead of its reader (always at least one block): memory per "
            "open sequential stream is at most this plus one block (the one being read)."),
        Key("fs.s3a.vectored.read.min.seek.size", "4K",
            "Vectored reads merge ranges closer than this into one GET (Parquet on Hadoop 3.3.5+)."),
        Key("fs.s3a.vectored.read.max.merged.size", "1M",
            "Largest merged vectored read; larger ranges are fetched alone."),
        Key("s3commit.bridge.idle-timeout", "3600",
            "Seconds a write stream may go untouched before the sidecar aborts it (an abandoned stream must "
            "not hold its parts for the life of a session)."),
        *(Key(*spec) for spec in connection.CONNECTION_KEYS),  # credentials, assumed role, TLS, proxy, pool, timeouts
    )
}


Parse = Callable[..., Any]
"""How a key's text becomes a field's value: ``parse(text, what=key)`` (``parse_size``, ``parse_bool``,
``ConflictMode.parse``...), raising :class:`~s3commit.errors.ConfigError` naming the key."""

_SETTING = "s3commit.setting"


def setting(key: str, parse: Parse, **kwargs: Any) -> Any:
    """An options field set by ``key``: its default is ``parse`` of the key's default in :data:`KEYS` (the one
    place it is written), and :func:`settings` reads the key through the same ``parse``. ``kwargs`` go to
    :func:`dataclasses.field` (``repr=False`` for a secret)."""
    return field(default=parse(KEYS[key].default, what=key), metadata={_SETTING: (key, parse)}, **kwargs)


def settings(cls: type, conf: Mapping[str, str]) -> dict[str, Any]:
    """The fields of the options dataclass ``cls`` that keys set (:func:`setting`), read from ``conf``
    (Hadoop-style keys, ``spark.hadoop.`` prefixes already stripped); a key not set has its default."""
    values: dict[str, Any] = {}
    for option in fields(cls):
        if _SETTING in option.metadata:
            key, parse = option.metadata[_SETTING]
            values[option.name] = parse(str(conf.get(key, KEYS[key].default)).strip(), what=key)
    return values


def resolve_threads(value: int) -> int:
    """Hadoop's rule: negative means ×cores; 0 means run sequentially (1 thread)."""
    if value < 0:
        return max(1, -value * (os.cpu_count() or 1))
    return max(1, value)


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How the store retries throttling, 5xx, timeouts and dropped connections (jittered exponential)."""

    max_attempts: int = setting("fs.s3a.attempts.maximum", parse_int)
    initial_delay: float = setting("s3commit.retry.initial-delay", parse_float)
    max_delay: float = setting("s3commit.retry.max-delay", parse_float)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}")
        if self.initial_delay < 0 or self.max_delay < 0:
            raise ConfigError("RetryPolicy delays must be >= 0")


_CONNECTION: dict[str, Any] = connection.connection_fields({})
"""The connection fields' defaults: what :mod:`s3commit.config.connection` makes of no key set (its
``CONNECTION_KEYS`` hold the defaults, listed in :data:`KEYS`)."""

_SSE = {"SSE-S3": "AES256", "AES256": "AES256", "SSE-KMS": "aws:kms", "AWS:KMS": "aws:kms"}


def _parse_sse(text: str, *, what: str) -> str | None:
    """S3A's encryption algorithm (``SSE-S3``, ``SSE-KMS``; the SDK's names too) as S3 names it."""
    algorithm = text.upper() or None
    if algorithm and algorithm not in _SSE:
        raise ConfigError(f"{what} {algorithm!r} is not valid. Valid values are: SSE-S3, SSE-KMS")
    return _SSE[algorithm] if algorithm else None


def _parse_auto_bool(text: str, *, what: str) -> bool | None:
    """``auto`` (None: decided later) or a boolean."""
    return None if text.lower() == "auto" else parse_bool(text, what=what)


@dataclass(frozen=True, kw_only=True)
class StoreOptions:
    """How to reach S3. ``None`` fields fall back to boto3's own resolution (env, profiles, config)."""

    endpoint_url: str | None = _CONNECTION["endpoint_url"]
    region: str | None = setting("fs.s3a.endpoint.region", parse_optional)
    path_style: bool = setting("fs.s3a.path.style.access", parse_bool)
    access_key: str | None = setting("fs.s3a.access.key", parse_optional, repr=False)
    secret_key: str | None = setting("fs.s3a.secret.key", parse_optional, repr=False)
    session_token: str | None = setting("fs.s3a.session.token", parse_optional, repr=False)
    credentials: CredentialChain | None = _CONNECTION["credentials"]
    """S3A's credential providers (``fs.s3a.aws.credentials.provider``); None: the keys above if set, else
    boto3's chain."""
    use_ssl: bool = _CONNECTION["use_ssl"]
    proxy: Proxy | None = _CONNECTION["proxy"]
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_pool_connections: int = _CONNECTION["max_pool_connections"]
    connect_timeout: float = _CONNECTION["connect_timeout"]
    read_timeout: float = _CONNECTION["read_timeout"]
    sse_algorithm: str | None = setting("fs.s3a.encryption.algorithm", _parse_sse)
    sse_kms_key_id: str | None = setting("fs.s3a.encryption.key", parse_optional)
    storage_class: str | None = setting("fs.s3a.create.storage.class", parse_optional)
    acl: str | None = setting("fs.s3a.acl.default", parse_optional)
    checksum_algorithm: str | None = setting("fs.s3a.create.checksum.algorithm", parse_text)
    """Sent with every part and single-PUT object (:mod:`s3commit.model.checksums`); ``"auto"``: ``CRC32C`` where
    ``awscrt`` is installed, else ``CRC32`` (resolved here, so the field names the algorithm; where a bucket's store
    validates no checksum, ``auto`` sends none there: :meth:`~s3commit.store.body_policy.PayloadPolicy.algorithm`);
    None or ``"none"``: off."""
    checksum_auto: bool | None = None
    """Whether ``checksum_algorithm`` is ``auto``'s choice, set from it (None). A copy (``dataclasses.replace``) keeps
    it while its algorithm is the one ``auto`` chose; options made anew with that algorithm's name are not."""
    verify_etag: bool | None = setting("s3commit.checksum.verify-etag", _parse_auto_bool)
    """Compare each answer's ETag with the MD5 of the bytes sent, where S3 defines it so; None (auto): where the
    store was not seen to validate the checksum sent
    (:meth:`~s3commit.store.body_policy.PayloadPolicy.verifies_etags`)."""
    payload_signing: str = setting("s3commit.signing.payload", parse_text)
    """``s3commit.signing.payload``: ``auto`` (sign a body only where nothing else catches its damage) or ``signed``
    (:mod:`s3commit.store.body_policy`)."""
    capabilities_max_age: float = setting("s3commit.capabilities.cache", parse_seconds)
    """Seconds a probe's findings are kept on local disk (:mod:`s3commit.store.capability_cache`); 0: not kept."""
    concurrency_adaptive: bool = setting("s3commit.store.concurrency.adaptive", parse_bool)
    """Adapt the requests in flight per prefix to the store's throttling (:mod:`s3commit.store.concurrency`)."""
    concurrency_max: int = setting("s3commit.store.concurrency.max", parse_int)
    """The most requests in flight per prefix, and where the adaptive limit starts."""
    lean_requests: bool = setting("s3commit.store.lean-requests", parse_bool)
    """Send CompleteMultipartUploads through :mod:`s3commit.store.lean_complete` instead of botocore's call."""
    etag_form: EtagForm = EtagForm.OBJECTS
    """How the ``.pending`` and ``.pendingset`` files saved through this store write their part ETags
    (:class:`~s3commit.model.manifests.EtagForm`): objects (hadoop-aws 3.4.2 and later) or strings (older S3A). A
    Spark sidecar sets the form of its JVM's S3A (:mod:`s3commit.bridge.registry`); no Hadoop key sets it."""

    def __post_init__(self) -> None:
        chosen = normalise(self.checksum_algorithm)
        kept = bool(self.checksum_auto) and chosen == automatic()  # a copy of auto's options, its algorithm unchanged
        object.__setattr__(self, "checksum_auto", is_auto(self.checksum_algorithm) or kept)
        object.__setattr__(self, "checksum_algorithm", chosen)
        try:
            object.__setattr__(self, "etag_form", EtagForm(self.etag_form))
        except ValueError:
            raise ConfigError(f"etag_form {self.etag_form!r} is not valid. Valid values are: "
                              f"{', '.join(f.value for f in EtagForm)}") from None
        if self.sse_algorithm not in (None, "AES256", "aws:kms"):
            raise ConfigError(
                f"sse_algorithm {self.sse_algorithm!r} is not valid. Valid values are: AES256, aws:kms"
            )
        signing = str(self.payload_signing).strip().lower()
        if signing not in ("auto", "signed"):
            raise ConfigError(f"s3commit.signing.payload {self.payload_signing!r} is not valid. Valid values are: "
                              "auto, signed")
        object.__setattr__(self, "payload_signing", signing)
        if self.concurrency_max < 1:
            raise ConfigError(f"s3commit.store.concurrency.max must be >= 1, got {self.concurrency_max}")
        if self.sse_kms_key_id and self.sse_algorithm != "aws:kms":
            raise ConfigError("sse_kms_key_id is set but sse_algorithm is not aws:kms")

    def write_args(self) -> dict[str, str]:
        """Extra arguments for every object-creating request (PUT, Create, Copy)."""
        args: dict[str, str] = {}
        if self.sse_algorithm:
            args["ServerSideEncryption"] = self.sse_algorithm
        if self.sse_kms_key_id:
            args["SSEKMSKeyId"] = self.sse_kms_key_id
        if self.storage_class:
            args["StorageClass"] = self.storage_class
        if self.acl:
            args["ACL"] = self.acl
        return args

    @classmethod
    def from_hadoop_conf(cls, conf: Mapping[str, str], *, bucket: str | None = None) -> StoreOptions:
        """Build from ``fs.s3a.*`` keys (``spark.hadoop.`` prefixes already stripped), as S3A reads them for
        ``bucket`` (its ``fs.s3a.bucket.<bucket>.*`` keys win) with S3A's older key names honoured."""
        conf = connection.current_names(connection.resolve_bucket(conf, bucket))
        return cls(**connection.connection_fields(conf), retry=RetryPolicy(**settings(RetryPolicy, conf)),
                   **settings(cls, conf))


class LeaseMode(ValuedEnum):
    """``s3commit.commit.lease``: whether job commits take the destination's commit lease."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"


class TrackUploads(ValuedEnum):
    """When the magic writer records an upload id in the job directory at upload start."""

    AUTO = "auto"
    ALWAYS = "always"
    NEVER = "never"


@dataclass(frozen=True, kw_only=True)
class CommitterOptions:
    """Committer behaviour. Keyword-only; ``dataclasses.replace`` derives variants."""

    threads: int = setting("fs.s3a.committer.threads", parse_int)
    part_size: int = setting("fs.s3a.multipart.size", parse_size)
    max_in_flight: int = setting("fs.s3a.fast.upload.active.blocks", parse_int)
    conflict_mode: ConflictMode = setting("fs.s3a.committer.staging.conflict-mode", ConflictMode.parse)
    unique_filenames: bool = setting("fs.s3a.committer.staging.unique-filenames", parse_bool)
    success_marker: bool = setting("mapreduce.fileoutputcommitter.marksuccessfuljobs", parse_bool)
    staging_dir: str | None = setting("s3commit.staging.dir", parse_optional)
    journal: bool = setting("s3commit.commit.journal", parse_bool)
    rate_limit: float = setting("s3commit.commit.rate-limit", parse_float)
    track_uploads: TrackUploads = setting("s3commit.magic.track-uploads", TrackUploads.parse)
    abort_orphans: bool = setting("s3commit.abort.orphans", parse_bool)
    validate_output: bool = setting("s3commit.committer.validate.output", parse_bool)
    summary_report_dir: str | None = setting("fs.s3a.committer.summary.report.directory", parse_optional)
    track_commits_in_memory: bool = setting("fs.s3a.committer.magic.track.commits.in.memory.enabled", parse_bool)
    lease: LeaseMode = setting("s3commit.commit.lease", LeaseMode.parse)
    lease_wait: float = setting("s3commit.commit.lease.wait", parse_seconds)
    lease_duration: float = setting("s3commit.commit.lease.duration", parse_seconds)
    job_liveness: float = setting("s3commit.job.liveness", parse_seconds)
    snapshot_retention: float = setting("s3commit.snapshot.retention", parse_seconds)
    complete_at_task_commit: bool = setting("s3commit.snapshot.complete-at-task-commit", parse_bool)
    sweep_dead_jobs: bool = setting("s3commit.job.sweep", parse_bool)

    def __post_init__(self) -> None:
        object.__setattr__(self, "conflict_mode",
                           ConflictMode.parse(self.conflict_mode, what="conflict mode"))
        object.__setattr__(self, "track_uploads",
                           TrackUploads.parse(self.track_uploads, what="s3commit.magic.track-uploads"))
        object.__setattr__(self, "lease", LeaseMode.parse(self.lease, what="s3commit.commit.lease"))
        if self.lease_wait < 0 or self.lease_duration < 1:
            raise ConfigError(f"lease_wait must be >= 0 and lease_duration >= 1 s, got {self.lease_wait} and "
                              f"{self.lease_duration}")
        if self.job_liveness < 1:
            raise ConfigError(f"s3commit.job.liveness must be at least 1 s, got {self.job_liveness}")
        if self.part_size < MIN_PART_SIZE:
            raise ConfigError(
                f"part_size {self.part_size} is below S3's minimum part size of {MIN_PART_SIZE} bytes (5 MiB)"
            )
        if self.part_size > MAX_PART_SIZE:
            raise ConfigError(f"part_size {self.part_size} is above S3's maximum part size (5 GiB)")
        if self.max_in_flight < 1:
            raise ConfigError(f"max_in_flight must be >= 1, got {self.max_in_flight}")
        if self.rate_limit < 0:
            raise ConfigError(f"rate_limit must be >= 0, got {self.rate_limit}")

    @property
    def pool_size(self) -> int:
        return resolve_threads(self.threads)

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in fields(cls)}

    @classmethod
    def from_hadoop_conf(cls, conf: Mapping[str, str]) -> CommitterOptions:
        """Build from Hadoop-style keys (``spark.hadoop.`` prefixes already stripped)."""
        return cls(**settings(cls, conf))


def committer_name_from_conf(conf: Mapping[str, str]) -> CommitterName:
    """The committer named by ``fs.s3a.committer.name`` (default magic)."""
    value = str(conf.get("fs.s3a.committer.name", KEYS["fs.s3a.committer.name"].default))
    return CommitterName.parse(value, what="committer name (fs.s3a.committer.name)")
