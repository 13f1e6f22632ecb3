"""WebSockets: the handshake meets the limits of its path as the GET it is
(cellrate.asgi), and cellrate.websocket.MessageLimit limits the messages of a
connection and of its key. In process first (every branch, on hand-made ASGI
messages), then under uvicorn with 2 workers on one shared directory, driven
by real clients (the `websockets` package): a client that opens connections
until refused, and one that sends faster than allowed, are limited exactly,
across both workers."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
import uuid

import pytest

import cellrate
from cellrate.asgi import RateLimitMiddleware
from cellrate.websocket import CLOSE_CODE, MessageLimit, message_size
from conftest import HERE

# -- in process ------------------------------------------------------------------------


def run(app, scope, incoming):
    """Runs `app` on a websocket `scope`, receiving `incoming` after the
    connect (then a disconnect); returns what it sent and what it received."""
    queue = [{"type": "websocket.connect"}] + list(incoming) + [
        {"type": "websocket.disconnect", "code": 1000}]
    sent, received = [], []

    async def receive():
        return queue.pop(0) if queue else {"type": "websocket.disconnect", "code": 1000}

    async def send(message):
        sent.append(message)

    async def echo(scope, receive, send):
        await receive()
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            received.append(message)
            if message["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": message.get("text")})

    asyncio.run(app(echo)(dict(scope), receive, send))
    return sent, received


def ws_scope(path="/ws", client="192.0.2.1", **extra):
    scope = {"type": "websocket", "path": path, "raw_path": path.encode(), "headers": [],
             "client": (client, 5000), "query_string": b"", "subprotocols": []}
    scope.update(extra)
    return scope


def texts(sent):
    return [message["text"] for message in sent if message["type"] == "websocket.send"]


def closes(sent):
    return [message.get("code") for message in sent if message["type"] == "websocket.close"]


def test_the_handshake_without_the_denial_extension_is_closed():
    middleware = lambda app: RateLimitMiddleware(app, "1/hour")  # noqa: E731
    app = middleware(None)
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "websocket.connect"}

    async def accept(scope, receive, send):
        await send({"type": "websocket.accept"})

    app.app = accept
    asyncio.run(app(ws_scope(), receive, send))
    asyncio.run(app(ws_scope(), receive, send))  # no extensions: a close
    asyncio.run(app(ws_scope(extensions={"websocket.http.response": {}}), receive, send))
    assert sent[0] == {"type": "websocket.accept"}
    assert sent[1] == {"type": "websocket.close", "code": 1008}
    assert sent[2]["type"] == "websocket.http.response.start" and sent[2]["status"] == 429
    assert (b"retry-after", b"3600") in sent[2]["headers"]
    assert sent[3]["type"] == "websocket.http.response.body"


def test_the_key_and_admitted_headers_of_a_handshake():
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["cellrate.key"])
        await send({"type": "websocket.accept", "headers": [(b"x-app", b"1")]})

    middleware = RateLimitMiddleware(app, "5/hour", admitted_headers=True,
                                     key=cellrate.web.header("x-user"))
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "websocket.connect"}

    asyncio.run(middleware(ws_scope(headers=[(b"x-user", b"ada")]), receive, send))
    asyncio.run(middleware(ws_scope(), receive, send))
    assert seen == ["x-user=ada", "192.0.2.1"]
    assert (b"x-app", b"1") in sent[0]["headers"]
    assert (b"ratelimit", b'"default";r=4;t=720') in sent[0]["headers"]


def test_peers_that_are_no_address_share_one_key():
    """Handshakes from peers that are no address (made up, empty, absent) are
    one key, "unknown": limited together, never a fresh limit each."""
    keys = []

    async def app(scope, receive, send):
        keys.append(scope["cellrate.key"])
        await send({"type": "websocket.accept"})

    middleware = RateLimitMiddleware(app, "2/hour")
    sent = []

    async def send(message):
        sent.append(message["type"])

    async def receive():
        return {"type": "websocket.connect"}

    for client in [("not-an-address", 1), ("", 0), None, ("999.1.1.1", 2), ("1.2.3\x00", 3)]:
        asyncio.run(middleware(ws_scope(client=None) | {"client": client}, receive, send))
    assert keys == ["unknown", "unknown"]
    assert sent == ["websocket.accept"] * 2 + ["websocket.close"] * 3


def messages(*payloads):
    return [{"type": "websocket.receive", "text": text} for text in payloads]


def test_messages_faster_than_allowed_close_the_connection():
    sent, received = run(lambda app: MessageLimit(app, "3/hour"), ws_scope(),
                         messages("a", "b", "c", "d", "e"))
    assert texts(sent) == ["a", "b", "c"]
    assert closes(sent) == [CLOSE_CODE]
    # the application is told the connection is gone, with the code
    assert received[-1] == {"type": "websocket.disconnect", "code": CLOSE_CODE}
    assert len(received) == 4


def test_dropped_messages_keep_the_connection_open():
    sent, received = run(lambda app: MessageLimit(app, "3/hour", on_refusal="drop"), ws_scope(),
                         messages("a", "b", "c", "d", "e"))
    assert texts(sent) == ["a", "b", "c"] and closes(sent) == []
    assert received[-1] == {"type": "websocket.disconnect", "code": 1000}


def test_cost_in_bytes_and_a_message_that_never_fits():
    sent, _ = run(lambda app: MessageLimit(app, "10/hour", cost=message_size, on_refusal="drop"),
                  ws_scope(), messages("aaaa", "bbbbbbbbbbbb", "bbbb", "é", "cc"))
    # 12 bytes never fit; "é" is 2 bytes in UTF-8: 4 + 4 + 2 = 10, then "cc" is refused
    assert texts(sent) == ["aaaa", "bbbb", "é"]
    assert message_size({"type": "websocket.receive", "bytes": b"\0" * 7}) == 7


def test_per_key_is_shared_by_every_connection_of_the_key():
    per_key = cellrate.KeyedLimiter("4/hour")
    limit = MessageLimit(None, "3/hour", per_key=per_key)

    def connect(key, payloads):
        limit_app = lambda app: (setattr(limit, "app", app), limit)[1]  # noqa: E731
        return run(limit_app, ws_scope(**{"cellrate.key": key}), messages(*payloads))[0]

    first = connect("ada", ["1", "2", "3"])
    second = connect("ada", ["4", "5", "6"])  # one left for the key
    other = connect("bob", ["1", "2", "3", "4"])  # its own key; its connection's 3
    assert texts(first) == ["1", "2", "3"] and closes(first) == []
    assert texts(second) == ["4"] and closes(second) == [CLOSE_CODE]
    assert texts(other) == ["1", "2", "3"] and closes(other) == [CLOSE_CODE]
    # a refusal by one spends nothing of the other: ada's per_key counted 4, refused 1
    assert per_key.stats()["admitted"] == 4 + 3 and per_key.stats()["refused"] == 1


def test_a_refusal_ends_the_apps_receiving_and_other_scopes_pass():
    async def chatty(scope, receive, send):
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            return
        await receive()
        await send({"type": "websocket.accept"})
        assert (await receive())["type"] == "websocket.receive"
        assert (await receive())["type"] == "websocket.disconnect"  # refused: closed

    sent = []

    async def send(message):
        sent.append(message)

    incoming = [{"type": "websocket.connect"}] + messages("a", "b")

    async def receive():
        return incoming.pop(0)

    limit = MessageLimit(chatty, "1/hour")
    asyncio.run(limit(ws_scope(), receive, send))
    asyncio.run(limit({"type": "http", "path": "/"}, receive, send))
    assert [message["type"] for message in sent] == [
        "websocket.accept", "websocket.close", "http.response.start"]


@pytest.mark.parametrize("options, param, kind", [
    ({}, "per_connection", cellrate.InvalidArgument),
    ({"per_connection": "ten/s"}, "per_connection", cellrate.InvalidArgument),
    ({"per_connection": "1/s;5/m"}, "per_connection", cellrate.InvalidArgument),
    ({"per_connection": object()}, "per_connection", cellrate.InvalidArgumentType),
    ({"per_key": "0/s"}, "per_key", cellrate.InvalidArgument),
    ({"per_key": cellrate.Limiter(1)}, "per_key", cellrate.InvalidArgumentType),
    ({"per_connection": "1/s", "burst": 0}, "burst", cellrate.InvalidArgument),
    ({"per_connection": "1/s", "cost": -1}, "cost", cellrate.InvalidArgument),
    ({"per_connection": "1/s", "cost": "bytes"}, "cost", cellrate.InvalidArgumentType),
    ({"per_connection": "1/s", "on_refusal": "ignore"}, "on_refusal", cellrate.InvalidArgument),
    ({"per_connection": "1/s", "close_code": 1000}, "close_code", cellrate.InvalidArgument),
    ({"per_connection": "1/s", "close_code": "1008"}, "close_code",
     cellrate.InvalidArgumentType),
])
def test_mistakes_name_their_option(options, param, kind):
    with pytest.raises(kind) as error:
        MessageLimit(None, **options)
    assert error.value.param == param


# -- under uvicorn, 2 workers, one shared directory ---------------------------------------

websockets = pytest.importorskip("websockets", reason="make test installs websockets")
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402
from websockets.sync.client import connect  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("uvicorn", reason="make test installs uvicorn")
    from test_web_servers import free_port, server_env, stop, wait_until_listening

    region = f"/dev/shm/cellrate-test-ws-{uuid.uuid4().hex}"
    log = tmp_path_factory.mktemp("ws") / "uvicorn.log"
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "websocket_app:app", "--host", "127.0.0.1",
             "--port", str(port), "--workers", "2", "--no-access-log", "--lifespan", "off"],
            cwd=str(HERE), env=server_env(CELLRATE_REGION=region), stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_listening(port, proc, log)
        yield port
    finally:
        stop(proc)
        shutil.rmtree(region, ignore_errors=True)


def open_ws(port, path, headers=None):
    """(connection or None, the worker's pid, the refusal's status or None)."""
    try:
        ws = connect(f"ws://127.0.0.1:{port}{path}", open_timeout=30, close_timeout=30,
                     additional_headers=headers).__enter__()  # closed by the test
    except InvalidStatus as refused:
        body = refused.response.body.decode()
        return None, body.rsplit(" ", 1)[-1], refused.response.status_code
    return ws, ws.recv(timeout=30), None


def open_admitted(port, path):
    """A connection, once the previous one's unit in flight is back."""
    deadline = time.monotonic() + 30
    while True:
        ws, pid, _ = open_ws(port, path)
        if ws is not None:
            return ws, pid
        assert time.monotonic() < deadline, "a closed connection kept its unit"
        time.sleep(0.05)


