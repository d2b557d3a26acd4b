"""Run the benchmarks: ``python benchmarks/run.py [--quick] [--sections ...]`` (``s3commit bench`` from a clone).

The benchmarks are repository tooling, not shipped in the wheel: they import ``benchmarks`` and ``testbed`` from
this clone."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks import main  # noqa: E402

if __name__ == "__main__":  # not when a worker process re-imports it (multiprocessing's spawn: Dask's LocalCluster)
    raise SystemExit(main())
