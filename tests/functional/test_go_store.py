"""The Go store (``testbed.go_store``, ``testbed/gostore``) answers as S3 and the memory model do: multipart ETags and
bytes, conditional writes refused with 412, listings, 501 for what it does not model; and it keeps S3's envelope:
503 SlowDown above a partition's rate (checked by rates and counts, never by timing), a partition splitting after
sustained throttling, latencies as a lower bound. Skipped, naming the cause, where Go is not installed."""

from __future__ import annotations

import base64
import hashlib
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from s3commit.model.object_info import multipart_etag
from s3commit.testing._sim.profiles import LatencyProfile, ThrottleSpec
from testbed.go_store import GoStore, GoStoreError, build_go_store

try:
    build_go_store()
except GoStoreError as err:
    pytest.skip(f"the Go store is not available: {err}", allow_module_level=True)


@pytest.fixture(scope="module", params=[("epoll", 0.0), ("epoll", 0.001), ("goroutines", 0.0)],
                ids=["epoll", "epoll-tick", "goroutines"])
def go_store(request):
    """The store, on each of its front ends (one event loop, looking at every arrival or once a millisecond; a
    goroutine a connection)."""
    frontend, tick = request.param
    with GoStore(frontend=frontend, tick=tick) as started:
        yield started


@pytest.fixture(scope="module")
def client(go_store):
    return go_store.client()


@pytest.fixture
def bucket(go_store):
    return go_store.create_bucket(f"go-{uuid.uuid4().hex[:12]}")


def code_of(err: ClientError) -> tuple[str, int]:
    return err.response["Error"]["Code"], err.response["ResponseMetadata"]["HTTPStatusCode"]


def test_multipart_etag_and_bytes_are_s3s(client, bucket):
    upload = client.create_multipart_upload(Bucket=bucket, Key="a/b.bin")["UploadId"]
    first, second = b"x" * 100, b"second part"
    etags = [client.upload_part(Bucket=bucket, Key="a/b.bin", UploadId=upload, PartNumber=n, Body=body)["ETag"]
             for n, body in ((1, first), (2, second))]
    parts = [{"ETag": etag, "PartNumber": n} for n, etag in enumerate(etags, 1)]
    done = client.complete_multipart_upload(Bucket=bucket, Key="a/b.bin", UploadId=upload,
                                            MultipartUpload={"Parts": parts})
    assert done["ETag"] == multipart_etag(etags) and done["ETag"].endswith('-2"')
    got = client.get_object(Bucket=bucket, Key="a/b.bin")
    assert got["Body"].read() == first + second and got["ETag"] == done["ETag"]
    assert client.head_object(Bucket=bucket, Key="a/b.bin")["ContentLength"] == len(first + second)
    ranged = client.get_object(Bucket=bucket, Key="a/b.bin", Range="bytes=98-102")
    assert ranged["Body"].read() == b"xxsec" and ranged["ContentRange"] == f"bytes 98-102/{len(first + second)}"
    # a repeated Complete is answered with the object's ETag; an unknown upload is NoSuchUpload
    again = client.complete_multipart_upload(Bucket=bucket, Key="a/b.bin", UploadId=upload,
                                             MultipartUpload={"Parts": parts})
    assert again["ETag"] == done["ETag"]
    with pytest.raises(ClientError) as caught:
        client.upload_part(Bucket=bucket, Key="a/b.bin", UploadId=upload, PartNumber=3, Body=b"late")
    assert code_of(caught.value) == ("NoSuchUpload", 404)
    # a completed upload is kept only to answer its repeated Complete: neither listed nor to be aborted, nor
    # completed again at another key
    assert upload not in [u["UploadId"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]
    for call in (lambda: client.abort_multipart_upload(Bucket=bucket, Key="a/b.bin", UploadId=upload),
                 lambda: client.complete_multipart_upload(Bucket=bucket, Key="a/other.bin", UploadId=upload,
                                                          MultipartUpload={"Parts": parts})):
        with pytest.raises(ClientError) as caught:
            call()
        assert code_of(caught.value) == ("NoSuchUpload", 404)
    # one part: the object holds that part's bytes (unchanged by a later part of another upload)
    single = client.create_multipart_upload(Bucket=bucket, Key="a/one.bin")["UploadId"]
    etag = client.upload_part(Bucket=bucket, Key="a/one.bin", UploadId=single, PartNumber=1, Body=b"one")["ETag"]
    client.complete_multipart_upload(Bucket=bucket, Key="a/one.bin", UploadId=single,
                                     MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]})
    other = client.create_multipart_upload(Bucket=bucket, Key="a/two.bin")["UploadId"]
    client.upload_part(Bucket=bucket, Key="a/two.bin", UploadId=other, PartNumber=1, Body=b"two")
    assert client.get_object(Bucket=bucket, Key="a/one.bin")["Body"].read() == b"one"
    client.abort_multipart_upload(Bucket=bucket, Key="a/two.bin", UploadId=other)


