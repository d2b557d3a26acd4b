"""Full parts sent as pieces (:func:`s3commit.transfer.parts.pieces_per_part`), end to end on every S3 server we test:
a magic file of 16 MiB parts goes up in 8 MiB pieces, stays invisible until the job commits, arrives exact with
its checksums, and leaves no upload behind (moto in the default tier; SeaweedFS and rclone in the slow tier)."""

from __future__ import annotations

import hashlib
import os

from s3commit import create_committer
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from s3commit.transfer.parts import PIECE_MIN
from testbed.fixtures import ALL_SERVERS, every_server_fixture

s3_server = every_server_fixture(ALL_SERVERS)


def test_a_magic_file_of_large_parts_goes_up_in_pieces_and_commits_exact(store, s3_client, s3_bucket, tmp_path):
    data = os.urandom(2 * 2 * PIECE_MIN + PIECE_MIN + 3)  # two full parts of 16 MiB, then a last of 8 MiB + 3
    committer = create_committer("magic", f"s3://{s3_bucket}/pieces", store=store, staging_dir=str(tmp_path),
                                 part_size=2 * PIECE_MIN)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("part-00000.bin") as out:
        out.write(data)
    message = committer.commit_task(attempt)
    assert "pieces/part-00000.bin" not in list_keys(s3_client, s3_bucket, "pieces/")  # nothing visible yet
    committer.commit_job([message])
    head = s3_client.head_object(Bucket=s3_bucket, Key="pieces/part-00000.bin")
    assert head["ContentLength"] == len(data)
    # 4 pieces of 8 MiB and the last part whole (rclone's ETag is the MD5 of the object, not of its parts)
    assert head["ETag"].endswith('-5"') or head["ETag"] == f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'
    body = s3_client.get_object(Bucket=s3_bucket, Key="pieces/part-00000.bin")["Body"].read()
    assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()
    assert_no_pending_uploads(s3_client, s3_bucket)
