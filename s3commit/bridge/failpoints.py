"""Crash points for tests: make a sidecar kill itself at a named moment, once across every sidecar.

``S3COMMIT_SIDECAR_CRASH=<when>:<op>[,<when>:<op>...]@<directory>``: the sidecar that first meets ``op``
(``before``: on receipt, before the handler runs; ``after``: once the handler has run, before the answer is
sent) creates ``<directory>/<when>-<op>`` and kills itself with SIGKILL, as the kernel's OOM killer would. The
file makes it fire once: the sidecar the JVM starts next (which inherits the same environment) finds it and
carries on. ``stall:<op>`` instead holds the request for :data:`STALL_SECONDS` (once), standing in for a hung
sidecar (the JVM's timeout for metadata operations). Unset, nothing happens and nothing is checked but one
dictionary lookup per request.
"""

from __future__ import annotations

import os
import signal
import time

ENV = "S3COMMIT_SIDECAR_CRASH"
STALL_SECONDS = 30.0


class Failpoints:
    def __init__(self, spec: str | None = None) -> None:
        spec = os.environ.get(ENV, "") if spec is None else spec
        points, _, directory = spec.partition("@")
        self.directory = directory
        self.points: set[tuple[str, str]] = set()
        for point in filter(None, (p.strip() for p in points.split(","))):
            when, _, op = point.partition(":")
            if when not in ("before", "after", "stall") or not op or not directory:
                raise ValueError(f"{ENV}={spec!r}: expected <before|after|stall>:<op>[,...]@<directory>")
            self.points.add((when, op))

    def reach(self, when: str, op: str) -> None:
        """Die here if a crash point is set for this moment and has not fired in any sidecar yet (on receipt,
        stall instead if a stall point is set for ``op``)."""
        if when == "before" and ("stall", op) in self.points and self._first("stall", op):
            time.sleep(STALL_SECONDS)
            return
        if (when, op) not in self.points or not self._first(when, op):
            return
        os.kill(os.getpid(), signal.SIGKILL)

    def _first(self, when: str, op: str) -> bool:
        """Whether this is the first time any sidecar meets this point (it leaves a marker file)."""
        marker = os.path.join(self.directory, f"{when}-{op}")
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True
