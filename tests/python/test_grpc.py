"""cellrate.grpc: real grpcio servers and clients on loopback (generic handlers
on raw bytes, no protoc step), synchronous and asyncio, unary and streaming.
A refusal is RESOURCE_EXHAUSTED with the RateLimit fields and
grpc-retry-pushback-ms as trailing metadata, which gRPC's own retries obey;
routes by method name, keys from metadata, concurrency held until a call
ends (cancelled included), charges after the call, dry run; and what a
hostile client sends (calls until refused, malformed metadata, a peer or a
forwarded hop that is no address) is limited, never crashed, never widened."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from concurrent import futures

import pytest

import cellrate

grpc = pytest.importorskip("grpc", reason="make test installs grpcio")
import grpc.aio  # noqa: E402, F811  (the submodule, which importorskip does not load)

import cellrate.grpc  # noqa: E402
from cellrate.grpc import AsyncRateLimitInterceptor, RateLimitInterceptor  # noqa: E402

SERVICE = "test.Echo"
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


# -- the service: sync and asyncio behaviours of each kind ----------------------------

def say(request, context):
    return request


def count(request, context):
    for index in range(3):
        yield bytes([index])


def collect(requests, context):
    return b"".join(requests)


def chat(requests, context):
    for request in requests:
        yield request


async def say_async(request, context):
    return request


async def count_async(request, context):
    for index in range(3):
        yield bytes([index])


async def collect_async(requests, context):
    return b"".join([request async for request in requests])


async def chat_async(requests, context):
    async for request in requests:
        yield request


def handlers(asynchronous, **extra):
    kinds = {"Say": (grpc.unary_unary_rpc_method_handler, say_async if asynchronous else say),
             "Count": (grpc.unary_stream_rpc_method_handler,
                       count_async if asynchronous else count),
             "Collect": (grpc.stream_unary_rpc_method_handler,
                         collect_async if asynchronous else collect),
             "Chat": (grpc.stream_stream_rpc_method_handler,
                      chat_async if asynchronous else chat)}
    kinds.update(extra)
    return grpc.method_handlers_generic_handler(
        SERVICE, {name: make(behavior) for name, (make, behavior) in kinds.items()})


@contextlib.contextmanager
def sync_server(interceptor, **extra):
    server = grpc.server(futures.ThreadPoolExecutor(8), interceptors=[interceptor])
    server.add_generic_rpc_handlers((handlers(False, **extra),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(None)


class AsyncServer:
    """A grpc.aio server on its own event loop thread, for sync clients."""

    def __init__(self, interceptor, **extra):
        self.interceptor, self.extra = interceptor, extra
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self):
        self.thread.start()

        async def start():
            self.server = grpc.aio.server(interceptors=[self.interceptor])
            self.server.add_generic_rpc_handlers((handlers(True, **self.extra),))
            port = self.server.add_insecure_port("127.0.0.1:0")
            await self.server.start()
            return port

        return asyncio.run_coroutine_threadsafe(start(), self.loop).result(30)

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.server.stop(None), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def serve(asynchronous, *args, **options):
    """A server limited by an interceptor of `*args, **options`, of the kind
    asked; yields the port."""
    if asynchronous:
        return AsyncServer(AsyncRateLimitInterceptor(*args, **options))
    return sync_server(RateLimitInterceptor(*args, **options))


KINDS = [False, True]
KIND_IDS = ["sync", "asyncio"]


def call(channel, method="Say", request=b"hi", metadata=None, timeout=30):
    """(status code, trailing metadata as a dict, response) of one call."""
    path = f"/{SERVICE}/{method}"
    if method in ("Say", "Count"):
        caller = (channel.unary_unary if method == "Say" else channel.unary_stream)(path)
        argument = request
    else:
        caller = (channel.stream_unary if method == "Collect" else channel.stream_stream)(path)
        argument = iter([request, request])
    try:
        if method in ("Say", "Collect"):
            response, rpc = caller.with_call(argument, metadata=metadata, timeout=timeout)
        else:
            rpc = caller(argument, metadata=metadata, timeout=timeout)
            response = b"".join(rpc)
        return rpc.code(), dict(rpc.trailing_metadata() or ()), response
    except grpc.RpcError as error:
        return error.code(), dict(error.trailing_metadata() or ()), None


# -- refusals, every kind of call ----------------------------------------------------

@pytest.mark.parametrize("asynchronous", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("method", ["Say", "Count", "Collect", "Chat"])
def test_calls_until_refused(asynchronous, method):
    with serve(asynchronous, "3/hour") as port, grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        results = [call(ch, method) for _ in range(5)]
    codes = [code for code, _, _ in results]
    assert codes == [grpc.StatusCode.OK] * 3 + [EXHAUSTED] * 2
    expected = {"Say": b"hi", "Count": b"\0\1\2", "Collect": b"hihi", "Chat": b"hihi"}[method]
    assert all(response == expected for _, _, response in results[:3])
    trailing = results[3][1]
    assert trailing["ratelimit-policy"] == '"default";q=3;w=3600'
    assert trailing["ratelimit"] == '"default";r=0;t=3600'
    assert int(trailing["retry-after"]) == 1200  # one unit back in 20 minutes
    assert 1_199_000 < int(trailing[cellrate.grpc.PUSHBACK]) <= 1_200_000


@pytest.mark.parametrize("asynchronous", KINDS, ids=KIND_IDS)
def test_a_cost_that_never_fits_says_do_not_retry(asynchronous):
    with serve(asynchronous, "3/hour", cost=4) as port, \
            grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        code, trailing, _ = call(channel)
    assert code == EXHAUSTED
    assert trailing[cellrate.grpc.PUSHBACK] == "-1" and "retry-after" not in trailing


def test_the_client_retries_after_the_pushback():
    """A client whose service config retries RESOURCE_EXHAUSTED: the second
    call is refused, gRPC waits the pushback and tries again, admitted."""
    config = json.dumps({"methodConfig": [{
        "name": [{"service": SERVICE}],
        "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
                        "backoffMultiplier": 1, "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]},
    }]})
    limiter = cellrate.Limiter("2/s", burst=1)  # one call, then one every 500 ms
    with serve(False, limiter) as port, grpc.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.enable_retries", 1),
                                          ("grpc.service_config", config)]) as channel:
        assert call(channel)[0] == grpc.StatusCode.OK
        start = time.monotonic()
        code, _, response = call(channel)
        waited = time.monotonic() - start
    assert code == grpc.StatusCode.OK and response == b"hi"
    assert waited >= 0.4  # the pushback was obeyed, not gRPC's 10 ms backoff
    assert limiter.stats()["refused"] == 1 and limiter.stats()["admitted"] == 2


# -- routes, keys, dry run -----------------------------------------------------------

@pytest.mark.parametrize("asynchronous", KINDS, ids=KIND_IDS)
def test_routes_by_method_name_and_exemptions(asynchronous):
    with serve(asynchronous, None, routes={f"/{SERVICE}/Say": "1/hour",
                                           f"/{SERVICE}/C*": "2/hour"},
               exempt_paths=[f"/{SERVICE}/Chat"]) as port, \
            grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        says = [call(channel, "Say")[0] for _ in range(2)]
        counts = [call(channel, "Count")[0] for _ in range(3)]
        chats = [call(channel, "Chat")[0] for _ in range(5)]
    ok = grpc.StatusCode.OK
    assert says == [ok, EXHAUSTED]
    assert counts == [ok, ok, EXHAUSTED]
    assert chats == [ok] * 5


@pytest.mark.parametrize("asynchronous", KINDS, ids=KIND_IDS)
def test_a_key_from_metadata_and_malformed_metadata(asynchronous):
    """Keyed by x-api-key: each key its own limit; a call without it is its
    peer's. Binary, repeated, odd entries are read, never crash the call."""
    with serve(asynchronous, "2/hour", key=cellrate.grpc.header("x-api-key")) as port, \
            grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        alice = [call(channel, metadata=[("x-api-key", "alice")])[0] for _ in range(3)]
        bob = [call(channel, metadata=[("x-api-key", "bob")])[0] for _ in range(3)]
        odd = [call(channel, metadata=metadata)[0] for metadata in [
            [("x-api-key", "a"), ("x-api-key", "b")],  # repeated: one key "a, b"
            [("x-api-key", "a"), ("x-api-key", "b")],
            [("x-api-key", "a"), ("x-api-key", "b")],
            [("x-api-key-bin", b"\xff\x00\xfe")],  # binary, not the key: the peer's
            [("other-bin", bytes(range(256)))],
            [("x-api-key", "")],  # empty: a key of its own, as a header's
        ]]
    ok = grpc.StatusCode.OK
    assert alice == [ok, ok, EXHAUSTED] and bob == [ok, ok, EXHAUSTED]
    assert odd == [ok, ok, EXHAUSTED, ok, ok, ok]


