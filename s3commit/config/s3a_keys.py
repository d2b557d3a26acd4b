"""S3A's keys, and what s3commit does with each: the table (data) behind docs/spark.md's "S3A's keys", and the one
warning naming those a configuration sets that s3commit does not support.

A key is ``honoured`` (s3commit does what S3A does: every ``fs.s3a.*`` key of :data:`s3commit.config.KEYS`, and
the few the JVM's FileSystem reads itself), ``same`` (s3commit always behaves as S3A does with the value given, or
with any value: nothing to do), ``obsolete`` (S3A itself ignores it now) or ``unsupported`` (it would change what
S3A does, and s3commit does not do it: named in the warning, with s3commit's nearest key where there is one). A
``same`` key set to another value, and an ``fs.s3a.*`` key S3A does not define (a typo?), are named too.
Pure: no I/O.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from s3commit.config.options import KEYS


class Treatment(enum.Enum):
    HONOURED = "honoured"
    SAME = "same"
    OBSOLETE = "obsolete"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class S3AKey:
    """One of S3A's keys (or, ending in ``.``, a family of them) and what s3commit does with it."""

    name: str
    treatment: Treatment
    note: str
    same_as: str | None = None
    """``same``: the value whose behaviour s3commit always has (None: any value)."""


_H, _S, _O, _U = Treatment.HONOURED, Treatment.SAME, Treatment.OBSOLETE, Treatment.UNSUPPORTED
_TABLE = (
    S3AKey("fs.s3a.block.size", _H, "the block size every file's status reports (split planning), as S3A"),
    S3AKey("fs.s3a.impl", _S, "Hadoop's binding of the scheme: configure() sets s3commit's FileSystem"),
    S3AKey("fs.s3a.impl.disable.cache", _S, "Hadoop's FileSystem cache, not S3A's: applies as usual"),
    S3AKey("fs.s3a.committer.magic.enabled", _S, "the magic committer is always available", "true"),
    S3AKey("fs.s3a.committer.require.uuid", _S, "Spark's job id always names the job (and its files)"),
    S3AKey("fs.s3a.committer.generate.uuid", _S, "Spark's job id always names the job (and its files)"),
    S3AKey("fs.s3a.committer.abort.pending.uploads", _S,
           "s3commit aborts only its own job's uploads, never another writer's (s3commit.abort.orphans)"),
    S3AKey("fs.s3a.committer.staging.abort.pending.uploads", _S,
           "s3commit aborts only its own job's uploads, never another writer's (s3commit.abort.orphans)"),
    S3AKey("fs.s3a.committer.staging.tmp.path", _S,
           "the staging committers keep their pendingsets in S3: no cluster file system is needed"),
    S3AKey("fs.s3a.committer.experimental.collect.iostatistics", _S, "statistics: _SUCCESS has s3commit's counters"),
    S3AKey("fs.s3a.multipart.uploads.enabled", _S, "the committers are multipart uploads", "true"),
    S3AKey("fs.s3a.multiobjectdelete.enable", _S, "deletes go in DeleteObjects batches of 1,000", "true"),
    S3AKey("fs.s3a.list.version", _S, "listings use ListObjectsV2", "2"),
    S3AKey("fs.s3a.accesspoint.required", _S, "buckets are addressed by name", "false"),
    S3AKey("fs.s3a.requester.pays.enabled", _S, "requester-pays buckets are not supported", "false"),
    S3AKey("fs.s3a.directory.marker.retention", _S, "directory markers are kept (S3A's default since 3.4)", "keep"),
    S3AKey("fs.s3a.authoritative.path", _S, "only affects marker retention, which is always keep"),
    S3AKey("fs.s3a.downgrade.syncable.exceptions", _S, "hflush/hsync do nothing (no data is visible before "
           "close)", "true"),
    S3AKey("fs.s3a.etag.checksum.enabled", _S, "getFileChecksum() answers none", "false"),
    S3AKey("fs.s3a.change.detection.mode", _S, "reads do not check the object's ETag or version", "none"),
    S3AKey("fs.s3a.change.detection.source", _S, "reads do not check the object's ETag or version"),
    S3AKey("fs.s3a.change.detection.version.required", _S, "reads do not check the object's ETag or version"),
    S3AKey("fs.s3a.experimental.aws.s3.throttling", _S, "throttling is retried with backoff (tenacity)"),
    S3AKey("fs.s3a.retry.http.5xx.errors", _S, "5xx answers are retried with backoff (tenacity)", "true"),
    S3AKey("fs.s3a.bucket.probe", _S, "the bucket is checked at job setup"),
    S3AKey("fs.s3a.ssl.channel.mode", _S, "the sidecar's TLS is Python's (OpenSSL), not the JVM's"),
    S3AKey("fs.s3a.classloader.isolation", _S, "the sidecar loads no JVM classes"),
    S3AKey("fs.s3a.threads.keepalivetime", _S, "idle threads: no effect on what is written"),
    S3AKey("fs.s3a.input.async.drain.threshold", _S, "reads close their streams at once: no effect on data"),
    S3AKey("fs.s3a.prefetch.enabled", _S, "sequential reads always prefetch (fs.s3a.experimental.input.fadvise)"),
    S3AKey("fs.s3a.optimized.copy.from.local.enabled", _S, "copyFromLocalFile is not part of any commit"),
    S3AKey("fs.s3a.fast.upload", _O, "S3A always uploads block by block now; so does s3commit"),
    S3AKey("fs.s3a.fast.buffer.size", _O, "replaced by fs.s3a.fast.upload.buffer in S3A"),
    S3AKey("fs.s3a.s3guard.", _O, "S3Guard was removed from S3A (3.4)"),
    S3AKey("fs.s3a.metadatastore.", _O, "S3Guard was removed from S3A (3.4)"),
    S3AKey("fs.s3a.failinject.", _O, "S3A's own test fault injection"),
    S3AKey("fs.s3a.select.", _U, "S3 Select (removed from S3A in 3.4.1)"),
    S3AKey("fs.s3a.audit.", _U, "S3A's request auditing (referrer headers)"),
    S3AKey("fs.s3a.analytics.accelerator.", _U, "the analytics accelerator input stream"),
    S3AKey("fs.s3a.input.stream.type", _U, "s3commit has one input stream (fs.s3a.experimental.input.fadvise)"),
    S3AKey("fs.s3a.threads.max", _U, "s3commit's threads: fs.s3a.connection.maximum (part uploads per sidecar), "
           "fs.s3a.committer.threads (commits)"),
    S3AKey("fs.s3a.max.total.tasks", _U, "s3commit's bound: fs.s3a.fast.upload.active.blocks per open file"),
    S3AKey("fs.s3a.executor.capacity", _U, "s3commit's bound: fs.s3a.fast.upload.active.blocks per open file"),
    S3AKey("fs.s3a.connection.ttl", _U, "connections live as long as botocore's pool keeps them"),
    S3AKey("fs.s3a.connection.idle.time", _U, "connections live as long as botocore's pool keeps them"),
    S3AKey("fs.s3a.connection.keepalive", _U, "TCP keep-alive is the OS's default"),
    S3AKey("fs.s3a.connection.acquisition.timeout", _U, "waiting for a pooled connection has no limit"),
    S3AKey("fs.s3a.connection.part.upload.timeout", _U, "a part's upload is bounded by fs.s3a.connection.timeout"),
    S3AKey("fs.s3a.connection.expect.continue", _U, "botocore sends Expect: 100-continue on uploads"),
    S3AKey("fs.s3a.socket.send.buffer", _U, "socket buffers are the OS's"),
    S3AKey("fs.s3a.socket.recv.buffer", _U, "socket buffers are the OS's"),
    S3AKey("fs.s3a.paging.maximum", _U, "listings take S3's page size (1,000 keys)"),
    S3AKey("fs.s3a.bulk.delete.page.size", _U, "deletes go in batches of 1,000 keys"),
    S3AKey("fs.s3a.multipart.threshold", _U, "a file smaller than fs.s3a.multipart.size is one PUT"),
    S3AKey("fs.s3a.multipart.purge", _U, "s3commit never purges others' uploads: `s3commit uploads abort`, or a "
           "bucket lifecycle rule"),
    S3AKey("fs.s3a.multipart.purge.age", _U, "see fs.s3a.multipart.purge"),
    S3AKey("fs.s3a.directory.operations.purge.uploads", _U, "see fs.s3a.multipart.purge"),
    S3AKey("fs.s3a.retry.limit", _U, "s3commit's retries: fs.s3a.attempts.maximum, s3commit.retry.initial-delay, "
           "s3commit.retry.max-delay"),
    S3AKey("fs.s3a.retry.interval", _U, "see fs.s3a.retry.limit"),
    S3AKey("fs.s3a.retry.throttle.limit", _U, "see fs.s3a.retry.limit"),
    S3AKey("fs.s3a.retry.throttle.interval", _U, "see fs.s3a.retry.limit"),
    S3AKey("fs.s3a.prefetch.max.blocks.count", _U,
           "s3commit's bounds: fs.s3a.prefetch.block.count, s3commit.prefetch.max-ahead"),
    S3AKey("fs.s3a.vectored.active.ranged.reads", _U, "a vectored read fetches its merged ranges all at once"),
    S3AKey("fs.s3a.object.content.encoding", _U, "objects carry no Content-Encoding"),
    S3AKey("fs.s3a.encryption.context", _U, "SSE-KMS encryption context"),
    S3AKey("fs.s3a.signing-algorithm", _U, "requests are signed with SigV4"),
    S3AKey("fs.s3a.s3.signing-algorithm", _U, "requests are signed with SigV4"),
    S3AKey("fs.s3a.sts.signing-algorithm", _U, "requests are signed with SigV4"),
    S3AKey("fs.s3a.custom.signers", _U, "custom signers are JVM classes"),
    S3AKey("fs.s3a.s3.client.factory.impl", _U, "the client is boto3's"),
    S3AKey("fs.s3a.user.agent.prefix", _U, "requests carry botocore's user agent"),
    S3AKey("fs.s3a.endpoint.fips", _U, "name a FIPS endpoint in fs.s3a.endpoint"),
    S3AKey("fs.s3a.cross.region.access.enabled", _U, "set fs.s3a.endpoint.region to the bucket's region"),
    S3AKey("fs.s3a.checksum.validation", _U, "reads are not checksum-validated (writes are: "
           "fs.s3a.create.checksum.algorithm)"),
    S3AKey("fs.s3a.create.performance", _U, "writes always run S3A's safety checks' equivalent"),
    S3AKey("fs.s3a.performance.flags", _U, "writes always run S3A's safety checks' equivalent"),
    S3AKey("fs.s3a.proxy.domain", _U, "NTLM proxies are not supported (basic authentication is)"),
    S3AKey("fs.s3a.proxy.workstation", _U, "NTLM proxies are not supported (basic authentication is)"),
    S3AKey("fs.s3a.security.credential.provider.path", _U, "Hadoop credential stores (JCEKS) are the JVM's: "
           "give the sidecar its credentials through fs.s3a.aws.credentials.provider (roles, environment)"),
    S3AKey("fs.s3a.aws.credentials.provider.mapping", _U, "provider names are S3A's and the AWS SDKs' own"),
    S3AKey("fs.s3a.delegation.token.binding", _U, "Hadoop delegation tokens are the JVM's"),
    S3AKey("fs.s3a.committer.overwrite.and.commit", _U, "overwrites are applied after the job's files are complete"),
    S3AKey("fs.s3a.committer.delete.directory.threads", _U, "old data is deleted by fs.s3a.committer.threads"),
)

