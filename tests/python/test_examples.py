"""The throttled-script examples of docs/waiting.md run, keep to the limit, and get no 429."""

import re
import subprocess
import sys

import pytest

from conftest import REPO

LINE = re.compile(r"^\s*(\d+\.\d+)s  call (\d+): HTTP (\d+)$")
CALLS = 6
INTERVAL = 0.2  # "5/second", burst 1


def run_example(name):
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / name), "--calls", str(CALLS)],
        capture_output=True, text=True, timeout=60, check=True)
    lines = result.stdout.splitlines()
    assert len(lines) == CALLS, result.stdout
    return [tuple(float(g) if i == 0 else int(g) for i, g in enumerate(LINE.match(line).groups()))
            for line in lines]


@pytest.mark.parametrize("name", ["throttled_api.py", "throttled_api_async.py"])
def test_throttled_script(name):
    if name.endswith("_async.py"):
        pytest.importorskip("httpx")
    calls = run_example(name)
    assert [status for _, _, status in calls] == [200] * CALLS  # the stand-in saw no excess
    # the calls went out in the order they were made (the async ones: FIFO waiters). Each line
    # gives the time its call went out; the async ones print as their answers come, in any order.
    calls.sort()
    assert [number for _, number, _ in calls] == list(range(1, CALLS + 1))
    # the last one was admitted (CALLS - 1) intervals after the first, at the earliest
    assert calls[-1][0] >= (CALLS - 1) * INTERVAL - 0.001