@pytest.mark.parametrize("asynchronous", KINDS, ids=KIND_IDS)
def test_dry_run_refuses_nothing_and_says_so(asynchronous, caplog):
    with serve(asynchronous, "1/hour", dry_run=True) as port, \
            grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        results = [call(channel) for _ in range(3)]
    assert [code for code, _, _ in results] == [grpc.StatusCode.OK] * 3
    trailing = results[2][1]
    assert trailing["ratelimit"] == '"default";r=0;t=3600'
    assert "retry-after" not in trailing and cellrate.grpc.PUSHBACK not in trailing
    assert sum("dry run: would refuse POST /test.Echo/Say" in record.getMessage()
               for record in caplog.records) == 2


def test_admitted_headers_follow_the_handlers_own_trailing_metadata():
    def tagged(request, context):
        context.set_trailing_metadata((("x-handler", "1"),))
        return request

    interceptor = RateLimitInterceptor("5/hour", admitted_headers=True)
    with sync_server(interceptor, Say=(grpc.unary_unary_rpc_method_handler, tagged)) as port, \
            grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        code, trailing, _ = call(channel)
    assert code == grpc.StatusCode.OK
    assert trailing["x-handler"] == "1" and trailing["ratelimit"] == '"default";r=4;t=720'


# -- concurrency and charges -----------------------------------------------------------

