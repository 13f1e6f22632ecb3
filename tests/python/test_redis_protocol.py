"""The Redis store's protocol (tests/vectors/redis.txt, written by the reference model
tests/model/redis_model.py) through the Python face's calls into the core: a request's
words, a reply's reading, what a failure means, the Cluster slots' message, the deny
cache's answers, on_error's answers, the probe's back-off, a key's name. The C tests
and busted (tests/lua/redis_protocol_spec.lua) read the same file. No server: these are
the rules; test_redis.py runs them against redis-server."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import cellrate

pytest.importorskip("redis", reason="make test installs redis-py")
import cellrate.redis as cr_redis  # noqa: E402
import redis.crc  # noqa: E402

core = cellrate._cellrate
VECTORS = Path(__file__).resolve().parents[1] / "vectors"
NEVER = 2**63 - 1


def text(field: str) -> bytes | None:
    """A text field: '-' for none, else a quote and its bytes, %XX escaped."""
    if field == "-":
        return None
    assert field.startswith("'"), field
    return re.sub(rb"%([0-9A-F]{2})", lambda m: bytes([int(m.group(1), 16)]),
                  field[1:].encode())


def messages() -> dict:
    """The core's status table: name -> message (tests/vectors/status.txt)."""
    table = {}
    for line in (VECTORS / "status.txt").read_text().splitlines():
        if line.startswith("status "):
            head, message = line.split("|", 1)
            table[head.split()[2]] = message
    return table


def read() -> list:
    return [line.split() for line in (VECTORS / "redis.txt").read_text().splitlines()
            if line and not line.startswith("#")]


LINES = read()
SCRIPT_TEXT = (VECTORS.parents[1] / "redis" / "decide.lua").read_text()
MODES = {f[1]: int(f[2]) for f in LINES if f[0] == "mode"}
MESSAGES = messages()


def limits() -> dict:
    made = {}
    for f in LINES:
        if f[0] == "limit":
            limit = cellrate.Limit(float(f[3]), float(f[4]), algorithm=f[2],
                                   burst=None if f[5] == "-" else int(f[5]),
                                   max_debt=None if f[6] == "-" else int(f[6]))
            assert (limit.emission_ns, limit.tolerance_ns, limit.burst, limit.max_debt) == \
                tuple(int(x) for x in f[7:11]), f
            made[int(f[1])] = limit
    return made


LIMITS = limits()


def pairs(kind: str):
    """Each line of `kind` with the line after it."""
    for at, f in enumerate(LINES):
        if f[0] == kind:
            yield f, LINES[at + 1]


def refused(status: str, function, *args) -> None:
    """`function(*args)` raises the core's error of `status`, in its words."""
    with pytest.raises(cellrate.CellrateError) as info:
        function(*args)
    assert str(info.value) == MESSAGES[status]


def test_the_constants_and_the_unavailable_words():
    constants = {f[1]: f[2] for f in LINES if f[0] == "constant"}
    assert cr_redis.MAX_TOLERANCE_NS == int(constants["MAX_TOLERANCE_NS"])
    assert cr_redis.MAX_DEBT_NS == int(constants["MAX_DEBT_NS"])
    assert cr_redis.FIRST_BACKOFF_S == int(constants["FIRST_BACKOFF_NS"]) / 1e9
    assert cr_redis.MAX_BACKOFF_S == int(constants["MAX_BACKOFF_NS"]) / 1e9
    assert cr_redis.UNAVAILABLE_REPLIES == tuple(f[1] for f in LINES if f[0] == "unavailable")
    assert {name: getattr(cr_redis, name.upper()) for name in MODES} == MODES


def test_the_script_states_the_same_constants():
    """The script runs inside Redis, self-contained: its `local` constants are the core's."""
    script = cr_redis.SCRIPT.decode()
    local = dict(re.findall(r"^local ([A-Z][A-Z_]*) = (.*)$", script, re.M))
    for f in LINES:
        if f[0] == "constant" and f[1] in local:
            value = local[f[1]]
            assert (value.strip("'").encode() if value.startswith("'") else value.encode()) \
                == (text(f[2]) if f[2].startswith("'") else f[2].encode()), f[1]
        if f[0] == "mode":
            assert local[f[1].upper()] == f"'{f[2]}'", f[1]
    assert {"MAX_TOLERANCE_NS", "MAX_DEBT_NS", "ALGORITHM_REPLY", "CHARGE"} <= set(local)


