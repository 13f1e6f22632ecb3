"""Following a provider through the Python face (docs/design.md §18):
tests/vectors/follow.txt replayed through cellrate.read_signal and through
Limiter.follow / KeyedLimiter.follow (in process and shared), and what a face
adds: the forms headers come in, bad arguments in the core's words."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

import cellrate

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "vectors"
sys.path.insert(0, str(ROOT / "tests" / "model"))

import gcra_model as model  # noqa: E402
from test_vectors import STATUS  # noqa: E402


def decode(token: str) -> bytes:
    assert token.startswith("=")
    out, text, i = bytearray(), token[1:], 0
    while i < len(text):
        if text[i] == "%":
            out.append(int(text[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(ord(text[i]))
            i += 1
    return bytes(out)


def fields_of(words: list[str]) -> tuple[list, list[str]]:
    count = int(words[0])
    fields = [(decode(words[1 + 2 * i]), decode(words[2 + 2 * i])) for i in range(count)]
    return fields, words[1 + 2 * count:]


def seconds(ns: int) -> float:
    return model.float_face_seconds(ns)


def duration(ns: int) -> float:
    return math.inf if ns == model.NEVER else ns / 1e9


def read_vectors():
    signals, refusals, scenarios, retries = [], [], [], []
    for number, line in enumerate((VECTORS / "follow.txt").read_text().splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        word, *rest = line.split(" ")
        if word in ("signal", "refused"):
            status, quota, realtime = int(rest[0]), rest[1], int(rest[2])
            fields, tail = fields_of(rest[3:])
            if word == "refused":
                refusals.append((number, fields, status, quota, realtime, tail[0]))
            else:
                count = int(tail[0])
                bounds = [(int(tail[1 + 2 * i]), int(tail[2 + 2 * i])) for i in range(count)]
                signals.append((number, fields, status, quota, realtime, bounds))
        elif word == "retry":
            retries.append((number, [int(word) for word in rest]))
        elif word == "limit":
            scenarios.append((number, rest, []))
        else:
            scenarios[-1][2].append((number, word, rest))
    return signals, refusals, scenarios, retries


SIGNALS, REFUSALS, SCENARIOS, RETRIES = read_vectors()


def test_the_vectors_are_there():
    assert len(SIGNALS) > 300 and len(SCENARIOS) > 100 and REFUSALS and len(RETRIES) > 50


def test_read_signal_matches_the_vectors():
    mismatches = []
    for number, fields, status, quota, realtime, bounds in SIGNALS:
        got = cellrate.read_signal(fields, status or None, quota=quota, now=seconds(realtime))
        want = [(remaining, within / 1e9) for remaining, within in bounds]
        if got != want:
            mismatches.append(f"line {number}: {got} != {want}")
    assert not mismatches, "\n".join(mismatches[:20])


def test_refusals_have_the_cores_words():
    for number, fields, status, quota, realtime, name in REFUSALS:
        with pytest.raises(cellrate.InvalidArgument) as raised:
            cellrate.read_signal(fields, status, quota=quota, now=seconds(realtime))
        param, message = STATUS[name]
        assert (raised.value.param, str(raised.value)) == (param, message), number


def make_store(kind: str, header: list[str], tmp_path, index: int):
    algorithm, a, b = header[0], int(header[1]), int(header[2])
    if algorithm == "gcra":
        args, kwargs = (1.0, model.float_face_period(a)), {"burst": b}
    else:
        args, kwargs = (float(b), seconds(a)), {"algorithm": algorithm}
    if kind.startswith("shared"):
        kwargs["shared"] = str(tmp_path / f"follow-{kind}-{index}")
    if kind.endswith("keyed"):
        store = cellrate.KeyedLimiter(*args, capacity=16, **kwargs)
        return store, ("key",)
    return cellrate.Limiter(*args, **kwargs), ()


@pytest.mark.parametrize("kind", ["limiter", "keyed", "shared limiter", "shared keyed"])
def test_follow_matches_the_vectors(kind, tmp_path):
    mismatches = []
    for index, (_, header, steps) in enumerate(SCENARIOS):
        store, key = make_store(kind, header, tmp_path, index)
        for number, word, rest in steps:
            t = seconds(int(rest[0]))
            if word == "check":
                got = store.check(*key, int(rest[1]), now=t).allowed
                want = rest[2] == "1"
            elif word == "peek":
                d = store.peek(*key, int(rest[1]), now=t)
                got = (d.allowed, d.remaining, d.retry_after, d.reset_after)
                want = (rest[2] == "1", int(rest[3]), duration(int(rest[4])), int(rest[5]) / 1e9)
            else:
                status, quota, pending, share = int(rest[1]), rest[2], int(rest[3]), float(rest[4])
                fields, tail = fields_of(rest[5:])
                got = store.follow(*key, fields, status or None, quota=quota, pending=pending,
                                   share=share, now=t)
                want = tail[0] == "1"
            if got != want:
                mismatches.append(f"line {number} ({word}): {got} != {want}")
    assert not mismatches, "\n".join(mismatches[:20])


def test_retry_waits_match_the_vectors():
    checked = 0
    for number, (status, attempt, retries, backoff, cap, random64, retry, wait) in RETRIES:
        if seconds(backoff) is None or seconds(cap) is None:
            continue  # not exact in float seconds
        got = cellrate._cellrate._retry_wait(status, attempt, retries, seconds(backoff),
                                             seconds(cap), random64)
        assert got == (wait / 1e9 if retry else None), number
        checked += 1
    assert checked > 50


# --------------------------------------------------------------------------
# What the Python face adds


class MultiHeaders:
    """A mapping with repeated names, as httpx.Headers: multi_items()."""

    def __init__(self, pairs):
        self.pairs = pairs

    def multi_items(self):
        return list(self.pairs)


@pytest.mark.parametrize("headers", [
    {"Retry-After": "3"},
    [("Retry-After", "3")],
    (("retry-after", b"3"),),
    [(b"RETRY-AFTER", b"3")],
    MultiHeaders([("Retry-After", "3")]),
])
def test_headers_in_any_usual_form(headers):
    assert cellrate.read_signal(headers, 429) == [(0, 3.0)]


def test_repeated_fields_of_a_mapping_with_multi_items_all_count():
    headers = MultiHeaders([("x-ratelimit-remaining", "9"), ("x-ratelimit-remaining", "2")])
    assert cellrate.read_signal(headers) == [(2, 0.0)]


def test_http_message_headers():
    import email.message

    message = email.message.Message()
    message["Retry-After"] = "4"
    assert cellrate.read_signal(message, 503) == [(0, 4.0)]


@pytest.mark.parametrize("headers", ["Retry-After: 3", b"x", 5, [("Retry-After",)],
                                     [("Retry-After", 3)], [["Retry-After", "3"]], None])
def test_headers_of_another_shape_name_headers(headers):
    with pytest.raises(cellrate.InvalidArgumentType) as raised:
        cellrate.read_signal(headers)
    assert (raised.value.param, str(raised.value)) == STATUS["E_HEADERS"]


@pytest.mark.parametrize("kwargs, status", [
    ({"quota": "bytes"}, "E_QUOTA"),
    ({"status": 600}, "E_STATUS_CODE"),
    ({"status": 99}, "E_STATUS_CODE"),
    ({"pending": -1}, "E_PENDING"),
    ({"share": 0.0}, "E_SHARE"),
    ({"share": 1.5}, "E_SHARE"),
    ({"share": math.nan}, "E_SHARE"),
    ({"now": -1.0}, "E_NOW"),
])
def test_bad_arguments_in_the_cores_words(kwargs, status):
    limiter = cellrate.Limiter("10/s")
    before = limiter.peek()
    with pytest.raises(cellrate.InvalidArgument) as raised:
        limiter.follow({"Retry-After": "5"}, **kwargs)
    assert (raised.value.param, str(raised.value)) == STATUS[status]
    assert limiter.peek().remaining == before.remaining  # nothing followed


@pytest.mark.parametrize("kwargs, status", [
    ({"quota": 1}, "E_QUOTA"),
    ({"status": "429"}, "E_STATUS_CODE"),
    ({"status": True}, "E_STATUS_CODE"),
    ({"pending": 1.5}, "E_PENDING"),
    ({"share": "half"}, "E_SHARE"),
])
def test_bad_types_in_the_cores_words(kwargs, status):
    with pytest.raises(cellrate.InvalidArgumentType) as raised:
        cellrate.Limiter("10/s").follow({}, **kwargs)
    assert (raised.value.param, str(raised.value)) == STATUS[status]


def test_a_response_without_any_signal_changes_nothing():
    limiter = cellrate.Limiter("10/s")
    assert not limiter.follow({"Content-Type": "application/json"}, 200)
    assert not limiter.follow([], 503)
    assert limiter.peek().remaining == 9


def test_a_429_blocks_every_caller_of_the_limit_and_a_shared_region(tmp_path):
    path = str(tmp_path / "region")
    one, two = cellrate.Limiter("10/s", shared=path), cellrate.Limiter("10/s", shared=path)
    assert one.follow({"Retry-After": "30"}, 429)
    refusal = two.check()
    assert not refusal.allowed and 29 < refusal.retry_after <= 30
    assert two.stats()["refused"] == 1 and two.peek().retry_after > 29  # refused: spent nothing
    with pytest.raises(cellrate.RateLimited):
        two.wait(timeout=1)


def test_follow_is_listed_on_the_types():
    assert "follow" in dir(cellrate.Limiter) and "follow" in dir(cellrate.KeyedLimiter)
    assert cellrate.read_signal is cellrate._cellrate.read_signal


# --------------------------------------------------------------------------
# @cellrate.limit(follow=): a function that returns a response


class Response:
    def __init__(self, status, headers):
        self.status_code, self.headers = status, headers


def test_the_decorator_follows_what_a_function_returns():
    answers = [Response(429, {"Retry-After": "30"})]

    @cellrate.limit("10/second", follow=True, block=False)
    def call():
        return answers[0]

    assert call().status_code == 429
    with pytest.raises(cellrate.RateLimited) as refused:
        call()  # every call of the limit is held until the Retry-After ends
    assert 29 < refused.value.retry_after <= 30


def test_the_decorator_follows_each_key_and_async_functions():
    @cellrate.limit("10/second", key=lambda user: user, follow=True, block=False)
    async def call(user):
        return Response(200, {"x-ratelimit-remaining-requests": "0",
                              "x-ratelimit-reset-requests": "20s"})

    import asyncio

    async def main():
        await call("a")
        with pytest.raises(cellrate.RateLimited):
            await call("a")
        await call("b")  # another key, its own limit

    asyncio.run(main())


def test_the_decorator_takes_a_function_that_reads_the_result():
    seen = []

    def parts(result):
        seen.append(result)
        return result["headers"], result["status"]

    @cellrate.limit("10/second", follow=parts, block=False)
    def call():
        return {"status": 503, "headers": [("Retry-After", "5")]}

    call()
    assert seen and call.__wrapped__ is not None
    with pytest.raises(cellrate.RateLimited):
        call()


def test_a_fleet_member_follows_at_its_share():
    from cellrate import _outbound

    class Member:  # what cellrate.share's limiters expose
        local = cellrate.Limiter("100/second")
        share = 0.25

    # the provider has 20 left: a quarter of them is this member's
    assert _outbound.follow_store(Member(), (), {"x-ratelimit-remaining-requests": "20"}, 200)
    assert Member.local.peek(5).allowed and not Member.local.peek(6).allowed


@pytest.mark.parametrize("kwargs, param", [
    ({"follow": "yes"}, "follow"),
    ({"follow": True, "limiter": object()}, "limiter"),
])
def test_the_decorator_names_a_bad_follow(kwargs, param):
    with pytest.raises(cellrate.InvalidArgumentType) as raised:
        cellrate.limit(**({"rate": "1/s"} if "limiter" not in kwargs else {}), **kwargs)
    assert raised.value.param == param


def test_the_decorator_refuses_to_follow_generators_and_non_responses():
    with pytest.raises(cellrate.InvalidArgumentType) as raised:
        @cellrate.limit("1/s", follow=True)
        def numbers():
            yield 1
    assert raised.value.param == "follow"

    @cellrate.limit("10/s", follow=True)
    def plain():
        return 42

    with pytest.raises(cellrate.InvalidArgumentType) as raised:
        plain()
    assert raised.value.param == "follow"
