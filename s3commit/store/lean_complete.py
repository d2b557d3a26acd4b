"""CompleteMultipartUpload built, signed and sent by s3commit itself: the commit path's hot request at a fraction of
botocore's CPU per request (``s3commit.store.lean-requests``; on by default). The commit's other bulk requests go the
same way, signed by the same code: ListObjectsV2 pages (an overwrite lists 200 pages of 1,000 keys for 100,000 old
files, botocore's parser spending ~20 ms a page) and whole-object GETs (the job commit reads every pendingset
before its first Complete); everything else is botocore's.

A job commit of 100,000 files is one Complete per file. botocore spends about 0.76 ms of client CPU on each on the
reference machine (a dozen events, endpoint rules, validation and serialization, SigV4, parsing the answer), more
than S3's 3,500 writes a second per prefix leave (0.29 ms): the client, not S3, is then the commit's limit.
:class:`LeanCompletes` sends the same request as botocore does, with none of that per request:

- where: the bucket's endpoint (scheme, host, path-style or virtual-hosted addressing, signing region) is resolved
  once per bucket by the client's own endpoint rules, as its call of a Complete would resolve them (botocore's
  ``_resolve_endpoint_ruleset``; not a presigned URL: presigning names S3's global endpoint where a call names the
  region's); the key is percent-encoded onto it as botocore encodes it, and the upload id goes in the query;
- what: the ``<CompleteMultipartUpload>`` document of the parts (number, ETag and the part's checksum where one is
  recorded, in the order botocore writes them), ``If-None-Match: *`` when asked; no other header botocore sends for
  a Complete but the user agent;
- signed: SigV4, payload signed (a Complete's body is a few hundred bytes), the client's current credentials
  (``get_frozen_credentials``: refreshable ones refreshed as botocore would), the derived key kept per secret, day,
  region and service;
- sent through the client's HTTP session (its connection pool, proxies, TLS settings and timeouts; a failed
  connection raises botocore's own exceptions);
- answered: the ETag of ``<CompleteMultipartUploadResult>``; an error status, or S3's ``<Error>`` inside a 200 (which
  S3 sends when a Complete fails after its answer started), becomes the :class:`~botocore.exceptions.ClientError`
  botocore would raise (code, message, status; a 200's error as a 500, as botocore makes it), so the store's retry
  loop, its translation (:func:`~s3commit.errors.translate_client_error`), its counters and the adaptive limit see
  what they see of botocore's.

botocore sends the Complete instead where this does not hold, decided once per store (or per bucket, for what
only its endpoint tells): a client without an HTTP session to lend, a signer other than SigV4 (unsigned or anonymous
credentials, SigV4a of multi-region access points), a bucket whose endpoint rules name another signer or add headers
(S3 Express session auth) or cannot be resolved, and moto's in-process mock
(no connection is made: its ``before-send`` handler must see the request). The store's options set nothing else a
Complete carries (no SSE-C, no requester pays). And botocore takes over a bucket's Completes where the store refuses
one sent here for how it was built, signed or addressed (:data:`REFUSALS`: a signature it does not accept, a region
it redirects): the Complete refused is sent again by botocore, the refusal logged once.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import html
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote_plus, urlsplit
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from s3commit._version import __version__
from s3commit.model.object_info import KeyPage
from s3commit.store import moto_inprocess
from s3commit.store.client import parse_timestamp
from s3commit.store.lean_http import Settings, settings_of
from s3commit.store.signing import SIGNATURE_VERSION

log = logging.getLogger(__name__)

ALGORITHM = "AWS4-HMAC-SHA256"
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_S3_NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
_SIGNERS = ("s3v4", "v4", SIGNATURE_VERSION)
"""The client's signature versions that are plain SigV4 (what this module signs)."""
_KEYS_KEPT = 16
_PLAIN_KEY = re.compile(r"[A-Za-z0-9/_.~-]*")
"""A key that percent-encoding leaves as it is (``quote(key, safe="/~")``): most are, and quoting costs per byte."""
_PLAIN_ID = re.compile(r"[A-Za-z0-9_.~-]*")
_RESULT_ETAG = re.compile(rb'\s*(?:<\?xml [^>]*\?>\s*)?<CompleteMultipartUploadResult[\s>][^<]*'
                          rb'(?:<(?!ETag>)[A-Za-z0-9]+>[^<]*</[A-Za-z0-9]+>\s*)*<ETag>((?:[^<&]|&quot;)*)</ETag>')
