"""A test server whose port another process took between choosing and binding it starts again with new ports."""

from __future__ import annotations

import pytest

from testbed.ports import PORT_ATTEMPTS, port_was_taken, start_with_fresh_ports


class Refused(RuntimeError):
    pass


TAKEN = ("weed mini exited:\nmini.go:1244 Port allocation failed: port 40353 for Iceberg (specified by flag "
         "s3.port.iceberg) is not available on 127.0.0.1 and cannot be used")


def test_the_messages_of_a_taken_port_are_recognised_and_others_are_not():
    assert port_was_taken(TAKEN)
    assert port_was_taken("rclone exited:\nlisten tcp 127.0.0.1:4242: bind: address already in use")
    assert not port_was_taken("weed mini exited:\npanic: no space left on device")


def test_a_taken_port_is_tried_again_with_new_ports_then_the_server_starts():
    attempts = []

    def start_once():
        attempts.append(1)
        if len(attempts) < PORT_ATTEMPTS:
            raise Refused(TAKEN)
        return "started"

    assert start_with_fresh_ports(start_once, Refused, "a server") == "started"
    assert len(attempts) == PORT_ATTEMPTS


def test_any_other_failure_and_the_last_attempt_raise_at_once():
    calls = []

    def broken():
        calls.append(1)
        raise Refused("weed mini exited:\npanic: no space left on device")

    with pytest.raises(Refused, match="no space"):
        start_with_fresh_ports(broken, Refused, "a server")
    assert len(calls) == 1

    def always_taken():
        calls.append(1)
        raise Refused(TAKEN)

    with pytest.raises(Refused, match="Port allocation failed"):
        start_with_fresh_ports(always_taken, Refused, "a server")
    assert len(calls) == 1 + PORT_ATTEMPTS
