"""cellrate inside real nginx workers (Debian's nginx with its lua module):
one shared limit across workers, nanosecond precision, reloads that keep
every key's state, and header bytes equal to the Python face's."""

from __future__ import annotations

import concurrent.futures
import http.client
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

import cellrate

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "model"))
import gcra_model  # noqa: E402

from server import Nginx  # noqa: E402

SLOW_PERIOD = 1000  # seconds per unit: no unit comes back during a test


def fire(server: Nginx, path: str, threads: int, per_thread: int):
    """`threads` clients, each on its own keep-alive connection, each sending
    `per_thread` GETs: every (status, headers) in the order received."""

    def client(_):
        results = []
        connection = server.connection()
        try:
            for _ in range(per_thread):
                status, headers, _ = server.get(path, connection)
                results.append((status, headers))
        finally:
            connection.close()
        return results

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return [r for batch in pool.map(client, range(threads)) for r in batch]


@pytest.mark.parametrize("path", ["/limited", "/announced"])
def test_refusal_carries_the_fields_and_ends_the_request(path):
    """A refusal carries RateLimit-Policy, RateLimit and Retry-After; an
    admission carries none by default (/limited) and the first two with
    admitted_headers (/announced)."""
    burst = 3
    with Nginx(workers=1, rate=f"1/{SLOW_PERIOD}s", burst=burst) as server:
        started = time.monotonic()
        replies = [server.get(path) for _ in range(burst + 2)]
        elapsed = time.monotonic() - started
    statuses = [status for status, _, _ in replies]
    assert statuses == [200] * burst + [429] * 2
    window = burst * SLOW_PERIOD
    for index, (status, headers, _) in enumerate(replies):
        if status == 200 and path == "/limited":
            assert not {"RateLimit-Policy", "RateLimit", "Retry-After"} & set(headers), headers
            continue
        assert headers["RateLimit-Policy"] == f'"default";q={burst};w={window}'
        remaining = max(0, burst - 1 - index)
        match = re.fullmatch(r'"default";r=(\d+);t=(\d+)', headers["RateLimit"])
        assert match, headers["RateLimit"]
        assert int(match[1]) == remaining
        # t: the time until the key is idle again, rounded up.
        spent = min(index + 1, burst)
        assert spent * SLOW_PERIOD - elapsed - 1 <= int(match[2]) <= spent * SLOW_PERIOD
        if status == 200:
            assert "Retry-After" not in headers
        else:
            assert SLOW_PERIOD - elapsed - 1 <= int(headers["Retry-After"]) <= SLOW_PERIOD


def test_options_are_checked_and_a_mistake_names_the_option():
    """Each of the config's bad_options is refused before anything is decided,
    with the option's name; the route's limit (burst 3) is then untouched."""
    with Nginx(workers=1) as server:
        status, _, body = server.get("/bad_options")
        assert status == 200
        errors = body.decode().splitlines()
        # Nothing was decided: the route's three units are all still there.
        assert [server.get("/several")[0] for _ in range(4)] == [200, 200, 200, 429]
    expected = [  # the core's words, cellrate.web.Policy's too (tests/vectors/options.txt)
        "unknown option 'headers' (did you mean 'header'?)",
        "admitted_headers must be a boolean",
        "key must be a string (the request's key) or a function returning one",
        "status must be an integer from 400 to 599",
        "status must be an integer from 400 to 599",
        "status must be an integer from 400 to 599",
        "status must be an integer from 400 to 599",
        "status must be an integer from 400 to 599",
        "name must be 1 to 64 printable ASCII characters",
        "opts must be a table with the fields key, cost, ",
    ]
    assert len(errors) == len(expected), errors
    for error, wanted in zip(errors, expected):
        assert "cellrate.nginx: " + wanted in error, (error, wanted)


