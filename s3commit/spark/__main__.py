"""``python -m s3commit.spark build|conf``: see :func:`s3commit.spark.conf.main`."""

from s3commit.spark.conf import main

raise SystemExit(main())
