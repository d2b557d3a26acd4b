"""The commit operations and the job-commit engine (Hadoop's ``commit/impl``): *how* uploads are committed.

Operations on uploads (:mod:`.upload_actions`: complete, abort, revert), manifests in S3
(:mod:`.manifest_store`), everything under a prefix (:mod:`.prefixes`), the uploads that belong to one job
(:mod:`.job_uploads`), overwrite plans (:mod:`.overwrite`), reading back what was committed
(:mod:`.validate_output`), summary reports (:mod:`.summary_reports`); task commit and abort, magic and staging
(:mod:`.task_commit`), with the in-memory tracking of magic task attempts in the process that writes them
(:mod:`.task_registry`); the commit engine, one journal-driven state machine for every commit, a job's or a
streaming batch's (:mod:`.engine`), the destination's commit lease (:mod:`.lease`), one owner per job
(:mod:`.ownership`), recovery of an interrupted commit (:mod:`.recovery`, :mod:`.recovery_result`), and the commit
session that binds lease, journal, resume, roll-back and report for one job commit (:mod:`.session`).

May import: :mod:`s3commit.transfer`, :mod:`s3commit.store`, :mod:`s3commit.config`, :mod:`s3commit.model`,
:mod:`s3commit.errors`. Knows nothing of Spark or of committers' lifecycles.
"""
