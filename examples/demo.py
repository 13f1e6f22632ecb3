"""cellrate in Python: a burst, a turn-away with its exact retry-after, recovery."""
import os
import shutil
import subprocess
import tempfile
import time

import cellrate


def show(label, d):
    print(f"  {label:<28} allowed={str(d.allowed):<5} remaining={d.remaining} "
          f"retry_after={d.retry_after:.9f} s reset_after={d.reset_after:.9f} s")


print(f"cellrate {cellrate.__version__} (Python)")

print("\n1. '10/second', burst 6, on an explicit clock (exact to the nanosecond):")
lim = cellrate.Limiter("10/second", burst=6)
print(f"  {lim!r}")
for i in range(7):
    show(f"request {i + 1} at t=0", lim.check(now=100.0))
show("request 8 at t=0.1", lim.check(now=100.1))

print("\n2. the same on the real clock: wait exactly retry_after, then go:")
lim = cellrate.Limiter("5/second", burst=3)
for i in range(4):
    d = lim.check()
    show(f"request {i + 1}", d)
time.sleep(d.retry_after)
show("after sleeping retry_after", lim.check())

print("\n3. per key, with a cost, and a probe that commits nothing:")
keyed = cellrate.KeyedLimiter("300/minute", burst=60)
show("alice spends 50", keyed.check("alice", cost=50, now=10.0))
show("alice asks 20 more", keyed.check("alice", cost=20, now=10.0))
show("bob is untouched", keyed.peek("bob", now=10.0))
show("alice asks 61 (never fits)", keyed.check("alice", cost=61, now=10.0))
show("alice, 2 s later, peeks", keyed.peek("alice", now=12.0))
print(f"  keys tracked: {len(keyed)}")

lua_cpath = os.environ.get("CELLRATE_LUA_CPATH")
if lua_cpath and shutil.which("lua5.4"):
    print("\n4. one limit shared by processes, Python and Lua, through /dev/shm:")
    folder = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    path = os.path.join(folder, "demo-limits")
    shared = cellrate.KeyedLimiter("10/s", burst=10, capacity=1000, shared=path)
    show("Python spends 4 of 10", shared.check("carol", cost=4, now=50.0))
    lua = (f'package.cpath = "{lua_cpath};" .. package.cpath\n'
           'local cellrate = require "cellrate"\n'
           f'local keyed = cellrate.keyed("10/s", {{ burst = 10, capacity = 1000, shared = "{path}" }})\n'
           'local ok, remaining = keyed:check("carol", 5, 50.0)\n'
           'print(("  a Lua process spends 5:       allowed=%s remaining=%d"):format(\n'
           '    tostring(ok), remaining))\n')
    subprocess.run(["lua5.4", "-e", lua], check=True)
    show("Python asks 2 more", shared.check("carol", cost=2, now=50.0))
    shutil.rmtree(folder)
