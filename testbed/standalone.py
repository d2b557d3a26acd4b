"""A Spark standalone cluster on 127.0.0.1 for tests and benchmarks: a Master and Workers started with PySpark's
own ``bin/spark-class``, each in its own session so that stopping the cluster kills it with its executors.

Nothing here imports s3commit's other modules; PySpark is imported when a cluster starts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    """The installed PySpark's directory (``bin/spark-class``, ``bin/spark-submit``, ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class StandaloneCluster:
    """A Master and ``workers`` Workers (``cores`` and ``memory`` each) on 127.0.0.1, logs and work directories
    under ``workdir``.

    Args:
        workdir: where the logs (``master.log``, ``worker-N.log``) and the Workers' work directories go.
        workers, cores, memory: the Workers and what each offers.
        worker_options: Java options of the Workers (``SPARK_WORKER_OPTS``), e.g.
            ``-Dspark.decommission.enabled=true`` so that SIGPWR decommissions a Worker with its executors.
        env: the environment of every process (default: this one without ``SPARK_HOME`` and the sidecars'
            Python settings); ``SPARK_LOCAL_IP`` and ``SPARK_NO_DAEMONIZE`` are always set.
        startup_timeout: seconds to wait for every Worker to register.
    """

    def __init__(self, workdir: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g",
                 worker_options: str = "", env: Mapping[str, str] | None = None,
                 startup_timeout: float = 180.0) -> None:
        self.workdir, self.workers, self.cores, self.memory = Path(workdir), workers, cores, memory
        base = env if env is not None else {k: v for k, v in os.environ.items()
                                            if k not in ("SPARK_HOME", "S3COMMIT_PYTHON", "PYSPARK_PYTHON")}
        self.env = {**base, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
        if worker_options:
            self.env["SPARK_WORKER_OPTS"] = worker_options
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def logs(self) -> list[Path]:
        """The Master's log, then each Worker's."""
        return [self.workdir / "master.log"] + [self.workdir / f"worker-{n}.log" for n in range(1, self.workers + 1)]

    def worker_pids(self) -> list[int]:
        """The Workers' process ids (their JVMs are the processes :meth:`start` started)."""
        return [p.pid for p in self.processes[1:]]

    def _start(self, args: list[str], log: Path) -> None:
        with log.open("w") as out:
            self.processes.append(subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], stdout=out,
                                                   stderr=subprocess.STDOUT, env=self.env, start_new_session=True))

    def start(self) -> StandaloneCluster:
        """Start the Master and the Workers; return once every Worker registered (or raise, with the logs)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                         "--webui-port", str(free_port())], self.logs[0])
            for n in range(1, self.workers + 1):
                work = self.workdir / f"work-{n}"
                work.mkdir(exist_ok=True)
                self._start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores",
                             str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()),
                             "--work-dir", str(work), self.url], self.logs[n])
            deadline = time.monotonic() + self.startup_timeout
            while self.logs[0].read_text().count("Registering worker") < self.workers:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.workers} workers did not register within {self.startup_timeout} s:\n"
                                       + "\n".join(p.read_text()[-2000:] for p in self.logs))
                time.sleep(0.3)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Kill every process group the cluster started (executors and their sidecars included)."""
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.processes = []

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()


def executor_pids(app_id: str) -> list[int]:
    """The process ids of the executor JVMs of application ``app_id`` on this machine."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in argv and app_id.encode() in argv:
            found.append(int(pid))
    return found


def parent_pid(pid: int) -> int:
    """The parent of process ``pid`` (an executor's: the Worker that launched it)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def wait_gone(pids: list[int], timeout: float) -> bool:
    """Wait until none of ``pids`` runs (``timeout`` seconds at most); whether they are all gone."""
    deadline = time.monotonic() + timeout
    while any(os.path.exists(f"/proc/{pid}") for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True
