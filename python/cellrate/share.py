"""One fleet cap decided locally: each member holds a share of it.

    >>> import redis
    >>> from cellrate.share import ShareLimiter
    >>> limiter = ShareLimiter(redis.Redis(), "1000/s", burst=100, name="api")
    >>> limiter.allow()
    True
    >>> limiter.share  # alone in the fleet: all of it
    1.0
    >>> limiter.close()

A member (this process) decides with a local cellrate.Limiter, at local speed;
every `interval` seconds a heartbeat (one round trip, one script,
redis/share.lua, the server's clock) tells Redis the units the member was asked
for since the last one, admitted or not, and answers the member's share: a
max-min fair split of the fleet rate and burst by demand, applied to the local
limiter with reconfigure() at every answer (the units used carry). A member
silent for `ttl` (default three intervals; `interval` and `ttl` are the
fleet's own, fixed by its first heartbeat) drops out and the others' shares
grow. While Redis cannot answer a member keeps its last share (never more),
logs once, and rejoins when Redis answers. KeyedShareLimiter is the keyed form: each key's
limit scaled by the member's share, keys decided locally. With shared= the
member is the host: its processes decide on one region, and the one holding
the advisory lock beside it heartbeats for all (the demand is the region's
counters, the share applied to the region). The bound the fleet keeps and its
derivation: docs/design/share.md.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import socket
import threading
import time
import weakref
from typing import Any, Awaitable, Callable, Tuple, Union

import cellrate
from cellrate import _cellrate
from cellrate._cellrate import inspect_region
from cellrate._errors import invalid
from cellrate.redis._protocol import DEFAULT_PREFIX, _protocol, _read_script
from cellrate.redis._store import _SyncStore

__all__ = ["KeyedShareLimiter", "SHARE_SCRIPT", "ShareLimiter"]

#: The heartbeat's script, byte for byte as every face sends it.
SHARE_SCRIPT: bytes = _read_script("share.lua")
SHARE_SHA = hashlib.sha1(SHARE_SCRIPT).hexdigest()
_SHARE_PROTOCOL = _protocol(SHARE_SCRIPT)
#: The smallest share of a member among n members: 1 / (FLOOR_DIVISOR * n) (the core's,
#: which the script's pins).
FLOOR_DIVISOR: int = _cellrate._SHARE_FLOOR_DIVISOR
# The options of a member (their defaults and refusals): the core's table.
_check_options = cellrate._cellrate._check_options
#: A member silent for ttl drops out; ttl's default, in intervals.
TTL_INTERVALS = int(_check_options("ShareLimiter", {"name": "-", "interval": 1})["ttl"])
#: The longest a heartbeat takes (timeout's default, seconds).
DEFAULT_TIMEOUT_S: float = cellrate._cellrate._options("ShareLimiter")["timeout"]["default"]
#: The start of the script's refusal of a heartbeat, then "<param> <words>" (a ttl or
#: interval that is not the fleet's).
_REFUSED = _SHARE_PROTOCOL["REFUSED"]

log = logging.getLogger("cellrate.share")

Key = Union[str, bytes]


def _default_member(region: bytes | None) -> str:
    """This process: host, pid and a random part (a restarted pid is another member).
    A host member: host and a short hash of the region's path, the same in every
    process of the host (a take-over continues the member)."""
    host = "".join(c if c.isalnum() or c in "-._" else "_" for c in socket.gethostname())
    if region is not None:
        return f"{host[:32]}-{hashlib.sha1(region).hexdigest()[:12]}"
    return f"{host[:32]}-{os.getpid()}-{os.urandom(4).hex()}"


#: Openings of a host's region tried before giving up (each fails only when the
#: region's limit changed between reading it and opening the region).
_OPEN_TRIES = 16


class _Host:
    """The election of a host member: the process holding an advisory lock (flock,
    exclusive) on the file beside the region, `<region>.lock`, heartbeats. A process
    that dies drops it; another process's thread takes it at its next tick."""

    def __init__(self, region: bytes, mode: int) -> None:
        self.region = region
        #: True while this process holds the lock (heartbeats for the host).
        self.leads = False
        self._fd: int | None = None
        self._fd = os.open(region + b".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)

    def lead(self) -> bool:
        """Takes the lock if it is free (never waits); True while this process holds it."""
        if not self.leads and self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            self.leads = True
        return self.leads

    def limit(self) -> Tuple[float, float, int, int]:
        """The region's live limit: rate, period, burst and its generation (0: never
        changed since it was made)."""
        info = inspect_region(self.region)
        return (float(info["rate"]), float(info["period"]),  # type: ignore[arg-type]
                int(info["burst"]), int(info["generation"]))  # type: ignore[call-overload]

    def close(self) -> None:
        """Lets go of the lock (another process of the host takes it at its next tick)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd, self.leads = None, False

    __del__ = close  # a limiter collected unclosed lets go of the lock too


class _Share(_SyncStore):
    """What both forms share: the fleet's limit, the heartbeat, the thread, the share."""

    _options = ""  # the form's row of the core's options table

    _decisions: Tuple[str, ...] = ()  # the local limiter's methods each form exposes

    _kind = "sync"
    _client_names = ("a redis.Redis or redis.cluster.RedisCluster, or a valkey.Valkey or "
                     "valkey.cluster.ValkeyCluster")
    _script, _sha = SHARE_SCRIPT, SHARE_SHA

    def __init__(self, client: Any, rate: float | str, period: float | None = None, *,
                 burst: int | None = None, name: str, interval: float = 1.0,
                 ttl: float | None = None, member: str | None = None,
                 prefix: str = DEFAULT_PREFIX, timeout: float = DEFAULT_TIMEOUT_S,
                 background: bool = True, **local: Any) -> None:
        # the core's table checks every option (cellrate/options.h): the fleet's, the
        # heartbeats', and the local limiter's own (max_cost, algorithm and on_change
        # refused: the local limiter follows the share)
        options = _check_options(self._options, {
            **local, "period": period, "burst": burst, "name": name, "interval": interval,
            "ttl": ttl, "member": member, "prefix": prefix, "timeout": timeout,
            "background": background})
        self._open_client(client, options["prefix"], options["timeout"])
        self.name = name
        self.interval: float = options["interval"]
        self.ttl: float = options["ttl"]
        # without a member, named below, once the region's path is known
        self.member: str = member or ""
        background = options["background"]
        local = {name: value for name, value in local.items() if value is not None}
        #: The fleet's limit (cellrate.Limit): what all members together admit.
        self.fleet = cellrate.Limit(rate, period, burst=burst)
        self._open_connections()
        self._key = f"{prefix}share:{name}"
        self._lock = threading.Lock()
        self._counted = 0  # the local limiter's units asked by the last heartbeat
        self._since = time.monotonic()
        self._known_demand = False  # _counted and _since are a baseline
        self._joined = False  # what it holds is in the records (held is sent)
        self._down = False
        #: The fraction of the fleet this member holds; until its first heartbeat
        #: answers, the core's cold start (1 / FLOOR_DIVISOR).
        self.share: float = _cellrate._SHARE_COLD_START
        #: The member's max-min fair fraction by the last heartbeat's demands.
        self.target = self.share
        #: Live members at the last heartbeat (0: none answered yet).
        self.members = 0
        shared = local.pop("shared", None)
        self._host: _Host | None = None
        if shared is None:
            self._local = self._make_local(*_cellrate._share_limit(self.fleet, self.share),
                                           **local)
        else:
            self._local = self._open_region(shared, local)
            region = os.fsencode(os.path.realpath(shared))
            self._host = _Host(region, local.get("shared_mode") or 0o600)
        if not self.member:
            self.member = _default_member(None if self._host is None else self._host.region)
        # the decisions are the local limiter's own (no wrapper: local speed); the demand
        # is read from its counters at each heartbeat
        for method in self._decisions:
            setattr(self, method, getattr(self._local, method))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            self.heartbeat()  # a refusal (a ttl or interval not the fleet's) raises here
        except BaseException:
            if self._host is not None:
                self._host.close()
            raise
        if background:
            self._thread = threading.Thread(
                target=_beat, args=(weakref.ref(self), self.interval, self._stop),
                name=f"cellrate.share {name}", daemon=True)
            self._thread.start()

    def _make_local(self, rate: float, period: float, burst: int, **local: Any) -> Any:
        raise NotImplementedError  # pragma: no cover - each form has its own

    def _open_region(self, shared: Any, local: Any) -> Any:
        """The host's region, opened with its live limit (on_change="refuse": an opening
        never changes the host's share), or made at the start share. A bad shared= gets
        the core's error, naming it."""
        for tries in range(_OPEN_TRIES, 0, -1):
            try:
                info = inspect_region(shared)
                rate, period, burst = info["rate"], info["period"], info["burst"]
            except Exception:  # noqa: BLE001 - no region yet (or a bad path: the opening says)
                rate, period, burst = _cellrate._share_limit(self.fleet, self.share)
                tries = 1
            try:
                return self._make_local(rate, period, burst,  # type: ignore[arg-type]
                                        shared=shared, on_change="refuse", **local)
            except cellrate.InvalidArgument:
                if tries == 1:  # not a limit changed since it was read
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def local(self) -> Any:
        """The local limiter (its rate and burst are this member's share)."""
        return self._local

    @property
    def leader(self) -> bool:
        """True when this process heartbeats for its member: always for a process member;
        for a host member, while this process holds the host's lock."""
        return self._host is None or self._host.leads

    def heartbeat(self) -> bool:
        """One heartbeat now (the thread calls it every interval): the demand since the
        last one, the share answered and applied. True when Redis answered; else the
        share stays (logged once until Redis answers again). On a process of a host
        that another process heartbeats for: no round trip, the share read from the
        region, True."""
        with self._lock:
            now = time.monotonic()
            asked, self._counted = _cellrate._share_asked(self._local.stats(), self._counted)
            elapsed, self._since = now - self._since, now
            host = self._host
            if host is not None and not host.leads:
                # every tick keeps a baseline of the region's counters, so that a process
                # that takes over sends the host's demand of the last interval
                self._known_demand = True
                rate, period, _, generation = host.limit()
                self.share = _cellrate._share_of(self.fleet, rate, period)
                if not host.lead():
                    return True
                # the host's record holds what the region runs at, unless no leader
                # ever changed it (its start share is not in the records)
                self._joined = generation > 0
            # what it holds: nothing before Redis first answered (its start share is
            # not in the records)
            demand, held, fleet_rate = _cellrate._share_report(
                self.fleet, asked, elapsed, self._known_demand, self.share, self._joined)
            words = [1, self._key, self.member, repr(demand), repr(held), repr(self.ttl),
                     repr(self.interval), repr(fleet_rate), repr(self.timeout)]
            try:
                share, members, target = _cellrate._share_reply(self._call(words))
            except Exception as error:  # noqa: BLE001 - a heartbeat raises only a refusal
                text = str(error)
                if isinstance(error, self._library.exceptions.ResponseError) and _REFUSED in text:
                    self._step("refused")  # a member refused holds nothing
                    refusal = text[text.index(_REFUSED) + len(_REFUSED):].strip()
                    raise invalid(refusal.split(" ", 1)[0], refusal) from error
                self._step("unavailable")  # never more than the last share
                if not self._down:
                    self._down = True
                    log.warning("cellrate.share %s: Redis does not answer the heartbeat "
                                "(%s: %s); keeping the share %.6g until it does",
                                self.name, type(error).__name__, error, self.share)
                return False
            if self._down:
                self._down = False
                log.warning("cellrate.share %s: Redis answers again; rejoined", self.name)
            self._known_demand = self._joined = True
            self.members, self.target = members, target
            if self._step("answered", held, share):
                # applied: said at once, so that its old share counts no more and the
                # others grow at their next heartbeat, not one later (a failure here
                # only leaves the old share counted for interval + timeout)
                words[4] = repr(self.share)
                try:
                    share, self.members, self.target = _cellrate._share_reply(
                        self._call(words))
                except Exception:  # noqa: BLE001 - the heartbeat itself was answered
                    return True
                self._step("confirmed", self.share, share)
            return True

    def _step(self, outcome: str, held: float = 0.0, answered: float = 0.0) -> bool:
        """Does what the core says a member does after `outcome`: applies its share (every
        time it says so: a limit changed by hand is undone); True when the share shrank
        below `held` and the heartbeat that says it was applied is due."""
        share, apply, confirm = _cellrate._share_after(outcome, self.share, self._joined,
                                                       held, answered)
        if apply:
            self._apply(share)
        self.share = share
        return confirm

    def _apply(self, share: float) -> None:
        """The local limiter runs at `share` of the fleet (a change to its own limit
        changes nothing)."""
        rate, period, burst = _cellrate._share_limit(self.fleet, share)
        self._local.reconfigure(rate, period, burst=burst)
        self.share = share

    def close(self) -> None:
        """Stops the heartbeats and leaves the fleet (the others' shares grow at their
        next heartbeat; without this, after ttl). The local limiter then runs at the
        core's slowest rate, burst 1: what this member held is the others' now.
        A process of a host member only stops its own heartbeats and lets go of the
        host's lock (another process takes it over at its next tick); the region and
        the host's record stay (the host drops out ttl after its last process)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if self._host is not None:
            with self._lock:
                self._host.close()
            return
        with self._lock:
            self._step("left")
        try:
            self._run("HDEL", self._key, self.member)
        except Exception:  # noqa: BLE001 - leaving is best effort: ttl drops the member
            pass

    def __enter__(self) -> "_Share":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    rate = property(lambda self: self._local.rate, doc="This member's rate (per period).")
    burst = property(lambda self: self._local.burst, doc="This member's burst.")
    period = property(lambda self: self.fleet.period, doc="Seconds.")


def _beat(ref: "weakref.ref[_Share]", interval: float, stop: threading.Event) -> None:
    """Heartbeats every interval, on a fixed schedule (a heartbeat's own time does not
    delay the next: its reply arrives within interval + timeout of the last one's
    script), until the limiter is closed or collected."""
    due = time.monotonic() + interval
    while not stop.wait(max(0.0, due - time.monotonic())):
        limiter = ref()
        if limiter is None:
            return
        try:
            limiter.heartbeat()
        except Exception:  # noqa: BLE001 - the thread outlives a failure of one beat
            log.exception("cellrate.share %s: a heartbeat failed", limiter.name)
        del limiter
        due = max(due + interval, time.monotonic())  # one overran: the next at once


class ShareLimiter(_Share):
    """A fleet limit decided locally: this member's share of it, in a cellrate.Limiter.

    ShareLimiter(client, rate, period=None, *, burst=None, name, interval=1.0, ttl=None,
                 member=None, prefix="cellrate:", timeout=0.25, background=True)

    rate, period, burst: the fleet's limit (cellrate.Limit's arguments). name: the fleet
    (every member of one fleet gives the same name and limit). interval: seconds between
    heartbeats; ttl: a member silent that long drops out (default 3 intervals); both are
    the fleet's, fixed by its first heartbeat: another is refused (InvalidArgument naming
    it, from the constructor or heartbeat(); a member refused holds nothing). member:
    this member's name (default: host, pid and a random part; with shared=, host and a
    hash of the region's path). timeout bounds each heartbeat. background=False: no
    thread, the caller calls heartbeat(). The decisions (allow, check, peek, charge,
    take, wait, acquire, reset) are the local Limiter's own methods; the demand a
    heartbeat sends is what its counters decided since the last one (stats():
    units_admitted + units_refused - units_refunded; peek counts nothing). shared=path:
    the host is the member, every process of it deciding on that region (its counters
    are the host's demand); the process holding the lock file beside it (path +
    ".lock") heartbeats and applies the share to the region, the others read it from
    there. clock= (and capacity= of the keyed form) pass through to the local limiter.
    """

    _options = "ShareLimiter"
    _decisions = ("allow", "check", "peek", "charge", "take", "wait", "acquire", "reset")
    allow: Callable[..., bool]
    check: Callable[..., cellrate.Decision]
    peek: Callable[..., cellrate.Decision]
    charge: Callable[..., cellrate.Decision]
    take: Callable[..., int]
    wait: Callable[..., None]
    acquire: Callable[..., Awaitable[None]]
    reset: Callable[[], None]

    def _make_local(self, rate: float, period: float, burst: int, **local: Any) -> Any:
        return cellrate.Limiter(rate, period, burst=burst, **local)


class KeyedShareLimiter(_Share):
    """A fleet's per-key limit decided locally: each key's limit scaled by this member's
    share, in a cellrate.KeyedLimiter (capacity= as there). The share is the limit's as a
    whole, split by the units asked over all keys; keys are never sent to Redis. The
    other arguments are ShareLimiter's; the decisions take the key first."""

    _options = "KeyedShareLimiter"
    _decisions = ("allow", "check", "peek", "charge", "take", "reset")
    allow: Callable[..., bool]
    check: Callable[..., cellrate.Decision]
    peek: Callable[..., cellrate.Decision]
    charge: Callable[..., cellrate.Decision]
    take: Callable[..., int]
    reset: Callable[[Key], None]

    def _make_local(self, rate: float, period: float, burst: int, **local: Any) -> Any:
        return cellrate.KeyedLimiter(rate, period, burst=burst, **local)

    def __len__(self) -> int:
        return len(self._local)

