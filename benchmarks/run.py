"""Run the benchmarks: ``python benchmarks/run.py [--quick]`` (the same as ``s3commit bench``)."""

from s3commit.bench import main

raise SystemExit(main())
