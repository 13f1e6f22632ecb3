"""The `cellrate` command (also `python -m cellrate`): a live region.

    cellrate inspect PATH [--json]   the region's limit, algorithm, capacity,
                                     live keys, plans (names and limits), penalty and
                                     the keys in its box (banned now), counters and
                                     layout version; for a directory (a web policy's
                                     shared=), each region in it, and what it skipped
    cellrate inspect PATH --key KEY  one key of a keyed region: its plan, the units it
                                     used and those remaining now
    cellrate reset PATH [KEY]        a keyed region's KEY (without: every key), or a limiter;
                                     a banned key is let out of the penalty box

inspect only reads (cellrate._cellrate.inspect_region and inspect_key never write). reset
opens the region with the limit it records and on_change="refuse", so it can
never change a limit; it takes one region, never a directory. Anything that is
not a region (a directory holding none), and a usage mistake, exit with status
2 and one line on stderr naming the path; the file is left as it was.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

import cellrate
from cellrate import _cellrate

USAGE_ERROR = 2

# inspect's fields in the order printed; the rest follow, then the counters
FIELDS = ("kind", "limit", "algorithm", "rate", "period", "burst", "max_in_flight", "lease",
          "peak", "capacity", "live_keys", "penalty", "generation", "layout_version", "size",
          "this_boot")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own usage errors: status 2, as ours
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="cellrate", description="Inspect or reset a live cellrate region.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    inspect = commands.add_parser("inspect", help="print a region's limit, keys and counters "
                                                  "(reads only)")
    inspect.add_argument("path", metavar="PATH", help="the region (a file under /dev/shm), or a "
                                                      "directory of regions (a shared= directory)")
    inspect.add_argument("--json", action="store_true", help="one JSON object, for scripts")
    inspect.add_argument("--key", metavar="KEY", help="one key of a keyed region: its plan, "
                                                      "used and remaining units")
    reset = commands.add_parser(
        "reset", help="reset a keyed region's KEY (without KEY: every key), or a limiter")
    reset.add_argument("path", metavar="PATH", help="the region (one file, not a directory)")
    reset.add_argument("key", metavar="KEY", nargs="?", help="the key (a keyed region)")
    return parser


class _Refused(Exception):
    """A region the command will not touch: its message names the path."""


def _inspect(path: str) -> dict[str, Any]:
    try:
        info: dict[str, Any] = _cellrate.inspect_region(path)
    except OSError as error:
        raise _Refused(f"{path}: {error.strerror or error}") from None
    except (cellrate.CellrateError, ValueError, TypeError) as error:
        text = str(error)
        raise _Refused(text if path in text else f"{path}: {text}") from None
    return info


def _inspect_key(path: str, key: str) -> dict[str, Any]:
    if os.path.isdir(path):
        raise _Refused(f"{path}: a directory; --key takes one region, a file in it "
                       f"(cellrate inspect {path} lists them)")
    try:
        info: dict[str, Any] = _cellrate.inspect_key(path, key)
    except OSError as error:
        raise _Refused(f"{path}: {error.strerror or error}") from None
    except (cellrate.CellrateError, ValueError, TypeError) as error:
        text = str(error)
        raise _Refused(text if path in text else f"{path}: {text}") from None
    return info


def _key_text(info: dict[str, Any], path: str) -> str:
    lines = [f"key {info['key']!r} in {path}"]
    if info["plan"] is None:
        lines.append("  no slot: an idle key (its next decision starts from a full burst, "
                     "under the plan it names)")
        return "\n".join(lines)
    limit = info["limit"]
    lines += [f"  plan        {info['plan']} ({_limit_text(limit)})",
              f"  used        {info['used']} of {limit['burst']}",
              f"  remaining   {info['remaining']}",
              f"  reset after {info['reset_after']:.3f}s"]
    return "\n".join(lines)


def _limit_text(limit: dict[str, Any]) -> str:
    return f"{limit['rate']:g} per {limit['period']:g}s, burst {limit['burst']}"


def _inspect_directory(path: str) -> dict[str, Any]:
    """Each region in directory `path` (by its path, in name order), and each
    entry that is none with the reason it was skipped; a directory holding no
    region is refused."""
    try:
        names = sorted(os.listdir(path))
    except OSError as error:
        raise _Refused(f"{path}: {error.strerror or error}") from None
    regions: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for name in names:
        inside = os.path.join(path, name)
        if os.path.isdir(inside):
            skipped[inside] = "a directory"
            continue
        try:
            regions[inside] = _inspect(inside)
        except _Refused as refused:
            skipped[inside] = _without_path(str(refused), inside)
    if not regions:
        others = f" ({len(skipped)} other entries)" if skipped else ""
        raise _Refused(f"{path}: a directory with no cellrate region in it{others}")
    return {"directory": path, "regions": regions, "skipped": skipped}


def _without_path(message: str, path: str) -> str:
    """A refusal's words without the path they name (printed beside them)."""
    if message.startswith(f"{path}: "):
        return message[len(path) + 2:]
    if message.endswith(f": {path}"):
        return message[:-len(path) - 2]
    return message


