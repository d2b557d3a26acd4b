"""The sidecar that serves the JVM bridge (``python -m s3commit.bridge``): see :mod:`.server`."""
