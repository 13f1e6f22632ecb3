"""Plans and priorities in nginx (docs/nginx.md, "Plans"): four workers decide one
keyed limit in a shared region with two tiers (free 5 an hour, pro 20 an hour:
nothing comes back while the test runs) and two classes (critical 0, bulk 0.5),
each request under the plan its API key maps to ($plan) or a function names.
Counted over concurrent requests on their own connections, spread across the
workers: each tier admits exactly its burst per key, an upgraded key carries
the units it used, bulk is refused once half the burst is spent while critical
still gets the rest; an unknown plan or class is a 500 naming it; /metrics,
from any worker, counts every request in its plan's and its class's series."""

from __future__ import annotations

import concurrent.futures
import pathlib

import pytest
from server import Nginx

HERE = pathlib.Path(__file__).resolve().parent
TEMPLATE = HERE / "plans.conf.in"
FREE, PRO, WORKERS = 5, 20, 4
FIELDS = {"FREE": str(FREE), "PRO": str(PRO)}


def _statuses(server: Nginx, path: str, count: int,
              headers: dict[str, str] | None = None) -> tuple[list[int], set[str]]:
    """`count` requests of `path` from 16 threads, each on its own connection (so
    the workers share them): the statuses, and the workers that answered."""
    def get(_: int) -> tuple[int, str]:
        status, fields, _ = server.get(path, headers=headers)
        return status, fields.get("X-Worker", "")

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(get, range(count)))
    return [status for status, _ in answers], {worker for _, worker in answers}


def _admitted(server: Nginx, path: str, count: int,
              headers: dict[str, str] | None = None) -> int:
    statuses, _ = _statuses(server, path, count, headers)
    assert set(statuses) <= {200, 429}, statuses
    return statuses.count(200)


