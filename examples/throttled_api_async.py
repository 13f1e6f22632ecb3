"""The asyncio form: many calls started at once, sent 5 per second in the
order they were started, the event loop free for other work meanwhile.

    pip install httpx
    python examples/throttled_api_async.py [URL] [--calls N]

Without a URL it calls a stand-in API on 127.0.0.1 (examples/standin_api.py).
"""

import argparse
import asyncio
import time

import httpx

import cellrate


@cellrate.limit("5/second")  # awaits (never blocks the loop) until within the limit
async def fetch(client, url):
    sent = time.monotonic()  # admitted: the call goes out now
    response = await client.get(url)
    return sent, response.status_code


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url", nargs="?")
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    stop = None
    if args.url is None:
        import standin_api

        args.url, stop = standin_api.start()
    try:
        start = time.monotonic()
        async with httpx.AsyncClient(timeout=10) as client:

            async def call(number):
                sent, status = await fetch(client, f"{args.url}/items/{number}")
                print(f"{sent - start:7.3f}s  call {number}: HTTP {status}")

            await asyncio.gather(*(call(number) for number in range(1, args.calls + 1)))
    finally:
        if stop is not None:
            stop()


if __name__ == "__main__":
    asyncio.run(main())
