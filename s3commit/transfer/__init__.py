"""The transfer of bytes: a file object that streams to S3 as a multipart upload (:mod:`.writer`), the parts it
sends (:mod:`.parts`), and bounded parallel work (:mod:`.parallel`). Knows nothing of committers: on close, the
writer asks a completion policy whether to complete or to defer (Hadoop's ``PutTracker`` seam).

May import: :mod:`s3commit.store`, :mod:`s3commit.config`, :mod:`s3commit.model`, :mod:`s3commit.errors`.
"""
