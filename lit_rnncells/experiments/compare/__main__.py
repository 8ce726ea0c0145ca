"""``python -m lit_rnncells.experiments.compare``: the same command as ``python -m lit_rnncells.compare``."""
import sys

from .cli import main

sys.exit(main())
