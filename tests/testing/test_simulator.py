"""The simulator in front of moto, observed the way code under test sees it: through boto3.

Delays are asserted on what the simulator reports it injected (exact, no timing race); wall-clock checks
only bound them generously from one side.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError

from s3commit.testing import FaultSpec, LatencyProfile, S3TestServerError, ThrottleSpec
from s3commit.testing._sim.profiles import S3_EXPRESS
from s3commit.testing._sim.simulator import SimulatorConfig, SimulatorServer
from s3commit.testing.assertions import count_requests, list_keys, list_pending_uploads

MB = 1_000_000


def _error_code(error: ClientError) -> tuple[str, int]:
    return error.response["Error"]["Code"], error.response["ResponseMetadata"]["HTTPStatusCode"]


# -- latency ------------------------------------------------------------------------------------------


def test_profile_latency_is_injected_per_operation(s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    # Given: the S3 Express profile.
    s3_sim.configure(profile="s3-express")
    body = b"x" * 8000

    # When: three HEADs and two small PUTs.
    started = time.monotonic()
    for i in range(2):
        sim_client.put_object(Bucket=s3_bucket, Key=f"k{i}", Body=body)
    for _ in range(3):
        sim_client.head_object(Bucket=s3_bucket, Key="k0")
    elapsed = time.monotonic() - started

    # Then: the simulator injected exactly the profile's numbers (first byte + body at 80 MB/s).
    delays = s3_sim.stats().delay_seconds
    assert delays["HeadObject"] == pytest.approx(3 * S3_EXPRESS.first_byte_seconds["HeadObject"])
    assert delays["PutObject"] == pytest.approx(2 * (0.005 + len(body) / (80 * MB)))
    assert elapsed >= sum(delays.values())  # and the client really waited


def test_body_transfer_time_counts_request_and_response_bodies(s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    s3_sim.configure(profile=LatencyProfile(name="slow-wire", transfer_bytes_per_second=10 * MB))
    sim_client.put_object(Bucket=s3_bucket, Key="big", Body=b"b" * 500_000)
    assert sim_client.get_object(Bucket=s3_bucket, Key="big")["Body"].read() == b"b" * 500_000

    stats = s3_sim.stats()
    assert stats.delay_seconds["PutObject"] == pytest.approx(0.05)  # 500 kB in at 10 MB/s
    assert stats.delay_seconds["GetObject"] == pytest.approx(0.05)  # 500 kB out
    assert (stats.bytes_in["PutObject"], stats.bytes_out["GetObject"]) == (500_000, 500_000)


def test_answers_with_a_body_add_no_delayed_ack_stall(s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    # Given: no latency profile, a small object read over one keep-alive connection, each GET beside a HEAD of the
    # same object (no body: nothing to hold back), so that a loaded machine slows both alike.
    s3_sim.configure(profile="none")
    sim_client.put_object(Bucket=s3_bucket, Key="small", Body=b"s" * 100)

    def timed(call: Any) -> float:
        started = time.monotonic()
        call()
        return time.monotonic() - started

    extra = []
    for _ in range(11):
        head = timed(lambda: sim_client.head_object(Bucket=s3_bucket, Key="small"))
        get = timed(lambda: sim_client.get_object(Bucket=s3_bucket, Key="small")["Body"].read())
        extra.append(get - head)
    # Then: the body is not held back behind the headers until the client's delayed ACK (40 ms on Linux), which
    # S3 does not add: every GET and LIST and Complete would otherwise be 40 ms slower than its profile says.
    assert sorted(extra)[len(extra) // 2] < 0.025, extra


def test_latency_of_one_request_does_not_delay_others(s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    # Given: 0.4 s per HEAD; eight HEADs one after another would take 3.2 s.
    s3_sim.configure(profile=LatencyProfile(name="slow-head", first_byte_seconds={"HeadBucket": 0.4}))

    # When: they run on eight threads at once.
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: sim_client.head_bucket(Bucket=s3_bucket), range(8)))
    elapsed = time.monotonic() - started

    # Then: all eight slept their 0.4 s, in parallel.
    assert s3_sim.stats().delay_seconds["HeadBucket"] == pytest.approx(3.2)
    assert elapsed < 2.0


def test_a_slow_requests_effect_lands_at_the_end_of_its_latency(s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    # Given: Completes take 2 s; the store has done a few already (it knows its usual time for one).
    def upload(key: str) -> dict[str, Any]:
        upload_id = sim_client.create_multipart_upload(Bucket=s3_bucket, Key=key)["UploadId"]
        etag = sim_client.upload_part(Bucket=s3_bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=b"p")["ETag"]
        return {"Bucket": s3_bucket, "Key": key, "UploadId": upload_id,
                "MultipartUpload": {"Parts": [{"PartNumber": 1, "ETag": etag}]}}

    for i in range(3):
        sim_client.complete_multipart_upload(**upload(f"warm-{i}"))
    request = upload("slow")
    s3_sim.configure(profile=LatencyProfile(name="slow-complete", first_byte_seconds={"CompleteMultipartUpload": 2.0}))

    # When: one is sent, and another thread watches for its object.
    sent = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(sim_client.complete_multipart_upload, **request)
        while not list_keys(sim_client, s3_bucket, "slow"):
            time.sleep(0.02)
        visible = time.monotonic() - sent
        answer.result()

    # Then: the object appeared at the end of the latency, not when the store got the request (a test that slows an
    # operation holds it unapplied); a loaded machine can only make it later.
    assert visible >= 1.8
    assert s3_sim.stats().delay_seconds["CompleteMultipartUpload"] == pytest.approx(2.0)


def test_copy_delay_is_source_size_over_copy_bandwidth(
    s3_sim: Any, s3_bucket: str, raw_client: Any, sim_client: Any
) -> None:
    # Given: a 1 MB source object and a 10 MB/s copy bandwidth (no other latency).
    raw_client.put_object(Bucket=s3_bucket, Key="src", Body=b"s" * MB)
    upload_id = raw_client.create_multipart_upload(Bucket=s3_bucket, Key="dst-mpu")["UploadId"]
    s3_sim.configure(copy_bandwidth=10 * MB)

    # When: a CopyObject (size learnt by HEAD) and two UploadPartCopy, ranged and whole.
    sim_client.copy_object(Bucket=s3_bucket, Key="dst", CopySource=f"{s3_bucket}/src")
    for part, source_range in ((1, {"CopySourceRange": "bytes=0-499999"}), (2, {})):
        sim_client.upload_part_copy(
            Bucket=s3_bucket,
            Key="dst-mpu",
            UploadId=upload_id,
            PartNumber=part,
            CopySource={"Bucket": s3_bucket, "Key": "src"},
            **source_range,
        )

    # Then: 2.5 MB copied, 0.25 s of copy time charged to the copy operations.
    stats = s3_sim.stats()
    assert stats.copy_bytes == 2_500_000
    assert stats.copy_seconds == pytest.approx(0.25)
    assert stats.delay_seconds == pytest.approx({"CopyObject": 0.1, "UploadPartCopy": 0.15})
    raw_client.abort_multipart_upload(Bucket=s3_bucket, Key="dst-mpu", UploadId=upload_id)


# -- throttle -----------------------------------------------------------------------------------------


def test_throttle_answers_slowdown_per_prefix(s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    # Given: 5 writes/s per prefix, a burst of 5.
    s3_sim.configure(throttle=ThrottleSpec(writes_per_second=5, burst_seconds=1))

    # When: 12 quick PUTs into one prefix.
    outcomes = []
    for i in range(12):
        try:
            sim_client.put_object(Bucket=s3_bucket, Key=f"hot/{i}", Body=b"x")
            outcomes.append("ok")
        except ClientError as error:
            outcomes.append(_error_code(error))

    # Then: the burst passes, the rest is refused with 503 SlowDown, and nothing refused was written.
    assert outcomes[:5] == ["ok"] * 5
    refused = [o for o in outcomes if o != "ok"]
    assert len(refused) >= 5 and set(refused) == {("SlowDown", 503)}
    assert s3_sim.stats().throttled == {"PutObject": len(refused)}
    assert len(list_keys(sim_client, s3_bucket, "hot/")) == 12 - len(refused)
    # Another prefix has its own budget; reads are not throttled.
    sim_client.put_object(Bucket=s3_bucket, Key="cold/0", Body=b"x")
    for _ in range(10):
        sim_client.head_object(Bucket=s3_bucket, Key="hot/0")


# -- faults -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "code"), [("503", ("SlowDown", 503)), ("500", ("InternalError", 500))])
def test_error_faults_are_not_forwarded(
    s3_sim: Any, s3_bucket: str, raw_client: Any, sim_client: Any, kind: str, code: tuple[str, int]
) -> None:
    s3_sim.fail_next("PutObject", kind)
    with pytest.raises(ClientError) as raised:
        sim_client.put_object(Bucket=s3_bucket, Key="k", Body=b"x")
    assert _error_code(raised.value) == code
    assert list_keys(raw_client, s3_bucket) == []  # moto never saw it
    sim_client.put_object(Bucket=s3_bucket, Key="k", Body=b"x")  # the script is used up
    assert s3_sim.stats().faults == {"PutObject": {kind: 1}}


def test_reset_before_forwarding_loses_the_request(
    s3_sim: Any, s3_bucket: str, raw_client: Any, sim_client: Any
) -> None:
    s3_sim.fail_next("PutObject", "reset")
    with pytest.raises(ConnectionClosedError):
        sim_client.put_object(Bucket=s3_bucket, Key="k", Body=b"x")
    assert list_keys(raw_client, s3_bucket) == []


def test_reset_after_forwarding_applies_the_request_but_loses_the_answer(
    s3_sim: Any, s3_bucket: str, raw_client: Any, sim_client: Any
) -> None:
    # Given: one part uploaded.
    upload_id = raw_client.create_multipart_upload(Bucket=s3_bucket, Key="out")["UploadId"]
    etag = raw_client.upload_part(Bucket=s3_bucket, Key="out", UploadId=upload_id, PartNumber=1, Body=b"p")["ETag"]
    s3_sim.fail_next("CompleteMultipartUpload", "reset", after_forward=True)
    s3_sim.fail_next("CreateMultipartUpload", "reset", after_forward=True)

    # When: Complete and Create both lose their answers.
    with pytest.raises(ConnectionClosedError):
        sim_client.complete_multipart_upload(
            Bucket=s3_bucket, Key="out", UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
        )  # fmt: skip
    with pytest.raises(ConnectionClosedError):
        sim_client.create_multipart_upload(Bucket=s3_bucket, Key="orphan")

    # Then: S3 did both: the object exists, and an upload nobody knows the id of is pending.
    assert raw_client.get_object(Bucket=s3_bucket, Key="out")["Body"].read() == b"p"
    assert [u.key for u in list_pending_uploads(raw_client, s3_bucket)] == ["orphan"]
    stats = s3_sim.stats()
    assert stats.resets_after_forward == {"CompleteMultipartUpload": 1, "CreateMultipartUpload": 1}
    assert stats.faults_of("reset") == 2


def test_200_with_error_body_fails_complete_and_copy_without_applying_them(
    s3_sim: Any, s3_bucket: str, raw_client: Any, sim_client: Any
) -> None:
    raw_client.put_object(Bucket=s3_bucket, Key="src", Body=b"s")
    upload_id = raw_client.create_multipart_upload(Bucket=s3_bucket, Key="out")["UploadId"]
    etag = raw_client.upload_part(Bucket=s3_bucket, Key="out", UploadId=upload_id, PartNumber=1, Body=b"p")["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
    s3_sim.fail_next("CompleteMultipartUpload", "200-error")
    s3_sim.fail_next("CopyObject", "200-error")

    # boto3 parses the <Error> inside the 200 answer and raises.
    with pytest.raises(ClientError) as complete_error:
        sim_client.complete_multipart_upload(Bucket=s3_bucket, Key="out", UploadId=upload_id, MultipartUpload=parts)
    with pytest.raises(ClientError) as copy_error:
        sim_client.copy_object(Bucket=s3_bucket, Key="copy", CopySource=f"{s3_bucket}/src")
    assert complete_error.value.response["Error"]["Code"] == "InternalError"
    assert copy_error.value.response["Error"]["Code"] == "InternalError"

    # Nothing happened upstream: the upload is still pending and can be completed by a retry.
    assert list_keys(raw_client, s3_bucket) == ["src"]
    sim_client.complete_multipart_upload(Bucket=s3_bucket, Key="out", UploadId=upload_id, MultipartUpload=parts)
    assert list_keys(raw_client, s3_bucket) == ["out", "src"]


def test_200_error_cannot_be_scripted_for_other_operations(s3_sim: Any) -> None:
    with pytest.raises(S3TestServerError, match="cannot apply to PutObject"):
        s3_sim.fail_next("PutObject", "200-error")


def _run_heads(client: Any, bucket: str, n: int) -> list[str]:
    outcomes = []
    for _ in range(n):
        try:
            client.head_bucket(Bucket=bucket)
            outcomes.append("ok")
        except ClientError as error:
            outcomes.append(error.response["Error"]["Code"])
        except ConnectionClosedError:
            outcomes.append("reset")
    return outcomes


def test_random_faults_are_reproducible_for_a_seed(s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    spec = FaultSpec(rates={"503": 0.2, "500": 0.1, "reset": 0.1}, reset_after_forward=0.0)

    s3_sim.configure(faults=spec, seed=7)
    first = _run_heads(sim_client, s3_bucket, 40)
    s3_sim.configure(seed=7)  # restarts the streams
    second = _run_heads(sim_client, s3_bucket, 40)
    s3_sim.configure(seed=8)
    other_seed = _run_heads(sim_client, s3_bucket, 40)

    assert first == second
    assert other_seed != first
    assert {"ok", "503", "500", "reset"} <= set(first + other_seed)  # HEAD errors carry only the status
    faults = s3_sim.stats().faults["HeadBucket"]
    assert sum(faults.values()) == sum(o != "ok" for o in first + second + other_seed)


# -- moto gaps mapped to AWS answers --------------------------------------------------------------------


def test_unknown_upload_id_is_no_such_upload_not_moto_500(
    s3_sim: Any, s3_bucket: str, raw_client: Any, sim_client: Any
) -> None:
    # Given: an upload that another job aborted.
    raw_client.put_object(Bucket=s3_bucket, Key="src", Body=b"s")
    upload_id = raw_client.create_multipart_upload(Bucket=s3_bucket, Key="k")["UploadId"]
    raw_client.abort_multipart_upload(Bucket=s3_bucket, Key="k", UploadId=upload_id)
    parts = {"Parts": [{"PartNumber": 1, "ETag": '"0"'}]}
    calls = {
        "UploadPart": lambda c: c.upload_part(Bucket=s3_bucket, Key="k", UploadId=upload_id, PartNumber=1,
                                              Body=b"x"),
        "UploadPartCopy": lambda c: c.upload_part_copy(Bucket=s3_bucket, Key="k", UploadId=upload_id,
                                                       PartNumber=1, CopySource=f"{s3_bucket}/src"),
        "CompleteMultipartUpload": lambda c: c.complete_multipart_upload(
            Bucket=s3_bucket, Key="k", UploadId=upload_id, MultipartUpload=parts),
    }  # fmt: skip
    for name, call in calls.items():
        # moto itself answers 500 ...
        with pytest.raises(ClientError) as raw_error:
            call(raw_client)
        assert raw_error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500, name
        # ... the simulator answers what AWS answers.
        with pytest.raises(ClientError) as error:
            call(sim_client)
        assert _error_code(error.value) == ("NoSuchUpload", 404), name
    assert s3_sim.stats().translated == {"NoSuchUpload": 3}


# -- plumbing -----------------------------------------------------------------------------------------


def test_chunked_request_body_is_forwarded_whole(s3_sim: Any, s3_bucket: str, raw_client: Any) -> None:
    host, port = s3_sim.endpoint_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("PUT", f"/{s3_bucket}/chunked", body=iter([b"abc", b"defg", b"h"]), encode_chunked=True)
    response = connection.getresponse()
    response.read()
    assert response.status == 200
    assert raw_client.get_object(Bucket=s3_bucket, Key="chunked")["Body"].read() == b"abcdefgh"
    assert s3_sim.stats().bytes_in == {"PutObject": 8}


def test_client_connections_are_kept_alive(s3_sim: Any, s3_bucket: str) -> None:
    host, port = s3_sim.endpoint_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    sockets = []
    for _ in range(3):
        connection.request("HEAD", f"/{s3_bucket}")
        response = connection.getresponse()
        response.read()
        assert (response.status, response.will_close) == (200, False)
        sockets.append(connection.sock)
    assert sockets[0] is sockets[1] is sockets[2]


def test_stats_reset_and_simulator_reset(s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    # Given: traffic, a fault config and a scripted fault.
    s3_sim.configure(profile="s3-express", faults=FaultSpec(rates={"500": 0.5}))
    s3_sim.fail_next("GetObject", "503")
    with count_requests(s3_sim) as counter:
        sim_client.list_objects_v2(Bucket=s3_bucket)
    assert counter["ListObjectsV2"] >= 1

    # When / Then: reset_stats zeroes the counters only.
    s3_sim.reset_stats()
    assert s3_sim.stats().total_requests == 0
    assert s3_sim.simulator_config()["profile"]["name"] == "s3-express"

    # When / Then: reset_simulator also restores the start-up configuration and drops the script.
    s3_sim.reset_simulator()
    config = s3_sim.simulator_config()
    assert (config["profile"]["name"], config["faults"]["rates"], config["scripted"]) == ("none", {}, {})


def test_the_request_log_names_each_requests_object_and_range(s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    sim_client.put_object(Bucket=s3_bucket, Key="a/b c", Body=b"0123456789")
    s3_sim.reset_stats()
    sim_client.get_object(Bucket=s3_bucket, Key="a/b c", Range="bytes=2-5")
    sim_client.get_object(Bucket=s3_bucket, Key="a/b c")
    sim_client.head_object(Bucket=s3_bucket, Key="a/b c")
    log = s3_sim.request_log()
    assert [{k: r[k] for k in ("operation", "bucket", "key", "range")} for r in log] == [
        {"operation": "GetObject", "bucket": s3_bucket, "key": "a/b c", "range": "bytes=2-5"},
        {"operation": "GetObject", "bucket": s3_bucket, "key": "a/b c", "range": ""},
        {"operation": "HeadObject", "bucket": s3_bucket, "key": "a/b c", "range": ""},
    ]
    # A timeline: in the order they arrived, each of the first two answered after it arrived (the last may still
    # be ending on the server's side when the test reads the log).
    assert [r["at"] for r in log] == sorted(r["at"] for r in log)
    assert all(r["at"] <= r["answered"] for r in log[:2])
    s3_sim.reset_stats()
    assert s3_sim.request_log() == []


def test_control_api_rejects_bad_configuration_with_the_valid_values(s3_sim: Any) -> None:
    with pytest.raises(S3TestServerError, match="valid values are none, s3-standard, s3-express"):
        s3_sim.configure(profile="s3-mars")
    with pytest.raises(S3TestServerError, match="copy_bandwidth must be > 0"):
        s3_sim.configure(copy_bandwidth=-1)


def test_simulator_server_runs_in_process_and_reports_an_unreachable_upstream(s3_server: Any, s3_bucket: str) -> None:
    def head(url: str, path: str) -> tuple[int, bytes]:
        host, port = url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request("GET" if path.count("/") > 1 else "HEAD", path)
        response = connection.getresponse()
        return response.status, response.read()

    # In front of the session's moto, in this process: the Simulator state is directly inspectable.
    config = SimulatorConfig(profile=S3_EXPRESS)
    with SimulatorServer(upstream=s3_server.raw_endpoint_url, config=config) as simulator:
        assert head(simulator.url, f"/{s3_bucket}")[0] == 200
        stats = simulator.simulator.snapshot()
        assert stats.requests == {"HeadBucket": 1}
        assert stats.delay_seconds == {"HeadBucket": pytest.approx(0.003)}

    # In front of nothing: S3 clients get a 502 that names the cause, not a hang.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    with SimulatorServer(upstream=f"http://127.0.0.1:{dead_port}") as simulator:
        status, body = head(simulator.url, "/bucket/key")
    assert status == 502
    assert b"<Code>BadGateway</Code>" in body


# -- checksums ----------------------------------------------------------------------------------------


def test_validate_checksums_refuses_a_body_its_checksum_header_does_not_match_as_s3_does(
        s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    import base64
    import zlib

    def crc32(data: bytes) -> str:
        return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()

    s3_sim.configure(validate_checksums=True)
    try:
        sim_client.put_object(Bucket=s3_bucket, Key="right", Body=b"hello", ChecksumCRC32=crc32(b"hello"))
        with pytest.raises(ClientError) as refused:
            sim_client.put_object(Bucket=s3_bucket, Key="wrong", Body=b"hello", ChecksumCRC32=crc32(b"other"))
        assert _error_code(refused.value) == ("BadDigest", 400)
        upload = sim_client.create_multipart_upload(Bucket=s3_bucket, Key="parts", ChecksumAlgorithm="CRC32")
        with pytest.raises(ClientError) as part:
            sim_client.upload_part(Bucket=s3_bucket, Key="parts", UploadId=upload["UploadId"], PartNumber=1,
                                   Body=b"x" * 10, ChecksumCRC32=crc32(b"y" * 10))
        assert _error_code(part.value) == ("BadDigest", 400)
        sim_client.abort_multipart_upload(Bucket=s3_bucket, Key="parts", UploadId=upload["UploadId"])
        assert list_keys(sim_client, s3_bucket) == ["right"]
        assert s3_sim.simulator_config()["validate_checksums"] is True
    finally:
        s3_sim.configure(validate_checksums=False)
    # Off (the default, as moto): a wrong checksum is accepted.
    sim_client.put_object(Bucket=s3_bucket, Key="wrong", Body=b"hello", ChecksumCRC32=crc32(b"other"))


def test_a_store_probed_against_a_validating_simulator_skips_the_md5_check(s3_sim: Any, s3_bucket: str) -> None:
    from s3commit.config.options import StoreOptions
    from s3commit.store.capability_cache import known
    from s3commit.store.s3store import S3Store

    env = s3_sim.env()
    store = S3Store(StoreOptions(endpoint_url=s3_sim.endpoint_url, region=env["AWS_DEFAULT_REGION"], path_style=True,
                                 access_key=env["AWS_ACCESS_KEY_ID"], secret_key=env["AWS_SECRET_ACCESS_KEY"]))
    s3_sim.configure(validate_checksums=True)
    try:
        found = known(store, s3_bucket, refresh=True)
        assert found is not None and found.validates("CRC32")
        assert not store.bodies.verifies_etags(s3_bucket)  # S3's own check replaces the MD5 of every part
    finally:
        s3_sim.configure(validate_checksums=False)
        known(store, s3_bucket, refresh=True)


def test_buckets_created_after_checksum_validation_changes_are_known_to_validate_or_not(s3_sim: Any) -> None:
    # The server is probed at start and tells each bucket it creates what it honours (testing.known): a bucket made
    # after validate_checksums changed must not inherit the start-up probe's answer (it did: a sidecar then checked
    # every part's MD5 against a server that validated its CRC32, and the peers bench measured that).
    from s3commit.config.options import StoreOptions
    from s3commit.store.capability_cache import known
    from s3commit.store.s3store import S3Store

    env = s3_sim.env()
    store = S3Store(StoreOptions(endpoint_url=s3_sim.endpoint_url, region=env["AWS_DEFAULT_REGION"], path_style=True,
                                 access_key=env["AWS_ACCESS_KEY_ID"], secret_key=env["AWS_SECRET_ACCESS_KEY"]))
    created = []

    def validates_in_a_new_bucket() -> bool:
        bucket = s3_sim.create_bucket(f"hinted-{len(created)}-{time.monotonic_ns() % 10**9}")
        created.append(bucket)
        found = known(store, bucket)  # no probe of its own: what the server told the cache
        return found is not None and found.validates("CRC32")

    try:
        assert not validates_in_a_new_bucket()
        s3_sim.configure(validate_checksums=True)
        assert validates_in_a_new_bucket() and not store.bodies.verifies_etags(created[-1])
        s3_sim.reset_simulator()  # back to the start-up configuration: moto's, no validation
        assert not validates_in_a_new_bucket() and store.bodies.verifies_etags(created[-1])
    finally:
        s3_sim.configure(validate_checksums=False)
        for bucket in created:
            store.requests.client.delete_bucket(Bucket=bucket)


# -- the store's clock --------------------------------------------------------------------------------


def test_the_stores_clock_moved_on_ages_what_was_written_before_and_dates_what_is_written_after(
        s3_server: Any, s3_bucket: str) -> None:
    import boto3
    from botocore.config import Config

    # A simulator of this test's own: the session's clock is left where it is.
    with SimulatorServer(upstream=s3_server.raw_endpoint_url) as simulator:
        client = boto3.client("s3", endpoint_url=simulator.url, aws_access_key_id="testing",
                              aws_secret_access_key="testing", region_name="us-east-1",
                              config=Config(s3={"addressing_style": "path"}))

        def age(key: str) -> float:  # by the store's clock: its Date against the object's Last-Modified
            head = client.head_object(Bucket=s3_bucket, Key=key)
            date = email.utils.parsedate_to_datetime(head["ResponseMetadata"]["HTTPHeaders"]["date"])
            return (date - head["LastModified"]).total_seconds()

        def listed_age(key: str) -> float:
            now = email.utils.parsedate_to_datetime(client.head_bucket(Bucket=s3_bucket)["ResponseMetadata"]
                                                    ["HTTPHeaders"]["date"])
            [found] = [o for o in client.list_objects_v2(Bucket=s3_bucket)["Contents"] if o["Key"] == key]
            return (now - found["LastModified"]).total_seconds()

        client.put_object(Bucket=s3_bucket, Key="before the move", Body=b"x")
        other = s3_server.create_bucket(f"{s3_bucket}-other")
        client.put_object(Bucket=other, Key="elsewhere", Body=b"z")
        connection = http.client.HTTPConnection(*simulator.url.removeprefix("http://").split(":"), timeout=10)
        connection.request("POST", "/__sim/advance", body=json.dumps({"bucket": s3_bucket, "seconds": 100}).encode())
        assert json.loads(connection.getresponse().read()) == {"advanced": 100.0}
        client.put_object(Bucket=s3_bucket, Key="after the move", Body=b"y")
        upload = client.create_multipart_upload(Bucket=s3_bucket, Key="upload after")["UploadId"]

        assert 99 <= age("before the move") <= 103 and 99 <= listed_age("before the move") <= 103
        assert -1 <= age("after the move") <= 2 and -1 <= listed_age("after the move") <= 2
        other_head = client.head_object(Bucket=other, Key="elsewhere")  # another bucket's clock did not move
        other_date = email.utils.parsedate_to_datetime(other_head["ResponseMetadata"]["HTTPHeaders"]["date"])
        assert -1 <= (other_date - other_head["LastModified"]).total_seconds() <= 2
        [listed] = [u for u in client.list_multipart_uploads(Bucket=s3_bucket)["Uploads"] if u["UploadId"] == upload]
        date = email.utils.parsedate_to_datetime(client.head_bucket(Bucket=s3_bucket)["ResponseMetadata"]
                                                 ["HTTPHeaders"]["date"])
        assert -1 <= (date - listed["Initiated"]).total_seconds() <= 2
        client.delete_objects(Bucket=s3_bucket, Delete={"Objects": [{"Key": "after the move"}]})
        assert simulator.simulator.clock.shift(s3_bucket, "after the move") == 0.0  # forgotten with the object
        client.abort_multipart_upload(Bucket=s3_bucket, Key="upload after", UploadId=upload)
        with pytest.raises(ValueError, match="only moves forward"):
            simulator.simulator.clock.advance(s3_bucket, -1)


# -- requests held until released -----------------------------------------------------------------------


def test_held_requests_wait_until_released_while_others_go_on(s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    sim_client.put_object(Bucket=s3_bucket, Key="k", Body=b"first")
    s3_sim.hold("GetObject", ending="k")
    sim_client.put_object(Bucket=s3_bucket, Key="other", Body=b"x")
    assert sim_client.get_object(Bucket=s3_bucket, Key="other")["Body"].read() == b"x"  # another key's GET goes
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(sim_client.get_object(Bucket=s3_bucket,
                                                                                 Key="k")["Body"].read()))
    reader.start()
    deadline = time.monotonic() + 30
    while s3_sim.held() != {"GetObject": 1}:  # the GET has reached the simulator and waits there
        assert time.monotonic() < deadline and reader.is_alive()
        time.sleep(0.01)
    sim_client.put_object(Bucket=s3_bucket, Key="k", Body=b"second")  # another operation is not held
    assert read == []
    s3_sim.release("GetObject")
    reader.join(30)
    assert read == [b"second"]  # forwarded once released: it reads what was written meanwhile
    assert s3_sim.held() == {}
    s3_sim.hold("HeadObject")
    s3_sim.reset_simulator()  # a reset lets everything go
    sim_client.head_object(Bucket=s3_bucket, Key="k")
