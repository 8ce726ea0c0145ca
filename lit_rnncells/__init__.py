"""lit_rnncells: a PyTorch Lightning plugin for research on recurrent cells."""
from .cpu_defaults import set_wait_policy as _set_wait_policy

_set_wait_policy()  # before torch loads, and only for the command line (see cpu_defaults.py)

from .cells import available_cells, build_cell, get_cell, register_cell
from .nn import Recurrent

__version__ = "0.1.0"
__all__ = ["Recurrent", "available_cells", "build_cell", "get_cell", "register_cell", "__version__"]
