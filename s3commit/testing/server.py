"""An S3 test server in a child process: moto on 127.0.0.1 behind the simulator proxy.

Run ``python -m s3commit.testing.server [--profile s3-standard] [--seed N] [--min-part-size BYTES] [--moto-costs]``
(:mod:`s3commit.testing._sim.server_process`): the process starts moto's ``ThreadedMotoServer`` and a
:class:`~s3commit.testing._sim.simulator.SimulatorServer` in front of it, both on loopback ports chosen by the OS,
prints one JSON line to stdout (``endpoint_url``, ``raw_endpoint_url``, ports, pid) and serves until it is
killed, its stdin reaches end-of-file, or its parent process dies. So a test run that crashes leaves no server behind.

:class:`S3TestServer` is the parent side: it starts that process, waits for the JSON line, and offers
boto3 clients, the environment a child process needs to reach the server, and the simulator's control API
(configure latency/faults/throttling, read stats, reset). moto lives in its own process so that its state
and threads never mix with the code under test, and so that other processes (Spark executors, the JVM
bridge sidecar) can reach the same server.

moto's cost model is not S3's: a ranged GET reads the whole object and a Complete copies every part
(:mod:`s3commit.testing._sim.moto_patches`). By default the server changes both, so that a request costs what it
costs on S3; ``--moto-costs`` (``S3TestServer(moto_costs=True)``) keeps moto's own, as a moto server a user starts
has them. Conditional writes stay atomic either way: that is S3's semantics, not a cost.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

from s3commit.testing._sim.classify import S3Operation
from s3commit.testing._sim.faults import FaultKind, FaultSpec
from s3commit.testing._sim.profiles import LatencyProfile, ProfileName, ThrottleSpec
from s3commit.testing._sim.server_process import is_loopback, main
from s3commit.testing._sim.stats import StatsSnapshot
from s3commit.testing._sim.store_hints import know_bucket, probe_server

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"

_UNSET: Any = object()


class S3TestServerError(RuntimeError):
    """The test server could not start, or its control API refused a request."""


# -- parent side ------------------------------------------------------------------------------------


class S3TestServer:
    """Start and control an S3 test server process (moto behind the simulator) on 127.0.0.1.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`::

        with S3TestServer(profile="s3-standard") as server:
            s3 = server.client()
            server.create_bucket("data")
            server.configure(faults=FaultSpec(rates={"503": 0.05}))

    Args:
        profile: initial latency profile name: ``none``, ``s3-standard`` or ``s3-express``.
        seed: initial fault seed.
        min_part_size: moto's minimum multipart part size in bytes; ``None`` keeps the real 5 MiB.
        host: loopback address to bind.
        startup_timeout: seconds to wait for the server's ready line.
        python: interpreter that runs the server (default: this one).
        verbose: keep moto's request log and tracebacks in the server's stderr.
        moto_costs: keep moto's own cost model (a ranged GET reads the whole object, a Complete copies every
            part) instead of S3's; see the module.
    """

    def __init__(
        self,
        *,
        profile: str = "none",
        seed: int = 0,
        min_part_size: int | None = None,
        host: str = "127.0.0.1",
        startup_timeout: float = 20.0,
        python: str = sys.executable,
        verbose: bool = False,
        moto_costs: bool = False,
    ) -> None:
        self.profile = ProfileName.parse(profile).value
        if not is_loopback(host):
            raise ValueError(f"host must be an IPv4 loopback address such as 127.0.0.1, got {host!r}")
        if min_part_size is not None and min_part_size < 0:
            raise ValueError(f"min_part_size must be >= 0 bytes, got {min_part_size}")
        self.seed, self.min_part_size, self.host = seed, min_part_size, host
        self.startup_timeout, self.python, self.verbose = startup_timeout, python, verbose
        #: moto's own cost model (a ranged GET reads the whole object, a Complete copies its parts), not S3's.
        self.moto_costs = moto_costs
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._ready: dict[str, Any] = {}
        self._control_client: S3Client | None = None
        # What the simulator does now that a probe finds (checksums validated, conditional DELETEs honoured), and
        # what it did when it was last probed.
        self._probed_settings = self._settings = (False, True)
        #: The server process's exit code after :meth:`stop` (0: it exited by itself on stdin EOF).
        self.exit_code: int | None = None

    # lifecycle

    def start(self) -> S3TestServer:
        """Start the server process and wait until it serves; return ``self``.

        Raises:
            S3TestServerError: the process exited or did not report ready within ``startup_timeout``;
                the message includes its stderr.
        """
        if self._process is not None:
            return self
        command = [self.python, "-m", "s3commit.testing.server", "--parent-pid", str(os.getpid()), "--watch-stdin"]
        command += ["--profile", self.profile, "--seed", str(self.seed), "--host", self.host]
        if self.min_part_size is not None:
            command += ["--min-part-size", str(self.min_part_size)]
        if self.verbose:
            command.append("--verbose")
        if self.moto_costs:
            command.append("--moto-costs")
        env = dict(os.environ)
        # Make the package importable in the child even when it is used from a source checkout.
        source_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (source_root, env.get("PYTHONPATH")) if p)
        # A file, not a pipe: nobody drains a pipe while the server runs, and a full pipe would block it.
        self._stderr = tempfile.TemporaryFile(prefix="s3commit-test-server-", suffix=".log")  # noqa: SIM115
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env, close_fds=True
        )
        atexit.register(self.stop)
        ready, stray, closed = _read_ready_line(self._process, self.startup_timeout)
        if ready is None:
            self._fail_start(stray, closed=closed)
        self._ready = ready
        probe_server(self)  # every bucket created later is known to honour what it does (testing.known)
        return self

    def _fail_start(self, stray: list[bytes], *, closed: bool) -> NoReturn:
        process = self._process
        assert process is not None
        what = f"did not start within {self.startup_timeout}s"
        if closed:
            # stdout closes a moment before an exiting process is gone: wait for its exit code.
            with contextlib.suppress(subprocess.TimeoutExpired):
                what = f"exited with code {process.wait(timeout=5)}"
            if process.returncode is None:
                what = "closed its stdout without reporting ready"
        if process.returncode is None:
            process.kill()
            process.wait()
        stderr = self.server_log()
        self._cleanup()
        detail = f"; its stdout: {b''.join(stray)[-1000:]!r}" if stray else ""
        raise S3TestServerError(f"S3 test server {what}{detail}; its stderr:\n{stderr[-4000:] or '(empty)'}")

    def stop(self) -> None:
        """Stop the server process (closing its stdin, then terminating, then killing). Idempotent."""
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):  # a broken pipe: the process is already gone
                process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        atexit.unregister(self.stop)
        if self._process is not None:
            self.exit_code = self._process.returncode
        if self._process is not None and self._process.stdout is not None:
            self._process.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
        self._process, self._stderr, self._control_client = None, None, None

    def __enter__(self) -> S3TestServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        """The server process id."""
        return int(self._require("pid"))

    @property
    def endpoint_url(self) -> str:
        """URL of the simulated S3 (latency, faults, stats apply here)."""
        return str(self._require("endpoint_url"))

    @property
    def raw_endpoint_url(self) -> str:
        """URL of moto itself, bypassing the simulator."""
        return str(self._require("raw_endpoint_url"))

    def _require(self, name: str) -> Any:
        if self._process is None or name not in self._ready:
            raise S3TestServerError("the S3 test server is not running; call start() first")
        return self._ready[name]

    def server_log(self) -> str:
        """What the server process wrote to stderr so far."""
        if self._stderr is None:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    # clients and environment

    def client(self, *, raw: bool = False, max_attempts: int = 1, max_pool_connections: int = 32) -> S3Client:
        """A new boto3 S3 client for this server.

        Args:
            raw: talk to moto directly instead of the simulator.
            max_attempts: botocore's total attempts per call; 1 (no botocore retry) leaves retrying to the
                code under test, as s3commit's store does.
            max_pool_connections: the client's connection pool size.
        """
        import boto3
        from botocore.config import Config

        retries = {"total_max_attempts": max_attempts, "mode": "standard"}
        config = Config(s3={"addressing_style": "path"}, retries=retries,
                        max_pool_connections=max_pool_connections, connect_timeout=10, read_timeout=120)
        return boto3.client(
            "s3",
            endpoint_url=self.raw_endpoint_url if raw else self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=config,
        )

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` (straight on moto: no simulated latency), known as the server (testing.known)."""
        if self._control_client is None:
            self._control_client = self.client(raw=True)
        self._control_client.create_bucket(Bucket=name)
        self._probe_again_if_settings_changed()
        know_bucket(self, name)
        return name

    def env(self) -> dict[str, str]:
        """Environment variables that point boto3's default resolution in another process at this server."""
        no_proxy = ",".join(p for p in (os.environ.get("NO_PROXY"), "127.0.0.1", "localhost") if p)
        return {
            "AWS_ENDPOINT_URL_S3": self.endpoint_url,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "NO_PROXY": no_proxy,
        }

    # simulator control

    def configure(
        self,
        *,
        profile: str | LatencyProfile = _UNSET,
        faults: FaultSpec | None = _UNSET,
        seed: int = _UNSET,
        copy_bandwidth: float | None = _UNSET,
        throttle: ThrottleSpec | None = _UNSET,
        clock_offset: float = _UNSET,
        validate_checksums: bool = _UNSET,
        conditional_deletes: bool = _UNSET,
    ) -> dict[str, Any]:
        """Change what the simulator does; options left out keep their current value.

        Args:
            profile: a profile name or a custom :class:`LatencyProfile`.
            faults: fault rates; ``None`` for no random faults (scripted ones stay).
            seed: fault seed. Setting ``faults`` or ``seed`` restarts the fault streams.
            copy_bandwidth: server-side copy rate in bytes/s overriding the profile's; ``None`` restores it.
            throttle: per-prefix rate limits; ``None`` turns throttling off.
            clock_offset: seconds the store's clock runs ahead of this host's (negative: behind): its ``Date``,
                ``Last-Modified`` and listed dates are moved by it (clock skew between client and store).
            validate_checksums: refuse a PutObject or UploadPart whose checksum header does not match its bytes
                (400 BadDigest), as S3 does; moto accepts any. The server is probed again at the next
                ``create_bucket``, so that buckets created after are known to validate (or not); a bucket created
                before keeps what its clients cached: probe it again (``known(store, bucket, refresh=True)``).
            conditional_deletes: False drops the ``If-Match`` of a DeleteObject before moto sees it, as a store that
                honours conditional PUTs but not conditional DELETEs does (probed again as ``validate_checksums``).

        Returns:
            The simulator's whole configuration after the change, as JSON data.
        """
        changes: dict[str, Any] = {}
        if profile is not _UNSET:
            changes["profile"] = profile.to_dict() if isinstance(profile, LatencyProfile) else profile
        if faults is not _UNSET:
            changes["faults"] = faults.to_dict() if faults is not None else None
        if seed is not _UNSET:
            changes["seed"] = seed
        if copy_bandwidth is not _UNSET:
            changes["copy_bandwidth"] = copy_bandwidth
        if throttle is not _UNSET:
            changes["throttle"] = throttle.to_dict() if throttle is not None else None
        if clock_offset is not _UNSET:
            changes["clock_offset"] = clock_offset
        if validate_checksums is not _UNSET:
            changes["validate_checksums"] = validate_checksums
        if conditional_deletes is not _UNSET:
            changes["conditional_deletes"] = conditional_deletes
        config = dict(self._control("POST", "config", changes))
        self._settings = (bool(config.get("validate_checksums")), bool(config.get("conditional_deletes", True)))
        return config

    def _probe_again_if_settings_changed(self) -> None:
        """Before a bucket is created (and told what the server honours): the server probed again if checksum
        validation or conditional DELETEs were turned on or off since its last probe (a reset returns both to their
        start). Counters that were zero stay zero: the probe's requests are no test's."""
        if self._settings != self._probed_settings:
            counted, before = sum(self.stats().requests.values()), self._probed_settings
            self._probed_settings = self._settings  # first: the probe creates a bucket of its own
            try:
                probe_server(self)
            except BaseException:
                self._probed_settings = before
                raise
            if not counted:
                self.reset_stats()

    def advance_clock(self, bucket: str, seconds: float) -> float:
        """Let ``seconds`` pass on ``bucket``'s clock without waiting: every object written there so far is that
        much older by the ``Date`` of the answers about it from now on; objects written later are dated on the
        moved clock. Other buckets' clocks stay (each test has its own bucket); it never moves back (a reset keeps
        it). Returns how far it has moved in all."""
        return float(self._control("POST", "advance", {"bucket": bucket, "seconds": seconds})["advanced"])

    def hold(self, operation: S3Operation | str, *, ending: str = "") -> None:
        """Hold the requests of ``operation`` (on keys ending with ``ending``) that arrive from now on: each waits
        before it is forwarded until :meth:`release` (or a reset; at most 5 minutes). A race is then staged by
        order, not by latency (:meth:`held` says when the code under test has reached the request)."""
        self._control("POST", "hold", {"operation": S3Operation.parse(operation).value, "ending": ending})

    def release(self, operation: S3Operation | str | None = None) -> None:
        """Let the held requests of ``operation`` (``None``: of every operation) go on, and hold no more."""
        self._control("POST", "release", {"operation": S3Operation.parse(operation).value} if operation else {})

    def held(self) -> dict[str, int]:
        """How many requests are held now, by operation."""
        return dict(self._control("GET", "held")["held"])

    def simulator_config(self) -> dict[str, Any]:
        """The simulator's whole configuration as JSON data, plus ``scripted``: faults not yet used."""
        return dict(self._control("GET", "config"))

    def fail_next(
        self, operation: S3Operation | str, kind: FaultKind | str, count: int = 1, *, after_forward: bool = False
    ) -> None:
        """Fail the next ``count`` requests of ``operation`` with fault ``kind`` (before random faults).

        ``after_forward`` (``reset`` only) forwards each request to moto before dropping the connection.
        """
        self._control("POST", "fail-next", {"operation": S3Operation.parse(operation).value, "count": count,
                                            "kind": FaultKind.parse(kind).value, "after_forward": after_forward})

    def stats(self) -> StatsSnapshot:
        """The simulator's counters (requests, bytes, faults, injected delays) since the last reset."""
        return StatsSnapshot.from_dict(self._control("GET", "stats"))

    def request_log(self) -> list[dict[str, Any]]:
        """The simulator's latest requests, oldest first: operation, bucket, key and Range header of each, when it
        arrived (``at``) and when it was answered (``answered``), in seconds since the epoch by the server's clock."""
        return list(self._control("GET", "requests"))

    def reset_stats(self) -> None:
        """Zero the simulator's counters and its request log."""
        self._control("POST", "reset-stats")

    def reset_simulator(self) -> None:
        """Return the simulator to its start-up configuration, drop scripted faults, zero the counters."""
        self._control("POST", "reset")
        self._settings = (False, True)  # the start-up configuration

    def reset(self) -> None:
        """Forget everything: moto's state (all buckets and uploads) and the simulator's (see above)."""
        connection = self._connection(self.raw_endpoint_url)
        try:
            connection.request("POST", "/moto-api/reset")
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise S3TestServerError(f"moto reset failed with HTTP {response.status}")
        finally:
            connection.close()
        self.reset_simulator()

    def _connection(self, url: str) -> http.client.HTTPConnection:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        # http.client directly, not urllib: urllib would honour HTTP_PROXY even for loopback.
        return http.client.HTTPConnection(host, int(port), timeout=30)

    def _control(self, method: str, action: str, payload: Mapping[str, Any] | None = None) -> Any:
        connection = self._connection(self.endpoint_url)
        try:
            body = json.dumps(payload).encode() if payload is not None else None
            connection.request(method, f"/__sim/{action}", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            data = json.loads(response.read() or b"{}")
        finally:
            connection.close()
        if response.status != 200:
            raise S3TestServerError(f"simulator {method} /__sim/{action} failed: {data.get('error', data)}")
        return data


def _read_ready_line(
    process: subprocess.Popen[bytes], timeout: float
) -> tuple[dict[str, Any] | None, list[bytes], bool]:
    """Wait for the server's JSON ready line on stdout.

    Returns:
        The ready data (``None`` if stdout closed or ``timeout`` passed first); the other stdout lines seen
        before it (a library may print on import; they are kept for the error message); and whether
        stdout was closed (rather than the wait timing out).
    """
    lines: queue.Queue[bytes] = queue.Queue()
    stdout = process.stdout
    assert stdout is not None

    def pump() -> None:  # a thread, because a pipe read cannot time out portably
        for line in iter(stdout.readline, b""):
            lines.put(line)
        lines.put(b"")

    threading.Thread(target=pump, name="server-ready", daemon=True).start()
    deadline = time.monotonic() + timeout
    stray: list[bytes] = []
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None, stray, False
        if not line:
            return None, stray, True
        with contextlib.suppress(ValueError):
            data = json.loads(line)
            if isinstance(data, dict) and "endpoint_url" in data:
                return data, stray, False
        stray.append(line)


if __name__ == "__main__":
    sys.exit(main())