def test_complete_checks_the_parts(client, bucket):
    upload = client.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    etags = [client.upload_part(Bucket=bucket, Key="k", UploadId=upload, PartNumber=n, Body=bytes([n]) * 10)["ETag"]
             for n in (1, 2)]
    for parts, code in (([{"ETag": etags[1], "PartNumber": 2}, {"ETag": etags[0], "PartNumber": 1}],
                         "InvalidPartOrder"),
                        ([{"ETag": etags[1], "PartNumber": 1}], "InvalidPart"),
                        ([{"ETag": etags[0], "PartNumber": 7}], "InvalidPart")):
        with pytest.raises(ClientError) as caught:
            client.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload,
                                             MultipartUpload={"Parts": parts})
        assert code_of(caught.value) == (code, 400)
    client.abort_multipart_upload(Bucket=bucket, Key="k", UploadId=upload)
    with pytest.raises(ClientError) as caught:
        client.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload,
                                         MultipartUpload={"Parts": [{"ETag": etags[0], "PartNumber": 1}]})
    assert code_of(caught.value) == ("NoSuchUpload", 404)
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_conditional_put_and_complete_are_refused_with_412(client, bucket):
    first = client.put_object(Bucket=bucket, Key="once", Body=b"1", IfNoneMatch="*")["ETag"]
    with pytest.raises(ClientError) as caught:
        client.put_object(Bucket=bucket, Key="once", Body=b"2", IfNoneMatch="*")
    assert code_of(caught.value) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as caught:
        client.put_object(Bucket=bucket, Key="once", Body=b"2", IfMatch='"0123"')
    assert code_of(caught.value) == ("PreconditionFailed", 412)
    assert client.put_object(Bucket=bucket, Key="once", Body=b"3", IfMatch=first)["ETag"] != first
    upload = client.create_multipart_upload(Bucket=bucket, Key="once")["UploadId"]
    etag = client.upload_part(Bucket=bucket, Key="once", UploadId=upload, PartNumber=1, Body=b"p")["ETag"]
    with pytest.raises(ClientError) as caught:
        client.complete_multipart_upload(Bucket=bucket, Key="once", UploadId=upload, IfNoneMatch="*",
                                         MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]})
    assert code_of(caught.value) == ("PreconditionFailed", 412)
    assert client.get_object(Bucket=bucket, Key="once")["Body"].read() == b"3"
    client.abort_multipart_upload(Bucket=bucket, Key="once", UploadId=upload)


def test_listings_page_roll_up_and_encode(client, bucket):
    keys = ["d/a b.txt", "d/sub/1", "d/sub/2", "d/z", "e"]
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=b"v")
    listed = client.list_objects_v2(Bucket=bucket, Prefix="d/", Delimiter="/")
    assert [o["Key"] for o in listed["Contents"]] == ["d/a b.txt", "d/z"]
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["d/sub/"]
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={"PageSize": 2})
    assert [o["Key"] for page in pages for o in page.get("Contents", [])] == sorted(keys)
    after = client.list_objects_v2(Bucket=bucket, StartAfter="d/sub/2")
    assert [o["Key"] for o in after["Contents"]] == ["d/z", "e"]
    deleted = client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "d/z"}, {"Key": "e"}]})
    assert sorted(d["Key"] for d in deleted["Deleted"]) == ["d/z", "e"]
    quiet = client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "d/sub/1"}], "Quiet": True})
    assert "Deleted" not in quiet and "Errors" not in quiet
    assert [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]] == ["d/a b.txt", "d/sub/2"]


