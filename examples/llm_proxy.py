"""An LLM-style proxy: each API key may spend TOKENS_PER_MINUTE tokens a minute.

A completion's cost is known only once the model has answered. The proxy
charges each request its estimate first (its prompt and `max_tokens`), then
settles on the usage the upstream reports: the policy's `charge=` reads it
from the response once the response has ended, and gives back what the
estimate overstated (or charges what it understated: a key may go into debt,
and is then refused, with the exact Retry-After, until the debt has drained).
docs/cost.md draws the flow. A usage figure gone wrong costs a key little: a
request counts at most MAX_COST (a larger figure is settled as MAX_COST, and
logged), and a debt is at most one burst deep (the default max_debt).

    python examples/llm_proxy.py        # serves on 127.0.0.1:8000, a stand-in upstream beside it

    curl -H 'Authorization: Bearer key-1' -d '{"prompt": "hello", "max_tokens": 200}' \\
         http://127.0.0.1:8000/v1/completions

The upstream is a stand-in on loopback (start_upstream) that answers like a
completions API: a text and its usage in tokens.
"""

import json
import pathlib
import sys
import urllib.request
from http.server import BaseHTTPRequestHandler

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse
from starlette.routing import Route

import cellrate
import cellrate.asgi

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # the stand-ins beside it
import standin_api  # noqa: E402

TOKENS_PER_MINUTE = 10_000
MAX_TOKENS = 4_000  # the most one completion may ask for
MAX_COST = 8_000  # the most one request may cost: its prompt and completion (the model's window)
USAGE_HEADER = "X-Usage-Tokens"

# burst = a minute's tokens; max_cost: a limit that could never admit the
# largest request is refused at start, naming burst, and a usage reported above
# it is settled as max_cost (and logged)
TOKENS = cellrate.KeyedLimiter(f"{TOKENS_PER_MINUTE}/minute", burst=TOKENS_PER_MINUTE,
                               max_cost=MAX_COST)


def api_key(request):
    """The key: the bearer token (a request without one shares "anonymous")."""
    value = request.header("Authorization") or ""
    return value[len("Bearer "):] if value.startswith("Bearer ") else "anonymous"


def estimate(body):
    """Tokens a completion may use: its prompt (about 4 characters a token) and max_tokens."""
    return len(str(body.get("prompt", ""))) // 4 + 1 + int(body["max_tokens"])


def reported_usage(request, response):
    """What the request really cost: the upstream's usage, passed on by the
    endpoint; a response without it (refused, failed) cost nothing."""
    return int(response.header(USAGE_HEADER) or 0)


def make_app(upstream_url, now=None):
    """The proxy in front of `upstream_url`; `now`: a clock for the limits (tests)."""

    def call_upstream(body):
        data = json.dumps(body).encode()
        post = urllib.request.Request(upstream_url + "/v1/completions", data=data,
                                      headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(post, timeout=10) as reply:
            return json.load(reply)

    async def completions(request):
        body = await request.json()
        tokens = body.get("max_tokens")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_TOKENS:
            return JSONResponse({"error": f"max_tokens must be an integer from 1 to {MAX_TOKENS}"},
                                status_code=400)
        if 1 + estimate(body) > MAX_COST:  # the door's unit, the prompt and the completion
            return JSONResponse({"error": f"the prompt is too long: at most {MAX_COST} tokens "
                                          "with the completion"}, status_code=400)
        # the estimate, charged to this request's key now (cellrate.web: an
        # endpoint charges its own request); the response settles it
        decision = request.scope["cellrate.charge"](estimate(body))
        if not decision.allowed:  # sent without usage: the response gives the estimate back
            return JSONResponse({"error": "token budget exhausted"}, status_code=429,
                                headers=decision.headers())
        answer = await run_in_threadpool(call_upstream, body)
        used = answer["usage"]["total_tokens"]
        return JSONResponse(answer, headers={USAGE_HEADER: str(used)})

    app = Starlette(routes=[Route("/v1/completions", completions, methods=["POST"])])
    # cost=1: a key in debt is refused at the door; charge=: settled on the usage reported
    return cellrate.asgi.RateLimitMiddleware(app, TOKENS, key=api_key, cost=1,
                                             charge=reported_usage, now=now)


class Upstream(BaseHTTPRequestHandler):
    """A stand-in completions API: it answers with half of max_tokens."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt_tokens = len(str(body.get("prompt", "")).split())
        completion_tokens = body["max_tokens"] // 2
        reply = json.dumps({
            "text": "lorem " * completion_tokens,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format, *args):  # quiet
        pass


def start_upstream():
    """Starts the stand-in upstream on a free loopback port; returns (base URL, stop)."""
    return standin_api.start(Upstream)


if __name__ == "__main__":
    import uvicorn

    url, stop_upstream = start_upstream()
    try:
        uvicorn.run(make_app(url), host="127.0.0.1", port=8000)
    finally:
        stop_upstream()