def test_status_and_body_of_a_refusal_are_configurable():
    with Nginx(workers=1, rate=f"1/{SLOW_PERIOD}s", burst=1) as server:
        first = server.get("/body")
        second = server.get("/body")
    assert first[0] == 200
    status, headers, body = second
    assert (status, body) == (503, b"slow down\n")
    assert headers["Content-Type"] == "text/plain"
    assert "Retry-After" in headers and "RateLimit" in headers


def test_keys_from_a_function_and_from_an_expression():
    """Each key has its own budget; the function's and the expression's keys
    are the bytes they return, so "arg:a" is one key wherever it comes from."""
    burst = 2
    with Nginx(workers=1, rate=f"1/{SLOW_PERIOD}s", burst=burst) as server:
        def by_function(client):
            connection = server.connection()
            try:
                connection.request("GET", "/by_function", headers={"X-Client": client})
                response = connection.getresponse()
                response.read()
                return response.status
            finally:
                connection.close()

        assert [by_function("alice") for _ in range(3)] == [200, 200, 429]
        assert [by_function("bob") for _ in range(3)] == [200, 200, 429]
        assert [server.get("/by_expression?client=a")[0] for _ in range(3)] == [200, 200, 429]
        assert server.get("/by_expression?client=b")[0] == 200
        # The client address is yet another key, untouched so far.
        assert server.get("/limited")[0] == 200


def test_a_class_per_request_from_ngx_var():
    """priority from a function reading ngx.var: bulk stops at its reserve (half
    of 10), requests without a class spend the rest; a class that is not the
    limit's, or several limits, are mistakes (a 500 and the core's words)."""
    with Nginx(workers=2, rate=f"1/{SLOW_PERIOD}s", burst=2) as server:
        def get(priority=None):
            connection = server.connection()
            try:
                headers = {"X-Priority": priority} if priority else {}
                connection.request("GET", "/classed", headers=headers)
                response = connection.getresponse()
                response.read()
                return response.status, response.getheader("RateLimit")
            finally:
                connection.close()

        assert [get("bulk")[0] for _ in range(6)] == [200] * 5 + [429]
        assert get("bulk")[1].startswith('"default";r=0;')  # the class's remaining
        assert get("critical") == (200, '"default";r=4;t=6000')
        assert [get()[0] for _ in range(5)] == [200] * 4 + [429]
        assert get("urgent")[0] == 500
        assert server.get("/classed_several")[0] == 500
        log = server.log()
        assert "priority must be the name of one of the limit's priority classes" in log
        assert "priority: several limits decided as one take no class" in log


def test_overload_bulk_refused_critical_served_four_workers():
    """Done when (priorities inside one limit): under overload, 4 workers on one
    shared region, bulk is admitted its half of the burst (10) and no more, and
    critical then still gets the half bulk may not spend, counted."""
    with Nginx(workers=4, rate=f"1/{SLOW_PERIOD}s", burst=2) as server:
        def get(priority):
            connection = server.connection()
            try:
                connection.request("GET", "/classed", headers={"X-Priority": priority})
                response = connection.getresponse()
                response.read()
                return response.status
            finally:
                connection.close()

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            bulk = list(pool.map(get, ["bulk"] * 60))
            critical = list(pool.map(get, ["critical"] * 20))
        assert (bulk.count(200), bulk.count(429)) == (5, 55)
        assert (critical.count(200), critical.count(429)) == (5, 15)


def test_several_limits_as_one():
    """A route limit (burst 3) and a per-client limit (burst 2) decided as one:
    the fields are those of the limit that refused, and a refusal by the
    client's limit spends nothing of the route's."""
    with Nginx(workers=2, rate=f"1/{SLOW_PERIOD}s", burst=2) as server:
        def get(client):
            connection = server.connection()
            try:
                connection.request("GET", "/several", headers={"X-Client": client})
                response = connection.getresponse()
                response.read()
                return response.status, dict(response.getheaders())
            finally:
                connection.close()

        alice = [get("alice") for _ in range(3)]
        bob = [get("bob") for _ in range(2)]
    assert [status for status, _ in alice] == [200, 200, 429]
    # alice's third request was refused by her own limit, whose fields it carries.
    assert alice[2][1]["RateLimit-Policy"] == f'"default";q=2;w={2 * SLOW_PERIOD}'
    # It spent nothing of the route's: bob still gets its third unit.
    assert [status for status, _ in bob] == [200, 429]
    assert bob[1][1]["RateLimit-Policy"] == f'"default";q=3;w={3 * SLOW_PERIOD}'
    assert bob[1][1]["RateLimit"].startswith('"default";r=0;')
    # An admission carries the tightest limit's fields: bob's has 0 left in the route.
    assert bob[0][1]["RateLimit"].startswith('"default";r=0;')


