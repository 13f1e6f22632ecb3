"""What every Redis store shares: its client, prefix, on_error and timeout, the one
handling of failures (on_error while Redis cannot decide, and the probe that tries it
again), and the transport of the blocking and the asyncio stores (the script's calls).
The stores of cellrate.redis and the fleet share (cellrate.share) build on it; private.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
import weakref
from typing import Any, Callable, List, Sequence, Tuple

import redis.exceptions

import cellrate
from cellrate._errors import invalid_type
from cellrate.redis._clients import library_of
from cellrate.redis._connections import _AsyncConnections, _Connections, _PoolExhausted
from cellrate.redis._protocol import (
    BATCH_SCRIPT,
    BATCH_SHA,
    SCRIPT,
    SHA,
    _cannot_decide,
    _core,
    _raise_mistake,
)


log = logging.getLogger("cellrate.redis")


class RedisUnavailable(cellrate.CellrateError):
    """Redis could not decide (unreachable, stalled or failing over) and on_error is "raise".

    The client's own exception is the __cause__.
    """


def _detached(error: BaseException) -> BaseException:
    """`error` kept for later (the cause of RedisUnavailable) without the tracebacks of
    its chain: their frames would keep the store, and so its probe, alive."""
    seen = error
    while seen is not None:
        seen.with_traceback(None)
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
    return error


class _Outage:
    """Redis cannot decide: since when (monotonic ns), the last failure (without its
    tracebacks) and when the probe tries next (monotonic ns; 0: no probe, a call that
    found no free connection). Never changed, replaced whole: a decision reads the
    availability once and answers from that, whatever the probe does meanwhile."""

    __slots__ = ("since", "error", "retry_at")

    def __init__(self, since: int, error: BaseException, retry_at: int) -> None:
        self.since = since
        self.error = error
        self.retry_at = retry_at


class _Availability:
    """Whether Redis decides lately; the back-off schedule of the probe, its log lines.

    A call reads `outage` once (None: ask Redis) and answers from what it read;
    failed() starts the probe (start_probe, given by the store: a thread or an
    asyncio task), which calls probed() after each try until one succeeds. No
    request ever waits for a probe. Its back-off (ns) is the core's.
    """

    def __init__(self) -> None:
        self.outage: _Outage | None = None
        self.backoff = 0
        self.probing = False
        self.lock = threading.Lock()

    def failed(self, error: BaseException, on_error: str) -> Tuple[_Outage, bool]:
        """Redis cannot decide: the outage, and True when the caller must start the probe."""
        error = _detached(error)
        with self.lock:
            outage = self.outage
            if outage is None:
                since = time.monotonic_ns()
                self.backoff = _core._redis_backoff(0)
                outage = _Outage(since, error, since + self.backoff)
                log.warning("Redis cannot decide (%s: %s); answering on_error=%r until it "
                            "decides again", type(error).__name__, error, on_error)
            else:
                outage = _Outage(outage.since, error, outage.retry_at)
            self.outage = outage
            start, self.probing = not self.probing, True
            return outage, start

    def probed(self, error: BaseException | None) -> float | None:
        """A probe's outcome (None: Redis decided); the delay to the next one (seconds),
        or None when probing stops."""
        with self.lock:
            outage = self.outage
            if error is None or outage is None:
                if outage is not None:
                    log.warning("Redis decides again after %.3f s",
                                (time.monotonic_ns() - outage.since) / 1e9)
                self.outage, self.probing = None, False
                return None
            self.backoff = _core._redis_backoff(self.backoff)
            self.outage = _Outage(outage.since, _detached(error),
                                  time.monotonic_ns() + self.backoff)
            return self.backoff / 1e9

    def resumed(self, outage: _Outage) -> _Outage | None:
        """Redis is asked again before the probe found it (another process did): the
        outage ends unless a newer one replaced it; the one then read."""
        with self.lock:
            if self.outage is outage:
                self.outage = None
                log.warning("Redis decides again after %.3f s (found by another process)",
                            (time.monotonic_ns() - outage.since) / 1e9)
            return self.outage

    def stopped(self) -> None:
        with self.lock:
            self.probing = False


class _Store:
    """What every Redis store shares: its client, prefix, on_error and timeout, the one
    handling of failures (on_error while Redis cannot decide, and the probe)."""

    _kind = ""  # the clients taken: "sync" or "async" (_clients.py)
    _client_names = ""
    _script, _sha = SCRIPT, SHA
    _probe_words: List[Any]  # what the probe sends: a call that writes nothing

    def _open_store(self, client: Any, prefix: str, on_error: str, timeout: float) -> None:
        """The client checked, and with it the options the core's table checked and
        normalised (cellrate/options.h) kept."""
        self._open_client(client, prefix, timeout)
        self.on_error = on_error

    def _open_client(self, client: Any, prefix: str, timeout: float) -> None:
        """The client checked and kept, with the prefix and timeout the core's table
        checked (every store, the share store too, which has no on_error)."""
        library = library_of(client)  # redis-py's, or valkey-py's
        if library is None or not isinstance(client, library.clients[self._kind]):
            raise invalid_type("client",
                               f"client must be {self._client_names}, not {type(client).__name__}")
        self._library = library
        self.client: Any = client
        self.prefix = prefix
        self.timeout = float(timeout)
        self._availability = _Availability()

    def _failed(self, error: Exception, keys: Sequence[bytes] = (), *request: Any) -> Any:
        """The answer to a call of `keys` that failed: on_error's when Redis cannot decide
        now (and, unless the call only found no free connection, the store answers
        on_error from then on while a probe tries Redis); a mistake raises
        RedisUnavailable, or InvalidArgument where it is one. `request`: what the
        store's on_error answer needs of the call (_fallback's)."""
        if not _cannot_decide(error):
            _raise_mistake(error, keys)
            raise RedisUnavailable(f"Redis refused the decision: {error}") from error
        if isinstance(error, _PoolExhausted):
            return self._fallback(_Outage(time.monotonic_ns(), error, 0), *request)
        outage, start = self._availability.failed(error, self.on_error)
        if start:
            self._start_probe()
        return self._fallback(outage, *request)

    def _while_down(self, outage: _Outage, *request: Any) -> Any:
        """The answer while Redis cannot decide, from the outage the call read (the
        probe restarted if it had stopped, as when its event loop ended)."""
        availability = self._availability
        if not availability.probing:
            with availability.lock:
                start, availability.probing = not availability.probing, True
            if start:
                self._start_probe()
        return self._fallback(outage, *request)

    def _fallback(self, outage: _Outage, *request: Any) -> Any:  # pragma: no cover - each store has its own
        raise NotImplementedError

    def _start_probe(self) -> None:  # pragma: no cover - each face has its own
        raise NotImplementedError

    def _found_back(self) -> None:
        """The probe found Redis back (a store with a fallback tells its region)."""

    def _unavailable(self, what: str, error: Exception) -> RedisUnavailable:
        """The error of a reset or a refund that Redis did not make (not a decision:
        raised whatever on_error says)."""
        return RedisUnavailable(f"Redis cannot {what} now: {error}")


class _SyncStore(_Store):
    """The transport of the blocking stores: the store's own connections (a cluster client:
    its own machinery), the script's calls, the probe thread."""

    _kind = "sync"

    def _open_connections(self) -> None:
        client = self.client
        self._connections = (None if isinstance(client, self._library.cluster)
                             else _Connections.of(client.connection_pool, self._library))
        self._probe_stop: threading.Event | None = None
        self._prober: threading.Thread | None = None

    def _run(self, *command: Any) -> Any:
        """One command's reply, within the store's timeout (a cluster client: its own)."""
        connections = self._connections
        if connections is None:
            return self.client.execute_command(*command)
        return connections.run(command, time.monotonic() + self.timeout)

    def _call(self, words: Sequence[Any], batch: bool = False) -> Any:
        """The script's reply (`batch`: the batch script's). After NOSCRIPT (a restart,
        SCRIPT FLUSH, a failover) EVAL sends the script with the call, so no flush
        between a load and a call can fail it again."""
        sha, script = (BATCH_SHA, BATCH_SCRIPT) if batch else (self._sha, self._script)
        try:
            return self._run("EVALSHA", sha, *words)
        except self._library.exceptions.NoScriptError:
            return self._run("EVAL", script, *words)

    def _call_batch(self, command: bytes, words_of: Callable[[], Sequence[Any]]) -> Any:
        """The batch script's reply to `command`, the core's whole EVALSHA as bytes, sent
        as they are on the store's own connections; a cluster client, and EVAL after
        NOSCRIPT, take the words (`words_of()`)."""
        connections = self._connections
        if connections is None:
            return self._call(words_of(), True)
        try:
            return connections.run((), time.monotonic() + self.timeout, command)
        except self._library.exceptions.NoScriptError:
            return self._run("EVAL", BATCH_SCRIPT, *words_of())

    def _start_probe(self) -> None:
        stop = self._probe_stop = threading.Event()
        self._prober = threading.Thread(
            target=_probe_thread, args=(weakref.ref(self), self._availability, stop),
            name="cellrate.redis probe", daemon=True)
        self._prober.start()

    def close(self) -> None:
        """Stops the probe of a store that Redis failed (it stops by itself once Redis
        decides again, or when the store is collected)."""
        if self._probe_stop is not None:
            self._probe_stop.set()
        if self._prober is not None and self._prober is not threading.current_thread():
            self._prober.join()