def http_get(port, path, headers=None):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read().decode().rsplit(" ", 1)[-1]
    finally:
        conn.close()


def test_a_handshake_meets_the_limits_of_a_get_to_its_path(server):
    """GETs and handshakes to /handshake, alternating, until each worker has
    answered more than the burst: across both, exactly 5 admitted."""
    answers = {}  # pid -> [admitted?]
    for attempt in range(200):
        if attempt % 2:
            status, pid = http_get(server, "/handshake")
            admitted = status == 200
        else:
            ws, pid, status = open_ws(server, "/handshake")
            admitted = ws is not None
            if ws is not None:
                ws.close()
            else:
                assert status == 429
        answers.setdefault(pid, []).append(admitted)
        if len(answers) == 2 and min(map(len, answers.values())) > 5:
            break
    assert len(answers) == 2 and min(map(len, answers.values())) > 5, answers
    assert sum(sum(admitted) for admitted in answers.values()) == 5, answers


def test_a_client_that_opens_connections_until_refused(server):
    """Two connections of one client at once, on whichever workers: the
    third is refused; when one closes, one more is admitted."""
    headers = {"X-Test": "open"}
    first, _, _ = open_ws(server, "/messages", headers)
    second, _, _ = open_ws(server, "/messages", headers)
    assert first is not None and second is not None
    for _ in range(5):  # never more, whichever worker answers
        refused, _, status = open_ws(server, "/messages", headers)
        assert refused is None and status == 429
    first.close()
    deadline = time.monotonic() + 30
    while True:  # the server ends the connection, then gives its unit back
        third, _, status = open_ws(server, "/messages", headers)
        if third is not None:
            break
        assert time.monotonic() < deadline, "the closed connection kept its unit"
        time.sleep(0.05)
    third.close()
    second.close()


