"""Plans, a limit per key: the reference model (docs/design/plans.md).

Written from the rule, not from the C. A keyed table holds named plans, each a
GCRA limit (T and tau = T * burst in ns); its own limit is the plan "default".
Every decision names a plan. A key decided under another plan than last time
first carries what it used into the new plan (docs/design.md §8): used =
max(0, TAT - t) / T_old exactly, TAT' = t + ceil(used * T_new) (an idle key
stays as it is). A change of a plan's parameters at instant c carries every key
on it the same way, at c. Then the decision is §1's. A refusal writes nothing;
a peek writes nothing (not even the plan). Integers only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NEVER = 2**63 - 1
PLANS_MAX = 16  # "default" included
NAME_MAX = 31  # bytes of a plan name


def check_table(names: list[bytes], algorithms: list[str], default_algorithm: str) -> str:
    """The status cr_plans_set gives for plans `names` (order as given)."""
    if not 1 <= len(names) <= PLANS_MAX - 1:
        return "E_PLANS"
    seen: set[bytes] = set()
    for name in names:
        if not 1 <= len(name) <= NAME_MAX or b"\0" in name or name == b"default" or name in seen:
            return "E_PLANS"
        seen.add(name)
    if any(algorithm != default_algorithm for algorithm in algorithms):
        return "E_PLANS_ALGORITHM"
    return "OK"


def items(count: int, keyed: bool, named: bool) -> str:
    """Where a plan is taken: `count` limits decided as one, with keys or not;
    `named`: a request names a plan (else a plan table is given to them).
    Several limits as one take no plan; plans are a keyed limit's."""
    if named and count > 1:
        return "E_PLAN_SEVERAL"
    if not keyed:
        return "E_PLAN_KEYED" if named else "E_PLANS_KEYED"
    return "OK"


def carry(tat: int, t: int, t_from: int, t_to: int) -> int:
    """TAT' = t + ceil((TAT - t) * T_to / T_from); an idle key stays."""
    if tat <= t:
        return tat
    return t + -(-(tat - t) * t_to // t_from)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    remaining: int
    retry_after_ns: int
    reset_after_ns: int
    state_after: int


def decide(emission_ns: int, burst: int, tat: int, t: int, cost: int) -> Decision:
    """§1's decision."""
    T, tau = emission_ns, emission_ns * burst
    base = max(tat, t)
    remaining_away = max(0, (t + tau - base) // T)
    if cost == 0:
        return Decision(True, remaining_away, 0, base - t, tat)
    if cost * T > tau:
        return Decision(False, remaining_away, NEVER, base - t, tat)
    new_tat = base + cost * T
    if t >= new_tat - tau:
        return Decision(True, (t + tau - new_tat) // T, 0, new_tat - t, new_tat)
    return Decision(False, remaining_away, new_tat - tau - t, base - t, tat)


@dataclass
class Table:
    """Plans by name: (T, burst); keys: name -> (plan, TAT)."""

    plans: dict[bytes, tuple[int, int]]
    keys: dict[bytes, tuple[bytes, int]] = field(default_factory=dict)

    def decide(self, key: bytes, plan: bytes, t: int, cost: int, commit: bool) -> Decision:
        if plan not in self.plans:
            raise KeyError(plan)
        emission, burst = self.plans[plan]
        was_plan, tat = self.keys.get(key, (plan, 0))
        if was_plan != plan:
            tat = carry(tat, t, self.plans[was_plan][0], emission)
        d = decide(emission, burst, tat, t, cost)
        if commit and (d.state_after != 0 or key in self.keys):
            self.keys[key] = (plan, d.state_after)
        return d

    def edit(self, plan: bytes, t: int, emission_ns: int, burst: int) -> None:
        """A change of the plan's parameters at `t`: every key on it carried."""
        old_emission, _ = self.plans[plan]
        self.plans[plan] = (emission_ns, burst)
        for key, (on, tat) in self.keys.items():
            if on == plan:
                self.keys[key] = (on, carry(tat, t, old_emission, emission_ns))