def count_tiers_and_classes(server: Nginx) -> None:
    """The counted scenario, on a server whose /by_variable names the plan by $plan (an
    API key's map), /by_function by ?plan=, and /classed the class by X-Priority too:
    each tier its burst, an upgrade carries, bulk yields (also through Redis:
    test_nginx_redis.py)."""
    free, pro = {"X-Api-Key": "free-secret"}, {"X-Api-Key": "pro-secret"}
    statuses, workers = _statuses(server, "/by_variable?key=f", 4 * FREE, free)
    assert statuses.count(200) == FREE and statuses.count(429) == 3 * FREE
    assert len(workers) >= 2  # spread across the workers: one limit decides
    assert _admitted(server, "/by_variable?key=p", 3 * PRO, pro) == PRO
    # no plan (no key nginx knows): "default", the table's own 5
    assert _admitted(server, "/by_variable?key=d", 4 * FREE) == FREE
    # a function names the plan; free -> pro carries the 5 units used: 15 more
    assert _admitted(server, "/by_function?key=u&plan=free", 4 * FREE) == FREE
    assert _admitted(server, "/by_function?key=u&plan=pro", 3 * PRO) == PRO - FREE
    # overload on a pro key: bulk stops at its reserve (half of 20), critical
    # then still gets the half bulk may not spend
    bulk = _admitted(server, "/classed?key=o", 3 * PRO, {**pro, "X-Priority": "bulk"})
    critical = _admitted(server, "/classed?key=o", 3 * PRO, {**pro, "X-Priority": "critical"})
    assert (bulk, critical) == (PRO // 2, PRO // 2)
    assert len(set(server.worker_pids())) == WORKERS


def test_four_workers_each_tier_its_burst_an_upgrade_carries_bulk_yields():
    with Nginx(workers=WORKERS, template=TEMPLATE, fields=FIELDS) as server:
        count_tiers_and_classes(server)


def test_the_fields_name_the_plan_that_decided():
    """RateLimit-Policy names the plan with its own numbers (as the Python
    policy's); without a plan, the policy's name."""
    with Nginx(workers=2, template=TEMPLATE, fields=FIELDS) as server:
        _, fields, _ = server.get("/by_variable?key=h1", headers={"X-Api-Key": "pro-secret"})
        assert fields["RateLimit-Policy"] == f'"pro";q={PRO};w=3600'
        assert fields["RateLimit"].startswith(f'"pro";r={PRO - 1};')
        _, fields, _ = server.get("/by_function?key=h2&plan=free")
        assert fields["RateLimit-Policy"] == f'"free";q={FREE};w=3600'
        _, fields, _ = server.get("/by_variable?key=h3")
        assert fields["RateLimit-Policy"] == f'"default";q={FREE};w=3600'
        # an empty name is no plan: "default"
        _, fields, _ = server.get("/by_function?key=h4&plan=")
        assert fields["RateLimit-Policy"] == f'"default";q={FREE};w=3600'


def test_an_unknown_plan_or_class_is_a_server_error_naming_it():
    """Never another limit, never a silent default: a 500, and the error log
    names plan or priority in the core's words; a plan where the core's rule
    refuses one (a limit without keys, several limits as one) too."""
    with Nginx(workers=2, template=TEMPLATE, fields=FIELDS) as server:
        assert server.get("/by_variable?key=x", headers={"X-Api-Key": "gold-secret"})[0] == 500
        assert server.get("/by_function?key=x&plan=gold")[0] == 500
        assert server.get("/classed?key=x", headers={"X-Priority": "urgent"})[0] == 500
        assert server.get("/unkeyed", headers={"X-Api-Key": "pro-secret"})[0] == 500
        assert server.get("/several?key=x", headers={"X-Api-Key": "pro-secret"})[0] == 500
        # nothing was spent by those: key x still has its whole burst
        assert _admitted(server, "/by_variable?key=x", 2 * FREE) == FREE
        log = server.log()
    assert "plan must be 'default' or the name of one of the plans" in log
    assert "priority must be the name of one of the limit's priority classes" in log
    assert "cellrate.nginx: plan: a limit without keys has only the plan 'default'" in log
    assert "cellrate.nginx: plan: several limits decided as one take no plan" in log


def series(samples: dict, family: str, label: str, name: str, outcome: str) -> float:
    return samples[(family, frozenset({("limit", "tiers"), (label, name), ("outcome", outcome)}))]


def test_metrics_count_each_plan_and_class_over_the_workers():
    """cellrate_plan_decisions_total and cellrate_priority_decisions_total,
    scraped from several workers, hold exactly the 200s and 429s counted here
    under each plan and class; a dry run's would-be refusals are not refused."""
    parser = pytest.importorskip("prometheus_client.parser",
                                 reason="make test installs prometheus_client")
    free, pro = {"X-Api-Key": "free-secret"}, {"X-Api-Key": "pro-secret"}
    with Nginx(workers=WORKERS, template=TEMPLATE, fields=FIELDS) as server:
        counted = {  # (plan, class): statuses; class None: none named (critical's)
            ("free", None): _statuses(server, "/by_variable?key=mf", 4 * FREE, free)[0],
            ("pro", None): _statuses(server, "/by_variable?key=mp", 3 * PRO, pro)[0],
            ("default", None): _statuses(server, "/by_variable?key=md", 2 * FREE)[0],
            ("pro", "bulk"): _statuses(server, "/classed?key=mo", 3 * PRO,
                                       {**pro, "X-Priority": "bulk"})[0],
            ("pro", "critical"): _statuses(server, "/classed?key=mo", 2 * PRO,
                                           {**pro, "X-Priority": "critical"})[0],
        }
        dry = _statuses(server, "/dry?key=mx", 2 * FREE, {**free, "X-Priority": "bulk"})[0]
        scrapes, answered_by = [], set()
        for _ in range(200):
            status, fields, body = server.get("/metrics")
            assert status == 200
            scrapes.append(body.decode())
            answered_by.add(fields["X-Worker"])
            if len(answered_by) == WORKERS:
                break
    assert dry == [200] * (2 * FREE)  # a dry run refuses nothing
    assert counted[("pro", "bulk")].count(200) == PRO // 2
    assert len(answered_by) >= 2, answered_by

    for text in scrapes:
        samples = {(s.name, frozenset(s.labels.items())): s.value
                   for family in parser.text_string_to_metric_families(text)
                   for s in family.samples}

        would_refuse = samples[("cellrate_decisions_total",
                                frozenset({("limit", "tiers"), ("outcome", "would_refuse")}))]
        dry_admitted = 2 * FREE - would_refuse
        assert 0 < dry_admitted < FREE  # bulk's share of free's burst, the rest would refuse
        for plan in ("default", "free", "pro"):
            statuses = [s for (p, _), got in counted.items() if p == plan for s in got]
            extra = dry_admitted if plan == "free" else 0
            assert series(samples, "cellrate_plan_decisions_total", "plan", plan,
                          "admitted") == statuses.count(200) + extra, (plan, text)
            assert series(samples, "cellrate_plan_decisions_total", "plan", plan,
                          "refused") == statuses.count(429), (plan, text)
        for priority in ("bulk", "critical"):
            statuses = [s for (_, c), got in counted.items() if (c or "critical") == priority
                        for s in got]
            extra = dry_admitted if priority == "bulk" else 0
            assert series(samples, "cellrate_priority_decisions_total", "priority", priority,
                          "admitted") == statuses.count(200) + extra, (priority, text)
            assert series(samples, "cellrate_priority_decisions_total", "priority", priority,
                          "refused") == statuses.count(429), (priority, text)
        assert "secret" not in text and "mf" not in text  # no credential, no key


def test_a_plan_given_as_it_is_is_judged_before_any_decision():
    """A literal plan: a policy name (the options' check) and one of the limit's
    plans (the first limit() of the pair), refused as a 500 naming plan in the
    core's words before any key is read or unit spent; a known one decides."""
    with Nginx(workers=2, template=TEMPLATE, fields=FIELDS) as server:
        for path in ("/literal_unknown?key=l", "/literal_no_policy_name?key=l",
                     "/literal_unkeyed"):
            assert [server.get(path)[0] for _ in range(3)] == [500] * 3, path
        _, fields, _ = server.get("/literal_pro?key=l")
        assert fields["RateLimit-Policy"].startswith('"pro";q=20;')
        assert _admitted(server, "/literal_pro?key=l", 2 * PRO) == PRO - 1
        log = server.log()
    assert "cellrate.nginx: plan must be 'default' or the name of one of the plans" in log
    assert "cellrate.nginx: plan: a limit without keys has only the plan 'default'" in log
