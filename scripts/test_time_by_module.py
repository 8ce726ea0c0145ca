"""Where the test suite's time goes: per test file, and how `--dist loadscope` shares it between workers.

Reads the output of a pytest run with ``--durations=0 --durations-min=0`` (every setup, call and teardown
time), sums it per test file, and prints the files by time, the sum, and the load each worker would get if
xdist's loadscope scheduler handed out whole files in its order (most tests first, ``--loadscope-reorder``, its
default) to whichever worker is free first. Compare that with the lower bound, the sum divided by the workers,
to see whether reordering the files could shorten the wall time, or whether only faster tests can::

    python -m pytest -q -rs -n 2 --dist loadscope -p no:cacheprovider --durations=0 --durations-min=0 > pytest.log
    python scripts/test_time_by_module.py pytest.log --workers 2

The loads are computed from the measured durations, not measured per worker: start-up and collection (about half
a minute on 2 cores) come on top of them.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

DURATION = re.compile(r"^\s*(?P<seconds>\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(?P<file>\S+?\.py)::(?P<test>\S+)")


def seconds_by_file(lines: Iterable[str]) -> Tuple[Dict[str, float], Dict[str, int]]:
    """Seconds and number of tests per test file, from pytest's ``--durations=0`` lines."""
    seconds: Dict[str, float] = defaultdict(float)
    tests: Dict[str, Set[str]] = defaultdict(set)
    for line in lines:
        match = DURATION.match(line)
        if match:
            seconds[match["file"]] += float(match["seconds"])
            tests[match["file"]].add(match["test"])
    return dict(seconds), {name: len(ids) for name, ids in tests.items()}


def loads_in_order(order: List[str], seconds: Dict[str, float], workers: int) -> List[float]:
    """Each worker's seconds when the files, in this order, each go to the worker with the least work so far."""
    loads = [0.0] * workers
    for name in order:
        loads[loads.index(min(loads))] += seconds[name]
    return loads


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="output of a pytest run with --durations=0")
    parser.add_argument("--workers", type=int, default=2, help="xdist workers (-n; default 2)")
    parser.add_argument("--top", type=int, default=20, help="files listed (default 20)")
    args = parser.parse_args(argv)
    if not args.log.is_file():
        print(f"error: {args.log} is not a file; pass the saved output of a pytest run with --durations=0",
              file=sys.stderr)
        return 2
    seconds, counts = seconds_by_file(args.log.read_text(encoding="utf-8", errors="replace").splitlines())
    if not seconds:
        print(f"error: {args.log} has no duration lines; run pytest with --durations=0 and pass its output",
              file=sys.stderr)
        return 2
    total = sum(seconds.values())
    by_time = sorted(seconds, key=lambda n: -seconds[n])
    by_count = sorted(seconds, key=lambda n: -counts[n])  # sorted() is stable: ties keep the log's order
    print("| test file | seconds | tests |\n|---|---:|---:|")
    for name in by_time[:args.top]:
        print(f"| {name} | {seconds[name]:.1f} | {counts[name]} |")
    print(f"\n{len(seconds)} files, {total:.0f} s of tests; "
          f"{args.workers} workers: at best {total / args.workers:.0f} s each")
    for label, order in (("loadscope's order (most tests first):", by_count), ("slowest file first:", by_time)):
        loads = loads_in_order(order, seconds, args.workers)
        print(f"{label:<38}{' / '.join(f'{x:.0f}' for x in loads)} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
