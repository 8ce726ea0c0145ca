"""``python -m lit_rnncells.analysis <figure> ...``: every module of this package that registers a figure."""
from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from typing import List, Optional

from . import common
from ..utils.arguments import OneLineParser


def load_figures() -> None:
    """Import every module of the package, so each registers its figures."""
    package = __package__ or "lit_rnncells.analysis"
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if info.name not in {"common", "__main__"}:
            importlib.import_module(f"{package}.{info.name}")


def main(argv: Optional[List[str]] = None) -> int:
    load_figures()
    parser = OneLineParser(allow_abbrev=False, prog="python -m lit_rnncells.analysis",
                                     description="Draw a paper's analysis figure from trained checkpoints.")
    sub = parser.add_subparsers(dest="figure", required=True, metavar="FIGURE")
    for name, fig in sorted(common.FIGURES.items()):
        fig.add_arguments(sub.add_parser(name, help=fig.help, description=fig.help, allow_abbrev=False))
    args = parser.parse_args(argv)
    try:
        if getattr(args, "output", None):
            args.output = str(common.figure_output(args.output))  # before any checkpoint is read
        already = len(common.WRITTEN)
        common.FIGURES[args.figure].run(args)
        for path in common.WRITTEN[already:]:
            print(f"analysis {args.figure}: wrote {path}", flush=True)
    except (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as error:
        if os.environ.get("LIT_RNNCELLS_TRACEBACK"):
            raise
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