@pytest.mark.parametrize("asynchronous", KINDS, ids=KIND_IDS)
def test_concurrency_held_until_the_call_ends_cancelled_included(asynchronous):
    started, release = threading.Event(), threading.Event()

    def slow(request, context):
        started.set()
        release.wait(30)
        return request

    async def slow_async(request, context):
        started.set()
        while not release.is_set():
            await asyncio.sleep(0.01)
        return request

    if asynchronous:
        server = AsyncServer(AsyncRateLimitInterceptor(None, concurrency=1),
                             Say=(grpc.unary_unary_rpc_method_handler, slow_async))
    else:
        server = sync_server(RateLimitInterceptor(None, concurrency=1),
                             Say=(grpc.unary_unary_rpc_method_handler, slow))
    with server as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        pending = channel.unary_unary(f"/{SERVICE}/Say").future(b"first", timeout=30)
        assert started.wait(30)
        code, trailing, _ = call(channel, "Count")  # another method, the same client
        assert code == EXHAUSTED and cellrate.grpc.PUSHBACK not in trailing
        release.set()
        assert pending.result() == b"first"
        assert call(channel, "Count")[0] == grpc.StatusCode.OK
        # a call cancelled while it holds its unit gives it back
        release.clear()
        started.clear()
        pending = channel.unary_unary(f"/{SERVICE}/Say").future(b"second", timeout=30)
        assert started.wait(30)
        pending.cancel()
        release.set()
        deadline = time.monotonic() + 30
        while call(channel, "Count")[0] != grpc.StatusCode.OK:
            assert time.monotonic() < deadline, "the cancelled call kept its unit"
            time.sleep(0.05)


@pytest.mark.parametrize("asynchronous", KINDS, ids=KIND_IDS)
def test_a_handler_charges_its_call_and_charge_settles_after_it(asynchronous):
    seen = []

    def charged(request, context):
        decision = cellrate.grpc.charger(context)(4)  # 1 + 4 units: the burst of 5 spent
        return b"%d" % decision.remaining

    async def charged_async(request, context):
        return charged(request, context)

    def settle(request, response):
        seen.append((request.path, response.status, response.bytes_sent))
        return None  # as charged

    keyed = cellrate.KeyedLimiter("5/hour")
    extra = {"Say": (grpc.unary_unary_rpc_method_handler,
                     charged_async if asynchronous else charged)}
    if asynchronous:
        server = AsyncServer(AsyncRateLimitInterceptor(keyed, charge=settle), **extra)
    else:
        server = sync_server(RateLimitInterceptor(keyed, charge=settle), **extra)
    with server as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        first = call(channel, "Say")
        after = call(channel, "Count")
    assert first[0] == grpc.StatusCode.OK and first[2] == b"0"
    assert after[0] == EXHAUSTED
    assert seen == [(f"/{SERVICE}/Say", 0, 1)]  # status OK, one byte sent
    assert keyed.stats()["units_admitted"] == 5


