"""A script that calls the fake provider (fake_provider.py) through an outbound
adapter, for tests/python/test_outbound.py; also run as a process of its own
(the two processes sharing a region):

    python outbound_client.py URL CLIENT WORKERS SECONDS [SHARED]

CLIENT: requests (threads), httpx (threads) or httpx-async (asyncio tasks).
Prints what run() returns, as JSON.
"""

from __future__ import annotations

import asyncio
import collections
import json
import sys
import threading
import time
from typing import Optional

import cellrate
from stalls import Watch

CEILING = "40/second"  # the script's own limit: above the provider's


def limiter(shared: Optional[str] = None) -> cellrate.Limiter:
    return cellrate.Limiter(CEILING, burst=1, shared=shared)


def run(url: str, client: str, workers: int, seconds: float, shared: Optional[str] = None,
        tokens: Optional[cellrate.Limiter] = None) -> dict:
    """{"statuses": {status: count the application saw}, "refused": [the instants
    (time.monotonic) it saw a 429], "stalls": [(from, to): the script not running,
    stalls.py]}."""
    statuses: collections.Counter = collections.Counter()
    refused: list = []
    watch = Watch()
    lock = threading.Lock()

    def seen(status: int) -> None:
        with lock:
            statuses[status] += 1
            if status == 429:
                refused.append(time.monotonic())

    options = {}
    if tokens is not None:
        options = {"tokens": tokens, "estimate": lambda request: 100}
    body = {"max_tokens": 100} if tokens is not None else {}
    stop = time.monotonic() + seconds
    if client == "httpx-async":
        import httpx

        from cellrate.httpx import AsyncRateLimitTransport

        async def main() -> None:
            watching = asyncio.get_running_loop().create_task(watch.task())
            transport = AsyncRateLimitTransport(limiter(shared), **options)
            async with httpx.AsyncClient(transport=transport, timeout=30) as session:
                async def task() -> None:
                    while time.monotonic() < stop:
                        seen((await session.post(url, json=body)).status_code)

                await asyncio.gather(*(task() for _ in range(workers)))
            watching.cancel()

        asyncio.run(main())
        return {"statuses": dict(statuses), "refused": refused, "stalls": watch.stalls}

    if client == "httpx":
        import httpx

        from cellrate.httpx import RateLimitTransport

        session = httpx.Client(transport=RateLimitTransport(limiter(shared), **options),
                               timeout=30)
        post = session.post
    else:
        import requests

        from cellrate.requests import RateLimitAdapter

        session = requests.Session()
        session.mount("http://", RateLimitAdapter(limiter(shared), **options))
        post = session.post

    def worker() -> None:
        while time.monotonic() < stop:
            seen(post(url, json=body, timeout=30).status_code)

    watching = watch.thread()
    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    watching.set()
    session.close()
    return {"statuses": dict(statuses), "refused": refused, "stalls": watch.stalls}


if __name__ == "__main__":
    url, client, workers, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    shared = sys.argv[5] if len(sys.argv) > 5 else None
    print(json.dumps(run(url, client, workers, seconds, shared)))