def test_wait_holds_requests_on_ngx_sleep_without_blocking_the_worker():
    """1/s, burst 1, wait 2.1 s, five requests at once on one worker: the
    reservations are due at 0, 1 and 2 s, so three pass, each held for its
    delay, and two (3 and 4 s) are refused at once. A request to another
    location sent meanwhile is answered before the last waiter: the worker
    sleeps on ngx.sleep, not in the operating system. The split holds for
    any arrivals within 0.9 s of the first (a busy machine's clients), and
    every time compared is seconds apart."""
    with Nginx(workers=1) as server:
        barrier = threading.Barrier(5)
        done = {}

        def waiter(index):
            barrier.wait()
            status, headers, _ = server.get("/wait")
            done[index] = (time.monotonic(), status, headers)

        started = time.monotonic()
        threads = [threading.Thread(target=waiter, args=(i,)) for i in range(5)]
        for thread in threads:
            thread.start()
        time.sleep(0.05)
        assert server.get("/stats")[0] == 200
        other_done = time.monotonic() - started
        for thread in threads:
            thread.join(timeout=20)
    statuses = sorted(status for _, status, _ in done.values())
    assert statuses == [200, 200, 200, 429, 429]
    admitted = sorted(when - started for when, status, _ in done.values() if status == 200)
    refused = [when - started for when, status, _ in done.values() if status == 429]
    # Each waiter is held at least its delay (0, 1, 2 s); refusals do not wait.
    assert admitted[1] >= 1 - 0.01 and admitted[2] >= 2 - 0.01, admitted
    assert max(refused) < admitted[2], (refused, admitted)
    assert other_done < admitted[2]
    for _, status, headers in done.values():
        assert "RateLimit" in headers and ("Retry-After" in headers) == (status == 429)


@pytest.mark.parametrize("workers", [2, 4])
def test_workers_share_one_limit(workers):
    """Concurrent clients spread over every worker (reuseport): exactly
    `burst` requests pass in all (a lost update would pass one more), each
    200's remaining count is its rank's or one less (each decision counts
    from its own clock reading, made before it reads the state: one that
    reads the clock before another worker's commit and the state after it
    sees the units as of its earlier instant) and every 429 carries the
    fields of this limit."""
    burst = 25
    with Nginx(workers=workers, rate=f"1/{SLOW_PERIOD}s", burst=burst,
               listen_options="reuseport") as server:
        started = time.monotonic()
        replies = fire(server, "/announced", threads=4 * workers, per_thread=20)
        elapsed = time.monotonic() - started
    assert len(replies) == 4 * workers * 20
    served_by = {headers["X-Worker"] for _, headers in replies}
    assert len(served_by) >= 2, f"every request went to one worker: {served_by}"
    admitted = [headers for status, headers in replies if status == 200]
    refused = [headers for status, headers in replies if status == 429]
    assert len(admitted) == burst
    assert len(admitted) + len(refused) == len(replies)
    remaining = sorted(int(re.search(r";r=(\d+);", h["RateLimit"])[1]) for h in admitted)
    assert all(rank - 1 <= left <= rank for rank, left in enumerate(remaining)), remaining
    assert remaining[-1] == burst - 1  # the first admission saw the whole burst less itself
    window = burst * SLOW_PERIOD
    for headers in refused:
        assert headers["RateLimit-Policy"] == f'"default";q={burst};w={window}'
        match = re.fullmatch(r'"default";r=0;t=(\d+)', headers["RateLimit"])
        assert match, headers["RateLimit"]
        assert window - elapsed - 1 <= int(match[1]) <= window
        assert SLOW_PERIOD - elapsed - 1 <= int(headers["Retry-After"]) <= SLOW_PERIOD


