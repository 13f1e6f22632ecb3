"""The web policy's concurrency=: a request holds its unit until its response
ends, streaming included; a client that goes away gives it back."""

import asyncio

import pytest

import cellrate
import cellrate.asgi
import cellrate.wsgi

# ---------------------------------------------------------------------------
# ASGI, driven by hand: the app streams two chunks, the test says when


def scope(client="203.0.113.9"):
    return {"type": "http", "method": "GET", "path": "/stream", "headers": [],
            "client": (client, 5555), "server": ("testserver", 80), "scheme": "http",
            "query_string": b"", "root_path": ""}


def streaming_app(go_on):
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await go_on.wait()
        await send({"type": "http.response.body", "body": b"last"})
        await asyncio.sleep(0)  # the app still runs after its last message

    return app


async def no_request_body():
    return {"type": "http.request", "body": b"", "more_body": False}


def test_asgi_streaming_response_holds_its_slot_until_the_last_chunk():
    async def main():
        go_on = asyncio.Event()
        concurrency = cellrate.Concurrency(1, capacity=16)
        app = cellrate.asgi.RateLimitMiddleware(streaming_app(go_on), concurrency=concurrency)
        first_sent, sent = asyncio.Event(), []

        async def send(message):
            sent.append(message)
            if message.get("more_body"):
                first_sent.set()

        task = asyncio.ensure_future(app(scope(), no_request_body, send))
        await first_sent.wait()
        assert concurrency.in_flight("203.0.113.9") == 1  # mid-stream: held

        refused = []

        async def send_refused(message):
            refused.append(message)

        await app(scope(), no_request_body, send_refused)
        assert refused[0]["status"] == 429
        assert b"in flight" in refused[1]["body"]
        other = []

        async def send_other(message):
            other.append(message)

        go_on_other = asyncio.Event()
        go_on_other.set()
        other_app = cellrate.asgi.RateLimitMiddleware(streaming_app(go_on_other),
                                                      concurrency=concurrency)
        await other_app(scope("198.51.100.7"), no_request_body, send_other)
        assert other[0]["status"] == 200  # another client has its own limit

        go_on.set()
        while not sent or sent[-1].get("body") != b"last":
            await asyncio.sleep(0)
        assert concurrency.in_flight("203.0.113.9") == 0  # released at the last chunk
        await task
        assert concurrency.in_flight("203.0.113.9") == 0

    asyncio.run(main())


def test_asgi_client_that_disconnects_releases_its_slot():
    async def main():
        concurrency = cellrate.Concurrency(1)
        started = asyncio.Event()

        async def app(scope, receive, send):
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"part", "more_body": True})
            started.set()
            message = await receive()  # the client goes away mid-stream
            assert message["type"] == "http.disconnect"

        gone = asyncio.Event()

        async def receive():
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            pass

        middleware = cellrate.asgi.RateLimitMiddleware(app, concurrency=concurrency)
        task = asyncio.ensure_future(middleware(scope(), receive, send))
        await started.wait()
        assert concurrency.in_flight() == 1
        gone.set()
        await task
        assert concurrency.in_flight() == 0

    asyncio.run(main())


def test_asgi_rate_refusal_releases_the_slot():
    async def main():
        concurrency = cellrate.Concurrency(1)
        go_on = asyncio.Event()
        go_on.set()
        app = cellrate.asgi.RateLimitMiddleware(streaming_app(go_on), "1/hour",
                                                concurrency=concurrency)
        statuses = []

        async def send(message):
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await app(scope(), no_request_body, send)
        await app(scope(), no_request_body, send)  # refused by the rate
        assert statuses == [200, 429]
        assert concurrency.in_flight() == 0

    asyncio.run(main())


# ---------------------------------------------------------------------------
# WSGI: held until the server closes the response iterable


def environ(client="203.0.113.9"):
    return {"REQUEST_METHOD": "GET", "PATH_INFO": "/stream", "SCRIPT_NAME": "",
            "REMOTE_ADDR": client, "wsgi.url_scheme": "http"}


def wsgi_streaming_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])

    def chunks():
        yield b"first"
        yield b"last"

    return chunks()


def test_wsgi_holds_until_the_iterable_is_closed():
    app = cellrate.wsgi.RateLimitMiddleware(wsgi_streaming_app, concurrency=1)
    statuses = []

    def start_response(status, headers, exc_info=None):
        statuses.append(status)

    body = app(environ(), start_response)
    chunks = iter(body)
    assert next(chunks) == b"first"
    assert app.policy.concurrency.in_flight("203.0.113.9") == 1
    refused = app(environ(), start_response)
    assert statuses == ["200 OK", "429 Too Many Requests"]
    assert b"in flight" in b"".join(refused)
    assert list(chunks) == [b"last"]
    assert app.policy.concurrency.in_flight("203.0.113.9") == 1  # iterated, not yet closed
    body.close()
    assert app.policy.concurrency.in_flight("203.0.113.9") == 0
    again = app(environ(), start_response)
    assert statuses[-1] == "200 OK"
    again.close()


def test_wsgi_app_that_raises_releases():
    def broken(environ, start_response):
        raise RuntimeError("boom")

    app = cellrate.wsgi.RateLimitMiddleware(broken, concurrency=1)
    with pytest.raises(RuntimeError):
        app(environ(), lambda *args: None)
    assert app.policy.concurrency.in_flight("203.0.113.9") == 0


def test_concurrency_bad_input():
    with pytest.raises(cellrate.InvalidArgument) as e:
        cellrate.wsgi.RateLimitMiddleware(wsgi_streaming_app, concurrency=0)
    assert e.value.param == "concurrency"
    assert "concurrency: limit must be an integer >= 1" in str(e.value)
    with pytest.raises(cellrate.InvalidArgumentType) as e:
        cellrate.wsgi.RateLimitMiddleware(wsgi_streaming_app, concurrency="10")
    assert e.value.param == "concurrency"


def test_concurrency_in_a_shared_namespace(tmp_path):
    shared = str(tmp_path / "app")
    first = cellrate.wsgi.RateLimitMiddleware(wsgi_streaming_app, concurrency=1, shared=shared)
    second = cellrate.wsgi.RateLimitMiddleware(wsgi_streaming_app, concurrency=1, shared=shared)
    statuses = []

    def start_response(status, headers, exc_info=None):
        statuses.append(status)

    held = first(environ(), start_response)
    second(environ(), start_response)  # another process's middleware, the same region
    assert statuses == ["200 OK", "429 Too Many Requests"]
    held.close()
    second(environ(), start_response).close()
    assert statuses[-1] == "200 OK"
