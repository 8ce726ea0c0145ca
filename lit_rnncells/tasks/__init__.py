"""Task LightningModules: each wraps any cell."""
from .base import RecurrentTask, resolve_cell
from .logic import LogicEvaluator
from .language_model import LanguageModel

__all__ = ["RecurrentTask", "resolve_cell", "LogicEvaluator", "LanguageModel"]
