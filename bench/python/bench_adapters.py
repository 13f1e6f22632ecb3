"""What the WebSocket message limit and the gRPC interceptors add to a message
or a call, for `make bench` (docs/design.md §17).

WebSocket: one ASGI connection of an echo app driven in process (no server):
`--messages` messages received and echoed, bare, behind
cellrate.websocket.MessageLimit with a per-connection limit, and with a
per-connection and a per-key limit (decided as one). gRPC: a unary behaviour
called as a synchronous server calls it (a context of our own: the peer and
the metadata a call carries), bare and wrapped by RateLimitInterceptor (the
default policy: the peer's address as the key); and a real grpcio server on
loopback, bare and intercepted, one client, `--calls` unary calls (the cost
of a call itself, for scale). The floor beside them is what the overhead may
cost: one decision of a keyed limit plus a dict lookup.

Every limit admits everything (far above the rate of the run). The variants
of one stack run round-robin, `--reps` timed runs after an untimed warm-up;
an overhead is the variant's time minus the bare one's of the same round,
the value the median.

    python bench_adapters.py [--reps N] [--messages N] [--calls N]

One JSON object per line on stdout (bench/README.md): py.adapters.floor,
py.adapters.ws.{bare,per_connection,per_connection_and_key}[.overhead],
py.adapters.grpc.{bare,interceptor}[.overhead] (in process),
py.adapters.grpc_server.{bare,interceptor}[.overhead] (loopback).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any, Callable, Dict, List

import cellrate

BIG = 1_000_000_000  # per second: nothing of a run is turned away


def emit(sid: str, values: List[float], ops: int) -> None:
    print(json.dumps({"id": sid, "lang": "python", "ns_per_op": round(statistics.median(values), 1),
                      "threads": 1, "ops_per_run": ops,
                      "runs_ns_per_op": [round(v, 1) for v in values]}), flush=True)


def measure(stack: str, runners: Dict[str, Callable[[int], float]], reps: int, ops: int) -> None:
    for run in runners.values():
        run(max(ops // 4, 100))  # warm-up
    runs: Dict[str, List[float]] = {name: [] for name in runners}
    for _ in range(reps):
        for name, run in runners.items():
            runs[name].append(run(ops))
    for name, values in runs.items():
        emit(f"py.adapters.{stack}.{name}", values, ops)
        if name != "bare":
            emit(f"py.adapters.{stack}.{name}.overhead",
                 [v - bare for v, bare in zip(values, runs["bare"])], ops)


def floor(reps: int, ops: int) -> None:
    keyed = cellrate.KeyedLimiter(BIG, burst=BIG)
    table = {"/test.Echo/Say": 1}
    values = []
    for _ in range(reps + 1):
        start = time.perf_counter_ns()
        for _ in range(ops):
            keyed.allow("192.0.2.1")
            table.get("/test.Echo/Say")
        values.append((time.perf_counter_ns() - start) / ops)
    emit("py.adapters.floor", values[1:], ops)


# -- WebSocket -------------------------------------------------------------------------


async def echo(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        await send({"type": "websocket.send", "text": message["text"]})


def ws_runner(app: Any, loop: asyncio.AbstractEventLoop) -> Callable[[int], float]:
    scope = {"type": "websocket", "path": "/ws", "client": ("192.0.2.1", 5000),
             "cellrate.key": "192.0.2.1"}
    connect = {"type": "websocket.connect"}
    message = {"type": "websocket.receive", "text": "hello"}
    disconnect = {"type": "websocket.disconnect", "code": 1000}

    def run(n: int) -> float:
        """One connection: the connect, n messages, the disconnect."""
        received = -1
        sent = 0

        async def receive() -> Dict[str, Any]:
            nonlocal received
            received += 1
            return connect if received == 0 else message if received <= n else disconnect

        async def send(reply: Dict[str, Any]) -> None:
            nonlocal sent
            sent += 1

        start = time.perf_counter_ns()
        loop.run_until_complete(app(dict(scope), receive, send))
        elapsed = time.perf_counter_ns() - start
        if sent != n + 1:  # the accept, then every message echoed
            raise SystemExit(f"bench_adapters: {sent} sends for {n} messages")
        return elapsed / n

    return run


def ws_variants() -> Dict[str, Any]:
    from cellrate.websocket import MessageLimit

    return {"bare": echo,
            "per_connection": MessageLimit(echo, BIG, burst=BIG),
            "per_connection_and_key": MessageLimit(
                echo, BIG, burst=BIG, per_key=cellrate.KeyedLimiter(BIG, burst=BIG))}


# -- gRPC ------------------------------------------------------------------------------


class Context:
    """What a synchronous server's context gives the interceptor."""

    def peer(self) -> str:
        return "ipv4:192.0.2.1:5000"

    def invocation_metadata(self) -> tuple:
        return (("user-agent", "bench"),)

    def add_callback(self, callback: Any) -> bool:
        return True

    def code(self) -> None:
        return None

    def trailing_metadata(self) -> tuple:
        return ()


def say(request: bytes, context: Any) -> bytes:
    return request


def grpc_runner(behavior: Callable[[bytes, Any], bytes]) -> Callable[[int], float]:
    def run(n: int) -> float:
        context = Context()
        start = time.perf_counter_ns()
        for _ in range(n):
            behavior(b"hi", context)
        return (time.perf_counter_ns() - start) / n

    return run


def grpc_variants() -> Dict[str, Callable[[bytes, Any], bytes]]:
    import grpc
    from cellrate.grpc import RateLimitInterceptor

    handler = grpc.unary_unary_rpc_method_handler(say)

    class Details:
        method = "/test.Echo/Say"
        invocation_metadata = ()

    interceptor = RateLimitInterceptor(cellrate.KeyedLimiter(BIG, burst=BIG))
    wrapped = interceptor.intercept_service(lambda details: handler, Details())
    return {"bare": say, "interceptor": wrapped.unary_unary}


def grpc_server_runners(stack: List[Any]) -> Dict[str, Callable[[int], float]]:
    from concurrent import futures

    import grpc
    from cellrate.grpc import RateLimitInterceptor

    runners = {}
    for name, interceptors in (("bare", []), ("interceptor", [RateLimitInterceptor(
            cellrate.KeyedLimiter(BIG, burst=BIG))])):
        server = grpc.server(futures.ThreadPoolExecutor(1), interceptors=interceptors)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "test.Echo", {"Say": grpc.unary_unary_rpc_method_handler(say)}),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = channel.unary_unary("/test.Echo/Say")
        stack += [server, channel]

        def run(n: int, stub: Any = stub) -> float:
            start = time.perf_counter_ns()
            for _ in range(n):
                stub(b"hi", timeout=30)
            return (time.perf_counter_ns() - start) / n

        runners[name] = run
    return runners


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    floor(args.reps, args.messages)
    loop = asyncio.new_event_loop()
    measure("ws", {name: ws_runner(app, loop) for name, app in ws_variants().items()},
            args.reps, args.messages)
    loop.close()
    measure("grpc", {name: grpc_runner(behavior) for name, behavior in grpc_variants().items()},
            args.reps, args.messages)
    stack: List[Any] = []
    try:
        measure("grpc_server", grpc_server_runners(stack), args.reps, args.calls)
    finally:
        for item in reversed(stack):  # the channels before their servers
            (item.stop(None) if hasattr(item, "stop") else item.close())


if __name__ == "__main__":
    main()
