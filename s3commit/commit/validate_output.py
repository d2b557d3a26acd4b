"""``validate_output`` (``s3commit.committer.validate.output``): each object a job commit completes is read
back (one HEAD with ``ChecksumMode=ENABLED``) and checked against its ``.pending``: its size always, its
checksum where the server returns one comparable with what was recorded (S3's COMPOSITE checksum of the parts,
``<base64>-<parts>``, or a one-part object's own). A mismatch fails the job commit, which then rolls back."""

from __future__ import annotations

from s3commit.errors import OutputMismatchError
from s3commit.model import checksums
from s3commit.model.manifests import PendingUpload
from s3commit.store.s3store import S3Store


def expected_checksum(pending: PendingUpload) -> tuple[str, str] | None:
    """The ``(algorithm, value)`` the completed object's checksum must be, where the records tell it."""
    algorithm, parts = checksums.recorded(pending.extra_data, pending.part_count, pending.filename)
    if algorithm is None:
        return None
    value = checksums.composite(algorithm, parts)
    return (algorithm, value) if value else None


def validate_committed(store: S3Store, pending: PendingUpload) -> bool:
    """Check one completed object; True if its checksum was verified too, False if only its size could be.

    Raises:
        OutputMismatchError: naming the object, what its manifest says and what the server has.
    """
    info = store.objects.head_object(pending.bucket, pending.destination_key, checksums=True)
    where = f"{pending.dest_uri} (upload {pending.upload_id[:10]}, {pending.part_count} part(s))"
    if info.size != pending.length:
        raise OutputMismatchError(f"{where}: the committed object has {info.size} bytes, its manifest says "
                                  f"{pending.length}")
    expected = expected_checksum(pending)
    returned = dict(info.checksums).get(expected[0]) if expected else None
    if expected is None or returned is None:
        return False
    verdict = checksums.composite_matches(expected[1], returned)
    if verdict is False:
        raise OutputMismatchError(f"{where}: the committed object's {expected[0]} checksum is {returned}, its "
                                  f"parts' recorded checksums give {expected[1]}")
    return bool(verdict)
