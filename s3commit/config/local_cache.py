"""s3commit's directory in the user's cache on this host, the one rule for where it is: ``$XDG_CACHE_HOME/s3commit``,
else ``~/.cache/s3commit``.

What is kept there, each under its own name: the bridge jar compiled with ``javac`` (:mod:`s3commit.spark.jar`),
what each store was seen to honour (``capabilities/``, :mod:`s3commit.store.capability_cache`, unless
``S3COMMIT_CAPABILITIES_DIR`` names another directory), and S3A's jars (``s3a-jars/``, :mod:`s3commit.demo.s3a`:
``s3commit demo --peers s3a``, the repository's S3A tier and benchmark; unless ``S3COMMIT_S3A_JARS`` names another
directory). The wheel build's backend (``build_backend/``) follows the same rule in a copy of its own: it runs
before s3commit is importable.
"""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/s3commit``, else ``~/.cache/s3commit`` (read when called: not created here)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "s3commit"