@pytest.mark.parametrize("burst", [1, 250])
def test_precision_at_5000_per_second(burst):
    """5000/s, offered more than that for 2 s by wrk over two workers.
    elapsed is the span between the first and the last request nginx saw
    (CLOCK_MONOTONIC, ns, recorded just before each decision).

    Always: at most burst + 5000 * elapsed + 1 admissions, and exactly (within
    1 %) the count that the reference model (tests/model) admits on the
    recorded arrivals. A limiter on a millisecond clock admits at most one
    unit per distinct millisecond with burst 1: a fifth of it.

    With burst 1 nothing absorbs the gaps between arrivals: a unit goes to the
    first arrival at or after the previous admission + 200 us, and the time
    until that arrival is lost; so an exact GCRA admits elapsed / (200 us +
    mean gap), below 5000 * elapsed - burst (measured here: the model itself
    admits about 2900/s under 30000/s offered). With burst 250 (50 ms of
    tolerance) it admits about 5000 * elapsed, unless the machine pauses wrk
    or nginx for longer than that: what an exact GCRA admits is the model's
    count on the arrivals, whatever the machine did, and the count is
    compared with that. How fast wrk offers is the machine's affair too: the
    limit has only to have refused some."""
    wrk = shutil.which("wrk")
    assert wrk, "wrk not found: run make deps (tests/install-deps.sh)"
    rate = 5000
    with Nginx(workers=2, listen_options="reuseport", precise_burst=burst) as server:
        run = subprocess.run([wrk, "-t2", "-c16", "-d2s", "--timeout", "5s",
                              f"http://127.0.0.1:{server.port}/precise"],
                             capture_output=True, text=True, timeout=30)
        assert run.returncode == 0, run.stderr
        admitted = server.stats()["admitted"]
        _, _, body = server.get("/arrivals")
    arrivals = sorted(int(line) for line in body.split())
    elapsed = (arrivals[-1] - arrivals[0]) / 1e9
    assert elapsed > 1.5, run.stdout
    assert admitted <= burst + rate * elapsed + 1
    limit = gcra_model.Limit(emission_ns=1_000_000_000 // rate, burst=burst)
    tat, expected = 0, 0
    for now in arrivals:
        decision = gcra_model.decide(limit, tat, now, 1)
        tat = decision.tat_after
        expected += decision.allowed
    assert abs(admitted - expected) <= 0.01 * expected, (
        f"admitted {admitted}, the model {expected}, in {elapsed:.6f} s")
    assert expected < len(arrivals), f"offered only {len(arrivals) / elapsed:.0f}/s: none refused"


def test_reload_during_traffic_keeps_every_key():
    """Clients keep sending while nginx reloads twice (a new master Lua state
    and new workers each time, the region reopened by path): no request
    fails, the new workers answer, and over the whole run exactly `burst`
    requests pass: the state of the key survived both reloads."""
    burst = 12
    with Nginx(workers=2, rate=f"1/{SLOW_PERIOD}s", burst=burst) as server:
        before = [server.get("/limited")[0] for _ in range(5)]
        assert before == [200] * 5
        stop = threading.Event()
        replies, failures = [], []

        def client():
            # A connection per request: an idle keep-alive connection that an
            # old worker closes on its way out is not a failed request.
            while not stop.is_set():
                try:
                    status, headers, _ = server.get("/limited")
                    replies.append((status, headers["X-Worker"]))
                except (OSError, http.client.HTTPException) as error:
                    failures.append(repr(error))

        def until(condition, what):
            # traffic is what the clients get through, however busy the machine
            deadline = time.monotonic() + 30
            while not condition():
                assert time.monotonic() < deadline, what
                time.sleep(0.01)

        threads = [threading.Thread(target=client) for _ in range(3)]
        for thread in threads:
            thread.start()
        try:
            until(lambda: len(replies) > 20, "no traffic before the reload")
            old_workers = {str(pid) for pid in server.worker_pids()}
            server.reload()
            count = len(replies)
            until(lambda: len(replies) > count + 20, "no traffic between the reloads")
            server.reload()
            new_workers = {str(pid) for pid in server.worker_pids()} - old_workers
            until(lambda: any(worker in new_workers for _, worker in replies),
                  "no reply from a reloaded worker")
            count = len(replies)
            until(lambda: len(replies) > count + 20, "no traffic after the reloads")
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=20)
    assert not failures, failures[:5]
    statuses = [status for status, _ in replies]
    assert set(statuses) <= {200, 429}
    assert 5 + statuses.count(200) == burst


