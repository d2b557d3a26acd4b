"""The test server's own process: moto on 127.0.0.1 behind the simulator proxy, serving until it is told to stop,
its stdin reaches end-of-file or its parent is gone (:mod:`s3commit.testing.server` starts it and is the
parent's side). ``python -m s3commit.testing.server --help`` lists its options.

``--moto-costs`` keeps moto's own cost model (a ranged GET reads the whole object, a Complete copies every part)
instead of S3's (:mod:`s3commit.testing._sim.moto_patches`); conditional writes stay atomic either way.
"""

from __future__ import annotations

import argparse
import gc
import ipaddress
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence

from s3commit.testing._sim.profiles import ProfileName, get_profile
from s3commit.testing._sim.simulator import SimulatorConfig, SimulatorServer
from s3commit.testing._sim.upstream import WsgiUpstream

_PARENT_POLL_SECONDS = 0.5


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m s3commit.testing.server",
                                     description="An S3 test server: moto behind the simulator proxy.")
    parser.add_argument("--profile", default="none", choices=[p.value for p in ProfileName])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--min-part-size",
        type=int,
        default=None,
        help="moto's S3_UPLOAD_PART_MIN_SIZE in bytes (default: moto's, the real 5 MiB)",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="simulator port (default: any free port)")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    parser.add_argument(
        "--watch-stdin", action="store_true", help="exit when stdin reaches end-of-file (the parent closed it)"
    )
    parser.add_argument("--verbose", action="store_true", help="keep moto's request log and tracebacks")
    parser.add_argument("--moto-costs", action="store_true",
                        help="keep moto's own costs: a ranged GET reads the whole object, a Complete copies its parts")
    args = parser.parse_args(argv)
    if args.min_part_size is not None and args.min_part_size < 0:
        parser.error(f"--min-part-size must be >= 0, got {args.min_part_size}")
    if not is_loopback(args.host):
        parser.error(f"--host must be an IPv4 loopback address such as 127.0.0.1, got {args.host!r}")
    return args


def is_loopback(host: str) -> bool:
    """Test servers never listen beyond this machine: they accept any credentials."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.version == 4 and address.is_loopback


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until a signal arrives, the parent dies (``--parent-pid``) or stdin closes
    (``--watch-stdin``; off by default so that ``python -m ... < /dev/null &`` keeps serving)."""
    args = _parse_args(argv)
    if args.min_part_size is not None:
        # moto reads this once, when it is imported, so it must be set before the import.
        os.environ["S3_UPLOAD_PART_MIN_SIZE"] = str(args.min_part_size)
    from moto.server import ThreadedMotoServer

    from s3commit.testing._sim.moto_patches import (
        atomic_conditional_writes,
        complete_without_copying,
        crc32c_as_s3,
        dispatch_hosts_once,
        iterate_keys_lightly,
        serve_ranges_lazily,
    )

    if not args.moto_costs:
        serve_ranges_lazily()  # a ranged GET costs its range, as on S3 (see the module)
        complete_without_copying()  # a Complete costs the same whatever the size, as on S3
    atomic_conditional_writes()  # a conditional write's check and write are one step, as on S3
    crc32c_as_s3()  # moto's CRC32C is CRC32 without the crc32c package
    dispatch_hosts_once()  # moto's server maps a host to its service once, not on every request
    iterate_keys_lightly()  # a listing goes through the bucket's keys without three calls for each
    if not args.verbose:
        # werkzeug logs every request and the traceback of every moto 500 (e.g. unknown upload ids).
        logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    moto = ThreadedMotoServer(ip_address=args.host, port=0, verbose=False)
    moto.start()
    moto_host, moto_port = moto.get_host_and_port()
    raw_url = f"http://{moto_host}:{moto_port}"
    config = SimulatorConfig(profile=get_profile(args.profile), seed=args.seed)
    # moto is called in this process; its own server stays up for the raw endpoint (tests that bypass the simulator)
    upstream = WsgiUpstream.of_moto(moto)
    simulator = SimulatorServer(upstream=upstream, host=args.host, port=args.port, config=config).start()
    ready = {
        "endpoint_url": simulator.url,
        "raw_endpoint_url": raw_url,
        "port": int(simulator.url.rsplit(":", 1)[1]),
        "raw_port": moto_port,
        "pid": os.getpid(),
        "profile": args.profile,
        "moto_costs": args.moto_costs,
        "min_part_size": args.min_part_size,
    }
    freeze_survivors()
    print(json.dumps(ready), flush=True)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # nobody reads stdout after the ready line

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if args.watch_stdin:
        threading.Thread(target=_wait_for_eof, args=(stop,), name="stdin-watch", daemon=True).start()
    try:
        while not stop.wait(_PARENT_POLL_SECONDS):
            if args.parent_pid is not None and os.getppid() != args.parent_pid:
                break  # re-parented: our parent died (stdin may be held open by a forked sibling)
    except KeyboardInterrupt:
        pass
    # Nothing to flush or persist: moto's state is in memory by design. Exit without joining the
    # server threads, which may be blocked in keep-alive reads.
    sys.stderr.flush()
    os._exit(0)


def freeze_survivors() -> None:
    """The store's objects (moto's keys: tens of thousands in a scale benchmark) live as long as the server. Left to
    the garbage collector, each of its full passes scans all of them: measured, 0.3-0.5 s every 15-20 s under a
    benchmark's load, a pause of every request (S3 has none). So what start-up loaded, and what survives each full
    pass, is frozen (``gc.freeze``): the next pass scans only what came since. A reference cycle among frozen
    objects that dies is not collected: a test server's life is short, and moto's keys die by reference counting."""
    gc.freeze()

    def after(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info.get("generation") == 2:
            gc.freeze()

    gc.callbacks.append(after)


def _wait_for_eof(stop: threading.Event) -> None:
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    stop.set()
