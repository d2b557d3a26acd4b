"""``python -m s3commit.testing``: run the S3 test server (same as ``python -m s3commit.testing.server``)."""

import sys

from s3commit.testing.server import main

sys.exit(main())
