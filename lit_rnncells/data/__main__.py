"""``python -m lit_rnncells.data list | prepare NAME | check NAME``: get and verify datasets for machines
without internet (prepare on a login node, check and train on the compute nodes).

Exit status: 0 ok, 1 a fault (each printed as ``error: <problem>; <fix>``), 2 a usage mistake.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional

from .check import check_folder
from .known import KNOWN, checkable, dataset
from .prepare import PrepareError, prepare
from .text import DATA_ENV
from ..utils.arguments import OneLineParser


def _dest(name: str, dest: Optional[str]) -> Path:
    if dest:
        return Path(dest).expanduser()
    root = os.environ.get(DATA_ENV)
    if not root:
        raise _Usage(f"no destination: set {DATA_ENV} (the folder holding one folder per dataset) or pass --dest")
    return Path(root).expanduser() / KNOWN[name].name


class _Usage(Exception):
    pass


def _list() -> int:
    width = max(len(n) for n in KNOWN)
    for name, known in sorted((n, k) for n, k in KNOWN.items() if checkable(n)):
        how = "manual download, then --source" if known.manual else ", ".join(s.filename for s in known.sources)
        print(f"{name:<{width}}  {known.title}  [{how}]")
    return 0


def _check(name: str, dest: Optional[str]) -> int:
    folder = _dest(name, dest)
    report = check_folder(name, folder)
    for line in report.ok:
        print(f"found: {line}")
    for note in report.notes:
        print(f"note: {note}")
    for fault in report.faults:
        print(f"error: {fault}")
    if report.faults:
        print(f"{name} in {folder}: {len(report.faults)} fault(s)")
        return 1
    print(f"{name} in {folder}: no faults")
    return 0


def _prepare(name: str, dest: Optional[str], mirror: Optional[str], source: Optional[str], force: bool) -> int:
    folder = _dest(name, dest)
    try:
        prepare(name, folder, mirror=mirror, source=Path(source).expanduser() if source else None, force=force,
                log=print)
    except PrepareError as err:
        print(f"error: {err}")
        return 1
    report = check_folder(name, folder)
    for note in report.notes:
        print(f"note: {note}")
    for fault in report.faults:
        print(f"error: {fault}")
    print(f"{name} written to {folder}" + (f" with {len(report.faults)} fault(s)" if report.faults else ""))
    return 1 if report.faults else 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = OneLineParser(prog="python -m lit_rnncells.data",
                                     description="Get (prepare) and verify (check) the datasets the library reads.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the known datasets")
    prep = sub.add_parser("prepare", help="download, verify and write a dataset into $LIT_RNNCELLS_DATA/<name>")
    prep.add_argument("name", help=f"one of {', '.join(sorted(n for n in KNOWN if checkable(n)))}")
    prep.add_argument("--dest", "--data_dir", dest="dest",
                      help=f"the dataset's folder (default: ${DATA_ENV}/<name>)")
    prep.add_argument("--mirror", default=os.environ.get("LIT_RNNCELLS_MIRROR"),
                      help="base URL (http://, https:// or file://) holding the release files under their own "
                           "names, tried instead of the official URLs (default: $LIT_RNNCELLS_MIRROR)")
    prep.add_argument("--source", help="a folder that already holds the release files (no download)")
    prep.add_argument("--force", action="store_true", help="write over files already in the destination")
    chk = sub.add_parser("check", help="verify a local dataset folder: files, counts, UTF-8, split overlap")
    chk.add_argument("name", help=f"one of {', '.join(sorted(n for n in KNOWN if checkable(n)))}")
    chk.add_argument("--dest", "--data_dir", dest="dest",  # --data_dir: the DataModules' name for the same folder
                     help=f"the dataset's folder (default: ${DATA_ENV}/<name>)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        if args.command == "list":
            return _list()
        args.name = dataset(args.name).name  # a DataModule's name (ptb_char) stands for its release (ptb)
        if args.command == "check":
            return _check(args.name, args.dest)
        return _prepare(args.name, args.dest, args.mirror, args.source, args.force)
    except (_Usage, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
