"""S3A settings given the way Spark users give them (Hadoop keys of the session, per bucket) reach every sidecar:
an assumed role is assumed through STS for its bucket only, and settings s3commit does not support are named in
one warning by the JVM, each once, while Hadoop's own defaults (core-default.xml) are never taken for settings."""

from __future__ import annotations

import http.client
import http.server
import json
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads

pytestmark = pytest.mark.spark

ASSUMED_ROLE = "org.apache.hadoop.fs.s3a.auth.AssumedRoleCredentialProvider"


@contextmanager
def recording_sts(moto_url: str) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """An STS endpoint in front of moto's that records each request's form (Action, RoleSessionName...)."""
    seen: list[dict[str, str]] = []
    target = urllib.parse.urlsplit(moto_url)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(dict(urllib.parse.parse_qsl(body.decode())))
            upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            upstream.request("POST", self.path, body, dict(self.headers.items()))
            answer = upstream.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.getheader("Content-Type") or "text/xml")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def hadoop_conf(spark):
    """The session's Hadoop configuration; keys the test sets are unset afterwards."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    names: list[str] = []

    def set_key(name: str, value: str) -> None:
        names.append(name)
        conf.set(name, value)

    yield set_key
    for name in names:
        conf.unset(name)


def test_a_per_bucket_assumed_role_is_assumed_for_that_bucket_only(spark, hadoop_conf, s3_server, s3_client):
    role_bucket, plain_bucket = (s3_server.create_bucket(f"test-{uuid.uuid4().hex[:12]}") for _ in range(2))
    session = f"spark-{uuid.uuid4().hex[:8]}"
    frame = spark.range(20).selectExpr("id", "cast(id % 2 as int) AS p")
    with recording_sts(s3_server.raw_endpoint_url) as (sts, seen):
        # Given: a role for one bucket only, as a cluster's core-site.xml or spark.hadoop.* settings name it.
        prefix = f"fs.s3a.bucket.{role_bucket}."
        for key, value in {"aws.credentials.provider": ASSUMED_ROLE,
                           "assumed.role.arn": "arn:aws:iam::123456789012:role/s3commit-etl",
                           "assumed.role.session.name": session, "assumed.role.external.id": "ext-42",
                           "assumed.role.session.duration": "20m", "assumed.role.sts.endpoint": sts,
                           "assumed.role.sts.endpoint.region": "us-east-1"}.items():
            hadoop_conf(prefix + key, value)
        # When: one session writes to both buckets.
        frame.write.partitionBy("p").parquet(f"s3a://{plain_bucket}/t")
        assert seen == []
        frame.write.partitionBy("p").parquet(f"s3a://{role_bucket}/t")
    # Then: the role's bucket was written as the role: each sidecar asked STS, with S3A's settings ...
    assert seen and {(r["Action"], r["RoleArn"], r["RoleSessionName"], r["ExternalId"], r["DurationSeconds"])
                     for r in seen} == {("AssumeRole", "arn:aws:iam::123456789012:role/s3commit-etl", session,
                                         "ext-42", "1200")}
    # ... and both buckets hold the rows, committed by s3commit.
    for bucket in (role_bucket, plain_bucket):
        assert sorted(r.id for r in spark.read.parquet(f"s3a://{bucket}/t").collect()) == list(range(20))
        assert json.loads(s3_client.get_object(Bucket=bucket, Key="t/_SUCCESS")["Body"].read())["committer"] == "magic"
        assert_no_pending_uploads(s3_client, bucket)


def test_unsupported_s3a_settings_are_named_once_and_hadoop_defaults_never(spark, s3_bucket):
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
    conf.set(f"fs.s3a.bucket.{s3_bucket}.threads.max", "200")
    conf.set("fs.s3a.multipart.purge", "true")
    bridge = jvm.s3commit.bridge.BridgeConf
    bridge.register(conf, s3_bucket)
    bridge.register(conf, s3_bucket)  # a second registration: nothing new to name
    warned = sorted(bridge.warned())
    assert [w for w in warned if w.startswith(("fs.s3a.threads.max ", "fs.s3a.multipart.purge "))] == [
        w for w in warned if "threads.max" in w or "multipart.purge " in w]
    assert any(w.startswith("fs.s3a.threads.max (") for w in warned)
    assert any(w.startswith("fs.s3a.multipart.purge (") for w in warned)
    # core-default.xml sets dozens of fs.s3a.* keys (S3A's select, retry and thread settings among them): none
    # of them is a setting anyone made, so none is named.
    assert not [w for w in warned if w.startswith(("fs.s3a.select.", "fs.s3a.retry.", "fs.s3a.paging.maximum"))]


@pytest.mark.slow
def test_a_later_session_on_another_endpoint_commits_where_the_cached_file_system_writes(
        _spark_sessions, s3_server, s3_bucket, s3_client):
    """A test suite's shape: a new S3 server (another endpoint) and a new session for each test, the same bucket
    name. Hadoop keeps the bucket's s3a FileSystem from the first session, and the tasks write through it; the
    commit must reach that store too (it once read the endpoint from the new job's configuration and failed with
    NoSuchUpload, or committed staged files where no reader looked), and the JVM names the difference once."""
    from s3commit.testing import S3TestServer

    second = S3TestServer().start()
    try:
        second.create_bucket(s3_bucket)
        spark = _spark_sessions.for_server(s3_server)
        spark.conf.set("fs.s3a.committer.name", "magic")
        spark.range(5).write.parquet(f"s3a://{s3_bucket}/first")  # the bucket's FileSystem: on s3_server
        spark = _spark_sessions.for_server(second)
        for name in ("magic", "directory"):
            spark.conf.set("fs.s3a.committer.name", name)
            spark.range(20).repartition(2).write.mode("overwrite").parquet(f"s3a://{s3_bucket}/{name}")
            assert spark.read.parquet(f"s3a://{s3_bucket}/{name}").count() == 20
            keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix=f"{name}/")["Contents"]]
            assert f"{name}/_SUCCESS" in keys and sum(k.endswith(".parquet") for k in keys) == 2, keys
            assert_no_pending_uploads(s3_client, s3_bucket)
        on_second = second.client()
        assert on_second.list_objects_v2(Bucket=s3_bucket).get("KeyCount") == 0
        assert_no_pending_uploads(on_second, s3_bucket)
        warnings = [str(w) for w in spark._jvm.s3commit.bridge.BridgeConf.storeWarnings()]
        mine = [w for w in warnings if f"s3a://{s3_bucket}:" in w]
        assert len(mine) == 1, warnings
        assert "fs.s3a.endpoint" in mine[0] and s3_server.endpoint_url in mine[0] and second.endpoint_url in mine[0]
        assert "testing" not in mine[0]  # never a credential
    finally:
        _spark_sessions.stop()
        second.stop()
