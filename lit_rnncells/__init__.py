"""lit_rnncells: a PyTorch Lightning plugin for research on recurrent cells."""
from .cells import available_cells, build_cell, get_cell, register_cell
from .nn import Recurrent

__version__ = "0.1.0"
__all__ = ["Recurrent", "available_cells", "build_cell", "get_cell", "register_cell", "__version__"]
