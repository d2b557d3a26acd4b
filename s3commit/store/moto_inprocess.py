"""moto's in-process mock (``mock_aws``): telling when S3 is answered inside this process, and meeting it there.

``with moto.mock_aws():`` serves S3 without a server: moto adds a ``before-send`` handler, its
``BotocoreStubber``, to botocore's built-in handlers, so every botocore client made after moto was imported
hands its prepared request to that handler, which answers it from moto's backend in this process's memory
(moto rebuilds the request as a werkzeug request, ``moto.core.request.Request.from_primitives``), and no
connection is made. Headers reach moto as botocore made them: the checksum headers the store sends, the
``x-amz-checksum-*`` or ``Content-MD5`` botocore adds where an operation requires one (DeleteObjects), and the
signature of the store's signer (:mod:`s3commit.store.signing`), which moto does not check. Two things differ:

- **Bodies.** werkzeug's request builder takes a body as ``bytes``, ``str`` or a file object, and reads
  anything else as a form (a mapping of fields). The store hands botocore a part's ``bytearray`` as it is
  (:mod:`s3commit.transfer.parts`): botocore signs it and urllib3 sends it to the socket without a copy. Inside the
  mock that buffer reached werkzeug's form parser instead, and every UploadPart (and a small file's single
  PUT) failed with ``AttributeError: 'bytearray' object has no attribute 'items'``. :func:`adapt` gives the
  store's client a handler that runs before moto's and turns such a body into ``bytes``, only for a request
  that moto will answer in this process: a request that goes out on a connection keeps its buffer, so the data
  path's CPU per byte is unchanged.
- **Conditional writes.** moto checks ``If-None-Match``/``If-Match`` and then writes, with nothing between:
  requests from several threads (a job's commit pool, the capability probe's eight racing PUTs) answered here
  could both pass a check that S3 lets exactly one pass, so the probe may find the race lost now and then, and the
  commit lease come and go from one run of a suite to the next. Nothing here changes moto: a suite that wants
  its conditional writes atomic, as on S3, asks for it (``s3commit.testing.atomic_conditional_writes()``, in the
  public test API).
- **Other processes.** The mock lives in this interpreter: a Spark sidecar, a Dask worker process or a Ray
  worker made the same request to AWS itself, with moto's fake credentials. :func:`refuse_other_processes`
  says so before anything is written, and names the pytest fixtures that run moto as a server every process
  reaches.

Nothing here imports moto unless moto is already imported and its mock started: outside ``mock_aws`` each
check costs a dictionary lookup.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from s3commit.errors import ConfigError

FIXTURES = ("s3commit's pytest fixtures run moto as a server on 127.0.0.1 that every process reaches: s3commit_env "
            "(boto3's default endpoint and credentials, in this process and its children), s3commit_bucket (a new "
            "bucket) and s3commit_server (the server: endpoint_url, client()), from the s3commit pytest plugin "
            "(s3commit.testing.fixtures; s3_env, s3_bucket and s3_server where a suite loads "
            "s3commit.testing.unprefixed)")
"""What an error names instead of the in-process mock."""

BODY_HANDLER_ID = "s3commit-inprocess-bodies"
"""The unique id of the handler :func:`adapt` registers (``client.meta.events.unregister`` takes it)."""


class InProcessMockError(ConfigError):
    """What was asked needs another process, which moto's in-process mock (``mock_aws``) cannot reach."""


def _active_stubber() -> Any:
    """moto's stubber while a ``mock_aws`` is started in this process, else None (moto not even imported)."""
    models = sys.modules.get("moto.core.models")
    stubber = getattr(models, "botocore_stubber", None)
    return stubber if getattr(stubber, "enabled", False) else None


def started() -> bool:
    """Whether a ``mock_aws`` is started in this process (a dictionary lookup when moto was never imported)."""
    return _active_stubber() is not None


def _answers(url: str) -> bool:
    """Whether moto's stubber answers a request to ``url`` (else it lets the request go out on a connection):
    moto's own URL rules, read from moto (a custom endpoint such as a moto server's is not among them)."""
    try:
        from moto import backend_index
        from moto.core.config import passthrough_service, passthrough_url
        from moto.core.utils import get_equivalent_url_in_aws_domain
    except ImportError:  # a moto whose internals moved: say it answers (at worst a needless copy or refusal)
        return True
    parsed, _ = get_equivalent_url_in_aws_domain(url)
    base = f"{parsed.scheme}://{parsed.netloc}{parsed.path}"
    if passthrough_url(base):
        return False
    return any(pattern.match(base) and not passthrough_service(service)
               for service, pattern in backend_index.backend_url_patterns)


def _has_stubber(client: Any, stubber: Any) -> bool:
    """Whether ``client`` carries moto's handler: a client made before moto was imported does not (botocore
    copies its built-in handlers into each new session), unless ``moto.core.patch_client`` added it."""
    try:
        handlers = client.meta.events._emitter._handlers.prefix_search("before-send.s3")
    except AttributeError:  # botocore's private emitter changed: assume it does
        return True
    return any(handler is stubber for handler in handlers)


def answered_here(client: Any) -> bool:
    """True when moto's in-process mock answers ``client``'s S3 requests in this process (a ``mock_aws`` is
    started, the client carries moto's handler, and its endpoint is one moto takes for AWS's)."""
    stubber = _active_stubber()
    return stubber is not None and _has_stubber(client, stubber) and _answers(str(client.meta.endpoint_url))


def _body_as_bytes(request: Any, **_: Any) -> None:
    """``before-send``, ahead of moto's stubber, for a request moto answers here: a bytes-like body that is not
    ``bytes`` becomes ``bytes`` (see the module). Outside a mock it costs a dictionary lookup."""
    if _active_stubber() is None or not _answers(request.url):
        return
    if isinstance(request.body, (bytearray, memoryview)):
        request.body = bytes(request.body)


def adapt(client: Any) -> Any:
    """``client`` (a botocore S3 client, or None), made to send its bodies as moto's in-process mock reads them
    when the mock answers it; unchanged on a real connection. Idempotent. Returns the client."""
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is not None:
        events.register_first("before-send", _body_as_bytes, unique_id=BODY_HANDLER_ID)
    return client


def refuse_other_processes(what: str, client: Callable[[], Any]) -> None:
    """Raise :class:`InProcessMockError` when work done in other processes (``what`` says which, as a clause:
    "Spark's S3 work runs in its sidecars") would write through an S3 that moto's in-process mock answers only
    here. ``client`` makes the S3 client those processes resolve
    (called only while a mock is started)."""
    if not started() or not answered_here(client()):
        return
    raise InProcessMockError(
        f"{what}, and moto's in-process mock (mock_aws) answers S3 only inside the process that started it: "
        "from there the requests would go to AWS itself, with moto's fake credentials. Nothing was written. "
        f"Test this with moto as a server instead: {FIXTURES}.")

