"""``python -m lit_rnncells.leaderboard``: the cells x tasks leaderboard, which lives in
:mod:`lit_rnncells.experiments.leaderboard` (built on the comparison runner)."""
import sys

from .experiments.leaderboard import *  # noqa: F401,F403
from .experiments.leaderboard import main

if __name__ == "__main__":
    sys.exit(main())
