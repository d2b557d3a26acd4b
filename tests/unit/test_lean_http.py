"""s3commit.store.lean_http: HTTP/1.1 on connections of s3commit's own, against a loopback server that answers what
each test scripts (Content-Length, chunked with trailers, an interim 100, Connection: close, a cut answer, nothing
listening), and when the client's own session must send instead (a proxy); connections opened ahead of their
requests, one its server closed while idle left out, and the loop they live on (LeanLoop)."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from s3commit.config.connection import Proxy
from s3commit.config.options import StoreOptions
from s3commit.store.client import build_s3_client
from s3commit.store.lean_http import Connections, Feed, LeanLoop, Origin, Settings, Unanswered, settings_of


async def _serve(answers: list[bytes], seen: list[bytes], connections: list[int]):
    """A server that reads each request (head and Content-Length body) and writes the next scripted answer (b"":
    close the connection instead)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                seen.append(head + await reader.readexactly(length))
                answer = answers.pop(0)
                if not answer:
                    break
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    break
        except asyncio.IncompleteReadError:
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, Origin("http", "127.0.0.1", server.sockets[0].getsockname()[1])


def _exchange(answers: list[bytes], requests: int = 1):
    seen: list[bytes] = []
    opened: list[int] = []
    results: list[object] = []

    async def main() -> None:
        server, origin = await _serve(answers, seen, opened)
        connections = Connections(Settings(read_timeout=5))
        for n in range(requests):
            try:
                results.append(await connections.send(origin, f"127.0.0.1:{origin.port}", "POST", f"/b/k{n}?uploadId=u",
                                                      [("Content-Length", "4")], b"body"))
            except Unanswered as err:
                results.append(err)
        connections.close()
        server.close()
        await server.wait_closed()

    asyncio.run(main())
    return results, seen, len(opened)


def test_a_request_is_written_as_signed_and_keep_alive_connections_are_reused():
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Amz-Request-Id: r1\r\n\r\nhello"
    results, seen, opened = _exchange([ok, ok], requests=2)
    assert [(a.status, a.body, a.headers["x-amz-request-id"]) for a in results] == [(200, b"hello", "r1")] * 2
    assert seen[0].startswith(b"POST /b/k0?uploadId=u HTTP/1.1\r\nHost: 127.0.0.1:")
    assert seen[0].endswith(b"Content-Length: 4\r\n\r\nbody")
    assert opened == 1


def test_chunked_answers_with_trailers_and_an_interim_answer_are_read_whole():
    chunked = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"4;ext=1\r\n<a>x\r\n4\r\n</a>\r\n0\r\nX-Trailer: t\r\n\r\n")
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    results, _, opened = _exchange([chunked, ok], requests=2)
    assert [(a.status, a.body) for a in results] == [(200, b"<a>x</a>"), (200, b"ok")]
    assert opened == 1  # the connection was left at the next answer's first byte


def test_connection_close_and_an_answer_to_the_end_of_the_connection_open_a_new_one():
    closing = b"HTTP/1.1 503 Slow Down\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbad"
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    results, _, opened = _exchange([closing, ok], requests=2)
    assert [(a.status, a.body) for a in results] == [(503, b"bad"), (200, b"ok")]
    assert opened == 2


def test_an_answer_cut_short_is_unanswered_after_the_request_was_sent():
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nonly part"
    results, _, _ = _exchange([cut, b""], requests=1)
    assert isinstance(results[0], Unanswered) and results[0].sent


def test_nothing_listening_is_unanswered_before_anything_was_sent():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def main() -> Unanswered:
        with pytest.raises(Unanswered) as raised:
            await Connections(Settings(connect_timeout=5)).send(Origin("http", "127.0.0.1", port), "h", "GET", "/",
                                                                [], b"")
        return raised.value

    assert asyncio.run(main()).sent is False


def test_origins_and_the_clients_settings():
    assert Origin.of("https://s3.eu-west-1.amazonaws.com/bucket") == Origin("https", "s3.eu-west-1.amazonaws.com",
                                                                            443)
    assert Origin.of("http://127.0.0.1:9000") == Origin("http", "127.0.0.1", 9000)
    with pytest.raises(ValueError):
        Origin.of("ftp://x")
    plain = build_s3_client(StoreOptions(endpoint_url="http://127.0.0.1:9000", region="us-east-1", access_key="a",
                                         secret_key="b", path_style=True))
    found = settings_of(plain, "http://127.0.0.1:9000/b")
    assert found is not None and found.verify and found.read_timeout  # (botocore's CA bundle, or True)
    proxied = build_s3_client(StoreOptions(endpoint_url="http://127.0.0.1:9000", region="us-east-1", access_key="a",
                                           secret_key="b", path_style=True, proxy=Proxy("127.0.0.1", 3128)))
    assert settings_of(proxied, "http://127.0.0.1:9000/b") is None  # the client's session goes through the proxy
    assert Settings(verify=False).ssl_context().check_hostname is False


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


async def _until(condition, seconds: float = 5.0) -> None:
    """Wait (on the loop) for ``condition()`` to hold: an event of the sockets, not a time."""
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.001)