def _probe_thread(store_ref: "weakref.ref[_SyncStore]", availability: _Availability,
                  stop: threading.Event) -> None:
    """Tries Redis after each back-off until it decides, the store is collected or closed."""
    delay: float | None = availability.backoff / 1e9
    while delay is not None:
        if stop.wait(delay):
            availability.stopped()
            return
        store = store_ref()
        if store is None:
            return
        error = _probe_error(store._call, store._probe_words)
        delay = availability.probed(error)
        if error is None:
            store._found_back()
        del store


def _probe_error(call: Callable[[Sequence[Any]], Any], words: Sequence[Any]) -> Exception | None:
    """What a probe met: None when Redis decided (a mistake is an answer too)."""
    try:
        call(words)
    except Exception as error:
        return error if _cannot_decide(error) else None
    return None


def _pool_exhausted(error: BaseException, exceptions: Any) -> bool:
    """A capped asyncio pool with no free connection: MaxConnectionsError where the
    asyncio pool raises it (redis-py 8, valkey-py), a plain ConnectionError with the
    library's own words before (`exceptions`: the client library's)."""
    max_connections = getattr(exceptions, "MaxConnectionsError", None)
    return ((max_connections is not None and isinstance(error, max_connections))
            or (type(error) is exceptions.ConnectionError
                and str(error) == "Too many connections"))


