"""Network parts the tasks share."""
from .recurrent import Recurrent

__all__ = ["Recurrent"]
