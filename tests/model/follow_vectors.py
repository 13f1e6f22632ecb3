"""tests/vectors/follow.txt, from the reference model (follow_model.py).

Written by make_vectors.py with the other vector files. Field names and values
are written `=` then their UTF-8 bytes, each byte outside `!`..`~`, and `%`,
as %XX (so "=" alone is an empty value). Every time a face replays (now,
realtime) is one whose float seconds are exact (gcra_model.float_face_seconds).
"""

from __future__ import annotations

import random

import catalogue_model as catalogue
import follow_model as follow
import gcra_model as model

SECOND = 10**9
MS = 10**6
# A realtime instant (Unix time): whole seconds, exact in float seconds.
REALTIME = 1_750_000_000 * SECOND
# Window scenarios run near it too (windows read the realtime clock).
EPOCH = 1_700_000_000 * SECOND
GRID = 1953125  # 5**9 ns: times on this grid (multiples of 2**-9 s) are exact floats


def encode(text: str) -> str:
    out = ["="]
    for byte in text.encode("utf-8", "surrogateescape"):
        if 0x21 <= byte <= 0x7E and byte != 0x25:
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def fields_text(fields) -> str:
    parts = [str(len(fields))]
    for name, value in fields:
        parts += [encode(name), encode(value)]
    return " ".join(parts)