def test_reload_with_a_changed_limit_under_traffic_carries_what_was_used():
    """A live change (docs/design.md §5) in nginx: four workers serve clients that never stop while
    `nginx -s reload` brings a changed rate and burst. The master's
    init_by_lua opens the region with the new limit, which makes it the
    region's; the old workers follow from their next decision while they
    drain and the new ones start on it. No request fails, and over the whole
    run exactly the new burst passes: the 12 units used before the reload
    carried (a fresh burst would have let 20 more through)."""
    with Nginx(workers=4, rate=f"1/{SLOW_PERIOD}s", burst=12) as server:
        stop = threading.Event()
        replies, failures = [], []

        def client():
            while not stop.is_set():
                try:
                    status, headers, _ = server.get("/limited")
                    replies.append((status, headers["X-Worker"], headers.get("RateLimit", "")))
                except (OSError, http.client.HTTPException) as error:
                    failures.append(repr(error))

        threads = [threading.Thread(target=client) for _ in range(4)]
        for thread in threads:
            thread.start()
        try:
            deadline = time.monotonic() + 30
            while sum(status == 429 for status, _, _ in replies) < 20:
                assert time.monotonic() < deadline, "the burst was never used up"
                time.sleep(0.01)
            old_workers = {str(pid) for pid in server.worker_pids()}
            admitted_before = sum(status == 200 for status, _, _ in replies)
            server.write_limits(RATE=f"1/{SLOW_PERIOD // 2}s", BURST="20")
            # the documented check opens the regions as the master will: the
            # change is made there, and the running workers follow it
            check = server.check_limits()
            assert check.returncode == 0, check.stderr
            server.reload()
            new_workers = {str(pid) for pid in server.worker_pids()} - old_workers
            deadline = time.monotonic() + 30
            while not any(worker in new_workers and status == 429
                          for status, worker, _ in replies):
                assert time.monotonic() < deadline, "no refusal from a reloaded worker"
                time.sleep(0.01)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=20)
        log = server.log()
    assert not failures, failures[:5]
    assert admitted_before == 12
    assert "per_client's limit changed from cellrate.KeyedLimiter(rate=1, period=1000, burst=12" \
        in check.stderr, check.stderr
    assert "per_client's limit changed" not in log  # the reload found it made
    statuses = [status for status, _, _ in replies]
    assert set(statuses) <= {200, 429}
    assert statuses.count(200) == 20, (statuses.count(200), log[-2000:])
    refused_after = [fields for status, worker, fields in replies
                     if status == 429 and worker in new_workers]
    assert refused_after and all("r=0" in fields for fields in refused_after), refused_after[:3]


def parse_decision(text: str):
    allowed, remaining, retry_after, reset_after, limit = text.split()
    return allowed == "true", int(remaining), float(retry_after), float(reset_after), int(limit)


