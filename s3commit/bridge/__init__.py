"""The sidecar that serves the JVM bridge (``python -m s3commit.bridge``): one Python process per JVM doing the S3 work
of Spark's commit protocols and ``s3a://`` FileSystem.

The process and its socket (:mod:`.server`, :mod:`.protocol`, :mod:`.blocks`, :mod:`.failpoints`), the table of
operations (:mod:`.operations`, ``operations.json``: the one specification both sides check), the handlers by
concern (:mod:`.handlers` assembles them: filesystem metadata :mod:`.files`, the data path's byte streams
:mod:`.data_path`, committer calls :mod:`.commits`, Structured Streaming's file sink :mod:`.sink`), the registered
Hadoop configurations (:mod:`.registry`), replies and errors (:mod:`.reply`), and a Python client (:mod:`.client`).

May import: :mod:`s3commit.committers` and every layer below it; never :mod:`s3commit.spark`, the engines or the CLI."""
