"""Calling an API no faster than it allows: 5 calls per second, one at a time.

    python examples/throttled_api.py [URL] [--calls N]

Without a URL it calls a stand-in API on 127.0.0.1 (examples/standin_api.py).
"""

import argparse
import time
import urllib.error
import urllib.request

import cellrate


@cellrate.limit("5/second")  # blocks until the call is within the limit
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:  # a 429 would show here
        return error.code


def main():
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
        for number in range(1, args.calls + 1):
            status = fetch(f"{args.url}/items/{number}")
            print(f"{time.monotonic() - start:7.3f}s  call {number}: HTTP {status}")
    finally:
        if stop is not None:
            stop()


if __name__ == "__main__":
    main()
