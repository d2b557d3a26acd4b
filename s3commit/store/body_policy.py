"""A part's or object's body on its way to S3: handed to botocore as it is, and signed only where it must be.

**No copy.** botocore's parameter validation takes a ``Body`` of ``bytes``, ``bytearray`` or a file object and
refuses a ``memoryview`` (a part mapped from its block file, :mod:`s3commit.transfer.parts`); a file object it sends in
16 KiB reads through Python, the GIL taken for each. The store hands it a :class:`Payload`: a file object over the
buffer, which passes validation (and is what a client without the handler below sends, slowly but exactly).
:func:`install_bodies` gives the client a ``before-call`` handler, first of its kind, that puts the buffer itself in the
request: botocore measures it, and urllib3 sends it with one ``sendall`` from the buffer's own memory (the page
cache, for a mapped block file).

**Payload signing.** SigV4 over plain http signs the SHA-256 of every body (botocore's rule; over https a
streamed body with a checksum header goes ``UNSIGNED-PAYLOAD``, TLS protecting it): about 0.7 s of CPU per GiB
on the reference machine, a quarter of what the sidecar spends on a part. Whether a body must be signed is the
store's decision per bucket (:meth:`PayloadPolicy.signs_payload`, ``s3commit.signing.payload``): with ``auto``
a body goes ``UNSIGNED-PAYLOAD`` where damage in transit is caught otherwise - the store was seen to validate the
checksum header sent (which the signature covers), or its part ETags were seen to be MD5s and the ETag check
compares them - and is signed where nothing else would catch it. A :class:`Payload` carries the decision to the
signer (:mod:`s3commit.store.signing`) in the request's context; where it signs a body whose checksum is a ``SHA256``,
the signer takes that checksum as the payload hash instead of hashing the body a second time.

What ``UNSIGNED-PAYLOAD`` trades, over plain http only: the signature no longer binds the body, so a party that
can rewrite the traffic could swap a body for another with the same CRC (a CRC is no MAC; an MD5 ETag it could
forge in the answer). Over plain http that party can already rewrite every answer (GETs, listings, ETags) and
read every byte: use https where the network is not trusted; there nothing changes.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from s3commit.config.options import StoreOptions
from s3commit.store.capabilities import Capabilities, Outcome

SIGNED = "s3commit.store.body_policy.signed"
"""The request-context key saying whether this body's SHA-256 is signed (absent: botocore decides)."""
SHA256 = "s3commit.store.body_policy.sha256"
"""The request-context key holding the body's SHA-256 (hex) where it is already known."""
HANDLER_ID = "s3commit-payload-bodies"
BODY_OPERATIONS = ("UploadPart", "PutObject")


class Payload(io.RawIOBase):
    """A body for botocore: the buffer ``data`` (sent as it is once :func:`install_bodies` swapped it in), whether its
    SHA-256 is signed (None: botocore's rule), and that SHA-256 (hex) when a ``SHA256`` checksum already holds it.
    Read as a file object only by a client without the handler. Make one per attempt."""

    def __init__(self, data: bytes | bytearray | memoryview, *, signed: bool | None,
                 sha256_hex: str | None = None) -> None:
        super().__init__()
        self.data = data
        self.signed = signed
        self.sha256_hex = sha256_hex
        self._view = memoryview(data).cast("B")
        self._position = 0

    def __len__(self) -> int:
        return self._view.nbytes

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        target = memoryview(buffer).cast("B")
        piece = self._view[self._position:self._position + target.nbytes]
        target[:piece.nbytes] = piece
        self._position += piece.nbytes
        return piece.nbytes

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._view.nbytes}[whence]
        self._position = max(0, base + offset)
        return self._position

    def tell(self) -> int:
        return self._position


def sha256_hex(algorithm: str | None, checksum: str | None) -> str | None:
    """The body's SHA-256 in hex where its checksum is one (base64, as S3 takes it), else None."""
    return base64.b64decode(checksum).hex() if algorithm == "SHA256" and checksum else None


def _swap(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """``before-call`` of UploadPart and PutObject: a :class:`Payload` gives the request its buffer, and the
    signer its decision."""
    body = params.get("body")
    if isinstance(body, Payload):
        params["body"] = body.data
        if body.signed is not None:
            context[SIGNED] = body.signed
        if body.sha256_hex:
            context[SHA256] = body.sha256_hex


def install_bodies(client: Any) -> Any:
    """``client`` (a botocore S3 client, or None) made to send a :class:`Payload` body as its buffer. Idempotent."""
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is not None:
        for operation in BODY_OPERATIONS:
            events.register_first(f"before-call.s3.{operation}", _swap, unique_id=f"{HANDLER_ID}-{operation}")
    return client


class PayloadPolicy:
    """What the store checks of the bodies it sends, per bucket: the ETag-vs-MD5 check, what a completed object's
    ETag says, and payload signing, as the options and what each bucket's store was seen to honour
    (``capabilities``, the store's own dict) decide."""

    def __init__(self, options: StoreOptions, capabilities: dict[str, Capabilities]) -> None:
        self.options = options
        self.capabilities = capabilities

    def algorithm(self, bucket: str, *, keep: bool = False) -> str | None:
        """The checksum sent with bodies to ``bucket``: the option's; under ``auto``, none where the store was seen
        to validate none and its part ETags are checked as MD5s (:meth:`Capabilities.auto_checksum`), unless the
        caller ``keep`` s it. An upload keeps what this said at its Create for all its parts (the store's findings
        may change meanwhile)."""
        algorithm = self.options.checksum_algorithm
        known = self.capabilities.get(bucket)
        if known is None or keep or not self.options.checksum_auto or not self.verifies_etags(bucket):
            return algorithm
        return known.auto_checksum(algorithm)

    def verifies_etags(self, bucket: str) -> bool:
        """Whether ETags in ``bucket`` are checked as the MD5 of the bytes sent: ``verify_etag``, else (auto) where
        the store was not seen to validate the checksum sent (unknown: on); never with SSE-KMS."""
        verify = self.options.verify_etag
        if verify is None:
            known = self.capabilities.get(bucket)
            verify = known is None or known.needs_etag_check(self.options.checksum_algorithm)
        return verify and self.options.sse_algorithm != "aws:kms"

    def multipart_etags(self, bucket: str) -> bool:
        """Whether a completed upload's object in ``bucket`` carries S3's multipart ETag (:attr:`Capabilities.
        multipart_etags`; unknown: yes), so that it is recognised by it."""
        known = self.capabilities.get(bucket)
        return known is None or known.multipart_etags

    def signs_payload(self, bucket: str) -> bool | None:
        """Whether SigV4 signs the SHA-256 of bodies sent to ``bucket``: True with ``signed``; with ``auto``, False
        where the store was seen to validate the checksum sent, or to give MD5 part ETags that the ETag check
        compares, else None: botocore's own rule (signed over http, not over https with a checksum)."""
        if self.options.payload_signing == "signed":
            return True
        known = self.capabilities.get(bucket)
        if known is None:
            return None
        if known.validates(self.options.checksum_algorithm) or (
                self.verifies_etags(bucket) and known.outcome("part-etag-md5") is Outcome.YES):
            return False
        return None
