"""``python -m lit_rnncells.reproduce``: the papers' reproduction reports, which live in
:mod:`lit_rnncells.experiments.reproduce` (this name is kept for the command line and old imports)."""
import sys

from .experiments.reproduce import *  # noqa: F401,F403
from .experiments.reproduce import main

if __name__ == "__main__":
    sys.exit(main())
