"""The option groups of :class:`~lit_rnncells.tasks.language_model.LanguageModel`, named after the two halves of
AWD-LSTM (Merity, Keskar & Socher 2018, "Regularizing and Optimizing LSTM Language Models"): its §4 regularisers
and its §3 optimiser. Field names are the flat names they replace, so a value reads the same in either spelling.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from ..utils.arguments import check_positive, check_probability


@dataclass(frozen=True)
class Regularization:
    """AWD-LSTM's dropouts and activation penalties (all off by default; its PTB word values in brackets).

    Args:
        dropout: locked (variational) dropout on the last layer's output, before the softmax (0.4).
        dropout_h: locked dropout between recurrent layers (0.25).
        dropout_i: locked dropout on the embedded input (0.4).
        dropout_e: embedding dropout: whole word types dropped from the embedding matrix (0.1).
        weight_drop: DropConnect on the recurrent (hidden-to-hidden) weights (0.5).
        alpha: activation regularisation (AR), the L2 penalty on the dropped last-layer output (2).
        beta: temporal activation regularisation (TAR), the L2 penalty on the change of the output between
            steps (1).
    """

    dropout: float = 0.0
    dropout_h: float = 0.0
    dropout_i: float = 0.0
    dropout_e: float = 0.0
    weight_drop: float = 0.0
    alpha: float = 0.0
    beta: float = 0.0

    def __post_init__(self) -> None:
        check_probability(dropout=self.dropout, dropout_h=self.dropout_h, dropout_i=self.dropout_i,
                          dropout_e=self.dropout_e, weight_drop=self.weight_drop)
        for name, value in (("alpha", self.alpha), ("beta", self.beta)):
            if value < 0:
                raise ValueError(f"regularization.{name} must be 0 or more, got {value}; use 0 to turn it off.")


@dataclass(frozen=True)
class Optimization:
    """AWD-LSTM's optimisation schedule (the optimiser itself is the task's ``optimizer``).

    Args:
        nt_asgd: non-monotonically triggered averaged SGD: switch to averaged SGD once the validation loss has
            not improved on the best of all but the last ``nonmono`` evaluations; evaluation then uses the
            average of the weights.
        nonmono: the non-monotone interval of NT-ASGD, in evaluations (AWD-LSTM: 5).
        scale_lr_with_seq_len: scale the learning rate by ``seq_len / bptt`` for each window, so a short
            window of variable-length BPTT weighs as much per token as a full one.
    """

    nt_asgd: bool = False
    nonmono: int = 5
    scale_lr_with_seq_len: bool = False

    def __post_init__(self) -> None:
        check_positive(nonmono=self.nonmono)


REGULARIZATION_FIELDS = tuple(f.name for f in fields(Regularization))
OPTIMIZATION_FIELDS = tuple(f.name for f in fields(Optimization))
