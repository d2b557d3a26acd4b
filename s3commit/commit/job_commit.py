"""The job commit engine: validate, journal, complete in parallel, overwrite, mark, clean up.

1. Load every pendingset (in parallel) and validate it: format, job id, bucket, every key under the
   destination (or in an absolute directory a committed task declared) and outside any scratch directory,
   no key written twice. Nothing is completed or deleted before every pendingset has passed. Loaded
   pendingsets are kept for step 3 up to a budget of uploads; past it they are dropped and re-read, so
   memory does not grow with the size of the job.
2. Record a journal (If-None-Match: *) so an interrupted commit can be finished or rolled back.
3. Complete every upload on a bounded pool (optionally rate-limited). On the first failure: stop, abort
   every upload not completed, delete (revert) the completed ones, raise one :class:`JobCommitError`.
4. Apply the overwrite plan *after* completion: delete old objects under the given prefixes (or the
   partitions just written), never the keys just committed, never any job's scratch directory.
5. Write ``_SUCCESS``; 6. abort this job's orphan uploads (:mod:`s3commit.commit.job_uploads`), then delete the
   job directory, journal last (so a clean-up cut short is finished from the same records).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from s3commit.commit.job_uploads import JobRecords, JobUploads
from s3commit.commit.lease import CommitLease, NoLease
from s3commit.commit.manifest_store import load_pendingset
from s3commit.commit.overwrite import OverwritePlan, delete_old
from s3commit.commit.prefixes import delete_prefix
from s3commit.commit.upload_actions import abort_upload_quietly, commit_upload, revert_upload_quietly
from s3commit.commit.validate_output import validate_committed
from s3commit.config.options import CommitterOptions
from s3commit.errors import (
    CommitConflictError,
    CompletionUnknownError,
    JobCommitError,
    JournalExistsError,
    LeaseLostError,
    ManifestError,
    NotFoundError,
    PendingsetMissingError,
    PreconditionFailedError,
    S3CommitError,
)
from s3commit.model.manifests import SUCCESS_FILENAME_LIMIT, CommitJournal, PendingSet, PendingUpload, SuccessData
from s3commit.model.object_info import CREATE_WINDOW_KEY
from s3commit.model.paths import JobLayout, is_scratch_key
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import RateLimiter, map_ordered, run_each, window_for

log = logging.getLogger(__name__)

CACHE_BUDGET = 10_000
"""Uploads kept in memory between validation and completion; larger jobs re-read their pendingsets."""


@dataclass
class CommitStats:
    """What a job commit did; becomes ``_SUCCESS`` metrics."""

    pendingsets: int = 0
    files: int = 0
    bytes: int = 0
    completed: int = 0
    aborted: int = 0
    reverted: int = 0
    deleted_by_overwrite: int = 0
    orphans_aborted: int = 0
    kept_changed: int = 0
    undo_failed: int = 0
    validated: int = 0
    checksums_verified: int = 0
    dead_jobs_swept: int = 0
    dead_job_uploads_aborted: int = 0
    timings_ms: dict[str, int] = field(default_factory=dict)


class JobCommit:
    """One job commit. Not reusable."""

    def __init__(self, store: S3Store, *, dest: S3Uri, layout: JobLayout, job_id: str, committer: str,
                 options: CommitterOptions, job_id_source: str = "s3commit",
                 absolute_dirs: Sequence[str] = (), lease: CommitLease | NoLease | None = None,
                 create_only: bool = False) -> None:
        self.store = store
        #: The destination's commit lease: taken after validation, checked before every step that changes it.
        self.lease = lease or NoLease()
        #: Complete with If-None-Match (conflict-mode=fail, mode="error") where the store honours it.
        self.create_only = create_only
        self.dest = dest
        # The job's uploads: under the destination, and in the directories outside it (same bucket) that
        # committed tasks declared they wrote to.
        self.uploads = JobUploads(store, dest, job_id, layouts=(layout,), absolute_dirs=absolute_dirs)
        self.absolute_dirs = self.uploads.absolute_dirs
        self.layout = layout
        self.job_id = job_id
        self.committer = committer
        self.options = options
        self.job_id_source = job_id_source
        self.stats = CommitStats()
        self._cache: dict[str, PendingSet] = {}
        self._committed: dict[str, str] = {}  # key -> upload id
        self._uncertain: dict[str, str] = {}  # key -> upload id: Completes that may have taken effect unseen
        # Committed uploads whose Create lost an answer (few): their windows find the orphans at clean-up.
        self._create_windows = JobRecords()
        self._lock = threading.Lock()

    # --- step 1: validation ---------------------------------------------------------------------

    def _validate(self, pendingset: PendingSet, source: str, seen: set[str], accepted: set[str]) -> None:
        if accepted and pendingset.task_attempt_id and pendingset.task_attempt_id not in accepted:
            # Another attempt of the task committed after the one the caller accepted (speculation without
            # a commit coordinator): committing it would publish output the caller never accepted.
            raise ManifestError(
                f"the pendingset was written by task attempt {pendingset.task_attempt_id}, but the committed "
                f"attempt is {', '.join(sorted(accepted))}: two attempts of one task committed", source=source)
        if pendingset.job_id and pendingset.job_id != self.job_id:
            raise ManifestError(f"Mismatch in Job ID ({self.job_id}) and commit job ID ({pendingset.job_id})",
                                source=source)
        for commit in pendingset.commits:
            if commit.bucket != self.dest.bucket:
                raise ManifestError(f"upload for {commit.dest_uri} is in another bucket than the destination "
                                    f"{self.dest}", source=source)
            if not self.in_scope(commit.destination_key) or is_scratch_key(commit.destination_key):
                raise ManifestError(f"upload for {commit.dest_uri} points outside the destination {self.dest}",
                                    source=source)
            if any(e in ("", ".", "..") for e in commit.destination_key.split("/")):
                raise ManifestError(f"upload key {commit.destination_key!r} has an empty, '.' or '..' element",
                                    source=source)
            if commit.destination_key in seen:
                raise ManifestError(f"Destination {commit.dest_uri} is written by more than one task",
                                    source=source)
            seen.add(commit.destination_key)
            if CREATE_WINDOW_KEY in commit.extra_data:
                self._create_windows.add_pending(commit)

    def in_scope(self, key: str) -> bool:
        """True if this job may write ``key``: under the destination, or a file directly in one of the
        declared absolute directories."""
        return self.uploads.in_scope(key)

    def scopes(self) -> list[str]:
        """The prefixes this job's uploads live under: the destination's, then each absolute directory's."""
        return self.uploads.scopes()

    def _load(self, key: str) -> PendingSet:
        cached = self._cache.get(key)
        return cached if cached is not None else load_pendingset(self.store, self.dest.bucket, key)

    def load_and_validate(self, pool: ThreadPoolExecutor, keys: Sequence[str],
                          accepted_attempts: dict[str, set[str]] | None = None) -> None:
        """Read and check every pendingset before anything is completed (raises on the first problem)."""
        seen: set[str] = set()
        cached = 0
        # In order, a bounded window ahead: only about ``2 x threads`` parsed pendingsets exist at once, so
        # memory does not grow with the number of tasks.
        loads = map_ordered(pool, keys, lambda key: load_pendingset(self.store, self.dest.bucket, key),
                            window=2 * self.options.pool_size)
        for key, future in loads:
            try:
                pendingset = future.result()
            except NotFoundError as err:
                raise PendingsetMissingError(
                    f"pendingset s3://{self.dest.bucket}/{key} of job {self.job_id} is missing: was the job "
                    "already committed or aborted?"
                ) from err
            self._validate(pendingset, f"s3://{self.dest.bucket}/{key}", seen,
                           (accepted_attempts or {}).get(key, set()))
            self.stats.files += len(pendingset.commits)
            self.stats.bytes += pendingset.total_length
            if cached + len(pendingset.commits) <= CACHE_BUDGET:
                self._cache[key] = pendingset
                cached += len(pendingset.commits)
        self.stats.pendingsets = len(keys)

    # --- step 2: journal ------------------------------------------------------------------------

    def write_journal(self, keys: Sequence[str], plan: OverwritePlan) -> None:
        journal = CommitJournal(job_id=self.job_id, committer=self.committer, bucket=self.dest.bucket,
                                dest_key=self.dest.key, pendingsets=tuple(keys),
                                delete_paths=plan.delete_paths, replace_partitions=plan.replace_partitions,
                                delete_outside=plan.delete_outside,
                                success_marker=self.options.success_marker, absolute_dirs=self.absolute_dirs)
        try:
            # A PUT whose answer was lost and whose retry then meets our own journal is verified by the store
            # (Retry.VERIFIED): a 412 here is another commit's journal.
            self.store.put_object(self.dest.bucket, self.layout.journal_key, journal.to_json(),
                                  if_none_match=True, content_type="application/json")
        except PreconditionFailedError as err:
            raise JournalExistsError(
                f"job {self.job_id} already has a commit journal at s3://{self.dest.bucket}/"
                f"{self.layout.journal_key}: another commit of this job is running or was interrupted; "
                f"run `s3commit recover {self.dest} --job {self.job_id}`"
            ) from err

    # --- step 3: completion ---------------------------------------------------------------------

    def _complete_one(self, limiter: RateLimiter, commit: PendingUpload, if_none_match: bool) -> None:
        limiter.acquire()
        self.lease.check()
        try:
            commit_upload(self.store, commit, if_none_match=if_none_match)
        except CompletionUnknownError:
            with self._lock:  # the roll-back resolves it before it decides (it may have been completed)
                self._uncertain[commit.destination_key] = commit.upload_id
            raise
        except PreconditionFailedError as err:
            raise CommitConflictError(f"{commit.dest_uri} appeared after the job's conflict check (another writer "
                                      "made it): it is not replaced") from err
        with self._lock:
            self._committed[commit.destination_key] = commit.upload_id
            self.stats.completed += 1
        if self.options.validate_output:  # a mismatch fails complete_all: the job then rolls back
            verified = validate_committed(self.store, commit)
            with self._lock:
                self.stats.validated += 1
                self.stats.checksums_verified += verified

    def complete_all(self, pool: ThreadPoolExecutor, keys: Sequence[str]) -> None:
        """Complete every upload (at most ``threads x 4`` queued, no per-upload state kept); stop at the first
        failure and re-raise it."""
        limiter = RateLimiter(self.options.rate_limit)
        known = self.store.capabilities.get(self.dest.bucket)
        if_none_match = self.create_only and known is not None and known.conditional_complete
        if self.create_only and not if_none_match:
            log.warning("job %s: the store of %s does not honour If-None-Match on Complete: an object that appears "
                        "there during this commit would be replaced", self.job_id, self.dest)
        failures = run_each(pool, self._uploads(keys), lambda c: self._complete_one(limiter, c, if_none_match),
                            window=window_for(self.options.pool_size), stop_on_failure=True)
        if failures:
            raise failures[0].error

    def mark_completed(self, commit: PendingUpload) -> None:
        """Count ``commit`` as completed by this commit (recovery found it complete): a roll-back then
        reverts it, and the overwrite plan keeps it."""
        with self._lock:
            self._committed[commit.destination_key] = commit.upload_id

    def validated_uploads(self, keys: Sequence[str]) -> Iterator[PendingUpload]:
        """The uploads of pendingsets :meth:`load_and_validate` accepted, in order (re-read past the cache)."""
        return self._uploads(keys)

    def _uploads(self, keys: Sequence[str]) -> Iterator[PendingUpload]:
        for key in keys:
            yield from self._load(key).commits

    def roll_back(self, pool: ThreadPoolExecutor, keys: Sequence[str]) -> int:
        """Abort every upload not completed and delete every completed one (after a failure).

        Returns how many uploads could not be undone (their failures are logged).
        """
        def undo(commit: PendingUpload) -> None:
            completed = self._committed.get(commit.destination_key) == commit.upload_id
            if not completed and self._uncertain.get(commit.destination_key) == commit.upload_id:
                try:  # a Complete whose answer was lost: read back again (the store's retries) before deciding
                    completed = self.store.completed_object(commit.bucket, commit.destination_key, commit.etags,
                                                            length=commit.length, created_ms=commit.created) is not None
                except S3CommitError as err:
                    log.warning("roll back: cannot tell whether %s was completed (%s): left to `s3commit recover`",
                                commit.dest_uri, err)
                    with self._lock:
                        self.stats.undo_failed += 1
                    return
            if completed:
                done = revert_upload_quietly(self.store, commit.bucket, commit.destination_key)
            else:
                done = abort_upload_quietly(self.store, commit.bucket, commit.destination_key, commit.upload_id)
            with self._lock:
                if not done:
                    self.stats.undo_failed += 1
                elif completed:
                    self.stats.reverted += 1
                else:
                    self.stats.aborted += 1

        def ours() -> Iterator[PendingUpload]:
            for key in keys:
                try:
                    pendingset = self._load(key)
                except Exception as err:  # an unreadable pendingset: its uploads are left to the sweep
                    log.warning("roll back: cannot read %s: %s", key, err)
                    self.stats.undo_failed += 1
                    continue
                yield from (c for c in pendingset.commits
                            if c.bucket == self.dest.bucket and self.in_scope(c.destination_key))

        run_each(pool, ours(), undo, window=window_for(self.options.pool_size))
        return self.stats.undo_failed

    # --- steps 4-6 ------------------------------------------------------------------------------

    def apply_overwrite(self, plan: OverwritePlan) -> None:
        """Delete the plan's old objects (never the keys just committed, a scratch key or ``_SUCCESS``)."""
        keep = set(self._committed)
        if plan.prefixes(self.dest, keep):
            self.lease.check()
        deleted, changed = delete_old(self.store, self.dest, plan, keep, threads=self.options.pool_size,
                                      skip=lambda k: is_scratch_key(k) or k == self.layout.success_key)
        self.stats.deleted_by_overwrite += deleted
        self.stats.kept_changed += changed

    def success_data(self) -> SuccessData:
        names = tuple(f"/{k}" for k in sorted(self._committed)[:SUCCESS_FILENAME_LIMIT])
        requests = self.store.counters.snapshot()["requests"]
        metrics = {
            "committer_commits_completed": self.stats.completed,
            "committer_bytes_committed": self.stats.bytes,
            "committer_files": self.stats.files,
            "committer_pendingsets": self.stats.pendingsets,
            "committer_commits_reverted": self.stats.reverted,
            "committer_commits_aborted": self.stats.aborted,
            "committer_objects_deleted_by_overwrite": self.stats.deleted_by_overwrite,
            "committer_objects_kept_changed_since_listing": self.stats.kept_changed,
            "committer_lease_wait_ms": int(self.lease.waited * 1000),
            "committer_lease_requests": self.lease.requests,
            "committer_dead_jobs_swept": self.stats.dead_jobs_swept,
            "committer_dead_job_uploads_aborted": self.stats.dead_job_uploads_aborted,
            **({"committer_objects_validated": self.stats.validated,
                "committer_checksums_verified": self.stats.checksums_verified} if self.options.validate_output
               else {}),
            **{f"op_{op}": n for op, n in sorted(requests.items())},
            **{f"duration_{k}_ms": v for k, v in self.stats.timings_ms.items()},
        }
        return SuccessData(
            committer=self.committer, job_id=self.job_id, job_id_source=self.job_id_source,
            description=f"s3commit job committer for {self.dest}", metrics=metrics,
            diagnostics={"fs.s3a.committer.threads": str(self.options.threads),
                         "fs.s3a.multipart.size": str(self.options.part_size),
                         "s3commit.commit.rate-limit": str(self.options.rate_limit),
                         "fs.s3a.create.checksum.algorithm": str(self.store.options.checksum_algorithm or "none"),
                         "s3commit.committer.validate.output": str(self.options.validate_output).lower(),
                         **self._store_diagnostics()},
            filenames=names,
        )

    def _store_diagnostics(self) -> dict[str, str]:
        """What the store was seen to honour, as the job's decisions used it (``_SUCCESS`` diagnostics)."""
        known = self.store.capabilities.get(self.dest.bucket)
        if known is None:
            return {"s3commit.capabilities": "unknown"}
        probed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(known.probed_at))
        return {"s3commit.capabilities": known.summary(), "s3commit.capabilities.probed": probed,
                "s3commit.checksum.verify-etag.effective": str(self.store.verifies_etags(self.dest.bucket)).lower()}

    def cleanup(self, *, read_pendingsets: bool = False) -> None:
        """Abort this job's orphan uploads, then delete the job directory (journal last).

        The orphans: uploads of task attempts that never committed (failed, lost, killed), recorded in the
        tasks directory, and those the job's rules find by listing (:mod:`s3commit.commit.job_uploads`), never the
        uploads just committed. ``read_pendingsets``: also read the pendingsets' records (a clean-up resumed
        by recovery, whose engine did not load them: the Create windows of committed uploads are there).
        """
        with ThreadPoolExecutor(1, thread_name_prefix="s3commit-sweep") as side:
            records = side.submit(self._records, read_pendingsets)
            self._finish_cleanup(records, side.submit(self._sweep, records))

    def _records(self, read_pendingsets: bool = False) -> JobRecords:
        """The records the clean-up's sweep works from (:meth:`cleanup`)."""
        records = self.uploads.read_records(pendingsets=False)
        if read_pendingsets:  # only what the engine would have kept: the windows of committed uploads
            records.update(self.uploads.read_pendingset_records().windowed())
        return records

    def _sweep(self, records: Future[JobRecords]) -> None:
        """Abort the job's orphan uploads (best effort where listing uploads is refused)."""
        found = records.result()
        found.update(self._create_windows)  # committed uploads whose Create lost an answer (from validation)
        keep = set(self._committed.values())
        known = self.store.capabilities.get(self.dest.bucket)
        # A store seen not to list uploads (named once at job setup): what the records name is aborted.
        listed = self.options.abort_orphans and (known is None or known.lists_uploads)
        if listed:
            try:
                self.stats.orphans_aborted += self.uploads.abort(found, keep=keep)
            except S3CommitError as err:
                # Best effort, as in S3A (HADOOP-17547): listing uploads needs s3:ListBucketMultipartUploads,
                # which many roles lack; the job's output is committed by now and must not be reported failed.
                log.warning("job %s: could not sweep orphan uploads under %s (set s3commit.abort.orphans="
                            "false if this role may not list uploads): %s", self.job_id, self.dest, err)
                listed = False
        if not listed:  # what the records name can be aborted without listing
            self.stats.orphans_aborted += self.uploads.abort(found, keep=keep, list_uploads=False)

    def _finish_cleanup(self, records: Future[JobRecords], swept: Future[None]) -> None:
        """Delete the job directory while ``swept`` runs, once the ``records`` it works from are read (they are in
        that directory), then, once it is done, the journal: a clean-up that stops part way is finished by
        `s3commit recover` from the same records."""
        bucket = self.dest.bucket
        wait([records])
        delete_prefix(self.store, bucket, f"{self.layout.job_dir}/", keep={self.layout.journal_key})
        swept.result()
        self.store.delete_object(bucket, self.layout.journal_key)

    def run(self, keys: Sequence[str], plan: OverwritePlan,
            accepted_attempts: dict[str, set[str]] | None = None) -> SuccessData:
        """The whole commit. On failure everything this job uploaded is aborted or reverted."""
        # The clean-up's side: its records (task attempts' files, which a commit does not change) are read while
        # the job commits; its sweep of orphan uploads runs beside the _SUCCESS PUT and the job directory's deletion.
        with ThreadPoolExecutor(1, thread_name_prefix="s3commit-sweep") as side:
            return self._run(keys, plan, accepted_attempts, side)

    def _run(self, keys: Sequence[str], plan: OverwritePlan, accepted_attempts: dict[str, set[str]] | None,
             side: ThreadPoolExecutor) -> SuccessData:
        started = time.monotonic()
        records = side.submit(self._records)
        bucket = self.dest.bucket
        with ThreadPoolExecutor(self.options.pool_size, thread_name_prefix=f"s3commit-{self.job_id[:8]}") as pool:
            t0 = time.monotonic()
            self.load_and_validate(pool, keys, accepted_attempts)
            self.stats.timings_ms["load"] = _ms(t0)
            if not keys:
                log.warning("job %s: no pending uploads to commit to %s", self.job_id, self.dest)
            t0 = time.monotonic()
            self.lease.acquire()  # nothing of this job changes the destination before it is held
            self.stats.timings_ms["lease"] = _ms(t0)
            if self.options.journal:
                self.write_journal(keys, plan)
            t0 = time.monotonic()
            try:
                self.complete_all(pool, keys)
            except LeaseLostError:
                raise  # the job that took the lease over settles this commit from its journal: no roll back here
            except BaseException as err:
                left = self.roll_back(pool, keys)
                message = f"job {self.job_id} commit to {self.dest} failed"
                if left:
                    # Keep the journal: it is how `s3commit recover --abort` finds what is still to undo.
                    message += (f"; {left} uploads or pendingsets could not be rolled back (see the log): run "
                                f"`s3commit recover {self.dest} --job {self.job_id} --abort`")
                elif self.options.journal:
                    revert_upload_quietly(self.store, bucket, self.layout.journal_key)
                failed = [(getattr(err, "key", None) or "?", err)]
                raise JobCommitError(message,
                                     failures=[(f"s3://{bucket}/{k}", e) for k, e in failed],
                                     reverted=self.stats.reverted, aborted=self.stats.aborted,
                                     not_rolled_back=left) from err
            self.stats.timings_ms["complete"] = _ms(t0)
        t0 = time.monotonic()
        self.apply_overwrite(plan)
        self.stats.timings_ms["overwrite"] = _ms(t0)
        self.stats.timings_ms["total"] = _ms(started)
        success = self.success_data()
        self.lease.check()
        swept = side.submit(self._sweep, records)
        if self.options.success_marker:
            self.store.put_object(bucket, self.layout.success_key, success.to_json(),
                                  content_type="application/json")
        try:
            self._finish_cleanup(records, swept)
        except S3CommitError as err:
            # The output is committed and _SUCCESS written: the job succeeded. What is left (the job directory,
            # the journal, uploads of failed attempts) is for `s3commit recover`, which finishes the clean-up.
            log.warning("job %s: committed, but the clean-up failed (finish it with `s3commit recover %s "
                        "--job %s`): %s", self.job_id, self.dest, self.job_id, err)
        log.info("job %s committed %d files (%d bytes) to %s in %d ms", self.job_id, self.stats.completed,
                 self.stats.bytes, self.dest, _ms(started))
        return success


def _ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)