def send_until_closed(ws, count):
    """Sends `count` messages one by one, each awaiting its echo; returns the
    echoes and the close code (None: still open)."""
    echoes = []
    try:
        for index in range(count):
            ws.send(f"m{index}")
            echoes.append(ws.recv(timeout=30))
    except ConnectionClosed as closed:
        return echoes, closed.rcvd.code if closed.rcvd else None
    return echoes, None


def test_messages_faster_than_allowed_across_workers(server):
    """Connections of one client, one after another on whichever worker, each
    sending until closed: 5 a connection, and 8 for the key across both
    workers; every refusal closes with 1008."""
    echoed, workers, codes = [], set(), []
    deadline = time.monotonic() + 60
    while len(workers) < 2 or len(echoed) < 3:
        assert time.monotonic() < deadline, (workers, echoed)
        ws, pid = open_admitted(server, "/messages")
        workers.add(pid)
        echoes, code = send_until_closed(ws, 7)
        ws.close()
        echoed.append(len(echoes))
        codes.append(code)
    assert echoed[:2] == [5, 3] and set(echoed[2:]) == {0}, echoed
    assert codes == [CLOSE_CODE] * len(codes)


def test_dropped_messages_cost_their_bytes(server):
    ws, _ = open_admitted(server, "/drop")
    for text in ("aaaa", "bbbb", "x" * 11, "cc", "d", "?"):
        ws.send(text)
    answers = [ws.recv(timeout=30) for _ in range(4)]
    ws.close()
    # 11 bytes never fit, "d" is past the 10: both dropped, the connection open
    assert answers == ["aaaa", "bbbb", "cc", "?"]
