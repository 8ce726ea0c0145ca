"""Task LightningModules: each wraps any cell."""
from .base import RecurrentTask, resolve_cell
from .logic import LogicEvaluator
from .language_model import LanguageModel
from .classification import AspectClassifier, DocumentClassifier, SequenceClassifier
from .seq2seq import Seq2Seq

__all__ = ["RecurrentTask", "resolve_cell", "LogicEvaluator", "LanguageModel", "AspectClassifier", "DocumentClassifier", "SequenceClassifier", "Seq2Seq"]