def http_date(ns: int) -> str:
    import email.utils

    return email.utils.formatdate(ns // SECOND, usegmt=True)


def rfc3339(ns: int, fraction: str = "") -> str:
    import datetime

    moment = datetime.datetime.fromtimestamp(ns // SECOND, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


class Vectors:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.limit = None
        self.state = None
        self.signals = 0
        self.follows = 0

    def comment(self, text: str) -> None:
        self.lines.append(f"# {text}")

    # -- the parser ---------------------------------------------------------

    def signal(self, fields, status: int = 0, quota: str = "requests",
               realtime: int = REALTIME) -> list:
        assert model.float_face_seconds(realtime) is not None
        bounds = follow.read_signal(fields, status, quota, realtime)
        flat = " ".join(f"{r} {w}" for r, w in bounds)
        self.lines.append(f"signal {status} {quota} {realtime} {fields_text(fields)} "
                          f"{len(bounds)}{' ' + flat if flat else ''}")
        self.signals += 1
        return bounds

    def refused(self, status_name: str, fields, status: int, quota: str, realtime: int) -> None:
        self.lines.append(f"refused {status} {quota} {realtime} {fields_text(fields)} "
                          f"{status_name}")

    # -- a key --------------------------------------------------------------

    def gcra(self, emission_ns: int, burst: int) -> None:
        assert model.float_face_period(emission_ns) is not None, emission_ns
        self.limit = model.Limit(emission_ns, burst)
        self.state = 0
        self.lines.append(f"limit gcra {emission_ns} {burst}")

    def window(self, algorithm: str, window_ns: int, rate: int) -> None:
        assert model.float_face_seconds(window_ns) is not None
        self.limit = catalogue.WindowLimit(algorithm, window_ns, rate)
        self.state = None
        self.lines.append(f"limit {algorithm} {window_ns} {rate}")

    def word(self) -> int:
        if isinstance(self.limit, catalogue.WindowLimit):
            return catalogue.pack(self.limit, self.state)
        return self.state

    def decide(self, t: int, cost: int, commit: bool):
        if isinstance(self.limit, catalogue.WindowLimit):
            d = catalogue.window_decide(self.limit, self.state, t, cost, commit)
            return d, d.counts_after
        d = model.decide(self.limit, self.state, t, cost, commit)
        return d, d.tat_after

    def check(self, t: int, cost: int = 1) -> bool:
        assert model.float_face_seconds(t) is not None, t
        d, self.state = self.decide(t, cost, True)
        self.lines.append(f"check {t} {cost} {int(d.allowed)} {self.word()}")
        return d.allowed

    def peek(self, t: int, cost: int = 1):
        assert model.float_face_seconds(t) is not None, t
        d, _ = self.decide(t, cost, False)
        self.lines.append(f"peek {t} {cost} {int(d.allowed)} {d.remaining} {d.retry_after_ns} "
                          f"{d.reset_after_ns}")
        return d

    def follow(self, t: int, fields, status: int = 0, quota: str = "requests", pending: int = 0,
               share: float = 1.0) -> bool:
        assert model.float_face_seconds(t) is not None, t
        # no absolute time: a face's follow reads the realtime clock for those
        bounds = follow.read_signal(fields, status, quota, None)
        before = self.word()
        self.state = follow.follow(self.limit, self.state, t, bounds, pending, share)
        pulled = self.word() != before
        self.lines.append(f"follow {t} {status} {quota} {pending} {share!r} "
                          f"{fields_text(fields)} {int(pulled)} {self.word()}")
        self.follows += 1
        return pulled


# --------------------------------------------------------------------------
# The parser: every family, and what is ignored


def retry_after(v: Vectors) -> None:
    v.comment("Retry-After: delay-seconds (a fraction allowed) and HTTP-dates, on 429, 503 "
              "or an unknown status; nothing on a 200")
    for value in ["120", "0", "1.5", "0.000000001", "0.0000000001", " 30 ", "\t7", "5.",
                  ".25", "31536000", "3600", "3601", "9223372036", "9223372037",
                  "99999999999999999999", "-1", "abc", "NaN", "nan", "inf", "1e3", "0x10", "+5",
                  "5 5", "", "1.1234567890123456789", "1.123456789012345678", "\u0661\u0662"]:
        v.signal([("Retry-After", value)], 429)
    for status in (0, 200, 301, 429, 503, 500):
        v.signal([("retry-after", "10")], status)
    future = REALTIME + 90 * SECOND
    for value in [http_date(future), http_date(REALTIME - 5 * SECOND), http_date(REALTIME),
                  http_date(REALTIME + SECOND), http_date(REALTIME + 400 * 86400 * SECOND),
                  "Sunday, 06-Nov-94 08:49:37 GMT", "Tuesday, 15-Jul-25 14:15:00 GMT",
                  "Tuesday, 15-Jul-75 14:15:00 GMT", "Tue Jul 15 14:15:00 2025",
                  "Tue Jul  1 14:15:00 2025", "Tue Jul 15 14:15:00 2125",
                  "Tue, 15 Jul 2025 14:15:00 GMT", "Tue, 15 Jul 2025 14:15:00 UTC",
                  "Tue, 31 Feb 2025 14:15:00 GMT", "Tue, 29 Feb 2028 14:15:00 GMT",
                  "Tue, 15 Jul 2025 24:00:00 GMT", "Tue, 15 Jul 2025 23:59:60 GMT",
                  "Xyz, 15 Jul 2025 14:15:00 GMT", "tue, 15 jul 2025 14:15:00 GMT",
                  "Tue, 15 Jul 9999 14:15:00 GMT", "Tue, 15 Jul 2262 14:15:00 GMT",
                  "Tue, 15 Jul 1969 14:15:00 GMT", "Tue,  15 Jul 2025 14:15:00 GMT"]:
        v.signal([("Retry-After", value)], 503)
    v.comment("retry-after-ms (decimal milliseconds), beside or instead of Retry-After")
    for value in ["250", "12.5", "0", "-3", "1e2"]:
        v.signal([("retry-after-ms", value)], 429)
    v.signal([("Retry-After", "2"), ("retry-after-ms", "1500")], 429)
    v.signal([("Retry-After", "2"), ("retry-after-ms", "x")], 429)
    v.signal([("retry-after-ms", "1500"), ("Retry-After", "1"), ("retry-after-ms", "900")], 429)
    v.comment("a 429 that says nothing else: nothing left now, for requests")
    v.signal([], 429)
    v.signal([], 429, "tokens")
    v.signal([], 503)
    v.signal([("Retry-After", "soon")], 429)
    v.signal([("Retry-After", "0")], 429)
    v.signal([("x-ratelimit-remaining-tokens", "0")], 429)
    v.signal([("x-ratelimit-remaining-tokens", "0")], 429, "tokens")
    v.signal([("Content-Type", "application/json")], 200)


def ietf(v: Vectors) -> None:
    v.comment("RateLimit (drafts 08 to 11): a List of \"policy\";r=R;t=T, its unit from "
              "RateLimit-Policy's qu")
    for value in ['"default";r=50;t=30', '"default";r=50', '"default";r=0;t=1',
                  '"a";r=5;t=10, "b";r=2;t=60', '"a";r=5;t=10,"b";r=2;t=60',
                  '"default";r=-1;t=30', '"default";r=1.5;t=30', '"default";t=30',
                  '"default";r=50;t=-5', '"default";r=50;t=1.5', '"default";r=50;t=999999999999999',
                  '"default";r=50;t=9223372036', '"default";r=50;t=9223372037',
                  '"default";r=999999999999999;t=1', '"default";r=1000000000000000;t=1',
                  'default;r=50;t=30', '"default";r=50;t=30,', '"default";r=50;;t=30',
                  '"default";r=50;t=30;pk=:cHsdsRa894==:', '"default";pk=:QXBw:;r=3;t=4',
                  '"default";r=7;t=8;acme-burst=100;comment="x, y"', '"def\\"ault";r=1;t=2',
                  '"default"; r=5; t=9', '"default" ;r=5', '("a" "b");r=1, "c";r=4;t=5',
                  '"x";r=?1', '"x";r=@1700000000;t=5', '"x";r=%"caf%c3%a9";t=5', '"x";r=:Zm9v:',
                  '"default";R=5;t=1', '"default";r=5;r=6;t=1', '"default";r=5;t=1;t=2',
                  '"bad\x01";r=1', '"default";r=1;t=1, ', '', '  "default";r=3;t=2  ']:
        v.signal([("RateLimit", value)])
    v.signal([("RateLimit", '"a";r=5;t=10'), ("RateLimit", '"b";r=2;t=60')])
    v.comment("the policy's unit: qu absent is requests; \"tokens\" is tokens; others are no "
              "quota of ours; a policy listed twice: the last")
    fields = [("RateLimit-Policy", '"req";q=100;w=60, "tok";q=1000;qu="tokens";w=60, '
               '"bytes";q=9;qu="content-bytes"'),
              ("RateLimit", '"req";r=40;t=20, "tok";r=300;t=20, "bytes";r=1;t=1, "other";r=9')]
    v.signal(fields)
    v.signal(fields, quota="tokens")
    v.signal([("RateLimit-Policy", '"p";q=1;qu=tokens'), ("RateLimit", '"p";r=1;t=1')])
    v.signal([("RateLimit-Policy", '"p";q=1;qu="tokens", "p";q=1'), ("RateLimit", '"p";r=1;t=1')])
    v.signal([("RateLimit-Policy", '"p";q=1;qu="tokens",'), ("RateLimit", '"p";r=1;t=1')],
             quota="tokens")
    v.comment("RateLimit (draft 07): a Dictionary limit=, remaining=, reset=")
    for value in ["limit=100, remaining=50, reset=5", "limit=100, remaining=0, reset=10",
                  "remaining=3", "reset=5", "remaining=-1, reset=5", "remaining=3, reset=-1",
                  "remaining=3, reset=2.5", "remaining=3;x=1, reset=4", "remaining=(1 2), reset=4",
                  "remaining=3, remaining=9, reset=4", "remaining=9, remaining=x, reset=4",
                  "Remaining=3", "remaining=3, reset=999999999999999", "remaining=3,"]:
        v.signal([("RateLimit", value)])
        v.signal([("RateLimit", value)], quota="tokens")
    v.comment("RateLimit-Remaining and RateLimit-Reset (drafts up to 06)")
    v.signal([("RateLimit-Limit", "100"), ("RateLimit-Remaining", "5"), ("RateLimit-Reset", "7")])
    v.signal([("RateLimit-Remaining", "5")])
    v.signal([("RateLimit-Reset", "7")])
    v.signal([("RateLimit-Remaining", "5"), ("RateLimit-Reset", "1.5")])
    v.signal([("RateLimit-Remaining", "5, 4"), ("RateLimit-Reset", "7")])


def providers(v: Vectors) -> None:
    v.comment("x-ratelimit-*-requests and -tokens (durations), OpenAI's form")
    openai = [("x-ratelimit-limit-requests", "60"), ("x-ratelimit-limit-tokens", "150000"),
              ("x-ratelimit-remaining-requests", "59"), ("x-ratelimit-remaining-tokens", "149984"),
              ("x-ratelimit-reset-requests", "1s"), ("x-ratelimit-reset-tokens", "6m0s")]
    v.signal(openai)
    v.signal(openai, quota="tokens")
    for value in ["1s", "6m0s", "20ms", "1h2m3.5s", "1.5s", "0s", "0", "2", "0.5", "1\u00b5s",
                  "3\u03bcs", "7us", "9ns", "1m", "1h", "2h", "1.s", ".5s", "1..5s", "s", "5x",
                  "-1s", "+1s", "1s ", "1 s", "", "1S", "99999999999h", "1h1h", "5ms3",
                  "1.1234567890123456789s"]:
        v.signal([("X-RateLimit-Remaining-Requests", "2"), ("X-RateLimit-Reset-Requests", value)])
    for value in ["59", "0", "-1", "5.0", "", "1e3", "9223372036854775807",
                  "9223372036854775808", "0059"]:
        v.signal([("x-ratelimit-remaining-requests", value), ("x-ratelimit-reset-requests", "1s")])
    v.comment("x-ratelimit-remaining and x-ratelimit-reset: seconds, or a Unix time in seconds "
              "or milliseconds")
    for value in ["60", "1.5", "2m", str(REALTIME // SECOND + 60), str(REALTIME // SECOND - 60),
                  str(REALTIME // MS + 1500), str(REALTIME // MS - 1500),
                  f"{REALTIME // SECOND + 30}.5", str(REALTIME // SECOND + 10**9),
                  "999999999", "1000000000", "999999999999", "9223372036854775807", "x"]:
        v.signal([("x-ratelimit-limit", "5000"), ("x-ratelimit-remaining", "4999"),
                  ("x-ratelimit-reset", value)])
    v.comment("anthropic-ratelimit-*: RFC 3339 resets")
    later = REALTIME + 42 * SECOND
    for value in [rfc3339(later), rfc3339(later, ".5"), rfc3339(later, ".123456789123"),
                  rfc3339(REALTIME - SECOND), rfc3339(later).replace("T", " "),
                  rfc3339(later).replace("T", "t").replace("Z", "z"),
                  rfc3339(later)[:-1] + "+01:00", rfc3339(later)[:-1] + "-01:00",
                  rfc3339(later)[:-1] + "+24:00", rfc3339(later)[:-1], rfc3339(later, "."),
                  "2025-02-30T00:00:00Z", "2025-13-01T00:00:00Z", "garbage",
                  rfc3339(later, ".1234567890123456789")]:
        v.signal([("anthropic-ratelimit-requests-limit", "50"),
                  ("anthropic-ratelimit-requests-remaining", "49"),
                  ("anthropic-ratelimit-requests-reset", value)])
    anthropic = [("anthropic-ratelimit-tokens-remaining", "96000"),
                 ("anthropic-ratelimit-tokens-reset", rfc3339(later)),
                 ("anthropic-ratelimit-input-tokens-remaining", "80000"),
                 ("anthropic-ratelimit-output-tokens-remaining", "16000")]
    v.signal(anthropic, quota="tokens")
    v.signal(anthropic)
    v.comment("names in any case; repeated fields of a family: the fewest remaining, the "
              "longest reset")
    v.signal([("X-RATELIMIT-REMAINING-REQUESTS", "3"), ("x-ratelimit-reset-requests", "2s"),
              ("x-ratelimit-remaining-requests", "5"), ("x-ratelimit-reset-requests", "9s"),
              ("x-ratelimit-remaining-requests", "bad"), ("x-ratelimit-reset-requests", "bad")])
    v.signal([("X-RateLimit-Remaining-To\u212aens", "3")], quota="tokens")
    v.comment("everything at once; more than eight bounds merge into the last")
    v.signal(openai + [("Retry-After", "3"), ("RateLimit", '"a";r=1;t=2'),
                       ("x-ratelimit-remaining", "7")], 429)
    many = [("RateLimit", f'"p{i}";r={100 - i};t={i + 1}') for i in range(12)]
    v.signal(many)
    v.signal([("RateLimit", ", ".join(f'"p{i}";r={i};t={20 - i}' for i in range(12)))])


def errors(v: Vectors) -> None:
    v.comment("refused calls: the status and what it names")
    v.refused("E_STATUS_CODE", [], 99, "requests", REALTIME)
    v.refused("E_STATUS_CODE", [], 600, "requests", REALTIME)
    v.refused("E_QUOTA", [], 429, "bytes", REALTIME)


PIECES = [
    ("Retry-After", ["1", "2.5", "0", "x", "-4", "3601"]),
    ("retry-after-ms", ["100", "x"]),
    ("RateLimit", ['"default";r=3;t=2', '"default";r=0;t=5', 'limit=9, remaining=1, reset=1',
                   '"t";r=900;t=30', '"x";r=2', 'bad,,']),
    ("RateLimit-Policy", ['"t";q=1000;qu="tokens";w=60', '"default";q=10;w=1']),
    ("x-ratelimit-remaining-requests", ["0", "4", "12", "x"]),
    ("x-ratelimit-reset-requests", ["1s", "250ms", "2m0s", "x"]),
    ("x-ratelimit-remaining-tokens", ["0", "500", "20000"]),
    ("x-ratelimit-reset-tokens", ["6m0s", "20ms", "0s"]),
    ("x-ratelimit-remaining", ["1", "7"]),
    ("x-ratelimit-reset", ["3", "0.5"]),
    ("RateLimit-Remaining", ["2"]),
    ("RateLimit-Reset", ["4"]),
]


def random_fields(rng: random.Random) -> list:
    fields = []
    for _ in range(rng.randrange(0, 6)):
        name, values = rng.choice(PIECES)
        fields.append((rng.choice([name, name.lower(), name.upper()]), rng.choice(values)))
    return fields


def random_signals(v: Vectors, rng: random.Random, count: int) -> None:
    v.comment(f"{count} random responses")
    for _ in range(count):
        v.signal(random_fields(rng), rng.choice([0, 200, 429, 503]),
                 rng.choice(["requests", "tokens"]))


# --------------------------------------------------------------------------
# Following: a key pulled into line, and what it decides after


def gcra_scenarios(v: Vectors) -> None:
    T = 100 * MS
    t0 = 1000 * SECOND
    v.comment("gcra 10/s burst 10: a remaining below ours spends the difference, now")
    v.gcra(T, 10)
    v.peek(t0)
    v.follow(t0, [("x-ratelimit-remaining-requests", "3")])
    v.peek(t0)
    v.check(t0), v.check(t0), v.check(t0), v.check(t0)
    v.peek(t0)
    v.comment("a remaining above ours changes nothing")
    v.follow(t0 + 2 * SECOND, [("x-ratelimit-remaining-requests", "50")])
    v.comment("a 429 with Retry-After: nothing before it, then one unit at a time")
    v.gcra(T, 10)
    v.follow(t0, [("Retry-After", "2")], 429)
    v.peek(t0)
    v.peek(t0 + 2 * SECOND - GRID)
    v.peek(t0 + 2 * SECOND)
    v.check(t0 + 2 * SECOND), v.check(t0 + 2 * SECOND)
    v.comment("the same Retry-After on a 200 says nothing")
    v.gcra(T, 10)
    v.follow(t0, [("Retry-After", "2")], 200)
    v.comment("a year is capped at an hour")
    v.gcra(T, 10)
    v.follow(t0, [("Retry-After", "31536000")], 429)
    v.peek(t0 + 3600 * SECOND - GRID)
    v.peek(t0 + 3600 * SECOND)
    v.comment("hostile values change nothing")
    v.gcra(T, 10)
    for value in ["-5", "NaN", "1e400", "99999999999999999999", "soon"]:
        v.follow(t0, [("Retry-After", value), ("x-ratelimit-remaining-requests", value)], 429)
        v.peek(t0)
    v.comment("a remaining with its reset: that many left now (the answer that says 0 holds "
              "the limit until its reset)")
    v.gcra(50 * MS, 4)
    v.follow(t0, [("x-ratelimit-remaining-requests", "2"), ("x-ratelimit-reset-requests", "1s")])
    v.peek(t0)
    for _ in range(3):
        v.check(t0)
    v.follow(t0 + 50 * MS, [("x-ratelimit-remaining-requests", "0"),
                            ("x-ratelimit-reset-requests", "750ms")])
    for k in range(1, 9):
        v.check(t0 + k * 125 * MS)
    v.comment("pending units and a fleet member's share")
    v.gcra(T, 20)
    v.follow(t0, [("x-ratelimit-remaining-requests", "10")], pending=4)
    v.peek(t0)
    v.gcra(T, 20)
    v.follow(t0, [("x-ratelimit-remaining-requests", "10")], share=0.25)
    v.peek(t0)
    v.gcra(T, 20)
    v.follow(t0, [("x-ratelimit-remaining-requests", "10")], pending=5, share=0.375)
    v.peek(t0)
    v.comment("tokens follow the tokens fields only")
    v.gcra(MS, 1000)
    v.follow(t0, [("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-remaining-tokens", "300"),
                  ("x-ratelimit-reset-tokens", "500ms")], 200, "tokens")
    v.peek(t0, 300)
    v.peek(t0, 301)
    v.comment("a follow while in debt, and with the clock stepped back: never less strict")
    v.gcra(T, 5)
    v.check(t0, 5)
    v.follow(t0 - 10 * SECOND, [("x-ratelimit-remaining-requests", "0"),
                                ("x-ratelimit-reset-requests", "1s")])
    v.follow(t0, [("Retry-After", "1")], 429)
    v.peek(t0)


def window_scenarios(v: Vectors) -> None:
    for algorithm in catalogue.WINDOWS:
        P = 8 * SECOND
        v.comment(f"{algorithm} 10 per 8 s: a remaining within the window, a wait past it")
        v.window(algorithm, P, 10)
        v.check(EPOCH + SECOND, 2)
        v.follow(EPOCH + 2 * SECOND, [("x-ratelimit-remaining-requests", "3")])
        v.peek(EPOCH + 2 * SECOND)
        v.peek(EPOCH + 2 * SECOND, 4)
        v.follow(EPOCH + 2 * SECOND, [("Retry-After", "1")], 429)
        v.peek(EPOCH + 3 * SECOND)
        v.follow(EPOCH + 4 * SECOND, [("Retry-After", "20")], 429)
        v.peek(EPOCH + 4 * SECOND)
        v.peek(EPOCH + 23 * SECOND)
        v.peek(EPOCH + 24 * SECOND)
        v.follow(EPOCH + 30 * SECOND, [("x-ratelimit-remaining-requests", "4"),
                                       ("x-ratelimit-reset-requests", "4s")])
        v.peek(EPOCH + 30 * SECOND, 4)
        v.peek(EPOCH + 30 * SECOND, 5)


def random_follows(v: Vectors, rng: random.Random, count: int) -> None:
    v.comment(f"{count} random keys: checks and follows, every algorithm")
    for _ in range(count):
        algorithm = rng.choice(["gcra", "fixed_window", "sliding_window"])
        t = EPOCH + rng.randrange(0, 4096) * GRID * 64
        if algorithm == "gcra":
            v.gcra(rng.choice([MS, 10 * MS, 125 * MS, SECOND]), rng.randrange(1, 12))
        else:
            v.window(algorithm, rng.choice([SECOND, 8 * SECOND, 60 * SECOND]),
                     rng.randrange(1, 20))
        for _ in range(rng.randrange(1, 8)):
            t += rng.randrange(0, 64) * GRID * 16
            if rng.random() < 0.5:
                v.check(t, rng.randrange(0, 4))
            else:
                relative = [f for f in random_fields(rng) if "Retry" not in f[0] or
                            rng.random() < 0.7]
                v.follow(t, relative, rng.choice([0, 200, 429]),
                         rng.choice(["requests", "tokens"]), rng.choice([0, 0, 1, 3]),
                         rng.choice([1.0, 1.0, 0.5, 0.3]))
            if rng.random() < 0.5:
                v.peek(t, rng.randrange(1, 4))


def retries(v: Vectors, rng: random.Random) -> None:
    v.comment("retrying a refused request: 429 and 503 only, while attempt <= retries; the "
              "back-off doubles up to its cap, half fixed, half spread")
    cases = [(429, 1, 3, SECOND // 2, 30 * SECOND, 0), (429, 1, 3, SECOND // 2, 30 * SECOND, 2**64 - 1),
             (503, 2, 3, SECOND // 2, 30 * SECOND, 2**63), (429, 3, 3, SECOND, 30 * SECOND, 12345),
             (429, 4, 3, SECOND, 30 * SECOND, 1), (500, 1, 3, SECOND, 30 * SECOND, 1),
             (200, 1, 3, SECOND, 30 * SECOND, 1), (429, 0, 3, SECOND, 30 * SECOND, 1),
             (429, 40, 100, SECOND, 30 * SECOND, 2**62), (429, 10**18, 2**62, 1, 2**62, 2**64 - 1),
             (429, 1, 0, SECOND, 30 * SECOND, 1), (429, 1, 3, 0, 30 * SECOND, 1),
             (429, 1, 3, 2 * SECOND, SECOND, 1), (429, 2, 3, 3, 5, 2**64 - 1)]
    for _ in range(60):
        cases.append((rng.choice([429, 503, 500]), rng.randrange(0, 8), rng.randrange(0, 6),
                      rng.choice([MS, 250 * MS, SECOND]), rng.choice([SECOND, 30 * SECOND]),
                      rng.randrange(0, 2**64)))
    for status, attempt, most, backoff, cap, random64 in cases:
        wait = follow.retry_wait(status, attempt, most, backoff, cap, random64)
        v.lines.append(f"retry {status} {attempt} {most} {backoff} {cap} {random64} "
                       f"{0 if wait is None else 1} {wait or 0}")


def make_follow() -> str:
    v = Vectors()
    rng = random.Random(20250704)
    v.lines += [
        "# Generated by tests/model/make_vectors.py from the reference model; do not edit.",
        "# signal <status> <quota> <realtime_ns> <n> (<=name> <=value>)*n <count> "
        "(<remaining> <within_ns>)*count",
        "#        what cr_signal_read reads; status 0: unknown; names and values are `=` and",
        "#        their bytes, %XX for a byte outside ! to ~ and for %",
        "# refused <status> <quota> <realtime_ns> <n> (<=name> <=value>)*n <STATUS_NAME>",
        "# limit gcra <emission_ns> <burst> | limit <fixed_window|sliding_window> <window_ns>"
        " <rate>",
        "#        a fresh key (state 0); readers run gcra also as token_bucket",
        "# check <now_ns> <cost> <allowed> <state_after>          (commits)",
        "# follow <now_ns> <status> <quota> <pending> <share> <n> (<=name> <=value>)*n "
        "<pulled> <state_after>",
        "#        no field of a follow holds an absolute time: the realtime clock is not read",
        "# peek <now_ns> <cost> <allowed> <remaining> <retry_after_ns> <reset_after_ns>",
        "# retry <status> <attempt> <retries> <backoff_ns> <max_backoff_ns> <random> <retry> "
        "<wait_ns>",
        "#        cr_retry_wait (the outbound adapters' retries; random: 64 bits, unsigned)",
    ]
    retry_after(v)
    ietf(v)
    providers(v)
    errors(v)
    random_signals(v, rng, 300)
    gcra_scenarios(v)
    window_scenarios(v)
    random_follows(v, rng, 150)
    retries(v, rng)
    v.lines.insert(14, f"# {v.signals} signals, {v.follows} follows")
    return "\n".join(v.lines) + "\n"