def _directory_text(listing: dict[str, Any]) -> str:
    parts = [_text(info, path) for path, info in listing["regions"].items()]
    skipped = [f"skipped {path}: {why}" for path, why in listing["skipped"].items()]
    return "\n\n".join(parts + (["\n".join(skipped)] if skipped else []))


def _penalty_text(penalty: dict[str, Any]) -> str:
    text = (f"a ban of {penalty['ban']:g}s after {penalty['after']} refusals within "
            f"{penalty['within']:g}s")
    return text + (f", up to {penalty['max_ban']:g}s" if penalty["max_ban"] != penalty["ban"]
                   else "")


def _banned_text(entry: dict[str, Any]) -> str:
    key = entry["key"] + ("..." if entry["key_length"] > len(entry["key"].encode()) else "")
    return f"{key!r}: {entry['ban_left']:.3f}s left, level {entry['level']}"


def _text(info: dict[str, Any], path: str) -> str:
    info = dict(info)
    banned = info.pop("banned", None)
    plans = info.pop("plans", None)
    if info.get("penalty") is not None:
        info["penalty"] = _penalty_text(info["penalty"])
    keys = [key for key in FIELDS if info.get(key) is not None] + sorted(
        key for key in info if key not in FIELDS and key != "stats" and info[key] is not None)
    # a concurrency limit's peak None: not tracked (the `peak no` line says so)
    stats = {key: value for key, value in (info.get("stats") or {}).items() if value is not None}
    pad = max([len(key) for key in keys] + [len(key) + 2 for key in stats]) + 2
    lines = [f"region {path}"]
    lines += [f"  {key.replace('_', ' '):<{pad}}{_shown(info[key])}" for key in keys]
    if plans:
        lines.append(f"  plans ({len(plans)}, 'default' the region's own limit)")
        lines += [f"    {name:<{pad - 2}}{_limit_text(limit)}" for name, limit in plans.items()]
    if banned:
        lines.append(f"  in the penalty box ({len(banned)} keys banned now)")
        lines += [f"    {_banned_text(entry)}" for entry in banned]
    if stats:
        lines.append("  counters")
        lines += [f"    {key:<{pad - 2}}{value}" for key, value in stats.items()]
    return "\n".join(lines)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _opened(info: dict[str, Any], path: str) -> Any:
    """The region opened with the limit it records: a limit that differs is
    refused (on_change="refuse"), never applied."""
    kind = info.get("kind")
    if kind == "concurrency":
        raise _Refused(f"{path}: a concurrency region holds work in flight; it has no reset")
    store = cellrate.KeyedLimiter if kind == "keyed" else cellrate.Limiter
    options: dict[str, Any] = {"shared": path, "on_change": "refuse",
                               "algorithm": info["algorithm"]}
    if kind == "keyed":
        options["capacity"] = info["capacity"]
    if cellrate._cellrate._algorithm_takes_burst(info["algorithm"]):
        options["burst"] = info["burst"]
    try:
        return store(info["rate"], info["period"], **options)
    except (cellrate.CellrateError, OSError) as error:
        raise _Refused(f"{path}: could not open it with its own limit: {error}") from None


def _reset(path: str, key: str | None) -> str:
    if os.path.isdir(path):
        raise _Refused(f"{path}: a directory; reset takes one region, a file in it "
                       f"(cellrate inspect {path} lists them)")
    info = _inspect(path)
    kind = info.get("kind")
    if kind == "limiter" and key is not None:
        raise _Refused(f"{path}: a limiter region has no keys; reset it without KEY")
    store = _opened(info, path)
    if key is None:
        if kind == "keyed":
            store.clear()
            return f"reset every key in {path}"
        store.reset()
        return f"reset {path}"
    store.reset(key)
    return f"reset {key!r} in {path}"


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command; returns its exit status (0, or 2 for a usage error
    or a file that is not a region)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "inspect" and args.key is not None:
            info = _inspect_key(args.path, args.key)
            print(json.dumps(info, indent=2) if args.json else _key_text(info, args.path))
        elif args.command == "inspect" and os.path.isdir(args.path):
            listing = _inspect_directory(args.path)
            print(json.dumps(listing, indent=2) if args.json else _directory_text(listing))
        elif args.command == "inspect":
            info = _inspect(args.path)
            print(json.dumps(info, indent=2) if args.json else _text(info, args.path))
        else:
            print(_reset(args.path, args.key))
    except _Refused as refused:
        print(f"cellrate: error: {refused}", file=sys.stderr)
        return USAGE_ERROR
    return 0


def run() -> None:
    """The console script's entry point."""
    sys.exit(main())
