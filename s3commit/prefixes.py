"""Everything under a prefix: its keys, and deleting them in batches (keeping what the caller names).

``delete_prefix`` is how job directories, attempt directories and overwritten data go: one LIST, then
DeleteObjects in batches of 1,000 (the store's). A prefix ends with ``/`` (or is the bucket root), so that
``a/b`` never takes ``a/bc`` with it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator

from s3commit.store import S3Store


def keys_under(store: S3Store, bucket: str, prefix: str) -> Iterator[str]:
    """Every key under ``prefix`` (paginated LIST), in S3's order."""
    for info in store.list_objects(bucket, prefix):
        yield info.key


def delete_prefix(store: S3Store, bucket: str, prefix: str, *, keep: Collection[str] = (),
                  skip: Callable[[str], bool] | None = None) -> int:
    """Delete every object under ``prefix`` except ``keep`` (and keys ``skip`` selects), in batches.

    ``prefix`` must end with ``/`` or be ``""`` (the bucket root) so that ``a/b`` never matches ``a/bc``.
    """
    if prefix and not prefix.endswith("/"):
        raise ValueError(f"prefix {prefix!r} must end with '/'")
    doomed = (k for k in keys_under(store, bucket, prefix)
              if k not in keep and not (skip is not None and skip(k)))
    return store.delete_objects(bucket, doomed)
