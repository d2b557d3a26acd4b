"""``s3commit bench``: multipart commits against rename-based commits on the same simulated S3.

Sections (each reports ratios measured in one run, never absolute targets in tests):

- ``commit``: N tasks x M files x S bytes for magic, directory, partitioned, rename-v1, rename-v2;
  task-commit and job-commit times, requests by operation, bytes copied, job-commit peak memory;
  plus magic's task commit at 64 MiB against 1 MiB per task.
- ``scaling``: job-commit time against file count (magic and rename-v1) and against threads (magic), with
  a bare boto3 pool completing the same uploads on the same server and the analytical bound
  (files x Complete latency / threads).
- ``memory``: a job commit of 100,000 pending uploads in 1,000 pendingsets (in-memory store).
- ``spark``: the same DataFrame through S3CommitProtocol (magic, directory) and Spark's FileOutputCommitter
  v1 and v2 over the same s3a:// FileSystem.
- ``streaming``: per micro-batch, a query's checkpoint through s3commit's manager against Spark's rename-based
  one over the same s3a:// FileSystem, and the file sink's commit through s3commit's protocol against Spark's
  (time, requests, bytes copied).

Results go to ``benchmarks/results/`` (JSON, Markdown, PNG). ``--quick`` is a small smoke run for CI.
"""

from benchmarks.main import main

__all__ = ["main"]