def test_connections_opened_ahead_are_the_ones_the_requests_use():
    seen: list[bytes] = []
    opened: list[int] = []
    with LeanLoop(Settings(read_timeout=5)) as lean:
        server, origin = lean.run(_serve([OK] * 6, seen, opened))
        lean.origin = origin
        connections = lean.connections
        assert connections is not None
        lean.warm(3)
        lean.warm(2)  # (fewer than asked before: nothing more)
        lean.run(_until(lambda: len(connections._idle.get(origin, [])) == 3))

        async def three() -> list[int]:
            answers = await asyncio.gather(*(connections.send(origin, "h", "GET", f"/k{n}", [], b"")
                                             for n in range(3)))
            return [answer.status for answer in answers]

        assert lean.run(three()) == [200] * 3
        assert len(opened) == connections.opened == connections.alive(origin) == 3
        lean.warm(4)  # one more, for three requests' worth already open
        lean.run(_until(lambda: connections.alive(origin) == 4 and len(connections._idle[origin]) == 4))
        assert len(seen) == 3 and connections.opened == 4
        server.close()


def test_requests_sent_while_connections_are_opened_ahead_wait_for_those_instead_of_opening_more():
    # The first wave of a commit on a loaded machine: its requests run before the connections opened for them are
    # open. Each takes one of those as it opens (none opened twice), and one that could not be opened leaves its
    # request to open its own.
    seen: list[bytes] = []
    opened: list[int] = []

    async def main() -> tuple[list[int], int, int]:
        server, origin = await _serve([OK] * 8, seen, opened)
        connections = Connections(Settings(read_timeout=5, connect_timeout=5))
        connections.warm(origin, 3)  # (not yet open when the requests below run)
        assert not connections._idle.get(origin)
        answers = await asyncio.gather(*(connections.send(origin, "h", "GET", f"/k{n}", [], b"") for n in range(4)))
        server.close()
        return [answer.status for answer in answers], connections.opened, connections.alive(origin)

    statuses, opened_by_client, alive = asyncio.run(main())
    assert statuses == [200] * 4
    assert opened_by_client == len(opened) == alive == 4  # three opened ahead, one more for the fourth request
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def refused() -> tuple[Unanswered, int, int]:
        connections = Connections(Settings(connect_timeout=5))
        origin = Origin("http", "127.0.0.1", port)
        connections.warm(origin, 1)
        with pytest.raises(Unanswered) as raised:
            await connections.send(origin, "h", "GET", "/", [], b"")
        return raised.value, connections.opened, connections.alive(origin)

    err, opened_by_client, alive = asyncio.run(refused())
    assert err.sent is False and "could not connect" in str(err) and opened_by_client == alive == 0


def test_an_idle_connection_its_server_closed_is_not_reused():
    closes: list[int] = []

    async def serve():
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            closes.append(1)
            await reader.readuntil(b"\r\n\r\n")
            writer.write(OK)  # keep-alive as far as the client knows, then closed (an idle timeout)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return server, Origin("http", "127.0.0.1", server.sockets[0].getsockname()[1])

    async def main() -> list[int]:
        server, origin = await serve()
        connections = Connections(Settings(read_timeout=5))
        first = await connections.send(origin, "h", "GET", "/a", [], b"")
        idle = connections._idle[origin][0]
        await _until(lambda: idle.ended)  # the server's FIN, seen by the loop while the connection was idle
        second = await connections.send(origin, "h", "GET", "/b", [], b"")
        alive = connections.alive(origin)
        connections.close()
        server.close()
        return [first.status, second.status, alive]

    assert asyncio.run(main()) == [200, 200, 1]
    assert len(closes) == 2  # a new connection for the second request, not a write to the closed one


def test_a_lean_loop_runs_coroutines_on_its_thread_and_ends_what_is_left_when_closed():
    lean = LeanLoop(name="s3commit-lean-test")
    started = threading.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    async def where() -> str:
        return threading.current_thread().name

    assert lean.run(where()) == "s3commit-lean-test"
    left = lean.submit(forever())
    assert started.wait(5)

    async def inside() -> None:
        with pytest.raises(RuntimeError, match="its own loop's thread"):
            lean.run(where())

    lean.run(inside())
    lean.close()
    assert left.cancelled() and not lean._thread.is_alive() and lean.loop.is_closed()
    with pytest.raises(RuntimeError, match="closed"):
        lean.submit(where())
    lean.close()  # (again: nothing)


def test_a_feed_hands_items_over_in_order_and_wakes_the_loop_only_when_it_waits():
    async def scenario() -> tuple[list[int], int]:
        loop = asyncio.get_running_loop()
        wakes = 0
        threadsafe = loop.call_soon_threadsafe

        def counted(*args: object) -> object:
            nonlocal wakes
            wakes += 1
            return threadsafe(*args)  # type: ignore[arg-type]

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        feed: Feed[int] = Feed(loop)
        # Put while the loop does not wait: taken with no wake-up.
        writer = threading.Thread(target=lambda: [feed.put(n) for n in range(1000)])
        writer.start()
        writer.join()
        got = [await feed.get() for _ in range(1000)]
        assert wakes == 0
        # The loop waits for the next one (the thread starts once get() has let go of the loop): its put wakes it,
        # once.
        later = threading.Thread(target=feed.put, args=(1000,))
        loop.call_soon(later.start)
        got.append(await feed.get())
        later.join()
        return got, wakes

    got, wakes = asyncio.run(scenario())
    assert got == list(range(1001))
    assert wakes == 1
