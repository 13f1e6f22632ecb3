"""Reference model of the web faces' rules (docs/design.md §10).

Written from the rules as the design states them, on Python's `ipaddress`
(an implementation of the address grammar and of RFC 5952's text that shares
nothing with core/web.c), so that the core can be checked against something
independent of it. make_vectors.py writes tests/vectors/web.txt from it.

- an address as text: IPv4, or IPv6 whose zone (from the first '%') is
  dropped; an IPv4-mapped IPv6 address is its IPv4 address; anything else is
  no address (None)
- its key: the network of ipv4_prefix / ipv6_prefix leading bits in
  ipaddress's text, the address alone at a full prefix; "unknown" for none
- a hop of X-Forwarded-For or Forwarded's for=: whitespace (SP, HTAB) and
  quotes around it dropped, then brackets ("[v6]:port") or a port ("v4:port")
- a trusted network: ipaddress.ip_network(text, strict=False), an
  IPv4-mapped one as the IPv4 network it maps
- the client behind trusted proxies: the hops of the field read from the
  right, the first not trusted (or no address) is the client, all trusted:
  the leftmost; an empty field or a Forwarded one without for= names none
- a refusal's status: 400 to 599; prefixes: 0 to 32, 0 to 128
- a dry run leaves Retry-After out of a refusal's fields
- a count: decimal digits with whitespace around, saturating at 2**63 - 1;
  settling: the count, at most max_cost; a count below 0 settles nothing
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import List, Optional, Union

INT64_MAX = 2**63 - 1
UNKNOWN = "unknown"
OWS = " \t"

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

# The fields the header formatter can write (docs/design.md §10), and those a
# dry run leaves out: Retry-After tells a client to wait (RFC 9110 §10.2.3),
# and a dry run admits.
FIELDS = ["RateLimit-Policy", "RateLimit", "Retry-After", "X-RateLimit-Limit",
          "X-RateLimit-Remaining", "X-RateLimit-Reset"]
DRY_RUN_REMOVED = ["Retry-After"]


def address(text: str) -> Optional[Address]:
    if ":" in text:
        text = text.partition("%")[0]
    try:
        parsed = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped
    return parsed


def key(parsed: Optional[Address], ipv4_prefix: int, ipv6_prefix: int) -> str:
    if parsed is None:
        return UNKNOWN
    prefix = ipv4_prefix if parsed.version == 4 else ipv6_prefix
    if prefix == parsed.max_prefixlen:
        return str(parsed)
    return str(ipaddress.ip_network((parsed, prefix), strict=False))


def from_bytes(packed: bytes) -> Optional[Address]:
    if len(packed) not in (4, 16):
        return None
    parsed = ipaddress.ip_address(packed)
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped
    return parsed


def hop(text: str) -> Optional[Address]:
    text = text.strip(OWS).strip('"')
    if text.startswith("["):
        text = text[1:text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    return address(text)


def network(text: str) -> Optional[Network]:
    try:
        parsed = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    mapped = getattr(parsed.network_address, "ipv4_mapped", None)
    if mapped is None or parsed.prefixlen < 96:
        return parsed
    return ipaddress.IPv4Network((int(mapped), parsed.prefixlen - 96))


def trusted(parsed: Optional[Address], networks: List[Network]) -> bool:
    return parsed is not None and any(parsed.version == net.version and parsed in net
                                      for net in networks)


@dataclass(frozen=True)
class NoHop:
    """The field names no hop: the peer is the client."""


def client(field: str, value: str, networks: List[Network]) -> Union[Address, None, NoHop]:
    if not value:
        return NoHop()
    if field == "forwarded":
        hops = []
        for element in value.split(","):
            for pair in element.split(";"):
                name, _, given = pair.partition("=")
                if name.strip(OWS).lower() == "for":
                    hops.append(given)
    else:
        hops = value.split(",")
    if not hops:
        return NoHop()
    found: Optional[Address] = None
    for given in reversed(hops):
        found = hop(given)
        if not trusted(found, networks):
            return found
    return found


def refusal_status_ok(status: int) -> bool:
    return 400 <= status <= 599


def prefix_ok(family: int, prefix: int) -> bool:
    return 0 <= prefix <= (32 if family == 4 else 128)


def count(text: str) -> Optional[int]:
    digits = text.strip(OWS)
    if not digits or not all("0" <= c <= "9" for c in digits):
        return None
    return min(int(digits), INT64_MAX)


@dataclass(frozen=True)
class Settlement:
    total: int
    units: int
    clipped: bool


def settle(charged: int, reported: int, max_cost: Optional[int]) -> Optional[Settlement]:
    """None: no count, nothing settled (the request stays charged `charged`)."""
    if reported < 0:
        return None
    clipped = max_cost is not None and reported > max_cost
    total = max_cost if clipped and max_cost is not None else reported
    return Settlement(total, total - charged, clipped)
