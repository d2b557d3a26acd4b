"""The simulated S3 behind :class:`s3commit.testing.S3TestServer` (private): an HTTP proxy in front of a moto server
that classifies each request (:mod:`.classify`), adds latency and throttling (:mod:`.profiles`), injects faults
(:mod:`.faults`) and counts what it saw (:mod:`.stats`), with moto's own gaps mended in the server's process
(:mod:`.moto_patches`, :mod:`.initiated`). Public names are re-exported by :mod:`s3commit.testing`.

May import: the runtime packages (for :mod:`.store_hints`) and the standard library; nothing of the demo.
"""
