"""Network parts the tasks share."""
from .recurrent import Recurrent
from .attention import Attention
from .beam_search import Hypothesis, SearchConfig, beam_search, greedy_search, search
from .dropout import (LockedDropout, WeightDrop, activation_regularization, embedding_dropout,
                      recurrent_weight_names, temporal_activation_regularization)

__all__ = ["Recurrent", "Attention", "Hypothesis", "SearchConfig", "beam_search", "greedy_search", "search",
           "LockedDropout", "WeightDrop", "activation_regularization", "embedding_dropout",
           "recurrent_weight_names", "temporal_activation_regularization"]