def test_charge_counts_the_bytes_of_a_stream():
    totals = []
    interceptor = RateLimitInterceptor(
        "100/hour", charge=lambda request, response: totals.append(response.bytes_sent))
    with sync_server(interceptor) as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        assert call(channel, "Count")[0] == grpc.StatusCode.OK
        assert call(channel, "Chat", b"hello")[0] == grpc.StatusCode.OK
    assert totals == [3, 10]


# -- addresses ---------------------------------------------------------------------

@pytest.mark.parametrize("peer, client", [
    ("ipv4:192.0.2.1:5000", ("192.0.2.1", 0)),
    ("ipv6:[2001:db8::1]:5000", ("2001:db8::1", 0)),
    ("ipv6:%5B2001:db8::1%5D:5000", ("2001:db8::1", 0)),
    ("ipv6:[::ffff:192.0.2.1]:5000", ("192.0.2.1", 0)),  # the core's canonical address
    ("unix:/run/app.sock", None),
    ("unix-abstract:app", None),
    ("ipv4:not-an-address:1", ("unknown", 0)),
    ("", ("", 0)),
    ("something else", ("something else", 0)),
])
def test_the_peer_as_a_client(peer, client):
    assert cellrate.grpc._peer(peer) == client


class FakeContext:
    def __init__(self, peer, metadata=()):
        self._peer, self._metadata = peer, metadata

    def peer(self):
        return self._peer

    def invocation_metadata(self):
        return self._metadata


@pytest.mark.parametrize("peer, key", [
    ("ipv4:192.0.2.1:5000", "192.0.2.1"),
    ("ipv6:[2001:db8::1:2]:5000", "2001:db8::/64"),  # the policy's ipv6_prefix
    ("ipv6:[::ffff:192.0.2.1]:1", "192.0.2.1"),  # mapped: the IPv4 client
    ("ipv4:not-an-address:1", "unknown"),  # never a key of its own
    ("ipv4:192.0.2.1\x00:1", "unknown"),
    ("garbage", "unknown"),
    ("unix:/run/app.sock", "unknown"),
])
def test_a_peer_that_is_no_address_is_one_shared_key(peer, key):
    policy = cellrate.web.Policy("1/hour")
    request = cellrate.web.Request(policy, "POST", "/x", cellrate.grpc._scope("/x",
                                                                              FakeContext(peer)))
    assert policy.key(request) == key


def test_forwarded_hops_that_are_no_address_narrow_never_widen():
    """Behind a trusted proxy on loopback, x-forwarded-for from the metadata:
    20 made-up hops that are no address share one limit."""
    with serve(False, "2/hour", trusted_proxies=["127.0.0.1"]) as port, \
            grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        hostile = [call(channel, metadata=[("x-forwarded-for", f"not-an-address-{i}")])[0]
                   for i in range(20)]
        real = [call(channel, metadata=[("x-forwarded-for", "203.0.113.7")])[0]
                for _ in range(3)]
    ok = grpc.StatusCode.OK
    assert hostile == [ok, ok] + [EXHAUSTED] * 18
    assert real == [ok, ok, EXHAUSTED]


# -- options -----------------------------------------------------------------------

def test_mistakes_name_their_option():
    with pytest.raises(cellrate.InvalidArgument) as error:
        RateLimitInterceptor("1/s", status=503)
    assert error.value.param == "status"
    with pytest.raises(cellrate.InvalidArgument) as error:
        AsyncRateLimitInterceptor("1/s", ipv4_prefix=33)
    assert error.value.param == "ipv4_prefix"

    class AsyncStore:
        async def check(self, key, cost=1, *, now=None):
            raise AssertionError

    with pytest.raises(cellrate.InvalidArgumentType) as error:
        RateLimitInterceptor((AsyncStore(), cellrate.grpc.client_address))
    assert error.value.param == "limit"


def test_a_custom_body_is_the_details():
    with serve(False, "1/hour", body="slow down") as port, \
            grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call(channel)
        stub = channel.unary_unary(f"/{SERVICE}/Say")
        with pytest.raises(grpc.RpcError) as error:
            stub(b"x", timeout=30)
    assert error.value.code() == EXHAUSTED and error.value.details() == "slow down"