def test_signatures_and_keys():
    for f, after in pairs("limit"):
        assert after[0] == "signature"
        assert core._redis_signature(LIMITS[int(f[1])]).encode() == text(after[1])
    keys = 0
    for f in LINES:
        if f[0] == "key":
            prefix, name, of, want = (text(x) for x in f[1:5])
            assert core._redis_key(prefix, name, of) == want, f
            keys += 1
    assert keys >= 5


WIPE_MARKER = core._redis_protocol()["WIPE_MARKER"]


def test_wipe_markers_share_their_keys_slots():
    """A key's wipe marker (on_wipe="refuse") is in the key's Cluster slot, by redis-py's
    own rule, and is the vectors' (the model's, found by search)."""
    marked = 0
    for f, after in pairs("marked"):
        groups = []
        for i in range(int(f[4])):
            limit, prefix, name, key = f[5 + 4 * i:9 + 4 * i]
            groups += [LIMITS[int(limit)], text(prefix), text(name), text(key)]
        now = None if f[3] == "-" else float(f[3])
        words = core._redis_request(MODES[f[1]] | WIPE_MARKER,
                                    int(f[2]), now, *groups)
        assert words == [text(word) for word in after[2:]], f
        nkeys = int(words[0])
        assert redis.crc.key_slot(words[nkeys]) == redis.crc.key_slot(words[1])
        marked += 1
    assert marked >= 6
    markers = [f for f in LINES if f[0] == "marker"]
    assert len(markers) >= 8
    for f in markers:
        assert redis.crc.key_slot(text(f[1])) == int(f[2]), f
        assert redis.crc.key_slot(text(f[3])) == int(f[2]), f
    for key in (b"cellrate:api:%d" % i for i in range(300)):
        words = core._redis_request(cr_redis.CHECK | WIPE_MARKER, 1, None,
                                    LIMITS[0], b"cellrate:", b"api", key[13:])
        assert redis.crc.key_slot(words[2]) == redis.crc.key_slot(words[1])


def batch_calls(f: list) -> tuple:
    """A batch line's now and calls, as _redis_batch takes them."""
    now = None if f[1] == "-" else float(f[1])
    calls, at = [], 3
    for _ in range(int(f[2])):
        mode, cost, n = MODES[f[at].removesuffix("+marker")], int(f[at + 1]), int(f[at + 2])
        if f[at].endswith("+marker"):  # the mode with the wipe marker
            mode |= WIPE_MARKER
        at += 3
        groups = []
        for _ in range(n):
            limit, prefix, name, key = f[at:at + 4]
            groups += [LIMITS[int(limit)], text(prefix), text(name), text(key)]
            at += 4
        calls.append((mode, cost, *groups))
    assert at == len(f), f
    return now, calls


def test_batches():
    count = 0
    for f, after in pairs("batch"):
        now, calls = batch_calls(f)
        if any(len(call) == 2 for call in calls):  # the binding's own arity check
            with pytest.raises(TypeError):
                core._redis_batch(now, calls)
        elif after[0] == "refused":
            refused(after[1], core._redis_batch, now, calls)
        else:
            assert after[0] == "words"
            assert core._redis_batch(now, calls) == [text(word) for word in after[2:]], f
            assert len(after) - 2 == int(after[1])
            # the whole command as the core packs it: byte for byte redis-py's packing
            sha = b"%040d" % count
            packed = redis.connection.Connection().pack_command(
                "EVALSHA", sha, *[text(word) for word in after[2:]])
            assert core._redis_batch_command(sha, now, calls) == b"".join(packed), f
        count += 1
    assert count >= 10
    for f in LINES:
        if f[0] == "batch_max":
            assert int(f[1]) == cr_redis_batch_max()
        elif f[0] == "batch_reply":
            reply = [0] * int(f[3]) if f[2] == "list" else 1
            if f[4] == "OK":
                assert core._redis_batch_reply(int(f[1]), reply) is None
            else:
                refused(f[4], core._redis_batch_reply, int(f[1]), reply)


def cr_redis_batch_max() -> int:
    return core._redis_protocol()["BATCH_MAX"]


