"""Which SigV4 signer the store's client uses: botocore's own (even where AWS's CRT is installed), told by each
body whether to sign its payload.

SigV4 over plain http signs the SHA-256 of every body (over https with a checksum header, S3 takes
``UNSIGNED-PAYLOAD``). Where ``awscrt`` is installed (the ``s3commit[crt]`` extra, or brought by another
package), botocore signs S3 requests through the CRT, which copies the body into a ``BytesIO`` and reads it
back through Python in 4 KiB pieces, taking the GIL for each, and always recomputes the hash (an
``X-Amz-Content-SHA256`` set beforehand is ignored for S3). Measured on the 2-core reference machine, 8
UploadParts of 32 MiB: 1.3-1.7 s to sign through the CRT, 0.2-0.5 s through botocore's signer, whose one
:func:`hashlib.sha256` call releases the GIL. With the sidecar's upload threads contending for the GIL the
difference grows (a profile put a quarter of the sidecar's busy time in the CRT's signing).

So the store's client names :data:`SIGNATURE_VERSION`, registered in botocore's table of signers as
:class:`PayloadSigV4Auth`, botocore's :class:`~botocore.auth.S3SigV4Auth` (and its query and POST forms) with one
difference: a body the store sent as a :class:`~s3commit.store.body_policy.Payload` decides whether its payload is
signed (the request's context, :data:`s3commit.store.body_policy.SIGNED`: ``UNSIGNED-PAYLOAD`` where the store catches
damage another way), and a signed body whose ``SHA256`` checksum was computed already is not hashed again. Every other
request is signed exactly as botocore signs it. botocore's table is only added to, so other clients in the
process keep their signers, and operations whose endpoint rules name another scheme (S3 Express, multi-region
access points) keep theirs.
"""

from __future__ import annotations

from typing import Any

from s3commit.store.body_policy import SHA256, SIGNED

SIGNATURE_VERSION = "s3v4-s3commit"
"""The signer name the store's client is configured with."""


def _signer_class() -> type:
    import botocore.auth

    class PayloadSigV4Auth(botocore.auth.S3SigV4Auth):
        """botocore's S3 signer; a body's payload signed as its :class:`~s3commit.store.body_policy.Payload` says."""

        def _should_sha256_sign_payload(self, request: Any) -> bool:
            decided = request.context.get(SIGNED)
            if decided is not None:
                return bool(decided)
            return bool(super()._should_sha256_sign_payload(request))

        def payload(self, request: Any) -> str:
            known = request.context.get(SHA256)
            if known and not self._is_streaming_checksum_payload(request) \
                    and self._should_sha256_sign_payload(request):
                return str(known)
            return str(super().payload(request))

    return PayloadSigV4Auth


def _register() -> None:
    """Add :data:`SIGNATURE_VERSION` (and its query and POST forms) to botocore's signers, once."""
    import botocore.auth

    table = botocore.auth.AUTH_TYPE_MAPS
    if SIGNATURE_VERSION not in table:
        table[SIGNATURE_VERSION] = _signer_class()
    table.setdefault(f"{SIGNATURE_VERSION}-query", botocore.auth.S3SigV4QueryAuth)
    table.setdefault(f"{SIGNATURE_VERSION}-presign-post", botocore.auth.S3SigV4PostAuth)


def config_options() -> dict[str, Any]:
    """The ``botocore.config.Config`` options choosing the signer."""
    _register()
    return {"signature_version": SIGNATURE_VERSION}