@pytest.mark.parametrize("written", ["as SDKs write it", "indented, a comment"])
def test_a_delete_document_is_read_however_it_is_written(go_store, client, bucket, written):
    odd = ["a&b", "c<d>e", "f'g\"h", "ü é/+%20", " spaced ", "x]]>y"]
    etags = {key: client.put_object(Bucket=bucket, Key=key, Body=b"v")["ETag"] for key in [*odd, "kept"]}
    objects = [*({"Key": key, "ETag": etags[key]} for key in odd[:3]), *({"Key": key} for key in odd[3:]),
               {"Key": "kept", "ETag": '"0123"'}]
    sent = {"Objects": objects, "Quiet": True}
    if written != "as SDKs write it":  # as a hand-written document may be (read by encoding/xml, not scanned)
        def indent(request, **_):
            request.data = request.body.replace(b"<Object>", b"\n  <Object><!-- an entry -->\n    ").replace(
                b"</Key>", b"</Key>\n")
            for name in [h for h in request.headers if h.lower().startswith(("x-amz-checksum-", "content-md5"))]:
                del request.headers[name]
            request.headers["Content-MD5"] = base64.b64encode(hashlib.md5(request.data).digest()).decode()
        client.meta.events.register_first("before-sign.s3.DeleteObjects", indent)
    try:
        answer = client.delete_objects(Bucket=bucket, Delete=sent)
    finally:
        if written != "as SDKs write it":
            client.meta.events.unregister("before-sign.s3.DeleteObjects", indent)
    assert [(e["Key"], e["Code"]) for e in answer.get("Errors", [])] == [("kept", "PreconditionFailed")]
    assert [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]] == ["kept"]


def test_listings_between_writes_deletes_and_rewrites_are_exact(client, bucket):
    """Keys written, deleted and written again between listings, a few at a time among many (the store sorts the new
    ones into a short run of their own and merges it into the rest only now and then): every listing, page and
    start-after as the keys there are."""
    there: set[str] = set()

    def listed(**kwargs):
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={"PageSize": 7},
                                                                 **kwargs)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def write(keys):
        for key in keys:
            client.put_object(Bucket=bucket, Key=key, Body=b"v")
        there.update(keys)

    write([f"k/{n:03d}" for n in range(0, 200, 2)])
    for step in range(12):
        write([f"k/{n:03d}" for n in range(1 + step * 16, 17 + step * 16, 4)])  # among the others
        gone = sorted(there)[step * 5:step * 5 + 3]
        client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in gone]})
        there.difference_update(gone)
        if step % 3 == 0:
            write(gone[:1])  # written again after its delete
        assert listed(Prefix="k/") == sorted(there)
        after = sorted(there)[len(there) // 2]
        assert listed(Prefix="k/", StartAfter=after) == [k for k in sorted(there) if k > after]


def test_multipart_uploads_are_listed_in_pages(client, bucket):
    made = sorted((f"u/{n}", client.create_multipart_upload(Bucket=bucket, Key=f"u/{n}")["UploadId"])
                  for n in range(5))
    pages = client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix="u/",
                                                                    PaginationConfig={"PageSize": 2})
    assert [(u["Key"], u["UploadId"]) for page in pages for u in page.get("Uploads", [])] == made
    for key, upload in made:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)


def test_what_it_does_not_model_is_501(client, bucket):
    client.put_object(Bucket=bucket, Key="t", Body=b"v")
    with pytest.raises(ClientError) as caught:
        client.put_object_tagging(Bucket=bucket, Key="t", Tagging={"TagSet": [{"Key": "a", "Value": "b"}]})
    assert code_of(caught.value) == ("NotImplemented", 501)


def test_seed_and_counts(go_store, client, bucket):
    seeded = go_store.seed(bucket, ["s/1", "s/2"], b"abc")
    assert [s["key"] for s in seeded] == ["s/1", "s/2"]
    assert {s["etag"] for s in seeded} == {'"900150983cd24fb0d6963f7d28e17f72"'}  # md5("abc")
    for s in seeded:
        client.complete_multipart_upload(Bucket=bucket, Key=s["key"], UploadId=s["upload_id"],
                                         MultipartUpload={"Parts": [{"ETag": s["etag"], "PartNumber": 1}]})
    go_store.put_objects(bucket, {"s/old-1": b"x"})
    counts = go_store.counts(bucket, "s/", contains=["/old-"])
    assert counts == {"objects": 3, "containing": {"/old-": 1}, "uploads": 0}
    assert client.get_object(Bucket=bucket, Key="s/2")["Body"].read() == b"abc"
    stats = go_store.stats()
    assert stats["requests"]["CompleteMultipartUpload"] >= 2 and stats["cpu_seconds"] > 0