def test_requests():
    count = 0
    for f, after in pairs("request"):
        mode, cost, n = MODES[f[1]], int(f[2]), int(f[4])
        now = None if f[3] == "-" else float(f[3])
        groups = []
        for i in range(n):
            limit, prefix, name, key = f[5 + 4 * i:9 + 4 * i]
            groups += [LIMITS[int(limit)], text(prefix), text(name), text(key)]
        if n == 0:  # the binding's own arity check: no call without a limit
            with pytest.raises(TypeError):
                core._redis_request(mode, cost, now, *groups)
            continue
        if after[0] == "refused":
            refused(after[1], core._redis_request, mode, cost, now, *groups)
        else:
            assert after[0] == "words"
            words = core._redis_request(mode, cost, now, *groups)
            assert words == [text(word) for word in after[2:]], f
            assert len(after) - 2 == int(after[1])
        count += 1
    assert count > 150


def field(value: str):
    return text(value) if value.startswith("'") else int(value)


def decision_fields(decision) -> list:
    """A Decision's fields, its times in seconds as the core converts ns."""
    return [int(decision.allowed), decision.remaining, decision.retry_after,
            decision.reset_after, decision.limit]


def seconds(fields: list) -> list:
    """allowed, remaining, retry_after_ns, reset_after_ns, limit: the times in seconds."""
    allowed, remaining, retry, reset, limit = (int(x) for x in fields)
    return [allowed, remaining, math.inf if retry == NEVER else retry / 1e9, reset / 1e9, limit]


def test_replies():
    count = 0
    for f, after in pairs("reply"):
        mode, n = MODES[f[1]], int(f[2])
        chosen = [LIMITS[int(i)] for i in f[3:3 + n]]
        rest = f[3 + n:]
        reply = int(rest[1]) if rest[0] == "int" else [field(x) for x in rest[2:]]
        if after[0] == "refused":
            refused(after[1], core._redis_reply, mode, reply, *chosen)
        elif after[0] == "count":
            assert core._redis_reply(mode, reply, *chosen) == int(after[1]), f
        else:
            decision = core._redis_reply(mode, reply, *chosen)
            assert decision_fields(decision) == seconds(after[1:6]), f
            index, clipped = int(after[6]), int(after[7])
            assert decision.limit == chosen[index].burst
            assert decision.clipped == bool(clipped), f
        count += 1
    assert count > 30


def test_failures():
    kinds = set()
    for f in LINES:
        if f[0] == "failure":
            word, message = text(f[1]), text(f[2]).decode()
            kind, words = core._redis_classify(None if word is None else word.decode(), message)
            assert kind == f[3], f
            assert words == (None if f[4] == "-" else message[int(f[4]):]), f
            kinds.add(kind)
    assert kinds == {"cannot_decide", "mistake", "wrong_algorithm", "cross_slot", "no_script"}


def test_slots_messages():
    count = 0
    for f in LINES:
        if f[0] == "slots":
            n = int(f[1])
            keys = [text(f[2 + 2 * i]) for i in range(n)]
            slots = [int(f[3 + 2 * i]) for i in range(n)]
            assert core._redis_slots_message(keys, slots).encode() == text(f[2 + 2 * n]), f
            count += 1
    assert count == 3


def test_the_deny_cache_keeps_what_the_core_keeps():
    count = 0
    for f in LINES:
        if f[0] == "remember":
            mode, nlimits = MODES[f[1]], int(f[2])
            if nlimits != 1:
                continue  # a face asks only of one limit's reply
            now = None if f[3] == "-" else int(f[3]) / 1e9
            cost, allowed, remaining, retry, reset, asked, kept = (int(x) for x in f[4:11])
            # the reply that says it (the script's fields; an admission in allow mode: 1)
            if allowed and mode == MODES["allow"]:
                reply = 1
            else:
                reply = [allowed, remaining, -1 if retry == NEVER else retry, reset, 1]
                if mode == MODES["charge"]:
                    reply.append(0)
            if mode in (MODES["take"], MODES["refund"]):
                reply = 1
            got = core._redis_remember(mode, now, cost, asked, reply, LIMITS[0])
            assert (got is not None) == bool(kept), f
            if got is not None:
                assert got == (asked, cost, remaining, retry, reset)
            count += 1
    assert count >= 10


def test_a_kept_refusal_answers_as_the_core_says():
    count = 0
    for f, after in pairs("recall"):
        limit = LIMITS[int(f[1])]
        refusal = tuple(int(x) for x in f[2:7])
        mode, nlimits = MODES[f[7]], int(f[8])
        if nlimits != 1:
            continue  # the face never asks for several limits
        now = None if f[9] == "-" else int(f[9]) / 1e9
        cost, clock = int(f[10]), int(f[11])
        got = core._redis_recall(mode, now, cost, clock, refusal, limit)
        if after[0] == "ask":
            assert got is None, f
        elif after[0] == "expired":
            assert got is False, f
        else:
            assert decision_fields(got) == seconds(after[1:6]), f
        count += 1
    assert count > 30


