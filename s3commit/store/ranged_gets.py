"""Ranged GETs of the data path at a third of botocore's CPU per request.

Every sequential block, random read and vectored range a JVM reads through ``s3a://`` is one ranged GET in the
sidecar (:meth:`~s3commit.store.objects.ObjectRequests.stream_object`): 128 GETs per GiB with S3A's
8 MiB blocks (about 48 since blocks grow to 32 MiB on a long sequential read). botocore spends about 2.5-2.9 ms of
CPU on each on the reference machine (validating
and serializing the call, resolving the endpoint, signing, a dozen events, parsing the answer's headers with
dateutil), all of it holding the GIL: 0.35 s per GiB read, a third of the sidecar's CPU on a read and the
first limit of a sidecar's throughput (:doc:`docs/spark.md`, "CPU per byte").

:class:`RangedGets` asks botocore once per object for a presigned GET URL (its public
``generate_presigned_url``: the same credentials, endpoint, addressing and signer as every other request), keeps
it :data:`URL_SECONDS` (it is valid for :data:`URL_EXPIRES`), and sends each range as a GET of that URL with a
``Range`` header through the client's own HTTP session (its connection pool, proxies, TLS settings and
timeouts; botocore's exceptions for failed connections): about 1 ms a request. The answer's body is botocore's
:class:`~botocore.response.StreamingBody`, as ``get_object`` returns it. An error answer becomes the
:class:`~botocore.exceptions.ClientError` botocore would raise (code and message from S3's XML error), so the
store retries and translates it as every request; a URL refused (403) after it was kept is signed afresh once.
An answer that is not the range asked for (a server ignoring ``Range``) is refused, never read as if it were.

Where this cannot hold - moto's in-process mock answers the client (no connection is made: botocore's
``before-send`` must see the request), or the client has no HTTP session to lend - the GET goes through
``get_object`` as before.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from typing import Any

from s3commit.store import moto_inprocess
from s3commit.store.lean_complete import client_error

URL_EXPIRES = 900
"""Seconds a presigned GET URL is valid for."""
URL_SECONDS = 300.0
"""Seconds a URL is used for (well inside :data:`URL_EXPIRES`, whatever the clocks)."""
URL_LIMIT = 256
"""Objects whose URL is kept at once (least recently used out)."""
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


class RangedGets:
    """Ranged GETs through a botocore S3 ``client`` (see the module); one per store, safe across threads."""

    def __init__(self, *, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._urls: OrderedDict[tuple[str, str], tuple[str, float]] = OrderedDict()

    def get(self, client: Any, bucket: str, key: str, first: int, last: int) -> dict[str, Any]:
        """Bytes ``[first, last]`` of ``s3://bucket/key``: ``{"Body": StreamingBody, "ContentLength": n}``."""
        session = getattr(getattr(client, "_endpoint", None), "http_session", None)
        if session is None or last < first or moto_inprocess.answered_here(client):  # (an empty range: S3 ignores it)
            return dict(client.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-{last}"))
        url, kept = self._url(client, bucket, key)
        response = self._send(session, url, first, last)
        if response.status_code == 403 and kept:  # signed with credentials since replaced, or a clock jump
            response.raw.release_conn()
            self._forget(bucket, key)
            url, _ = self._url(client, bucket, key)
            response = self._send(session, url, first, last)
        return _answer(response, bucket, key, first, last)

    def _send(self, session: Any, url: str, first: int, last: int) -> Any:
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method="GET", url=url, headers={"Range": f"bytes={first}-{last}"})
        request.stream_output = True  # the body stays on the connection until it is read
        return session.send(request.prepare())

    def _url(self, client: Any, bucket: str, key: str) -> tuple[str, bool]:
        """The object's presigned URL, and whether it was kept from before."""
        now = self._clock()
        with self._lock:
            found = self._urls.get((bucket, key))
            if found is not None and now - found[1] < URL_SECONDS:
                self._urls.move_to_end((bucket, key))
                return found[0], True
        url = str(client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key},
                                                ExpiresIn=URL_EXPIRES))
        with self._lock:
            self._urls[(bucket, key)] = (url, now)
            self._urls.move_to_end((bucket, key))
            while len(self._urls) > URL_LIMIT:
                self._urls.popitem(last=False)
        return url, False

    def _forget(self, bucket: str, key: str) -> None:
        with self._lock:
            self._urls.pop((bucket, key), None)


def _answer(response: Any, bucket: str, key: str, first: int, last: int) -> dict[str, Any]:
    """The GET's body if the answer is the range asked for; else the error botocore would raise."""
    from botocore.response import StreamingBody

    status, headers = response.status_code, response.headers
    if status >= 300:
        raise _error_of(response, status)
    length = int(headers.get("content-length", "-1"))
    match = _CONTENT_RANGE.match(headers.get("content-range", "").strip())
    starts = int(match.group(1)) if match else (0 if status == 200 else -1)
    if starts != first or length < 0 or (match is None and status != 200):
        response.raw.release_conn()
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "InvalidRangeAnswer", "Message": (
            f"GET of bytes {first}-{last} of s3://{bucket}/{key} was answered with status {status}, "
            f"Content-Range {headers.get('content-range')!r}: not the range asked for")},
            "ResponseMetadata": {"HTTPStatusCode": 500, "HTTPHeaders": dict(headers)}}, "GetObject")
    return {"Body": StreamingBody(response.raw, length), "ContentLength": length,
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": dict(headers)}}


def _error_of(response: Any, status: int) -> Exception:
    """The :class:`~botocore.exceptions.ClientError` of an error answer (S3's XML ``Code`` and ``Message``)."""
    try:
        text = response.raw.read(64 * 1024)
    except Exception:  # the error is the status; its text is a courtesy
        text = b""
    finally:
        response.raw.release_conn()
    return client_error(status, response.headers, text, "GetObject", missing="NoSuchKey")
