"""``python -m s3commit.cli``: the ``s3commit`` command."""

import sys

from s3commit.cli.app import main

sys.exit(main())