def _first_sentence(text: str) -> str:
    return re.split(r"(?<!e\.g\.)(?<=\.)\s+(?=[A-Z])", text, maxsplit=1)[0].rstrip(".")


S3A_KEYS: dict[str, S3AKey] = {
    **{name: S3AKey(name, Treatment.HONOURED, _first_sentence(key.why))
       for name, key in KEYS.items() if name.startswith("fs.s3a.")},
    **{key.name: key for key in _TABLE},
}
"""Every S3A key s3commit knows, by name (a name ending in ``.`` covers a family)."""


def lookup(name: str) -> S3AKey | None:
    """The entry of ``name``: its own, or its family's."""
    found = S3A_KEYS.get(name)
    if found is None:
        found = next((k for prefix, k in S3A_KEYS.items() if prefix.endswith(".") and name.startswith(prefix)), None)
    return found


def _plain(name: str, buckets: Iterable[str]) -> str:
    """``fs.s3a.bucket.<b>.<key>`` -> ``fs.s3a.<key>`` (``b`` a bucket named by the configuration)."""
    if name.startswith("fs.s3a.bucket."):
        rest = name[len("fs.s3a.bucket."):]
        for bucket in sorted(buckets, key=len, reverse=True):
            if rest.startswith(bucket + "."):
                return "fs.s3a." + rest[len(bucket) + 1:]
    return name