@pytest.mark.parametrize("named", [False, True])
def test_header_bytes_equal_the_python_face(named):
    """For each decision nginx made (returned exactly in X-Decision), the
    fields it sent are byte for byte those of Python's Decision.headers():
    admissions, refusals, a probe (cost 0) and an unfittable cost. A dry run
    answers a refusal without Retry-After, as the Python middleware does (the
    bytes of a real refusal's Retry-After: tests/nginx/test_contract.py).
    nginx's LuaJIT decides through the FFI (cellrate.ffi)."""
    burst, rate = 4, 2
    query = "&name=1" if named else ""
    window = burst / rate
    compared = 0
    with Nginx(workers=1, rate=f"{rate}/s", burst=burst) as server:
        for cost in [1, 2, 1, 1, 0, 3, burst + 1, 1]:
            _, headers, _ = server.get(f"/dry?cost={cost}{query}")
            allowed, remaining, retry_after, reset_after, limit = parse_decision(
                headers["X-Decision"])
            decision = cellrate.Decision(allowed, remaining, retry_after, reset_after, limit,
                                         window)
            if named:
                expected = decision.headers("per-client", legacy=True)
            else:
                expected = decision.headers()
            expected.pop("Retry-After", None)  # a dry run
            sent = {name: value for name, value in headers.items()
                    if "ratelimit" in name.lower() or name == "Retry-After"}
            assert sent == expected, (cost, headers["X-Decision"])
            assert headers["X-Path"] == "ffi"
            compared += 1
        log = server.log()
    assert compared == 8
    assert "cellrate dry run: would refuse" in log


def test_a_dry_run_counts_would_be_refusals_across_workers():
    """4 workers, 4 clients: every refusal a dry run lets through is counted in
    the region as would_refuse, never as refused; the admissions as admitted,
    exactly the decisions the clients saw (X-Decision)."""
    burst = 25
    with Nginx(workers=4, rate=f"1/{SLOW_PERIOD}s", burst=burst) as server:
        replies = fire(server, "/dry", threads=4, per_thread=30)
        stats = cellrate._cellrate.inspect_region(server.region + ".per_client")["stats"]
    assert [status for status, _ in replies] == [200] * 120
    admitted = sum(headers["X-Decision"].startswith("true") for _, headers in replies)
    assert admitted == burst  # one client key: the burst, then refusals let through
    assert (stats["admitted"], stats["refused"], stats["would_refuse"]) == (
        admitted, 0, 120 - admitted)


def test_module_is_built_against_openresty_luajit():
    """The module nginx loads was compiled against the LuaJIT headers of
    OpenResty's branch, the one Debian's lua module links."""
    found = subprocess.run(["dpkg-query", "-S", "/usr/include/luajit-2.1/lua.h"],
                           capture_output=True, text=True)
    assert found.stdout.startswith("libluajit2-5.1-dev:"), found.stdout
    linked = subprocess.run(["ldd", "/usr/lib/nginx/modules/ngx_http_lua_module.so"],
                            capture_output=True, text=True).stdout
    library = re.search(r"libluajit-5\.1\.so\.2 => (\S+)", linked)[1]
    # Merged /usr: dpkg knows the library by its /usr path.
    candidates = [library, "/usr" + library] if not library.startswith("/usr/") else [library]
    owners = [subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True).stdout
              for path in candidates]
    assert any(owner.startswith("libluajit2-5.1-2") for owner in owners), owners


def test_the_limit_is_refused_at_start_when_the_region_does_not_fit():
    """A limit that cannot be built stops nginx at start (init_by_lua runs in
    the master), with the core's words in the log, instead of workers that
    fail on every request."""
    server = Nginx(workers=1, rate="10/s", burst=0)
    try:
        with pytest.raises(RuntimeError, match="burst must be an integer >= 1"):
            server.start()
    finally:
        server.stop()


