"""The project's own test bed, kept out of the wheel: SeaweedFS and rclone's ``serve s3`` as the second and third
S3 servers (:mod:`.seaweed`, :mod:`.rclone`, free ports in :mod:`.ports`), a Spark standalone cluster on
127.0.0.1 (:mod:`.standalone`), Hadoop's S3A beside s3commit (:mod:`.s3a`: hadoop-aws and its SDK bundle from Maven
Central, cached once) and the generator of docs/operations.md's compatibility table (:mod:`.compat`).

Used by ``tests/`` and ``benchmarks/`` from a checkout; may import anything of ``s3commit``.
"""

CHILD_TIMEOUT = 1_100
"""Seconds a test waits for a child process (a Spark application, the demo, a wheel's build and install) before it
calls it hung: a guard against a hang, never a measure of speed. Generous, as a host can be slow for hours: the
longest such child took 300 s in this machine's slowest hour (2026-11-30), when its guard was 400 s, and CI's
machine has run the whole slow tier 2.8 times as long as this machine does in a quiet hour. The slow and S3A tiers'
pytest timeout (``.ci/run``) is above it, the default tier's (600 s) below: there the test's own timeout ends a hung
child first."""
