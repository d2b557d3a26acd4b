"""The project's own test bed, kept out of the wheel: SeaweedFS and rclone's ``serve s3`` as the second and third
S3 servers (:mod:`.seaweed`, :mod:`.rclone`, free ports in :mod:`.ports`), a Spark standalone cluster on
127.0.0.1 (:mod:`.standalone`), Hadoop's S3A beside s3commit (:mod:`.s3a`: hadoop-aws and its SDK bundle from Maven
Central, cached once) and the generator of docs/operations.md's compatibility table (:mod:`.compat`).

Used by ``tests/`` and ``benchmarks/`` from a checkout; may import anything of ``s3commit``.
"""