MISTAKES = [  # the words of each of the config's mistakes, in order
    "cellrate.nginx: unknown option 'headers'",
    "cellrate.nginx: admitted_headers must be a boolean",
    "cellrate.nginx: name must be",
    "cellrate.nginx: opts must be a table with the fields",
    "cellrate.nginx: cost must be an integer >= 0",
    "cellrate.nginx: cost must be an integer >= 0",
    "cellrate.nginx: wait must be a number of seconds >= 0",
    "cellrate.nginx: option key: the function returned a nil: key must be a string (any bytes, any length), "
    "not nil",
    # the core's words, cellrate.web.Policy's too
    "cellrate.nginx: ipv6_prefix must be an integer from 0 to 128",
    "cellrate.nginx: ipv4_prefix must be an integer from 0 to 32",
    "cellrate.nginx: ipv4_prefix must be an integer from 0 to 32",
    "cellrate.nginx: limits must be a cellrate limiter, a keyed limiter or a list of them, "
    "got string",
    "cellrate.nginx: limits[2] must be a cellrate limiter or keyed limiter, got string",
    "cellrate.nginx: limits must not be an empty list",
    "cellrate.nginx: option wait: limits must be one cellrate limiter or keyed limiter",
    "cellrate.Limiter is closed",
]


def test_a_mistake_is_raised_at_the_configs_line():
    """Each mistake given to the helper in an access_by_lua_block (no pcall)
    ends the request with 500, and nginx's error log names the block's own
    line (line 3 of the chunk), not a line of cellrate's Lua files: options,
    costs, waits, a key function's result, the limits argument, a closed
    limiter."""
    with Nginx(workers=2) as server:
        for case in range(1, len(MISTAKES) + 1):
            assert server.get(f"/mistake?case={case}")[0] == 500
        log = server.log()
    errors = re.findall(r"runtime error: (.*)", log)
    assert len(errors) == len(MISTAKES), log
    for error, words in zip(errors, MISTAKES):
        assert re.match(r"access_by_lua\(nginx\.conf:\d+\):3: ", error), error
        assert words in error, (error, words)
        assert "nginx.lua" not in error and "ffi.lua" not in error, error


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback (::1)")
def test_the_client_address_keys_ipv6_by_its_network():
    """The default key is the client's address: IPv6 by its /64 (two
    addresses of one /64 share a limit, two /64s do not), IPv4-mapped IPv6 as
    its IPv4 address, IPv4 by its address; ipv4_prefix and ipv6_prefix change
    the lengths. The addresses come over [::1] and 127.0.0.1, and through
    X-Real-IP (the realip module), on a limit of burst 2."""
    with Nginx(workers=2, rate=f"1/{SLOW_PERIOD}s", burst=2, ipv6=True) as server:
        def statuses(path, *clients):
            replies = []
            for client in clients:
                host = "::1" if client is None or ":" in client else "127.0.0.1"
                headers = {} if client is None else {"X-Real-IP": client}
                replies.append(server.get(path, headers=headers, host=host)[0])
            return replies

        # ::1 itself (no header) and ::2 share ::/64.
        assert statuses("/limited", None, "::2", None) == [200, 200, 429]
        # 2001:db8:1:2::/64: two addresses, two units; the third is refused.
        assert statuses("/limited", "2001:db8:1:2::a", "2001:db8:1:2:ffff::b",
                        "2001:db8:1:2::c") == [200, 200, 429]
        # Another /64 of the same /48 has its own limit.
        assert statuses("/limited", "2001:db8:1:3::a") == [200]
        # IPv4-mapped IPv6 is the IPv4 address, over either family.
        assert statuses("/limited", "::ffff:192.0.2.7", "192.0.2.7",
                        "::ffff:192.0.2.7") == [200, 200, 429]
        # IPv4 by its address: a neighbour has its own limit.
        assert statuses("/limited", "192.0.2.8", "192.0.2.9") == [200, 200]
        # ipv6_prefix = 60: 2001:db8:9:20:: and 2001:db8:9:2f:: share a /60,
        # 2001:db8:9:30:: is another; ipv4_prefix = 24 likewise.
        assert statuses("/prefixes", "2001:db8:9:20::1", "2001:db8:9:2f::1",
                        "2001:db8:9:2a::1", "2001:db8:9:30::1") == [200, 200, 429, 200]
        assert statuses("/prefixes", "198.51.100.1", "198.51.100.254",
                        "198.51.100.9", "198.51.101.1") == [200, 200, 429, 200]


