"""Network parts the tasks share."""
from .recurrent import Recurrent
from .attention import Attention
from .beam_search import Hypothesis, SearchConfig
from .recording import candidate_activations, composition_weights
from .contract import CellContractError, check_cell
from .dropout import (LockedDropout, WeightDrop, activation_regularization, embedding_dropout,
                      recurrent_weight_names, temporal_activation_regularization)

__all__ = ["Recurrent", "Attention", "Hypothesis", "SearchConfig", "CellContractError", "check_cell",
           "LockedDropout", "WeightDrop",
           "activation_regularization", "embedding_dropout", "recurrent_weight_names",
           "temporal_activation_regularization", "candidate_activations", "composition_weights"]