def test_its_capacity_is_measured_by_completing_every_upload_seeded(go_store):
    report = go_store.complete_capacity(uploads=300, connections=16)
    assert report["sent"] == report["answered"] == report["store_answers"] == 300
    assert report["statuses"] == {"200": 300} and "error" not in report
    assert report["complete"] == 300  # each upload became its object: the Completes were the lean path's, valid
    assert report["store_cpu_seconds"] > 0 and report["answers_per_second"] > 0
    assert report["answers_per_cpu_second"] > 0


def test_drive_reports_the_statuses_it_was_answered_and_refuses_a_plan_without_connections(go_store, bucket):
    report = go_store.drive("GET", [(f"/{bucket}/missing-{n}", "") for n in range(5)], connections=2)
    assert report["statuses"] == {"404": 5} and report["answered"] == 5 and report["store_answers"] == 5
    go_store.put_objects(bucket, {"here": b"x" * 100})
    heads = go_store.drive("HEAD", [(f"/{bucket}/here", "")] * 6, connections=2)  # (a length, and no body, each)
    assert heads["statuses"] == {"200": 6} and heads["answered"] == 6
    with pytest.raises(GoStoreError, match=r"drive failed \(exit 2\).*connections >= 1"):
        go_store.drive("GET", [("/x/y", "")], connections=0)