def test_on_errors_answers():
    count = 0
    for f in LINES:
        if f[0] == "unavailable_answer":
            limit, allow, cost, probe_in = LIMITS[int(f[1])], f[2] == "allow", int(f[3]), int(f[4])
            decision = core._redis_unavailable(MODES["check"], limit, allow, cost, probe_in)
            assert decision_fields(decision) == seconds(f[5:10]), f
            assert core._redis_unavailable(MODES["take"], limit, allow, cost, probe_in) == int(f[10])
            count += 1
    assert count >= 9


def test_the_back_off():
    for f in LINES:
        if f[0] == "backoff":
            assert core._redis_backoff(int(f[1])) == int(f[2]), f


def test_the_fallbacks_option_limit_and_way_back():
    """on_error="fallback" (the core's cr_redis_fallback_check, cr_redis_fallback_limit,
    cr_redis_going_back), as the vectors say."""
    counts = {"fallback_check": 0, "fallback_limit": 0, "going_back": 0}
    for f in LINES:
        if f[0] == "fallback_check":
            if f[3] == "OK":
                assert core._redis_fallback_check(f[1], f[2] == "1") is None, f
            else:
                with pytest.raises(cellrate.InvalidArgument, match="^fallback is the limit"):
                    core._redis_fallback_check(f[1], f[2] == "1")
        elif f[0] == "fallback_limit":
            limit, share = LIMITS[int(f[1])], float(f[2])
            if f[3] == "OK":
                got = core._redis_fallback_limit(limit, share)
                assert (got.algorithm, got.emission_ns, got.tolerance_ns, got.burst) == (
                    f[4], int(f[5]), int(f[6]), int(f[7])), f
            else:
                with pytest.raises(cellrate.InvalidArgument, match="^fallback must be a share"):
                    core._redis_fallback_limit(limit, share)
        elif f[0] == "going_back":
            got = core._redis_going_back(MODES[f[2]], int(f[3]), LIMITS[int(f[1])], int(f[4]))
            assert got == (MODES[f[5]], int(f[6]), f[7] == "1"), f
        else:
            continue
        counts[f[0]] += 1
    assert counts == {"fallback_check": 8, "fallback_limit": 77, "going_back": 108}


def test_check_all_items_are_judged_by_the_core():
    """A Redis check_all's items (the core's cr_redis_check_items): at least one, each a
    pair of a Redis rate limiter and a key, all on one client, in the core's words; each
    client compared by identity."""
    words = messages()
    clients = {}
    count = 0
    for f in LINES:
        if f[0] != "items":
            continue
        n = int(f[1])
        given = [None if c == "-" else clients.setdefault(c, object()) for c in f[2:2 + n]]
        status = f[2 + n]
        if status == "OK":
            assert core._redis_check_items(given) is None, f
        else:
            error = (cellrate.InvalidArgumentType if status == "E_REDIS_ITEMS" and n
                     else cellrate.InvalidArgument)
            with pytest.raises(error) as info:
                core._redis_check_items(given)
            assert str(info.value) == words[status] and info.value.param == "items", f
        count += 1
    assert count == 13


def test_a_live_change_is_judged_by_the_core():
    """reconfigure's rules (the core's cr_redis_check_change): a limit without a name
    cannot change, and the algorithm stays, in the words of the script's own refusal of
    a key held under another algorithm."""
    words = messages()
    count = 0
    for f in LINES:
        if f[0] != "change":
            continue
        given = None if f[3] == "-" else f[3]
        if f[4] == "OK":
            assert core._redis_check_change(f[1] == "1", f[2], given) is None, f
        else:
            with pytest.raises(cellrate.InvalidArgument) as info:
                core._redis_check_change(f[1] == "1", f[2], given)
            assert str(info.value) == words[f[4]], f
        count += 1
    assert count == 24
    kept = re.search(r"^local ALGORITHM_KEPT = '(.*)'$", SCRIPT_TEXT, re.M).group(1)
    assert words["E_REDIS_ALGORITHM_KEPT"] == "algorithm: " + kept
