"""The blocking stores' own connections to a Redis server (a Sentinel-managed master
too): a client pool's settings without its retries, every call within its deadline,
connecting included. Private to cellrate.redis.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
import weakref
from typing import Any, Deque, List, Tuple

import redis.exceptions


class _PoolExhausted(redis.exceptions.ConnectionError):
    """No connection of the pool came free before the call's deadline: this call
    only cannot decide (Redis is not down)."""


class _SentinelMaster:
    """The master's address, asked of the Sentinels of a pool that redis-py's
    Sentinel.master_for() made, within the time a call has left. redis-py's own
    lookup asks each Sentinel in turn with that Sentinel client's socket timeout (5 s
    by default), before the store could bound it. Here each Sentinel gets an equal
    share of the time left (so a frozen one costs a share and the next still
    answers), through the store's own connections to it; the reply is read and the
    master's state judged as redis-py does; a Sentinel that failed is asked last from
    then on, one that answered first (redis-py keeps the one that answered first too)."""

    def __init__(self, pool: Any, library: Any) -> None:
        self._library = library
        self._manager = pool.sentinel_manager
        self.service_name: str = pool.service_name
        self.check_connection: bool = pool.check_connection
        self._order: List[Any] = list(self._manager.sentinels)
        self._lock = threading.Lock()

    def _move(self, sentinel: Any, first: bool) -> None:
        with self._lock:
            if sentinel in self._order:
                self._order.remove(sentinel)
                self._order.insert(0 if first else len(self._order), sentinel)

    def address(self, deadline: float) -> Tuple[str, int]:
        with self._lock:
            sentinels = list(self._order)
        errors = []
        exceptions = self._library.exceptions
        for index, sentinel in enumerate(sentinels):
            left = deadline - time.monotonic()
            if left <= 0:
                errors.append("no time left")
                break
            try:
                reply = _Connections.of(sentinel.connection_pool, self._library).run(
                    ("SENTINEL MASTERS",), time.monotonic() + left / (len(sentinels) - index))
                masters = sentinel.response_callbacks["SENTINEL MASTERS"](reply)
            except (exceptions.ConnectionError, exceptions.TimeoutError,
                    exceptions.ResponseError) as error:
                where = sentinel.connection_pool.connection_kwargs
                errors.append(f"{where.get('host')}:{where.get('port')}: {error}")
                self._move(sentinel, first=False)
                continue
            state = masters.get(self.service_name)
            if state and self._manager.check_master_state(state, self.service_name):
                self._move(sentinel, first=True)
                forced = getattr(self._manager, "_force_master_ip", None)
                return (forced if forced is not None else state["ip"]), state["port"]
        raise self._library.master_not_found(
            f"No master found for {self.service_name!r} within the store's timeout: "
            + "; ".join(errors))


class _AskedWithin:
    """What a Sentinel-managed connection asks its pool (redis-py's proxy), answered
    within the deadline of the call that connects it: the master's address, then the
    connection's timeouts cut to the time still left."""

    is_master = True

    def __init__(self, master: _SentinelMaster) -> None:
        self.master = master
        self.service_name = master.service_name
        self.check_connection = master.check_connection
        self.deadline = 0.0
        self.connection: Any = None

    def get_master_address(self) -> Tuple[str, int]:
        address = self.master.address(self.deadline)
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise redis.exceptions.TimeoutError(
                "the master's address came with no time left within the store's timeout")
        self.connection.socket_connect_timeout = self.connection.socket_timeout = left
        return address


class _Connections:
    """The sync store's own connections to the client's server, shared by every store
    on one connection pool: the pool's settings (host, port, db, credentials, TLS,
    protocol) without the client's retries, at most the pool's max_connections at
    once; a call waits for a free one until its deadline. redis-py's own
    get_connection() cannot serve here: it connects, and so retries with back-off,
    before the caller can bound it. A pool of Sentinel.master_for() has its master's
    address asked of the Sentinels within the call's deadline too (_SentinelMaster)."""

    _by_pool: "weakref.WeakKeyDictionary[Any, _Connections]" = weakref.WeakKeyDictionary()
    _by_pool_lock = threading.Lock()

    @classmethod
    def of(cls, pool: Any, library: Any) -> "_Connections":
        """The connections of `pool`, a pool of the client library `library` (_clients)."""
        with cls._by_pool_lock:
            connections = cls._by_pool.get(pool)
            if connections is None:
                connections = cls._by_pool[pool] = cls(pool, library)
            return connections

    def __init__(self, pool: Any, library: Any) -> None:
        kwargs = dict(pool.connection_kwargs)
        kwargs.update(retry=library.no_retry(), health_check_interval=0)
        kwargs.pop("retry_on_timeout", None)
        self._kwargs = kwargs
        self._connection_class = pool.connection_class
        self._exceptions = library.exceptions
        self._sentinel_master = (
            _SentinelMaster(pool, library)
            if isinstance(pool, library.sentinel_pool) and pool.is_master
            else None)
        self.max_connections: int = getattr(pool, "max_connections", None) or 2**31
        self._idle: List[Any] = []
        self._count = 0
        self._free = threading.Condition(threading.Lock())
        self._pid = os.getpid()

    def _made(self) -> Any:
        """A new connection, not connected."""
        if self._sentinel_master is None:
            return self._connection_class(**self._kwargs)
        asked = _AskedWithin(self._sentinel_master)
        asked.connection = self._connection_class(**dict(self._kwargs, connection_pool=asked))
        return asked.connection

    def _get(self, deadline: float) -> Any:
        with self._free:
            if self._pid != os.getpid():  # a forked child: the parent's sockets are not ours
                self._idle, self._count, self._pid = [], 0, os.getpid()
            while not self._idle and self._count >= self.max_connections:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _PoolExhausted(
                        f"no connection of the pool came free within the store's timeout "
                        f"(max_connections={self.max_connections})")
                self._free.wait(remaining)
            if self._idle:
                return self._idle.pop()
            self._count += 1
        try:
            return self._made()
        except BaseException:
            with self._free:
                self._count -= 1
                self._free.notify()
            raise

    def _put(self, connection: Any, healthy: bool) -> None:
        if not healthy:
            connection.disconnect()
        with self._free:
            if self._pid == os.getpid():
                if healthy:
                    self._idle.append(connection)
                else:
                    self._count -= 1
                self._free.notify()

    def run(self, command: Tuple[Any, ...], deadline: float, packed: bytes | None = None) -> Any:
        """`command`'s reply (`packed`: the command's bytes, sent as they are), or the
        error of the reply; raises TimeoutError at the deadline. A connection found closed
        (a server restarted since) is made again once, while time remains."""
        connection = self._get(deadline)
        exceptions = self._exceptions
        healthy = False
        try:
            for attempt in (0, 1):
                fresh = getattr(connection, "_sock", None) is None
                if fresh:
                    remaining = max(deadline - time.monotonic(), 0.001)
                    connection.socket_connect_timeout = connection.socket_timeout = remaining
                    if self._sentinel_master is not None:
                        connection.connection_pool.deadline = deadline
                    connection.connect()
                try:
                    if packed is None:
                        connection.send_command(*command)
                    else:
                        connection.send_packed_command([packed], check_health=False)
                    if not connection.can_read(timeout=max(deadline - time.monotonic(), 0)):
                        raise redis.exceptions.TimeoutError(
                            "Redis did not answer within the store's timeout")
                    reply = connection.read_response()
                except exceptions.ResponseError:
                    healthy = True
                    raise
                except exceptions.ConnectionError:
                    if fresh or attempt or time.monotonic() >= deadline:
                        raise
                    connection.disconnect()
                    continue
                healthy = True
                return reply
        finally:
            self._put(connection, healthy)


class _AsyncConnections:
    """The asyncio stores' own connections to the server of a plain asyncio client's
    pool (not a Sentinel's, not a cluster's), shared by every store on that pool within
    one event loop: the pool's settings without the client's retries, health checks,
    socket timeouts (the store bounds the whole call) and per-command bookkeeping, at
    most the pool's max_connections at once; a call waits for a free one (its store
    bounds the wait). A decision is then one write and one read on a connection taken
    from a list, with no lock, no task and no timer of its own. A connection is tied to
    the event loop that made it: another loop starts afresh."""

    _by_pool: "weakref.WeakKeyDictionary[Any, _AsyncConnections]" = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, pool: Any, library: Any, loop: Any) -> "_AsyncConnections":
        """The connections of `pool` (of the client library `library`) on `loop`."""
        connections = cls._by_pool.get(pool)
        if connections is None or connections.loop is not loop:
            connections = cls._by_pool[pool] = cls(pool, library, loop)
        return connections

    def __init__(self, pool: Any, library: Any, loop: Any) -> None:
        kwargs = dict(pool.connection_kwargs)
        kwargs.update(retry=library.async_no_retry(), health_check_interval=0,
                      socket_timeout=None)
        kwargs.pop("retry_on_timeout", None)
        self._kwargs = kwargs
        self._connection_class = pool.connection_class
        self._exceptions = library.exceptions
        self.loop = loop
        self.max_connections: int = getattr(pool, "max_connections", None) or 2**31
        self._idle: List[Any] = []
        self._count = 0
        self._waiters: Deque[Any] = collections.deque()

    async def _get(self, waited: List[bool]) -> Any:
        """A connection: an idle one, a new one (not connected) below the cap, else the
        next one put back (`waited` marks the wait)."""
        if self._idle:
            return self._idle.pop()
        if self._count < self.max_connections:
            self._count += 1
            return self._connection_class(**self._kwargs)
        waited.append(True)
        waiter = self.loop.create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._put(waiter.result(), True)  # handed over as the wait ended
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def _put(self, connection: Any, healthy: bool) -> None:
        """A connection back: to the first waiter, else idle; a broken one (the client
        library disconnected it) is dropped, and its place goes to a waiter."""
        waiters = self._waiters
        if not healthy:
            if connection.is_connected:  # cancelled where the library did not close it
                self.loop.create_task(connection.disconnect(nowait=True))
            self._count -= 1
            while waiters:
                waiter = waiters.popleft()
                if not waiter.done():
                    self._count += 1
                    waiter.set_result(self._connection_class(**self._kwargs))
                    return
            return
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        self._idle.append(connection)

    async def aclose(self) -> None:
        """Closes the idle connections (the ones in use go back idle, for a later close)."""
        idle, self._idle = self._idle, []
        self._count -= len(idle)
        for connection in idle:
            await connection.disconnect()

    async def run(self, command: Tuple[Any, ...], waited: List[bool],
                  packed: bytes | None = None) -> Any:
        """`command`'s reply (`packed`: the command's bytes, sent as they are), or the
        error of the reply. A connection found closed (a server restarted since) is made
        again once; the caller bounds the call."""
        connection = self._idle.pop() if self._idle else await self._get(waited)
        exceptions = self._exceptions
        healthy = False
        try:
            for attempt in (0, 1):
                fresh = not connection.is_connected
                try:
                    await connection.send_packed_command(
                        connection.pack_command(*command) if packed is None else [packed],
                        check_health=False)
                    reply = await connection.read_response()
                except exceptions.ResponseError:
                    healthy = True
                    raise
                except exceptions.ConnectionError:
                    if fresh or attempt:
                        raise
                    await connection.disconnect()
                    continue
                healthy = True
                return reply
        finally:
            self._put(connection, healthy)
