"""``python -m s3commit``: the ``s3commit`` command (the console script's entry point, :func:`s3commit.cli.main`)."""

import sys

from s3commit.cli import main

sys.exit(main())
