"""LightningDataModules for each dataset (hub or local files in the official format)."""
from .logic import LogicDataModule
from .language_model import LanguageModelDataModule
from .text import Vocabulary, VocabularyMismatchError
from .translation import TranslationDataModule
from .subword import SubwordTokenizer
from .sentiment import AspectSentimentDataModule, DocumentSentimentDataModule

__all__ = ["LogicDataModule", "LanguageModelDataModule", "Vocabulary", "VocabularyMismatchError",
           "TranslationDataModule", "SubwordTokenizer",
           "AspectSentimentDataModule", "DocumentSentimentDataModule"]
