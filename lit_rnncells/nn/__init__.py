"""Network parts the tasks share."""
from .recurrent import Recurrent
from .dropout import (LockedDropout, WeightDrop, activation_regularization, embedding_dropout,
                      recurrent_weight_names, temporal_activation_regularization)

__all__ = ["Recurrent", "LockedDropout", "WeightDrop", "activation_regularization", "embedding_dropout",
           "recurrent_weight_names", "temporal_activation_regularization"]