"""A Complete's answer as S3 writes it: the declaration, the result's root (no prefix), elements of text before
its ``ETag``, and an ETag whose only entity is ``&quot;``. Any other answer is read by ElementTree."""
REFUSALS = frozenset({"SignatureDoesNotMatch", "IncompleteSignature", "AuthorizationHeaderMalformed",
                      "XAmzContentSHA256Mismatch", "MalformedXML", "PermanentRedirect", "TemporaryRedirect",
                      "301", "307"})
"""What a store answers a request it did not act on because of how the request was built, signed or addressed.
Where a Complete sent here gets one of these, botocore sends that Complete again, and every later one of the
bucket (:meth:`LeanCompletes.refused`): its own signer, its region redirects. A store that refuses botocore's
request too then says so through botocore's answer."""


_LIST_QUERY = {"Delimiter": "delimiter", "ContinuationToken": "continuation-token", "StartAfter": "start-after"}
"""A listing's arguments as botocore names them, and the query's names for them."""


class Target:
    """Where a bucket's Completes go and how they are signed: ``base`` (``scheme://host[/bucket]``), the ``host``
    signed (no default port), the signing ``region`` and ``service``."""

    __slots__ = ("base", "host", "path", "region", "service")

    def __init__(self, base: str, host: str, region: str, service: str) -> None:
        self.base, self.host, self.region, self.service = base, host, region, service
        self.path = urlsplit(base).path


def target_of(endpoint_url: str, headers: dict[str, Any], properties: dict[str, Any], region: str | None
              ) -> Target | None:
    """The :class:`Target` of what botocore's endpoint rules resolved for a Complete (the endpoint URL, the headers
    and properties they add, the client's region), or None where it is not plain SigV4 for ``s3`` without extra
    headers or properties (S3 Express's session auth and backend, SigV4a): botocore's then."""
    schemes = properties.get("authSchemes") or [{}]
    scheme = schemes[0]
    if headers or set(properties) - {"authSchemes"} or scheme.get("name", "sigv4") != "sigv4" \
            or scheme.get("signingName", "s3") != "s3":
        return None
    region = scheme.get("signingRegion") or region
    split = urlsplit(endpoint_url)
    if not region or split.scheme not in ("http", "https") or split.query or split.fragment:
        return None
    host = split.netloc.rsplit("@", 1)[-1]
    default = {"http": ":80", "https": ":443"}[split.scheme]
    if host.endswith(default):
        host = host[: -len(default)]
    return Target(endpoint_url.rstrip("/"), host, region, "s3")


def complete_body(parts: Sequence[dict[str, Any]]) -> bytes:
    """The ``<CompleteMultipartUpload>`` document of ``parts`` (``complete_parts``' dicts), as botocore writes it."""
    inner = "".join("<Part>" + "".join(f"<{name}>{escape(str(value))}</{name}>" for name, value in part.items())
                    + "</Part>" for part in parts)
    return f'<CompleteMultipartUpload xmlns="{_S3_NAMESPACE}">{inner}</CompleteMultipartUpload>'.encode()


def delete_body(objects: Sequence[tuple[str, str]]) -> bytes:
    """The quiet ``<Delete>`` document of ``(key, etag)`` pairs (no ``ETag`` element for ``""``), as botocore writes
    it."""
    inner = "".join(f"<Object><Key>{escape(key)}</Key>" + (f"<ETag>{escape(etag)}</ETag>" if etag else "")
                    + "</Object>" for key, etag in objects)
    return f'<Delete xmlns="{_S3_NAMESPACE}">{inner}<Quiet>true</Quiet></Delete>'.encode()