def test_a_bad_limit_passes_nginx_t_but_fails_the_check_and_the_reload():
    """lua-nginx-module does not run init_by_lua* under `nginx -t`, so it
    passes a rate the core refuses ("1/month"). The nginx page's check
    (docs/nginx.md) (the limits file run by luajit) fails on it with the
    core's words and a non-zero status; `nginx -s reload` exits
    0 (it only signals the master), the master writes the failure to the
    error log and the old workers go on serving the old limit. A good file
    passes the check and reloads, and the key's state carries over."""
    burst = 2
    with Nginx(workers=2, rate=f"1/{SLOW_PERIOD}s", burst=burst) as server:
        assert server.get("/limited")[0] == 200
        workers = set(server.worker_pids())
        for rate, words in [("1/month", "algorithm: months and years are calendar periods")]:
            server.write_limits(RATE=rate)
            tested = subprocess.run(server.command("-t", "-q"), capture_output=True)
            assert tested.returncode == 0, tested.stderr
            check = server.check_limits()
            assert check.returncode != 0, check
            assert words in check.stderr and str(server.limits) in check.stderr, check.stderr
            logged = len(server.log())
            assert server.signal_reload().returncode == 0
            deadline = time.monotonic() + 10
            while "init_by_lua error" not in server.log()[logged:]:
                assert time.monotonic() < deadline, server.log()[logged:]
                time.sleep(0.02)
            failure = server.log()[logged:]
            assert re.search(r"\[error\] .*init_by_lua error: " + re.escape(str(server.limits)),
                             failure), failure
            assert words in failure, failure
            # The old workers serve, on the old limit (the second unit of two).
            assert server.get("/limited")[0] == 200
            assert set(server.worker_pids()) == workers
        server.write_limits(RATE=f"1/{SLOW_PERIOD}s")
        check = server.check_limits()
        assert check.returncode == 0, check.stderr
        server.reload()
        # The two units were spent before the reload: the key kept its state.
        assert server.get("/limited")[0] == 429


def test_a_key_refused_five_times_across_four_workers_is_banned_for_three_seconds():
    """limits.penalized (2/s, burst 2, a ban of 3 s after 5 refusals within an
    hour) in a shared region: each request on a connection of its own, taken
    by any of the 4 workers, all of one key. The refusals before the ban
    are the limit's (Retry-After 1: a unit comes back within 0.5 s); the
    5th in total starts the ban (Retry-After 3), which refuses where the
    limit alone would admit, and ends after its 3 s."""
    client = {"X-Real-IP": "192.0.2.150"}
    with Nginx(workers=4) as server:
        limit_refusals = 0
        ban_started = None
        for _ in range(60):
            status, headers, _ = server.get("/penalized", headers=client)
            if status == 200:
                continue
            assert status == 429
            if headers["Retry-After"] == "3":
                ban_started = time.monotonic()
                break
            assert headers["Retry-After"] == "1", headers
            limit_refusals += 1
        assert ban_started is not None, "no ban in 60 requests"
        assert limit_refusals == 4  # counted across the workers: the 5th started the ban
        time.sleep(1.0)  # the limit gives units back: only the ban refuses now
        status, headers, _ = server.get("/penalized", headers=client)
        if time.monotonic() - ban_started < 2.9:  # (a loaded machine may have slept past it)
            assert status == 429 and headers["Retry-After"] in ("1", "2", "3"), headers
        assert server.get("/penalized", headers={"X-Real-IP": "192.0.2.151"})[0] == 200
        time.sleep(max(0.0, ban_started + 3.2 - time.monotonic()))
        assert server.get("/penalized", headers=client)[0] == 200
