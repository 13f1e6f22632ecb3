"""What a loaded machine took from a process: the intervals in which it did not run.

A watcher (a thread, or an asyncio task) sleeps STEP again and again and notes every
wake-up at least STALL late: from the instant it went to sleep to the instant it ran
again (time.monotonic, CLOCK_MONOTONIC: one clock for every process of the machine).
The outbound tests (test_outbound.py) judge only what was not starved: the fake
provider (fake_provider.py) and the script (outbound_client.py) each watch themselves.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import List, Tuple

STEP = 0.005  # seconds between two looks
STALL = 0.05  # a wake-up this late is a stall (the script's own interval is 0.025 s)


class Watch:
    def __init__(self, stall: float = STALL) -> None:
        self.stall = stall
        self.stalls: List[Tuple[float, float]] = []

    def _look(self, before: float) -> None:
        after = time.monotonic()
        if after - before >= STEP + self.stall:
            self.stalls.append((before, after))

    def thread(self) -> threading.Event:
        """Watches from a daemon thread until the event returned is set."""
        done = threading.Event()

        def watch() -> None:
            while True:
                before = time.monotonic()
                if done.wait(STEP):
                    return
                self._look(before)

        threading.Thread(target=watch, daemon=True, name="stalls").start()
        return done

    async def task(self) -> None:
        """Watches the running loop until cancelled."""
        while True:
            before = time.monotonic()
            await asyncio.sleep(STEP)
            self._look(before)
