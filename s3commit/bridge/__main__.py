from s3commit.bridge.server import main

raise SystemExit(main())