def puts(client, bucket: str, keys: list[str], threads: int = 8) -> list[str]:
    """PUT every key (``threads`` at once); the error codes met."""
    codes: list[str] = []
    lock = threading.Lock()

    def run(mine: list[str]) -> None:
        for key in mine:
            try:
                client.put_object(Bucket=bucket, Key=key, Body=b"v")
            except ClientError as err:
                with lock:
                    codes.append(err.response["Error"]["Code"])

    workers = [threading.Thread(target=run, args=(keys[n::threads],)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return codes


def test_writes_above_the_partitions_rate_are_slowed_down():
    spec = ThrottleSpec(writes_per_second=20, reads_per_second=None, burst_seconds=1, split_after_seconds=None)
    with GoStore(throttle=spec) as store:
        client = store.client(max_pool_connections=8)
        store.create_bucket("t")
        codes = puts(client, "t", [f"hot/{n}" for n in range(300)])
        # 300 PUTs against 20 a second with a burst of 20: most are refused unless they took ~14 s
        assert codes and set(codes) == {"SlowDown"}
        stats = store.stats()
        assert stats["slowdowns_answered"] == len(codes) == stats["slowdowns"]["PutObject"]
        assert client.put_object(Bucket="t", Key="cold/1", Body=b"v")  # another partition, its own rate
        assert client.list_objects_v2(Bucket="t", Prefix="hot/", MaxKeys=1)["KeyCount"] == 1  # reads unthrottled
        assert stats["partitions_split"] == 0


def test_a_partition_throttled_for_long_enough_splits():
    spec = ThrottleSpec(writes_per_second=10, reads_per_second=None, burst_seconds=1, split_after_seconds=0.3)
    with GoStore(throttle=spec) as store:
        client = store.client(max_pool_connections=8)
        store.create_bucket("t")
        deadline = time.monotonic() + 30  # (a bound on the loop, not an assertion on time)
        while store.stats()["partitions_split"] == 0 and time.monotonic() < deadline:
            puts(client, "t", [f"hot/{part}/{n}" for n in range(20) for part in "ab"])
        stats = store.stats()
        assert stats["splits"] == {"t": ["hot"]} and stats["slowdowns_answered"] > 0
        # after the split, hot/a and hot/b are partitions of their own, each with a full bucket of tokens
        assert puts(client, "t", [f"hot/c/{n}" for n in range(5)]) == []


def test_the_profiles_latency_is_waited():
    profile = LatencyProfile(name="slow-head", first_byte_seconds={"HeadBucket": 0.2})
    with GoStore(profile=profile) as store:
        client = store.client()
        store.create_bucket("l")
        started = time.perf_counter()
        client.head_bucket(Bucket="l")
        assert time.perf_counter() - started >= 0.2


def test_it_exits_when_its_stdin_closes():
    store = GoStore().start()
    process = store._process
    assert process is not None and process.stdin is not None
    process.stdin.close()
    assert process.wait(timeout=10) == 0
    store.stop()


def test_large_bodies_expect_100_continue_and_chunked_bodies_arrive_whole(go_store, client, bucket):
    import http.client
    import socket
    from urllib.parse import urlsplit

    big = bytes(range(256)) * 12_288  # 3 MiB: botocore sends it with "Expect: 100-continue"
    etag = client.put_object(Bucket=bucket, Key="big", Body=big)["ETag"]
    assert client.get_object(Bucket=bucket, Key="big")["Body"].read() == big
    assert etag == client.head_object(Bucket=bucket, Key="big")["ETag"]
    where = urlsplit(go_store.endpoint_url)
    with socket.create_connection((where.hostname, where.port)) as raw:
        raw.sendall(f"PUT /{bucket}/chunked HTTP/1.1\r\nHost: {where.netloc}\r\nTransfer-Encoding: chunked\r\n"
                    "Expect: 100-continue\r\n\r\n".encode())
        assert raw.recv(100).startswith(b"HTTP/1.1 100 Continue")
        raw.sendall(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        answer = http.client.HTTPResponse(raw)
        answer.begin()
        assert answer.status == 200
    assert client.get_object(Bucket=bucket, Key="chunked")["Body"].read() == b"hello world"


def test_its_own_go_tests_pass():
    """``go test`` of the module: its answers rendered (an error's request id, a Complete's document) and its
    parsing, without a socket."""
    import os
    import subprocess

    from testbed.go_store import GO_SOURCES, go_binary

    env = {**os.environ, "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    done = subprocess.run([go_binary(), "test", "./..."], cwd=GO_SOURCES, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_missing_go_or_a_failed_build_is_a_go_store_error_naming_it(monkeypatch, tmp_path):
    import shutil

    import testbed.go_store as go_store_module

    broken = tmp_path / "src"
    broken.mkdir()
    (broken / "go.mod").write_text("module broken\n\ngo 1.22\n")
    (broken / "main.go").write_text("package main\n\nfunc main() { undefinedName() }\n")
    monkeypatch.setattr(go_store_module, "GO_SOURCES", broken)
    monkeypatch.setattr(go_store_module, "CACHE_ROOT", tmp_path / "cache")
    with pytest.raises(GoStoreError, match=r"(?s)go build of .* failed.*undefined: undefinedName"):
        build_go_store()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [go_store_module.go_sources_hash()]
    assert list((tmp_path / "cache" / go_store_module.go_sources_hash()).iterdir()) == []  # nothing half-built
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(go_store_module, "GO_FALLBACK", tmp_path / "no-go")
    with pytest.raises(GoStoreError, match="the go command was not found on PATH"):
        build_go_store()


def test_its_answers_are_the_memory_wires(tmp_path):
    """The same requests through botocore to S3Wire (MemoryS3) and to a fresh Go store: the same parsed answers
    (dates, request ids and the Complete's Location, which names the endpoint, aside) and the same errors."""
    from s3commit.testing import MemoryS3, S3Wire

    def run(client) -> list:
        seen: list = []

        def call(name: str, **params) -> None:
            try:
                answer = getattr(client, name)(**params)
            except ClientError as err:
                seen.append((name, "error", err.response["Error"].get("Code"), err.response["Error"].get("Message"),
                             err.response["ResponseMetadata"]["HTTPStatusCode"]))
                return
            if "Body" in answer:
                answer["Body"] = answer["Body"].read()
            for drop in ("ResponseMetadata", "LastModified", "Location"):
                answer.pop(drop, None)
            for listed in ("Contents", "Uploads"):
                for item in answer.get(listed, []):
                    item.pop("LastModified", None)
                    item.pop("Initiated", None)
            answer.get("CopyObjectResult", {}).pop("LastModified", None)
            seen.append((name, answer))

        bucket = "same"
        call("put_object", Bucket=bucket, Key="d/a=1/x y", Body=b"one")
        call("put_object", Bucket=bucket, Key="d/a=1/x y", Body=b"two", IfNoneMatch="*")
        call("put_object", Bucket=bucket, Key="d/b", Body=b"three", ContentType="text/plain")
        call("get_object", Bucket=bucket, Key="d/a=1/x y", Range="bytes=1-")
        call("head_object", Bucket=bucket, Key="d/b")
        call("head_object", Bucket=bucket, Key="d/none")
        call("get_object", Bucket=bucket, Key="d/none")
        call("copy_object", Bucket=bucket, Key="e/c", CopySource={"Bucket": bucket, "Key": "d/b"})
        call("list_objects_v2", Bucket=bucket, Prefix="d/", Delimiter="/")
        call("list_objects_v2", Bucket=bucket, MaxKeys=1)
        call("list_objects_v2", Bucket=bucket, MaxKeys=1, ContinuationToken="d/a=1/x y")
        upload = client.create_multipart_upload(Bucket=bucket, Key="m")["UploadId"]
        etags = [client.upload_part(Bucket=bucket, Key="m", UploadId=upload, PartNumber=n, Body=b"p" * n)["ETag"]
                 for n in (1, 2)]
        call("list_multipart_uploads", Bucket=bucket)
        parts = [{"ETag": e, "PartNumber": n} for n, e in enumerate(etags, 1)]
        call("complete_multipart_upload", Bucket=bucket, Key="m", UploadId=upload,
             MultipartUpload={"Parts": parts[::-1]})
        call("complete_multipart_upload", Bucket=bucket, Key="m", UploadId=upload, MultipartUpload={"Parts": parts})
        call("complete_multipart_upload", Bucket=bucket, Key="m", UploadId=upload, MultipartUpload={"Parts": parts})
        call("abort_multipart_upload", Bucket=bucket, Key="m", UploadId=upload)
        call("delete_objects", Bucket=bucket, Delete={"Objects": [{"Key": "d/b"}, {"Key": "nothing"}]})
        call("delete_objects", Bucket=bucket, Delete={"Objects": [{"Key": "e/c"}], "Quiet": True})
        call("delete_object", Bucket=bucket, Key="d/a=1/x y", IfMatch='"0123"')
        call("delete_objects", Bucket=bucket, Delete={"Objects": [{"Key": "d/a=1/x y", "ETag": '"0123"'}]})
        call("delete_object", Bucket=bucket, Key="m")
        call("list_objects_v2", Bucket=bucket)
        call("put_object_tagging", Bucket=bucket, Key="d/a=1/x y", Tagging={"TagSet": []})
        call("head_bucket", Bucket="missing")
        return seen

    wire = S3Wire(MemoryS3())
    wire.s3.create_bucket("same")
    expected = run(wire.client())
    with GoStore() as fresh:
        fresh.create_bucket("same")
        assert len(expected) == 24 and run(fresh.client()) == expected


def test_reads_have_their_own_rate():
    spec = ThrottleSpec(writes_per_second=10_000, reads_per_second=20, burst_seconds=1, split_after_seconds=None)
    with GoStore(throttle=spec) as store:
        client = store.client(max_pool_connections=8)
        store.create_bucket("r")
        assert puts(client, "r", [f"k/{n}" for n in range(50)]) == []  # writes: far under their rate
        codes: list[str] = []
        lock = threading.Lock()

        def read(n: int) -> None:
            for _ in range(40):
                try:
                    client.get_object(Bucket="r", Key=f"k/{n}")["Body"].read()
                except ClientError as err:
                    with lock:
                        codes.append(err.response["Error"]["Code"])

        readers = [threading.Thread(target=read, args=(n,)) for n in range(8)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
        # 320 GETs against 20 a second with a burst of 20: most are refused unless they took ~15 s
        assert codes and set(codes) == {"SlowDown"}
        assert store.stats()["slowdowns"] == {"GetObject": len(codes)}


def test_virtual_host_style_names_the_bucket_by_host(go_store, client, bucket):
    import http.client
    from urllib.parse import urlsplit

    client.put_object(Bucket=bucket, Key="v/k", Body=b"hosted")
    where = urlsplit(go_store.endpoint_url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
    try:
        connection.request("GET", "/v/k", headers={"Host": f"{bucket}.localhost:{where.port}"})
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (200, b"hosted")
    finally:
        connection.close()
