"""Pure values and every persistent format: no I/O, no boto3.

What s3commit writes and reads as files is defined here once (Hadoop's ``commit/files``): the ``.pending``,
``.pendingset`` and ``_SUCCESS`` manifests and the commit journal (:mod:`.manifests`), the commit lease's body
(:mod:`.lease_record`), a streaming sink batch's journal (:mod:`.batch_journal`), the upload marker and the job's
owner and liveness records (:mod:`.markers`); what a committed task tells the job (:mod:`.task_message`); beside
them the values they are made of: S3 URIs (:mod:`.uri`), the layouts of a job's scratch data (:mod:`.paths`),
checksums and their rules (:mod:`.checksums`), and what S3 says about objects and uploads (:mod:`.object_info`).

May import: :mod:`s3commit.errors` and the standard library only.
"""
