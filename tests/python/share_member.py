"""One member of a fleet for test_share.py: decides at full speed until its deadline (or
its SIGKILL), and writes each admission's instant (CLOCK_MONOTONIC, comparable across
the host's processes) as soon as it is made, and each share it holds, as text lines.

    python share_member.py PORT NAME FLEET_RATE BURST INTERVAL TTL SECONDS OUT
"""

import os
import struct
import sys
import time

import redis

from cellrate.share import ShareLimiter


def main() -> None:
    port, name, rate, burst, interval, ttl, seconds, out = sys.argv[1:]
    client = redis.Redis(port=int(port))
    limiter = ShareLimiter(client, float(rate), 1.0, burst=int(burst), name=name,
                           interval=float(interval), ttl=float(ttl))
    admissions = os.open(out + ".admitted", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    shares = open(out + ".shares", "a", buffering=1)
    deadline = time.monotonic() + float(seconds)
    last = None
    allow, now, pack, write = limiter.allow, time.monotonic, struct.Struct("d").pack, os.write
    while True:
        if limiter.share != last:
            last = limiter.share
            shares.write(f"{now()!r} {last!r} {limiter.rate!r} {limiter.burst}\n")
        if allow():
            t = now()
            write(admissions, pack(t))
            if t > deadline:
                break
        elif now() > deadline:
            break
    limiter.close()


if __name__ == "__main__":
    main()
