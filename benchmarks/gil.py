"""How long a process held the GIL while a phase ran: ``py-spy record --gil`` sampling, corrected for CPU contention.

py-spy samples the process ``RATE`` times a second without stopping it (``--nonblocking``) and records the stack
of the thread holding the GIL, if one does: ``samples / RATE`` is the wall time the GIL was held (checked on
this machine: a thread spinning in Python is sampled 0.998 of the time, one hashing 32 MiB buffers with
``hashlib`` 0, one doing each half of the time 0.476). On a loaded machine a thread may hold the GIL while the
kernel runs another process: that wall time is not the interpreter's cost. The sampled process's threads'
``/proc/<pid>/task/<tid>/schedstat`` (time on a CPU, time runnable but waiting for one) give the share of its
runnable time it actually ran; the GIL-held time scaled by that share is the GIL-held CPU time, what bounds a
sidecar on an executor whose cores are its own. The per-sidecar ceiling is 1 / (GIL-held CPU seconds per GiB).
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RATE = 250
"""Samples a second."""


def py_spy() -> str | None:
    """The py-spy executable (beside this Python, or on PATH), or None."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


def _schedstat(pid: int) -> dict[int, tuple[int, int]]:
    """Per thread of ``pid``: (ns on a CPU, ns runnable and waiting)."""
    found = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run, wait, _ = f.read().split()
            found[int(tid)] = (int(run), int(wait))
        except (OSError, ValueError):
            continue
    return found


class GilSampler:
    """``with GilSampler(pid) as sampler: ...`` then :meth:`result`: the GIL-held time of ``pid`` during the block."""

    def __init__(self, pid: int, *, rate: int = RATE) -> None:
        self.pid, self.rate = pid, rate
        self._out = Path(tempfile.mkdtemp(prefix="s3commit-gil-")) / "raw.txt"
        self._spy: subprocess.Popen[str] | None = None
        self._before: dict[int, tuple[int, int]] = {}
        self._after: dict[int, tuple[int, int]] = {}
        self.seconds = 0.0

    def __enter__(self) -> GilSampler:
        executable = py_spy()
        if executable is None:
            raise RuntimeError("py-spy is not installed (pip install py-spy; the bench extra has it)")
        self._spy = subprocess.Popen([executable, "record", "--gil", "--nonblocking", "--rate", str(self.rate),
                                      "--format", "raw", "-o", str(self._out), "-p", str(self.pid)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1.0)  # attached and sampling
        self._before = _schedstat(self.pid)
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._started
        self._after = _schedstat(self.pid)
        assert self._spy is not None
        self._spy.send_signal(signal.SIGINT)
        try:
            self._spy.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self._spy.kill()
            self._spy.communicate()

    def result(self, gib: float) -> dict[str, Any]:
        """GIL-held seconds (wall, and CPU: scaled by the share of runnable time the threads ran), per GiB, the
        ceiling they imply, and where the GIL was held (the innermost s3commit frame, top 8)."""
        held, places = 0, collections.Counter[str]()
        if self._out.exists():
            for line in self._out.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                if not stack or not count.isdigit():
                    continue
                held += int(count)
                frames = stack.split(";")
                own = [frame for frame in frames if "s3commit/" in frame]
                places[(own[-1] if own else frames[-1]).split(" (")[0]] += int(count)
            shutil.rmtree(self._out.parent, ignore_errors=True)
        run = wait = 0
        for tid, (after_run, after_wait) in self._after.items():
            before_run, before_wait = self._before.get(tid, (0, 0))
            run, wait = run + after_run - before_run, wait + after_wait - before_wait
        on_cpu = run / (run + wait) if run + wait else 1.0
        # The samples of the second before the phase began held little; they are counted in (an upper bound).
        wall = held / self.rate
        cpu = wall * on_cpu
        return {"gil_held_seconds": wall, "on_cpu_share": on_cpu, "gil_held_cpu_seconds": cpu,
                "gil_held_cpu_per_gib": cpu / gib if gib else 0.0,
                "ceiling_gib_per_second": gib / cpu if cpu else None,
                "wall_ceiling_gib_per_second": gib / wall if wall else None,
                "phase_seconds": self.seconds, "samples": held,
                "where": {name: count for name, count in places.most_common(8)}}