class Prepared:
    """One Complete, built and signed: its :class:`Target`, the path and query (``target.path`` included), the
    headers in the order sent (``Host`` is the transport's: ``target.host``), and the body."""

    __slots__ = ("body", "headers", "path_query", "target")

    def __init__(self, target: Target, path_query: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.target, self.path_query, self.headers, self.body = target, path_query, headers, body

    @property
    def url(self) -> str:
        return f"{self.target.base}{self.path_query[len(self.target.path):]}"


class RefusedBefore(Exception):
    """The store refused this module's requests to the bucket (:meth:`LeanCompletes.refused`) after the caller
    asked :meth:`LeanCompletes.usable`: nothing was sent; botocore sends it."""


class LeanCompletes:
    """Completes sent by s3commit (see the module); one per store, safe across threads. ``clock``: seconds since
    the epoch (the signature's time)."""

    def __init__(self, *, clock: Any = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._client: Any = None
        self._usable: bool | None = None
        self._targets: dict[str, Target | None] = {}
        self._refused: set[str] = set()
        self._keys: dict[tuple[str, str, str, str], bytes] = {}
        self.user_agent = f"s3commit/{__version__} lean"

    def usable(self, client: Any, bucket: str) -> bool:
        """Whether this module sends ``client``'s Completes to ``bucket`` (else botocore does)."""
        if self._client is not client:  # decided once per client (a store has one)
            self._client, self._usable = client, _client_usable(client)
        if not self._usable or moto_inprocess.answered_here(client):
            return False
        return self._target(client, bucket) is not None

    def refused(self, bucket: str, error: BaseException) -> bool:
        """Whether ``error`` (an attempt's, sent here) is one of :data:`REFUSALS`; if so, botocore sends the
        bucket's Completes from now on (:meth:`usable` says no), and the first says so in the log."""
        if isinstance(error, RefusedBefore):
            return True
        response = getattr(error, "response", None)
        code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
        if code not in REFUSALS:
            return False
        with self._lock:
            first = bucket not in self._refused
            self._refused.add(bucket)
            self._targets[bucket] = None
        if first:
            log.warning("s3://%s: the store refused a request built by s3commit's lean path (%s: %s); botocore "
                        "sends this bucket's requests from now on (s3commit.store.lean-requests)", bucket,
                        code, response.get("Error", {}).get("Message", ""))  # type: ignore[union-attr]
        return True

    def attempt(self, bucket: str, sent_here: Callable[[], Any], by_botocore: Callable[[], Any]) -> Any:
        """One attempt of a request: ``sent_here()`` (built and signed by this module); where the store refuses it
        (:meth:`refused`: then every later one of the bucket too), ``by_botocore()``."""
        try:
            return sent_here()
        except Exception as err:  # (refused: this attempt, or another's since, RefusedBefore)
            if not self.refused(bucket, err):
                raise
        return by_botocore()

    def was_refused(self, bucket: str) -> bool:
        """Whether the store refused what this module sent to ``bucket`` (:meth:`refused`)."""
        return bucket in self._refused

    def own_connections(self, client: Any, bucket: str) -> tuple[Target, Settings] | None:
        """Where ``bucket``'s requests may go on connections of s3commit's own (:mod:`s3commit.store.lean_http`):
        their :class:`Target` and the client's connection settings; None where this module does not serve the bucket
        (see :meth:`usable`), the store refused what it sent, or the endpoint is not plain HTTP(S)."""
        if not self.usable(client, bucket) or self.was_refused(bucket):
            return None
        target = self.target(bucket)
        settings = settings_of(client, target.base) if target is not None else None
        return (target, settings) if target is not None and settings is not None else None

    def target(self, bucket: str) -> Target | None:
        """Where ``bucket``'s Completes go, once :meth:`usable` said yes for it (else None)."""
        return self._targets.get(bucket)

    def _target(self, client: Any, bucket: str) -> Target | None:
        try:
            return self._targets[bucket]
        except KeyError:
            pass
        try:  # botocore's endpoint rules, as its call would resolve them (once per bucket)
            url, headers, properties = client._resolve_endpoint_ruleset(
                client.meta.service_model.operation_model("CompleteMultipartUpload"),
                {"Bucket": bucket, "Key": "k", "UploadId": "u", "MultipartUpload": {"Parts": []}},
                {"client_config": client.meta.config})
            found = target_of(str(url), dict(headers or {}), dict(properties or {}), client.meta.region_name)
        except Exception:  # rules botocore would refuse (an ARN it cannot route...): botocore's, to say why
            found = None
        with self._lock:
            self._targets[bucket] = found
        return found

    def complete(self, client: Any, bucket: str, key: str, upload_id: str, parts: Sequence[dict[str, Any]], *,
                 if_none_match: bool = False) -> dict[str, Any]:
        """One attempt of the Complete (call :meth:`usable` first): ``{"ETag": ...}`` as botocore answers, or
        botocore's ``ClientError`` or connection error."""
        from botocore.awsrequest import AWSPreparedRequest, HeadersDict

        request = self.prepare(client, bucket, key, upload_id, parts, if_none_match=if_none_match)
        headers = HeadersDict()
        for name, value in request.headers:
            headers[name] = value
        prepared = AWSPreparedRequest("POST", request.url, headers, request.body, False)
        response = client._endpoint.http_session.send(prepared)
        return answer_of(response.status_code, response.headers, _content(response, request.url))

    def prepare(self, client: Any, bucket: str, key: str, upload_id: str, parts: Sequence[dict[str, Any]], *,
                if_none_match: bool = False) -> Prepared:
        """The Complete's request, built and signed (call :meth:`usable` first): what :meth:`complete` sends through
        the client's session, and :mod:`s3commit.store.lean_http` on connections of its own."""
        target = self._targets[bucket]
        if target is None:  # refused since the caller asked usable() (another thread's answer)
            raise RefusedBefore(bucket)
        query = "uploadId=" + (upload_id if _PLAIN_ID.fullmatch(upload_id) else quote(upload_id, safe="-_.~"))
        return self._signed(client, target, "POST", f"{target.path}/{_quoted_key(key)}", query,
                            complete_body(parts), [("If-None-Match", "*")] if if_none_match else [])

    def list_page(self, client: Any, bucket: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """One attempt of one ListObjectsV2 page of botocore's ``args`` (``Prefix``, ``Delimiter``,
        ``ContinuationToken``, ``StartAfter``; call :meth:`usable` first), as botocore answers it after its
        handlers (``encoding-type=url`` asked, the keys and prefixes decoded where the answer says it encoded
        them): ``Contents`` (``Key``, ``Size``, ``ETag``, ``LastModified``), ``CommonPrefixes``, ``IsTruncated``,
        ``NextContinuationToken``; or botocore's ``ClientError`` or connection error. A page of 1,000 keys costs a
        tenth of botocore's CPU (its parser builds every element of the model's shapes, then checks the whole
        document again for an error inside a 200), which an overwrite's listing spends beside its Completes."""
        response, url = self._list_response(client, bucket, args)
        return listing_of(response.status_code, response.headers, _content(response, url))

    def _list_response(self, client: Any, bucket: str, args: Mapping[str, Any]) -> tuple[Any, str]:
        """A ListObjectsV2 page's request (``encoding-type=url`` asked), sent: the response and its URL."""
        from botocore.awsrequest import AWSPreparedRequest, HeadersDict

        target = self._targets[bucket]
        if target is None:
            raise RefusedBefore(bucket)
        query = {"list-type": "2", "prefix": str(args.get("Prefix", "")), "encoding-type": "url"}
        query.update((_LIST_QUERY[name], str(value)) for name, value in args.items() if name in _LIST_QUERY and value)
        canonical = "&".join(f"{name}={quote(value, safe='-_.~')}" for name, value in sorted(query.items()))
        request = self._signed(client, target, "GET", target.path or "/", canonical, b"", [])
        headers = HeadersDict()
        for name, value in request.headers:
            headers[name] = value
        response = client._endpoint.http_session.send(AWSPreparedRequest("GET", request.url, headers, None, False))
        return response, request.url

    def list_keys_page(self, client: Any, bucket: str, args: Mapping[str, Any]) -> KeyPage:
        """:meth:`list_page` as its keys and ETags (:func:`key_page_of`): what an overwrite's listing of the old
        files reads, at half the CPU of the page as botocore answers it."""
        response, url = self._list_response(client, bucket, args)
        return key_page_of(response.status_code, response.headers, _content(response, url))

    def delete_objects(self, client: Any, bucket: str, objects: Sequence[tuple[str, str]]) -> dict[str, Any]:
        """One attempt of a quiet DeleteObjects of ``(key, etag)`` pairs (an ETag of ``""``: whatever the key holds;
        call :meth:`usable` first), as botocore answers it: ``Errors`` (``Key``, ``Code``, ``Message``), or botocore's
        ``ClientError`` or connection error. Its body's ``Content-MD5``, as S3 asks of a DeleteObjects. A batch of
        1,000 keys at a tenth of botocore's CPU (its serializer walks the model's shapes per key): an overwrite of
        100,000 old files sends 100."""
        from botocore.awsrequest import AWSPreparedRequest, HeadersDict

        target = self._targets[bucket]
        if target is None:
            raise RefusedBefore(bucket)
        body = delete_body(objects)
        digest = base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode()
        request = self._signed(client, target, "POST", target.path or "/", "delete=", body,
                               [("Content-MD5", digest)])
        headers = HeadersDict()
        for name, value in request.headers:
            headers[name] = value
        response = client._endpoint.http_session.send(
            AWSPreparedRequest("POST", request.url, headers, request.body, False))
        return deleted_of(response.status_code, response.headers, _content(response, request.url))

    def get_object(self, client: Any, bucket: str, key: str) -> bytes:
        """One attempt of a whole object's GET (call :meth:`usable` first): its bytes, all of them (a body shorter
        than its ``Content-Length`` raises botocore's ``IncompleteReadError``, as its streaming body does), or
        botocore's ``ClientError`` or connection error. A pendingset's GET at a quarter of botocore's CPU: a job
        commit reads every pendingset before its first Complete."""
        from botocore.awsrequest import AWSPreparedRequest, HeadersDict

        request = self.prepare_get(client, bucket, key)
        headers = HeadersDict()
        for name, value in request.headers:
            headers[name] = value
        response = client._endpoint.http_session.send(AWSPreparedRequest("GET", request.url, headers, None, False))
        return object_of(response.status_code, response.headers, _content(response, request.url))

    def prepare_get(self, client: Any, bucket: str, key: str) -> Prepared:
        """A whole object's GET, built and signed (call :meth:`usable` first): what :meth:`get_object` sends
        through the client's session, and :mod:`s3commit.store.lean_http` on connections of its own."""
        target = self._targets[bucket]
        if target is None:
            raise RefusedBefore(bucket)
        return self._signed(client, target, "GET", f"{target.path}/{_quoted_key(key)}", "", b"", [])

    def _signed(self, client: Any, target: Target, method: str, path: str, query: str, body: bytes,
                first: list[tuple[str, str]]) -> Prepared:
        """A request to ``target`` signed by SigV4 (payload signed) with the client's current credentials:
        ``path`` and ``query`` as sent (percent-encoded; the query's names in order), ``first``: headers sent and
        signed before the rest (lower-cased when signed)."""
        credentials = client._request_signer._credentials.get_frozen_credentials()
        payload = hashlib.sha256(body).hexdigest() if body else _EMPTY_SHA256
        now = time.gmtime(self._clock())
        stamp = time.strftime("%Y%m%dT%H%M%SZ", now)
        day = stamp[:8]
        signed = {"host": target.host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
        signed.update((name.lower(), value) for name, value in first)
        if credentials.token:
            signed["x-amz-security-token"] = credentials.token
        names = sorted(signed)
        signed_names = ";".join(names)
        canonical = (f"{method}\n{path}\n{query}\n" + "".join(f"{n}:{signed[n]}\n" for n in names)
                     + f"\n{signed_names}\n{payload}")
        scope = f"{day}/{target.region}/{target.service}/aws4_request"
        to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(self._key(credentials.secret_key, day, target.region, target.service),
                             to_sign.encode(), hashlib.sha256).hexdigest()
        headers = list(first)
        headers += [("User-Agent", self.user_agent), ("X-Amz-Date", stamp), ("X-Amz-Content-SHA256", payload)]
        if credentials.token:
            headers.append(("X-Amz-Security-Token", credentials.token))
        headers.append(("Authorization", f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
                                         f"SignedHeaders={signed_names}, Signature={signature}"))
        if body:
            headers.append(("Content-Length", str(len(body))))
        return Prepared(target, f"{path}?{query}" if query else path, headers, body)

    def _key(self, secret: str, day: str, region: str, service: str) -> bytes:
        """SigV4's derived signing key, kept per (secret, day, region, service)."""
        found = self._keys.get((secret, day, region, service))
        if found is None:
            found = _hmac(f"AWS4{secret}".encode(), day)
            for part in (region, service, "aws4_request"):
                found = _hmac(found, part)
            with self._lock:
                if len(self._keys) >= _KEYS_KEPT:
                    self._keys.clear()
                self._keys[(secret, day, region, service)] = found
        return found


def _content(response: Any, url: str) -> bytes:
    """An answer's whole body; a connection that fails while it is read raises botocore's error for it, as its
    streaming body does (a read timeout, or ``ResponseStreamingError``): transient, so the request is retried."""
    from botocore.exceptions import ReadTimeoutError, ResponseStreamingError
    from urllib3.exceptions import HTTPError
    from urllib3.exceptions import ReadTimeoutError as ReadTimedOut

    try:
        return bytes(response.content)
    except ReadTimedOut as err:
        raise ReadTimeoutError(endpoint_url=url, error=err) from err
    except HTTPError as err:  # (urllib3's: a reset, a body cut short, a protocol error)
        raise ResponseStreamingError(error=err) from err


def _quoted_key(key: str) -> str:
    """``quote(key, safe="/~")``, as botocore encodes a key into the path: a key's directory is quoted once (the
    files of a job share a few: ``day=1/``), its name only where it is not plain."""
    folder, slash, name = key.rpartition("/")
    return (_quoted_folder(folder) + slash if slash else "") + (
        name if _PLAIN_KEY.fullmatch(name) else quote(name, safe="/~"))


@functools.lru_cache(maxsize=4096)
def _quoted_folder(folder: str) -> str:
    return quote(folder, safe="/~")


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _client_usable(client: Any) -> bool:
    """Whether a client's Completes can be sent here at all: an HTTP session to lend, plain SigV4, credentials."""
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    signer = getattr(client, "_request_signer", None)
    if session is None or signer is None or getattr(signer, "_credentials", None) is None:
        return False
    version = getattr(client.meta.config, "signature_version", None) or "s3v4"
    return isinstance(version, str) and version in _SIGNERS


def answer_of(status: int, headers: Any, body: bytes) -> dict[str, Any]:
    """A Complete's answer as botocore returns it (``ETag``, ``ResponseMetadata``), or the ``ClientError`` botocore
    raises for it (an ``<Error>`` in a 200 as a 500, as botocore's ``_handle_200_error`` makes it)."""
    if status < 300:
        found = _RESULT_ETAG.match(body)
        if found is not None:  # (most answers: what ElementTree would read, at a tenth of its CPU)
            return {"ETag": found.group(1).replace(b"&quot;", b'"').decode(),
                    "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers}}
    root = _document(body)
    if status < 300 and _root_tag(root) == "CompleteMultipartUploadResult":  # (the answer's headers as they are)
        assert root is not None
        return {"ETag": (root.findtext(f"{{{_S3_NAMESPACE}}}ETag") or root.findtext("ETag") or ""),
                "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers}}
    raise client_error(status, headers, body, "CompleteMultipartUpload", expected="CompleteMultipartUploadResult")


def deleted_of(status: int, headers: Any, body: bytes) -> dict[str, Any]:
    """A DeleteObjects' answer as botocore returns it (``Errors``, ``Deleted``, ``ResponseMetadata``), or the
    ``ClientError`` botocore raises for it (an ``<Error>`` document in a 200 as a 500)."""
    root = _document(body)
    if status >= 300 or _root_tag(root) != "DeleteResult":
        raise client_error(status, headers, body, "DeleteObjects", expected="DeleteResult")
    assert root is not None
    found: dict[str, list[dict[str, str]]] = {"Errors": [], "Deleted": []}
    for element in root:
        tag = element.tag.rpartition("}")[2]
        if tag in ("Error", "Deleted"):
            found["Errors" if tag == "Error" else "Deleted"].append(
                {field.tag.rpartition("}")[2]: field.text or "" for field in element})
    page: dict[str, Any] = {name: found[name] for name in found if found[name]}
    page["ResponseMetadata"] = {"HTTPStatusCode": status, "HTTPHeaders": headers}
    return page


def object_of(status: int, headers: Any, body: bytes) -> bytes:
    """A whole object's GET answer as botocore answers it: its bytes, all of them (a body shorter than its
    ``Content-Length`` raises botocore's ``IncompleteReadError``, as its streaming body does), or botocore's
    ``ClientError`` (``NoSuchKey`` for a 404 without a body)."""
    from botocore.exceptions import IncompleteReadError

    if status >= 300:
        raise client_error(status, headers, body, "GetObject", missing="NoSuchKey")
    expected = headers.get("content-length")
    if expected is not None and expected.isdigit() and int(expected) != len(body):
        raise IncompleteReadError(actual_bytes=len(body), expected_bytes=int(expected))
    return bytes(body)


def listing_of(status: int, headers: Any, body: bytes) -> dict[str, Any]:
    """A ListObjectsV2 page as botocore returns it after its handlers (see :meth:`LeanCompletes.list_page`), or the
    ``ClientError`` botocore raises for the answer."""
    if status < 300:
        page = _listing_as_s3_writes_it(body)
        if page is not None:
            page["ResponseMetadata"] = {"HTTPStatusCode": status, "HTTPHeaders": headers}
            return page
    return _listing_read(status, headers, body)


def _listing_read(status: int, headers: Any, body: bytes) -> dict[str, Any]:
    """:func:`listing_of` by ElementTree: any document."""
    root = _document(body)
    if status >= 300 or _root_tag(root) != "ListBucketResult":
        raise client_error(status, headers, body, "ListObjectsV2", expected="ListBucketResult")
    assert root is not None
    found: dict[str, Any] = {}
    contents: list[dict[str, Any]] = []
    prefixes: list[dict[str, str]] = []
    for element in root:
        tag = element.tag.rpartition("}")[2]
        if tag == "Contents":
            entry: dict[str, Any] = {}
            for field in element:
                name = field.tag.rpartition("}")[2]
                if name in _OBJECT_FIELDS:
                    entry[name] = _OBJECT_FIELDS[name](field.text or "")
            contents.append(entry)
        elif tag == "CommonPrefixes":
            prefixes.append({"Prefix": element.findtext(f"{{{_S3_NAMESPACE}}}Prefix")
                             or element.findtext("Prefix") or ""})
        elif tag in ("IsTruncated", "NextContinuationToken", "EncodingType"):
            found[tag] = element.text or ""
    if found.get("EncodingType") == "url":  # as botocore's decode_list_object_v2 decodes them
        for entry in contents:
            if "Key" in entry:
                entry["Key"] = unquote_plus(entry["Key"])
        for common in prefixes:
            common["Prefix"] = unquote_plus(common["Prefix"])
    page: dict[str, Any] = {"IsTruncated": found.get("IsTruncated") == "true",
                            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers}}
    if "NextContinuationToken" in found:
        page["NextContinuationToken"] = found["NextContinuationToken"]
    if contents:
        page["Contents"] = contents
    if prefixes:
        page["CommonPrefixes"] = prefixes
    return page


_LISTING_ROOT = re.compile(r"\s*(?:<\?xml [^>]*\?>\s*)?<ListBucketResult[\s>]")
_LISTED = re.compile(r"<Contents><Key>([^<]*)</Key><LastModified>([^<]*)</LastModified><ETag>([^<]*)</ETag>"
                     r"(?:<(Checksum[A-Za-z]*)>[^<]*</\4>)*<Size>([0-9]+)</Size>")
_LISTED_PREFIX = re.compile(r"<CommonPrefixes><Prefix>([^<]*)</Prefix></CommonPrefixes>")
_LISTING_FIELD = re.compile(r"<(IsTruncated|NextContinuationToken|EncodingType)>([^<]*)</\1>")


def _listing_as_s3_writes_it(body: bytes) -> dict[str, Any] | None:
    """A listing's page read by patterns where it is written as S3 writes one (:func:`_scanned`): a third of
    ElementTree's CPU, which a listing of 100,000 old files spends beside the Completes. None for any other document
    (ElementTree reads it)."""
    scanned = _scanned(body)
    if scanned is None:
        return None
    listed, prefixes, found, decoded = scanned
    contents = [{"Key": _listed_text(key, decoded), "LastModified": parse_timestamp(modified),
                 "ETag": _listed_text(etag, False), "Size": int(size)} for key, modified, etag, _, size in listed]
    page: dict[str, Any] = {"IsTruncated": found.get("IsTruncated") == "true"}
    if "NextContinuationToken" in found:
        page["NextContinuationToken"] = _listed_text(found["NextContinuationToken"], False)
    if contents:
        page["Contents"] = contents
    if prefixes:
        page["CommonPrefixes"] = [{"Prefix": _listed_text(prefix, decoded)} for prefix in prefixes]
    return page


def key_page_of(status: int, headers: Any, body: bytes) -> KeyPage:
    """A ListObjectsV2 page (no delimiter asked) as its keys and ETags (see :meth:`LeanCompletes.list_keys_page`),
    or the ``ClientError`` botocore raises for the answer. Where it is written as S3 writes one, no entry becomes
    an object (:func:`listing_of` makes a dictionary and a timestamp each: twice the CPU)."""
    scanned = _scanned(body) if status < 300 else None
    if scanned is None:
        return key_page_from(_listing_read(status, headers, body))
    listed, _, found, decoded = scanned
    keys = [_listed_text(key, decoded) if "&" in key or "%" in key or "+" in key else key
            for key, _, _, _, _ in listed]
    etags = [_listed_text(etag, False) if "&" in etag else etag for _, _, etag, _, _ in listed]
    token = found.get("NextContinuationToken") if found.get("IsTruncated") == "true" else None
    return KeyPage(keys, etags, None if token is None else _listed_text(token, False))


def key_page_from(page: Mapping[str, Any]) -> KeyPage:
    """A ListObjectsV2 page as botocore answers it, as its keys and ETags."""
    contents = page.get("Contents") or []
    return KeyPage([str(entry["Key"]) for entry in contents], [str(entry.get("ETag", "")) for entry in contents],
                   page.get("NextContinuationToken") if page.get("IsTruncated") else None)


def _scanned(body: bytes) -> tuple[list[tuple[str, ...]], list[str], dict[str, str], bool] | None:
    """A listing's page read by patterns, where it is written as S3 writes one (no whitespace between elements,
    each entry's ``Key``, ``LastModified``, ``ETag``, checksum fields and ``Size`` in that order, no comment, CDATA
    or carriage return): its entries' fields (key, modified, ETag, a checksum's name, size; texts as written),
    common prefixes, the page's own fields, and whether its keys are URL-encoded. None for any other document:
    every entry must match, counted by its tags."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return None
    if not _LISTING_ROOT.match(text) or "<!" in text or "\r" in text:
        return None
    text = text.replace("&quot;", '"')  # (an ETag's quotes; "&amp;quot;" holds no "&quot;")
    listed = _LISTED.findall(text)
    prefixes = _LISTED_PREFIX.findall(text)
    if text.count("Contents>") != 2 * len(listed) or text.count("CommonPrefixes>") != 2 * len(prefixes):
        return None
    found = dict(_LISTING_FIELD.findall(text))
    return listed, prefixes, found, found.get("EncodingType") == "url"  # (decoded as botocore's handler does)


def _listed_text(text: str, decoded: bool) -> str:
    """An element's text as ElementTree reads it (entities resolved), URL-decoded where the listing encoded it."""
    if "&" in text:
        text = html.unescape(text)
    return unquote_plus(text) if decoded and ("%" in text or "+" in text) else text


_OBJECT_FIELDS: dict[str, Callable[[str], Any]] = {"Key": str, "Size": int, "ETag": str,
                                                   "LastModified": parse_timestamp}
"""What a listing's entry carries that s3commit reads, and how each is read (as botocore's parser reads it)."""


def _document(body: bytes) -> ElementTree.Element | None:
    text = body.strip()
    try:
        return ElementTree.fromstring(text) if text else None
    except ElementTree.ParseError:
        return None


def _root_tag(root: ElementTree.Element | None) -> str:
    return root.tag.rsplit("}", 1)[-1] if root is not None else ""


def client_error(status: int, headers: Any, body: bytes, operation: str, *, expected: str = "",
                 missing: str = "") -> Exception:
    """The ``ClientError`` botocore raises for an answer to ``operation`` that is an error, or is not ``<expected>``
    (an ``<Error>`` in a 200 as a 500, as botocore's ``_handle_200_error`` makes it); ``missing``: the code of a 404
    without a document (a GET's ``NoSuchKey``)."""
    from botocore.exceptions import ClientError

    root, text = _document(body), body.strip()
    tag = _root_tag(root)
    heads = {str(name).lower(): str(value) for name, value in headers.items()}
    metadata = {"HTTPStatusCode": status, "HTTPHeaders": heads, "RequestId": heads.get("x-amz-request-id", ""),
                "HostId": heads.get("x-amz-id-2", ""), "RetryAttempts": 0}
    if status < 300:  # an <Error> (or nothing S3 sends) in a 200: botocore makes it a 500
        metadata["HTTPStatusCode"] = status = 500
    code, message = str(status), ""
    if root is not None and tag == "Error":
        code = (root.findtext("Code") or code).strip()
        message = (root.findtext("Message") or "").strip()
    elif status == 404 and missing:
        code = missing
    elif root is None and text:
        code, message = "MalformedAnswer", f"an answer that is not XML: {text[:200]!r}"
    elif tag:
        code, message = "MalformedAnswer", f"an answer of <{tag}>, not {expected or 'an error'}"
    return ClientError({"Error": {"Code": code, "Message": message or f"HTTP {status}"},
                        "ResponseMetadata": metadata}, operation)
