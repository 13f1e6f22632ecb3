"""The penalty box (docs/design.md §15): a Penalty is what Limiter and
KeyedLimiter take as penalty=; the core judges it (cr_penalty_init) and
keeps refused keys (docs/design/penalty.md)."""

from __future__ import annotations

from typing import Any

from cellrate import _cellrate


class Penalty:
    """After `after` refusals of one key (a rate string of refusals, such as
    "5/minute"), that key is refused for `ban` seconds; a repeat offence (a
    ban starting less than max_ban after the last one ended) doubles the last
    ban, up to `max_ban` (None: bans never grow). A refusal during a ban
    spends nothing and its retry_after runs to the ban's end."""

    __slots__ = ("_after", "_ban", "_max_ban")

    def __init__(self, after: str, ban: float, *, max_ban: float | None = None) -> None:
        _cellrate._penalty_check(after, ban, max_ban)
        self._after, self._ban, self._max_ban = after, ban, max_ban

    @property
    def after(self) -> str:
        return self._after

    @property
    def ban(self) -> float:
        return self._ban

    @property
    def max_ban(self) -> float | None:
        return self._max_ban

    def __repr__(self) -> str:
        tail = "" if self._max_ban is None else f", max_ban={self._max_ban!r}"
        return f"Penalty({self._after!r}, {self._ban!r}{tail})"

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Penalty):
            return NotImplemented
        return (self._after, self._ban, self._max_ban) == (other._after, other._ban, other._max_ban)

    def __hash__(self) -> int:
        return hash((self._after, self._ban, self._max_ban))
