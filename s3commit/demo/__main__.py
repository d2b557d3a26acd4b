"""``python -m s3commit.demo``: the demo."""

from s3commit.demo import main

raise SystemExit(main())
