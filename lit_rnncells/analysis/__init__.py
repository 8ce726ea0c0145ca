"""Analysis figures of the papers, drawn from a trained checkpoint.

``python -m lit_rnncells.analysis <figure> --ckpt_path run.ckpt [options] --output fig.png``

Each figure is a module of this package that registers itself with :func:`figure`; the command line
finds them all (``python -m lit_rnncells.analysis --help`` lists them). A figure takes its numbers from
the model through the cells' and tasks' public hooks (never by re-implementing a cell's equations),
draws them with matplotlib through :func:`save_figure`, and returns the numbers it drew, so tests can
check them.
"""
from __future__ import annotations

from .common import FIGURES, figure, load_task, save_figure

__all__ = ["FIGURES", "figure", "load_task", "save_figure"]