def unsupported(conf: Mapping[str, str]) -> list[str]:
    """The keys of ``conf`` (per-bucket ones too) s3commit does not support or know, each with why:
    ``"fs.s3a.threads.max (s3commit's threads: ...)"``; empty when there are none."""
    named = buckets(conf)
    found = []
    for name in sorted(str(k) for k in conf):
        if not name.startswith("fs.s3a."):
            continue
        entry = lookup(_plain(name, named))
        if entry is None:
            found.append(f"{name} (not a key s3commit knows of S3A: a typo?)")
        elif entry.treatment is Treatment.UNSUPPORTED:
            found.append(f"{name} ({entry.note})")
        elif entry.treatment is Treatment.SAME and entry.same_as is not None \
                and str(conf[name]).strip().lower() != entry.same_as:
            found.append(f"{name}={conf[name]} (s3commit: {entry.note})")
    return found


def buckets(conf: Mapping[str, str]) -> set[str]:
    """The buckets of the per-bucket keys in ``conf`` (``fs.s3a.bucket.<b>.<key>`` with ``<key>`` known)."""
    found = set()
    for name in map(str, conf):
        if name.startswith("fs.s3a.bucket."):
            parts = name[len("fs.s3a.bucket."):].split(".")
            for i in range(1, len(parts)):
                if lookup("fs.s3a." + ".".join(parts[i:])) is not None:
                    found.add(".".join(parts[:i]))
                    break
    return found


def warning(conf: Mapping[str, str]) -> str | None:
    """One message naming every key :func:`unsupported` finds in ``conf``, or None."""
    keys = unsupported(conf)
    if not keys:
        return None
    return ("s3commit does not support these S3A settings, which therefore have no effect on what it does: "
            + "; ".join(keys))


def markdown_table() -> str:
    """docs/spark.md's table of S3A's keys (tests/unit/test_s3a_keys.py keeps the page equal to it)."""
    rows = ["| S3A key | s3commit | how |", "|---|---|---|"]
    for name in sorted(S3A_KEYS):
        entry = S3A_KEYS[name]
        shown = f"`{name}*`" if name.endswith(".") else f"`{name}`"
        what = entry.treatment.value + (f" (`{entry.same_as}`)" if entry.same_as else "")
        note = entry.note.replace("|", "/").replace("<", "&lt;").replace(">", "&gt;")
        rows.append(f"| {shown} | {what} | {note} |")
    return "\n".join(rows)