async def _bounded(awaitable: Any, seconds: float) -> Any:
    """`awaitable`'s result; asyncio.TimeoutError after `seconds`."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)  # pragma: no cover - Python 3.9, 3.10


class _AsyncStore(_Store):
    """The transport of the asyncio stores: the client's commands within the store's
    timeout, the script's calls, the probe task."""

    _kind = "async"
    _probe_task: "asyncio.Task[None] | None" = None
    _connections: Any = None  # _AsyncConnections or _ClientCommands, of a running loop

    def _own_connections(self, loop: Any) -> Any:
        """The store's own connections on `loop`, or the client's commands where it
        decides through its own machinery (a cluster, a Sentinel-managed master: their
        lookups)."""
        client, library = self.client, self._library
        pool = getattr(client, "connection_pool", None)
        if (isinstance(client, library.async_cluster) or pool is None
                or isinstance(pool, library.async_sentinel_pool)):
            return _ClientCommands(client, library.exceptions, loop)
        return _AsyncConnections.of(pool, library, loop)

    async def _run(self, *command: Any, packed: Any = None) -> Any:
        """One command's reply within the store's timeout (`packed`: its bytes and the
        words' maker, _call_batch's); a capped pool's refusal of a connection is waited
        out, and is this call's failure alone at the deadline."""
        waited: List[bool] = []
        try:
            return await _bounded(self._command(command, waited, packed), self.timeout)
        except asyncio.TimeoutError as error:
            if waited:
                raise _PoolExhausted("no connection of the pool came free within the "
                                     "store's timeout") from error
            raise redis.exceptions.TimeoutError(
                "Redis did not answer within the store's timeout") from error

    async def _command(self, command: Tuple[Any, ...], waited: List[bool],
                       packed: Any = None) -> Any:
        connections = self._connections
        loop = asyncio.get_running_loop()
        if connections is None or connections.loop is not loop:
            connections = self._connections = self._own_connections(loop)
        if packed is None:
            return await connections.run(command, waited)
        if isinstance(connections, _ClientCommands):  # its machinery packs the words
            return await connections.run(("EVALSHA", BATCH_SHA, *packed[1]()), waited)
        return await connections.run(command, waited, packed[0])

    async def _call(self, words: Sequence[Any], batch: bool = False) -> Any:
        """RedisLimiter._call, awaited."""
        sha, script = (BATCH_SHA, BATCH_SCRIPT) if batch else (self._sha, self._script)
        try:
            return await self._run("EVALSHA", sha, *words)
        except self._library.exceptions.NoScriptError:
            return await self._run("EVAL", script, *words)

    async def _call_batch(self, command: bytes, words_of: Callable[[], Sequence[Any]]) -> Any:
        """_SyncStore._call_batch, awaited."""
        try:
            return await self._run(packed=(command, words_of))
        except self._library.exceptions.NoScriptError:
            return await self._run("EVAL", BATCH_SCRIPT, *words_of())

    def _start_probe(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - a decision is always awaited in a loop
            self._availability.stopped()
            return
        self._probe_task = loop.create_task(
            _probe_task(weakref.ref(self), self._availability), name="cellrate.redis probe")

    async def aclose(self) -> None:
        """Stops the probe of a store that Redis failed (it stops by itself once Redis
        decides again, when the store is collected, or with its event loop), and closes
        the idle connections the stores on this client's pool keep on this event loop
        (made again by the next decision)."""
        task, self._probe_task = self._probe_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        connections = self._connections
        if connections is not None and connections.loop is asyncio.get_running_loop():
            await connections.aclose()


class _ClientCommands:
    """_AsyncConnections' run through the client's own machinery (a cluster client, a
    Sentinel-managed master): a capped pool's refusal of a connection is waited out."""

    def __init__(self, client: Any, exceptions: Any, loop: Any) -> None:
        self.client, self.exceptions, self.loop = client, exceptions, loop

    async def aclose(self) -> None:
        """The client's connections are the client's to close."""

    async def run(self, command: Tuple[Any, ...], waited: List[bool]) -> Any:
        exceptions = self.exceptions
        while True:
            try:
                return await self.client.execute_command(*command)
            except exceptions.ConnectionError as error:
                if not _pool_exhausted(error, exceptions):
                    raise
                waited.append(True)
                await asyncio.sleep(0.001)


async def _probe_task(store_ref: "weakref.ref[_AsyncStore]",
                      availability: _Availability) -> None:
    """_probe_thread, as an asyncio task."""
    delay: float | None = availability.backoff / 1e9
    try:
        while delay is not None:
            await asyncio.sleep(delay)
            store = store_ref()
            if store is None:
                return
            try:
                await store._call(store._probe_words)
                error: Exception | None = None
            except Exception as failure:
                error = failure if _cannot_decide(failure) else None
            delay = availability.probed(error)
            if error is None:
                store._found_back()
            del store
    finally:
        availability.stopped()
