"""The scenarios of tests/vectors/contract.txt (its header says the format),
for the Python and nginx runs of the cross-face contract (docs/contract.md)."""

from __future__ import annotations

import dataclasses
import pathlib

VECTORS = pathlib.Path(__file__).resolve().parents[1] / "vectors" / "contract.txt"

# The fields a scenario states: a response carries exactly these of them.
RATE_FIELDS = ("ratelimit-policy", "ratelimit", "retry-after",
               "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")


@dataclasses.dataclass
class Request:
    now: float
    cost: int
    status: int
    allowed: bool
    fields: dict[str, str]  # lower-case name -> value


@dataclasses.dataclass
class Scenario:
    name: str
    clock: bool  # its requests come at different times
    limits: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    options: dict[str, object] = dataclasses.field(default_factory=dict)
    requests: list[Request] = dataclasses.field(default_factory=list)


def _option(name: str, value: str) -> object:
    if name == "status":
        return int(value)
    if name == "name":
        return value
    assert value in ("true", "false"), (name, value)
    return value == "true"


def scenarios() -> list[Scenario]:
    found: list[Scenario] = []
    for line in VECTORS.read_text().splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        kind, rest = words[0], words[1:]
        if kind == "scenario":
            found.append(Scenario(rest[0], rest[1:] == ["clock"]))
        elif kind == "limit":
            found[-1].limits.append((rest[0], rest[1], int(rest[2])))
        elif kind == "option":
            found[-1].options[rest[0]] = _option(rest[0], rest[1])
        elif kind == "request":
            fields = dict(word.split("=", 1) for word in rest[4:])
            found[-1].requests.append(Request(float(rest[0]), int(rest[1]), int(rest[2]),
                                              rest[3] == "1",
                                              {k.lower(): v for k, v in fields.items()}))
        else:
            raise ValueError(f"{VECTORS}: unknown line {line!r}")
    return found


def rate_fields(headers: dict[str, str]) -> dict[str, str]:
    """The fields of a response (any case of name) that a scenario states."""
    return {name.lower(): value for name, value in headers.items()
            if name.lower() in RATE_FIELDS}
