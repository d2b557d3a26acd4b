"""Crash points for tests: make a sidecar kill itself at a named moment, once across every sidecar.

``S3COMMIT_SIDECAR_CRASH=<when>:<op>[,<when>:<op>...]@<directory>``: the sidecar that first meets ``op``
(``before``: on receipt, before the handler runs; ``after``: once the handler has run, before the answer is
sent) creates ``<directory>/<when>-<op>`` and kills itself with SIGKILL, as the kernel's OOM killer would. The
file makes it fire once: the sidecar the JVM starts next (which inherits the same environment) finds it and
carries on. Unset, nothing happens and nothing is checked but one dictionary lookup per request.
"""

from __future__ import annotations

import os
import signal

ENV = "S3COMMIT_SIDECAR_CRASH"


class Failpoints:
    def __init__(self, spec: str | None = None) -> None:
        spec = os.environ.get(ENV, "") if spec is None else spec
        points, _, directory = spec.partition("@")
        self.directory = directory
        self.points: set[tuple[str, str]] = set()
        for point in filter(None, (p.strip() for p in points.split(","))):
            when, _, op = point.partition(":")
            if when not in ("before", "after") or not op or not directory:
                raise ValueError(f"{ENV}={spec!r}: expected <before|after>:<op>[,...]@<directory>")
            self.points.add((when, op))

    def reach(self, when: str, op: str) -> None:
        """Die here if a crash point is set for this moment and has not fired in any sidecar yet."""
        if (when, op) not in self.points:
            return
        marker = os.path.join(self.directory, f"{when}-{op}")
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)
