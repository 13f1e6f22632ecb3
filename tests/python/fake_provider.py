"""A stand-in for a rate-limited API (an OpenAI-compatible one), for the
outbound tests (tests/python/test_outbound.py), run under uvicorn on loopback.

It enforces its own limits in fixed windows that start at its first request:
`requests` per window, and `tokens` per window when a request's JSON body asks
for max_tokens. Every answer says where the client stands, in the fields of
MODE (environment CELLRATE_FAKE_MODE):

    openai  x-ratelimit-{limit,remaining,reset}-{requests,tokens} (durations
            to the millisecond); a 429 with Retry-After (whole seconds) and
            retry-after-ms
    ietf    RateLimit-Policy and RateLimit (draft 11: whole seconds); a 429
            with Retry-After

A 200 answers as OpenAI's chat completions do: {"choices": [{"message": ...}],
"usage": {"total_tokens": n}}, n the tokens it counted (its max_tokens, or 1).
POST /admin/limits {"requests": n, "tokens": n} changes the limits at once,
mid-window (a sudden cut); GET /admin/stats gives what each window admitted
and refused, and its limit, when the first window started (time.monotonic) and
the stalls the provider itself suffered (stalls.py).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time

from stalls import Watch

WINDOW = float(os.environ.get("CELLRATE_FAKE_WINDOW", "1.0"))
MODE = os.environ.get("CELLRATE_FAKE_MODE", "openai")


class Provider:
    def __init__(self) -> None:
        self.requests = int(os.environ.get("CELLRATE_FAKE_REQUESTS", "20"))
        self.tokens = int(os.environ.get("CELLRATE_FAKE_TOKENS", "0")) or None
        self.start: float | None = None
        self.windows: dict[int, dict] = {}
        self.watch = Watch()
        self.watching = None

    def window(self, now: float) -> tuple[dict, float]:
        if self.start is None:
            self.start = now
        index = int((now - self.start) // WINDOW)
        state = self.windows.setdefault(index, {"requests": self.requests, "tokens": self.tokens,
                                                "admitted": 0, "refused": 0, "used": 0})
        state["requests"] = min(state["requests"], self.requests)  # a cut applies at once
        if self.tokens is not None:
            state["tokens"] = min(state["tokens"] or self.tokens, self.tokens)
        reset = self.start + (index + 1) * WINDOW - now
        return state, reset

    def fields(self, state: dict, reset: float) -> list[tuple[bytes, bytes]]:
        left = max(0, state["requests"] - state["admitted"])
        if MODE == "ietf":
            seconds = max(1, math.ceil(reset))
            fields = [(b"ratelimit-policy", f'"requests";q={state["requests"]};w={math.ceil(WINDOW)}'),
                      (b"ratelimit", f'"requests";r={left};t={seconds}')]
        else:
            fields = [(b"x-ratelimit-limit-requests", str(state["requests"])),
                      (b"x-ratelimit-remaining-requests", str(left)),
                      (b"x-ratelimit-reset-requests", f"{math.ceil(reset * 1000)}ms")]
            if state["tokens"] is not None:
                fields += [(b"x-ratelimit-limit-tokens", str(state["tokens"])),
                           (b"x-ratelimit-remaining-tokens",
                            str(max(0, state["tokens"] - state["used"]))),
                           (b"x-ratelimit-reset-tokens", f"{math.ceil(reset * 1000)}ms")]
        return [(name, value.encode()) for name, value in fields]

    def answer(self, asked: int) -> tuple[int, list, dict]:
        state, reset = self.window(time.monotonic())
        over = state["admitted"] >= state["requests"] or (
            state["tokens"] is not None and state["used"] + asked > state["tokens"])
        if over:
            state["refused"] += 1
            fields = self.fields(state, reset) + [
                (b"retry-after", str(max(1, math.ceil(reset))).encode())]
            if MODE == "openai":
                fields.append((b"retry-after-ms", str(math.ceil(reset * 1000)).encode()))
            return 429, fields, {"error": "rate limited"}
        state["admitted"] += 1
        state["used"] += asked
        return 200, self.fields(state, reset), {
            "choices": [{"message": {"role": "assistant", "content": "ok"}}],
            "usage": {"total_tokens": asked}}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.watching = asyncio.get_running_loop().create_task(self.watch.task())
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"]
        if path == "/admin/stats":
            status, fields, payload = 200, [], {
                "windows": {str(k): v for k, v in sorted(self.windows.items())},
                "window": WINDOW, "start": self.start, "stalls": self.watch.stalls}
        elif path == "/admin/limits":
            change = json.loads(body or b"{}")
            self.requests = int(change.get("requests", self.requests))
            if "tokens" in change:
                self.tokens = int(change["tokens"])
            status, fields, payload = 200, [], {}
        else:
            asked = 1
            if body:
                asked = int(json.loads(body).get("max_tokens", 1))
            status, fields, payload = self.answer(asked)
        content = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(content)).encode())] + fields})
        await send({"type": "http.response.body", "body": content})


app = Provider()
