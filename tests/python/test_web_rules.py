"""The web rules (tests/vectors/web.txt, written by tests/model/web_model.py)
through the Python face: each address, hop, trusted network and proxy's field
through cellrate.web.Policy as a request presents them, each status and prefix
as a Policy option, the dry run's fields through Policy.outcome, and counts
and settlements through the binding the policy settles with. The C tests,
busted and nginx read the same file (docs/design.md §10)."""

from __future__ import annotations

import functools
import logging
import pathlib
import urllib.parse

import pytest

import cellrate
from cellrate import _cellrate
from cellrate.web import Policy, Request, hop_address

VECTORS = pathlib.Path(__file__).resolve().parents[1] / "vectors" / "web.txt"
# A peer the trusted proxies' field is read behind: in no network of the vectors.
PROXY = "198.18.0.1"


def lines(kind: str) -> list[list[str]]:
    found = [line.split() for line in VECTORS.read_text(encoding="utf-8").splitlines()
             if line.startswith(kind + " ")]
    assert found, f"no {kind} lines in {VECTORS}"
    return found


def text(field: str) -> str:
    """A text field: percent-decoded, as a server hands the bytes over (latin-1)."""
    return "" if field == "-" else urllib.parse.unquote_to_bytes(field).decode("latin-1")


def view(policy: Policy, peer: str | None, **headers: str) -> Request:
    scope = {"type": "http", "client": None if peer is None else (peer, 1),
             "headers": [(name.replace("_", "-").lower().encode(), value.encode("latin-1"))
                         for name, value in headers.items()]}
    return Request(policy, "GET", "/", scope=scope)


@functools.lru_cache(None)
def prefixed(ipv4: int, ipv6: int) -> Policy:
    return Policy("1000/s", ipv4_prefix=ipv4, ipv6_prefix=ipv6)


@pytest.fixture(autouse=True)
def quiet(caplog):
    caplog.set_level(logging.ERROR, logger="cellrate")  # "requests arrive without an address"


def test_an_address_is_keyed_as_the_model_keys_it():
    wrong = []
    for _, address, ipv4, ipv6, key in lines("key"):
        policy = prefixed(int(ipv4), int(ipv6))
        request = view(policy, text(address))
        if policy.client_of(request) != key or policy.key(request) != key:
            wrong.append((text(address), ipv4, ipv6, policy.client_of(request), key))
    assert not wrong, wrong[:10]


def test_a_hop_is_read_as_the_model_reads_it():
    wrong = [(text(hop), hop_address(text(hop)), key) for _, hop, key in lines("hop")
             if hop_address(text(hop)) != key]
    assert not wrong, wrong


def test_trusted_networks_are_read_as_the_model_reads_them():
    for _, network, *answer in lines("network"):
        if text(network) == "unix":
            continue  # the Python face's own word: a peer on a Unix socket
        if answer == ["bad"]:
            with pytest.raises(cellrate.InvalidArgument) as caught:
                Policy("1/s", trusted_proxies=[text(network)])
            assert caught.value.param == "trusted_proxies", network
        else:
            Policy("1/s", trusted_proxies=[text(network)])
    for _, network, address, inside in lines("trust"):
        policy = Policy("1/s", trusted_proxies=[text(network)], ipv6_prefix=128)
        client = policy.client_of(view(policy, text(address), X_Forwarded_For="203.0.113.1"))
        assert (client == "203.0.113.1") == (inside == "1"), (network, address)


def test_the_client_behind_trusted_proxies_is_found_as_the_model_finds_it():
    wrong = []
    for _, field, networks, value, key in lines("client"):
        trusted = ([] if networks == "-" else networks.split(",")) + [PROXY]
        policy = Policy("1/s", trusted_proxies=trusted, ipv6_prefix=128,
                        proxy_header="Forwarded" if field == "forwarded" else "X-Forwarded-For")
        headers = {"Forwarded" if field == "forwarded" else "X_Forwarded_For": text(value)}
        client = policy.client_of(view(policy, PROXY, **headers))
        if client != (PROXY if key == "-" else key):
            wrong.append((field, networks, text(value), client, key))
    assert not wrong, wrong


def test_a_refusal_status_is_checked_as_the_model_checks_it():
    for _, status, verdict in lines("refusal_status"):
        if verdict == "OK":
            assert Policy("1/s", status=int(status)).status == int(status)
            continue
        with pytest.raises(cellrate.InvalidArgument) as caught:
            Policy("1/s", status=int(status))
        assert caught.value.param == "status"
        assert str(caught.value) == "status must be an integer from 400 to 599"


def test_a_prefix_is_checked_as_the_model_checks_it():
    for _, family, prefix, verdict in lines("prefix"):
        option = f"ipv{family}_prefix"
        if verdict == "OK":
            Policy("1/s", **{option: int(prefix)})
            continue
        with pytest.raises(cellrate.InvalidArgument) as caught:
            Policy("1/s", **{option: int(prefix)})
        assert caught.value.param == option


def test_a_dry_run_leaves_out_the_fields_the_model_leaves_out():
    def refused_fields(**options):
        policy = Policy(cellrate.KeyedLimiter("1/hour", burst=1), legacy_headers=True,
                        now=lambda: 1000.0, **options)
        request = view(policy, "192.0.2.1")
        limits = policy.limits_for(request)
        policy.decide(limits, request)
        decision = policy.decide(limits, request)
        assert not decision.allowed
        return dict(policy.outcome(decision, request)[1])

    every = refused_fields()
    sent = refused_fields(dry_run=True)
    for _, field, verdict in lines("dry_run"):
        assert field in every
        assert (field in sent) == (verdict == "kept"), field


def test_a_count_is_read_as_the_model_reads_it():
    for _, given, count in lines("count"):
        if count == "bad":
            with pytest.raises(cellrate.InvalidArgument) as caught:
                _cellrate._settle(0, text(given), None)
            assert caught.value.param == "charge"
        else:
            assert _cellrate._settle(0, text(given), None) == (int(count), int(count), False)


def test_a_settlement_is_what_the_model_settles():
    for _, charged, count, most, *answer in lines("settle"):
        max_cost = None if most == "-" else int(most)
        if answer == ["bad"]:
            with pytest.raises(cellrate.InvalidArgument) as caught:
                _cellrate._settle(int(charged), int(count), max_cost)
            assert caught.value.param == "charge"
        else:
            total, units, clipped = answer
            assert _cellrate._settle(int(charged), int(count), max_cost) == (
                int(total), int(units), clipped == "1")
