"""One member of a fleet for test_share.py: decides at full speed until its deadline (or
its SIGKILL), and writes each admission's instant (CLOCK_MONOTONIC, comparable across
the host's processes) as soon as it is made, and each share it holds, as text lines
(instant, share, rate, burst, 1 while this process heartbeats for its member). With
SHARED, a process of the host member deciding on that region.

    python share_member.py PORT NAME FLEET_RATE BURST INTERVAL TTL SECONDS OUT [SHARED]
"""

import os
import struct
import sys
import time

import redis

from cellrate.share import ShareLimiter


def main() -> None:
    port, name, rate, burst, interval, ttl, seconds, out, *shared = sys.argv[1:]
    client = redis.Redis(port=int(port))
    limiter = ShareLimiter(client, float(rate), 1.0, burst=int(burst), name=name,
                           interval=float(interval), ttl=float(ttl),
                           **({"shared": shared[0]} if shared else {}))
    admissions = os.open(out + ".admitted", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    shares = open(out + ".shares", "a", buffering=1)
    deadline = time.monotonic() + float(seconds)
    last = None
    allow, now, pack, write = limiter.allow, time.monotonic, struct.Struct("d").pack, os.write
    while True:
        if (limiter.share, limiter.leader) != last:
            last = (limiter.share, limiter.leader)
            shares.write(f"{now()!r} {last[0]!r} {limiter.rate!r} {limiter.burst} "
                         f"{int(last[1])}\n")
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
