"""Which SigV4 signer the store's client uses: botocore's own, even where AWS's CRT is installed.

SigV4 over plain http signs the SHA-256 of every body (over https with a checksum header, S3 takes
``UNSIGNED-PAYLOAD``). Where ``awscrt`` is installed (the ``s3commit[crt]`` extra, or brought by another
package), botocore signs S3 requests through the CRT, which copies the body into a ``BytesIO`` and reads it
back through Python in 4 KiB pieces, taking the GIL for each, and always recomputes the hash (an
``X-Amz-Content-SHA256`` set beforehand is ignored for S3). Measured on the 2-core reference machine, 8
UploadParts of 32 MiB: 1.3-1.7 s to sign through the CRT, 0.2-0.5 s through botocore's signer, whose one
:func:`hashlib.sha256` call releases the GIL. With the sidecar's upload threads contending for the GIL the
difference grows (a profile put a quarter of the sidecar's busy time in the CRT's signing).

So the store's client names :data:`SIGNATURE_VERSION`, registered in botocore's table of signers as
botocore's :class:`~botocore.auth.S3SigV4Auth` (and its query and POST forms): the same signature, computed
in Python. Nothing else changes: botocore's table is only added to, so other clients in the process keep the
CRT, and operations whose endpoint rules name another scheme (S3 Express, multi-region access points) keep
it too. Without the CRT, the client keeps botocore's default name (the table maps it to the same class).
"""

from __future__ import annotations

from typing import Any

SIGNATURE_VERSION = "s3v4-s3commit"
"""The signer name the store's client is configured with where the CRT would sign."""


def _register() -> bool:
    """Add :data:`SIGNATURE_VERSION` to botocore's signers; False where the CRT does not sign (no need)."""
    import botocore.auth
    from botocore.compat import HAS_CRT

    if not HAS_CRT:
        return False
    table = botocore.auth.AUTH_TYPE_MAPS
    table.setdefault(SIGNATURE_VERSION, botocore.auth.S3SigV4Auth)
    table.setdefault(f"{SIGNATURE_VERSION}-query", botocore.auth.S3SigV4QueryAuth)
    table.setdefault(f"{SIGNATURE_VERSION}-presign-post", botocore.auth.S3SigV4PostAuth)
    return True


def config_options() -> dict[str, Any]:
    """The ``botocore.config.Config`` options choosing the signer (``{}``: botocore's default)."""
    return {"signature_version": SIGNATURE_VERSION} if _register() else {}
