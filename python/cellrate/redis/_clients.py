"""The client libraries the Redis stores take: redis-py, and valkey-py (its fork: the
same API under other names) once the program has imported it. A client's library is
known by its class; this module never imports valkey itself, so `import cellrate` and
`import cellrate.redis` cost nothing where valkey-py is absent or unused. Private to
cellrate.redis and cellrate.share.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any, Dict, Tuple


class _Library:
    """One client library: its client classes by kind, and the exceptions and helpers the
    stores meet through it."""

    def __init__(self, name: str, client: str) -> None:
        def module(path: str) -> Any:
            return importlib.import_module(f"{name}{path}")

        exceptions = module(".exceptions")
        retry, backoff = module(".retry"), module(".backoff")
        self.name = name
        #: the blocking clients (the plain one, the cluster one), then the asyncio ones
        self.cluster: type = getattr(module(".cluster"), f"{client}Cluster")
        self.async_cluster: type = getattr(module(".asyncio.cluster"), f"{client}Cluster")
        self.clients: Dict[str, Tuple[type, ...]] = {
            "sync": (getattr(module(""), client), self.cluster),
            "async": (getattr(module(".asyncio"), client), self.async_cluster),
        }
        self.exceptions = exceptions
        sentinel = module(".sentinel")
        self.sentinel_pool: type = sentinel.SentinelConnectionPool
        self.async_sentinel_pool: type = module(".asyncio.sentinel").SentinelConnectionPool
        self.master_not_found: type = sentinel.MasterNotFoundError
        self.no_retry = lambda: retry.Retry(backoff.NoBackoff(), 0)
        async_retry = module(".asyncio.retry")
        self.async_no_retry = lambda: async_retry.Retry(backoff.NoBackoff(), 0)
        # failures that are not replies: no connection, no answer in time, no node for
        # the slot
        self.transport: Tuple[type, ...] = (
            exceptions.ConnectionError, exceptions.TimeoutError, exceptions.ClusterError,
            getattr(exceptions, f"{client}ClusterException"))
        # the first words of the replies the library maps to exceptions of its own,
        # stripped from their messages (redis-py 7 on keeps it as .status_code)
        try:
            parser = module("._parsers.base").BaseParser
        except ImportError:  # pragma: no cover - redis-py 4
            parser = module(".connection").BaseParser
        self.stripped: Dict[type, str] = {kind: word for word, kind in
                                          parser.EXCEPTION_CLASSES.items()
                                          if isinstance(kind, type)}


# The libraries known so far: redis-py always (the stores build on it), valkey-py from
# the first of its clients a store is given. Every library's exceptions, for the code
# that meets a failure without its store: updated whole when a library is added.
_LIBRARIES: Dict[str, _Library] = {"redis": _Library("redis", "Redis")}
_NAMES = {"redis": "Redis", "valkey": "Valkey"}
_lock = threading.Lock()
RESPONSE_ERRORS: Tuple[type, ...] = (_LIBRARIES["redis"].exceptions.ResponseError,)
TRANSPORT_ERRORS: Tuple[type, ...] = _LIBRARIES["redis"].transport
STRIPPED: Dict[type, str] = dict(_LIBRARIES["redis"].stripped)


def _add(name: str) -> _Library:
    global RESPONSE_ERRORS, TRANSPORT_ERRORS, STRIPPED
    with _lock:
        library = _LIBRARIES.get(name)
        if library is None:
            library = _Library(name, _NAMES[name])
            RESPONSE_ERRORS += (library.exceptions.ResponseError,)
            TRANSPORT_ERRORS += library.transport
            STRIPPED = {**STRIPPED, **library.stripped}
            _LIBRARIES[name] = library
        return library


def library_of(client: Any) -> _Library | None:
    """The library of `client` (of a subclass of its classes too), or None."""
    for cls in type(client).__mro__:
        name = cls.__module__.partition(".")[0]
        if name in _LIBRARIES:
            return _LIBRARIES[name]
        if name in _NAMES and name in sys.modules:  # a client of valkey-py, imported
            return _add(name)
    return None

