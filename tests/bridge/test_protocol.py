"""The sidecar's framing: headers and streamed bodies, the frame limit on both sides, bodies cut short."""

from __future__ import annotations

import json
import socket
import struct
import threading

import pytest

from s3commit.bridge.protocol import (
    FRAME_LIMIT,
    BodyError,
    Channel,
    FrameTooLarge,
    ProtocolError,
    ndjson,
)


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    left, right = Channel(a), Channel(b)
    yield left, right
    left.close()
    right.close()


def test_a_header_alone_round_trips(pair):
    left, right = pair
    left.write_message({"op": "x", "n": 1})
    header, body = right.read_message()
    assert header == {"op": "x", "n": 1} and body is None


def test_a_body_arrives_in_frames_and_fills_caller_buffers(pair):
    left, right = pair
    left.write_message({"op": "x"}, b"\x00\x01part data")
    header, body = right.read_message()
    assert header == {"op": "x", "body": True}
    buffer = bytearray(11)
    assert body.readinto(buffer) == 11 and bytes(buffer) == b"\x00\x01part data"
    assert body.readinto(bytearray(4)) == 0 and body.done


def test_an_empty_body_is_just_the_terminator(pair):
    left, right = pair
    left.write_message({"op": "x"}, b"")
    _, body = right.read_message()
    assert b"".join(body.chunks()) == b""


def test_a_large_body_never_uses_a_frame_over_the_limit(pair, monkeypatch):
    # Shrink the chunk size so that a body of 10 chunks is cheap to send through a socketpair.
    import s3commit.bridge.protocol as protocol

    monkeypatch.setattr(protocol, "CHUNK", 1024)
    left, right = pair
    data = bytes(range(256)) * 40  # 10,240 bytes: 10 frames of 1,024
    left.write_message({"op": "x"}, data)
    _, body = right.read_message()
    frames = list(body.chunks())
    assert [len(f) for f in frames] == [1024] * 10 and b"".join(frames) == data


def test_ndjson_records_stream_and_split_across_frames(pair, monkeypatch):
    import s3commit.bridge.protocol as protocol

    monkeypatch.setattr(protocol, "CHUNK", 64)
    left, right = pair
    records = [{"task": i, "name": "x" * (i % 7)} for i in range(500)]
    chunks = list(ndjson(records))
    assert len(chunks) > 1
    writer = threading.Thread(target=left.write_stream, args=({"op": "job.commit"}, chunks))
    writer.start()  # many small frames fill a socket buffer: read while it writes
    _, body = right.read_message()
    assert [json.loads(line) for line in body.lines()] == records
    writer.join(10)


def test_a_body_cut_short_carries_the_error_instead_of_the_rest(pair):
    left, right = pair

    def chunks():
        yield b"first bytes"
        raise OSError("the GET was reset")

    left.write_stream({"ok": True}, chunks(), error_header=lambda err: {"ok": False, "error": {
        "type": "IO", "message": str(err)}})
    _, body = right.read_message()
    received = b""
    with pytest.raises(BodyError) as caught:
        for chunk in body.chunks():
            received += chunk
    assert received == b"first bytes"
    assert caught.value.header["error"]["message"] == "the GET was reset"
    # the connection stays in step: the next message reads normally
    left.write_message({"op": "next"})
    assert right.read_message()[0] == {"op": "next"}


def test_a_sender_refuses_a_header_over_the_frame_limit(pair):
    left, _ = pair
    with pytest.raises(FrameTooLarge) as caught:
        left.write_header({"op": "job.commit", "messages": "x" * FRAME_LIMIT})
    assert "job.commit" in str(caught.value) and str(FRAME_LIMIT) in str(caught.value)


def test_a_receiver_refuses_a_frame_over_the_limit_before_reading_it(pair):
    left, right = pair
    left.sock.sendall(struct.pack(">I", FRAME_LIMIT + 1))
    with pytest.raises(FrameTooLarge) as caught:
        right.read_header()
    assert str(FRAME_LIMIT + 1) in str(caught.value)
    # a data frame over the limit, too
    left.write_header({"op": "x", "body": True})
    left.sock.sendall(struct.pack(">I", FRAME_LIMIT + 1))
    _, body = right.read_message()
    with pytest.raises(FrameTooLarge):
        body.readinto(bytearray(10))


def test_a_truncated_or_foreign_message_is_a_protocol_error(pair):
    left, right = pair
    left.sock.sendall(b"\x00\x00\x00\x05[1,2]")
    with pytest.raises(ProtocolError):
        right.read_header()
    left.sock.sendall(b"\x00\x00\x00\x03")
    left.close()
    with pytest.raises(EOFError):
        right.read_header()

