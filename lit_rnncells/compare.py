"""``python -m lit_rnncells.compare``: the comparison runner, which lives in
:mod:`lit_rnncells.experiments.compare` (this name is kept for the command line and old imports)."""
import sys

from .experiments.compare import *  # noqa: F401,F403
from .experiments.compare import main

if __name__ == "__main__":
    sys.exit(main())
