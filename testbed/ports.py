"""Ports for the test servers started as processes (SeaweedFS, rclone): chosen free, and chosen again when the
server finds one taken before it binds it."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)
StartedT = TypeVar("StartedT")


PORT_ATTEMPTS = 3
"""Starts of a server whose ports were taken between choosing them and binding them (each with new ports)."""


def port_was_taken(log: str) -> bool:
    """True if a server's log says one of its ports was taken before it could bind it: ports are chosen free, then
    handed to the server, and in between any process's outgoing connection may take one from the same range."""
    return "address already in use" in log or "Port allocation failed" in log


def start_with_fresh_ports(start_once: Callable[[], StartedT], error: type[Exception], what: str) -> StartedT:
    """``start_once()``, again with new ports (up to :data:`PORT_ATTEMPTS` times) when its ``error`` says a port
    was taken."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            return start_once()
        except error as err:
            if attempt == PORT_ATTEMPTS or not port_was_taken(str(err)):
                raise
            log.warning("%s: a port was taken before it could bind it; starting again with new ports", what)
    raise AssertionError("unreachable")


def free_ports(n: int) -> list[int]:
    """``n`` ports on 127.0.0.1 free at this moment (a server started on them may still find one taken)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
