"""The option groups of :class:`~lit_rnncells.tasks.Seq2Seq` and their checks.

* :class:`SideConfig` (``encoder`` / ``decoder``): what one side may set apart from the model-wide ``cell``,
  ``num_layers``, ``hidden_size`` and ``dropout``;
* :class:`DecodingConfig` (``decoding``): beam search and evaluation, never saved with the weights. Its search
  fields are :class:`~lit_rnncells.nn.beam_search.SearchOptions`' own (it extends that class), so the search
  options are defined in one place;
* :data:`DEPRECATED_NAMES`: the flat names these options had before the groups, kept for one release.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict, NamedTuple, Optional, Tuple

from ..utils.arguments import check_positive, check_probability
from ..nn.attention import ATTENTION_KINDS
from ..nn.beam_search import SearchConfig, SearchOptions
from .base import CellSpec, cell_config

EVAL_METRICS = ("sacrebleu", "tok_bleu", "rouge")
ROUGE_MULTIREF = (None, "pooled", "best")


@dataclass(frozen=True)
class SideConfig:
    """One side of the encoder-decoder: an unset field takes the model's top-level value.

    Args:
        cell: this side's cell (default: the model's ``cell``).
        num_layers: this side's number of layers (default: the model's ``num_layers``).
        hidden_size: this side's state size (default: the model's ``hidden_size``). The encoder is
            bidirectional: its outputs, the attention's keys, are 2 × its hidden size.
        output_dropout: dropout on this side's outputs: the encoder outputs the attention reads, or the
            decoder's attentional vector the softmax reads (default: the model's ``dropout``; 0 turns it off).
    """

    cell: Optional[CellSpec] = None
    num_layers: Optional[int] = None
    hidden_size: Optional[int] = None
    output_dropout: Optional[float] = None


@dataclass(frozen=True)
class DecodingConfig(SearchOptions):
    """How ``validate`` / ``test`` / ``predict`` decode and score; not saved with the weights, so a trained
    checkpoint decodes with the ``decoding`` of the config it is tested with.

    Args:
        beam_size: beam of ``test`` / ``predict`` (1: greedy search).
        n_best: hypotheses returned per input by ``predict`` (at most ``beam_size``).
        length_penalty: ``gnmt`` (Wu et al. 2016 eq. 14), ``average`` (|y|) or ``none``.
        alpha: the GNMT length penalty's exponent α.
        min_length: end-of-sequence is banned before this many tokens.
        max_length_a: outputs stop at ``max_length_a · |source| + max_length_b`` tokens.
        max_length_b: see ``max_length_a``.
        no_repeat_ngram_size: no n-gram of this size appears twice in an output (0: off).
        ban_unk: never produce the unknown token.
        val_beam_size: beam of validation during fit (1, the default: greedy).
        eval_metrics: computed on the decoded validation / test outputs, any of ``sacrebleu`` (detokenised),
            ``tok_bleu`` (BLEU on the corpus's own tokens, what papers report for pre-tokenised corpora) and
            ``rouge`` (ROUGE-1/2/L F1, recall and precision); every reference of an example counts; each
            metric's signature is printed and logged. Empty: loss only, no decoding.
        rouge_max_bytes: ROUGE reads the first N bytes of hypothesis and references (ROUGE-1.5.5 ``-b N``);
            null: the data's standard (75 for ``duc2004``, none otherwise); 0: never truncate.
        rouge_multiref: how ROUGE scores several references: ``pooled`` (ROUGE-1.5.5's ``-f A``, the published
            DUC-2004 protocol) or ``best`` (the best-F1 reference per metric); null: the data's standard, else
            ``pooled`` with several references and ``best`` with one.
    """

    val_beam_size: int = 1
    eval_metrics: Tuple[str, ...] = ("sacrebleu",)
    rouge_max_bytes: Optional[int] = None
    rouge_multiref: Optional[str] = None


SEARCH_FIELDS = tuple(f.name for f in fields(SearchOptions))
DECODING_OPTIONS = tuple(f.name for f in fields(DecodingConfig))
"""The fields of ``decoding``: inference settings, kept out of the checkpoint's hyperparameters."""
DEPRECATED_NAMES: Dict[str, str] = {
    "encoder_cell": "encoder.cell", "decoder_cell": "decoder.cell",
    "encoder_layers": "encoder.num_layers", "decoder_layers": "decoder.num_layers",
    "encoder_hidden_size": "encoder.hidden_size",
    "encoder_output_dropout": "encoder.output_dropout", "output_dropout": "decoder.output_dropout",
    "length_penalty_alpha": "decoding.alpha",
    **{name: f"decoding.{name}" for name in DECODING_OPTIONS if name != "alpha"},
}
"""Seq2Seq's flat option names before the groups (old name → ``group.field``); they go in the next release."""


def side_as_dict(side: SideConfig) -> Dict[str, Any]:
    """A side as the plain dict the checkpoint's hyperparameters hold (its cell as a name or class_path)."""
    out = {f.name: getattr(side, f.name) for f in fields(side)}
    out["cell"] = None if side.cell is None else cell_config(side.cell)
    return out


def check_decoding(decoding: DecodingConfig) -> None:
    """One clear ``ValueError`` for a decoding option the search configs do not check themselves."""
    check_positive(val_beam_size=decoding.val_beam_size)
    bad = [m for m in decoding.eval_metrics if m not in EVAL_METRICS]
    if isinstance(decoding.eval_metrics, str) or bad:
        raise ValueError(f"Unknown eval_metrics {bad or decoding.eval_metrics!r}; choose a list of "
                         f"{', '.join(EVAL_METRICS)}.")
    max_bytes = decoding.rouge_max_bytes
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0):
        raise ValueError(f"rouge_max_bytes must be a number of bytes (75 for DUC-2004), 0 for no truncation or "
                         f"null for the data's standard, got {max_bytes!r}.")
    if decoding.rouge_multiref not in ROUGE_MULTIREF:
        raise ValueError(f"rouge_multiref must be 'pooled' (ROUGE-1.5.5 -f A, every reference counted), 'best' "
                         f"(the best-F1 reference) or null for the data's standard, got {decoding.rouge_multiref!r}.")


def search_configs(decoding: DecodingConfig, specials: Dict[str, int]) -> Tuple[SearchConfig, SearchConfig]:
    """(validation, test / predict) search configs of ``decoding`` with the data's special ids; each checks
    its options (one clear ``ValueError``)."""
    check_decoding(decoding)
    search = {name: getattr(decoding, name) for name in SEARCH_FIELDS}
    test = SearchConfig(**search, **specials)
    val = SearchConfig(**{**search, "beam_size": decoding.val_beam_size, "n_best": 1}, **specials)
    return val, test


class Sizes(NamedTuple):
    """The sizes a Seq2Seq is built with, every default resolved."""

    encoder_hidden: int
    decoder_hidden: int
    encoder_layers: int
    decoder_layers: int
    encoder_dropout: float
    decoder_dropout: float
    attention_size: int
    output_size: int


def resolve_sizes(hidden_size: int, num_layers: int, dropout: float, encoder: SideConfig, decoder: SideConfig,
                  attention_size: Optional[int], output_size: Optional[int]) -> Sizes:
    """Each side's and the attention's sizes, the top-level values where the groups leave them unset; checked
    (one clear ``ValueError`` naming the option)."""
    def pick(value: Any, default: Any) -> Any:
        return default if value is None else value

    decoder_hidden = pick(decoder.hidden_size, hidden_size)
    sizes = Sizes(pick(encoder.hidden_size, hidden_size), decoder_hidden, pick(encoder.num_layers, num_layers),
                  pick(decoder.num_layers, num_layers), pick(encoder.output_dropout, dropout),
                  pick(decoder.output_dropout, dropout), pick(attention_size, decoder_hidden),
                  pick(output_size, decoder_hidden))
    check_positive(**{"hidden_size": hidden_size, "encoder.hidden_size": sizes.encoder_hidden,
                      "decoder.hidden_size": sizes.decoder_hidden, "encoder.num_layers": sizes.encoder_layers,
                      "decoder.num_layers": sizes.decoder_layers, "attention_size": sizes.attention_size,
                      "output_size": sizes.output_size})
    check_probability(**{"dropout": dropout, "encoder.output_dropout": sizes.encoder_dropout,
                         "decoder.output_dropout": sizes.decoder_dropout})
    return sizes


def check_specials(specials: Dict[str, int], target_vocab_size: int) -> None:
    """The special ids are distinct tokens of the target vocabulary."""
    for name, value in specials.items():
        if not 0 <= value < target_vocab_size:
            raise ValueError(f"{name}={value} is not a token of the target vocabulary of size "
                             f"{target_vocab_size}; use the data's special ids (pad 0, unk 1, bos 2, eos 3).")
    if len(set(specials.values())) != len(specials):
        raise ValueError(f"The special ids must differ, got {specials}; use pad 0, unk 1, bos 2, eos 3.")


def check_architecture(sizes: Sizes, embedding_size: int, attention: str, attention_query: str,
                       attentional_layer: bool, tie_embeddings: bool) -> None:
    """The attention and output options fit together (one clear ``ValueError`` naming the fix)."""
    if attention not in (*ATTENTION_KINDS, "none"):
        raise ValueError(f"Unknown attention {attention!r}; use one of {', '.join(ATTENTION_KINDS)} or none.")
    if attention == "none" and attention_query != "after":
        raise ValueError("attention_query has no effect without attention; leave it out or choose an attention "
                         f"({', '.join(ATTENTION_KINDS)}).")
    if attention == "dot" and sizes.decoder_hidden != 2 * sizes.encoder_hidden:
        raise ValueError(f"dot attention needs hidden_size ({sizes.decoder_hidden}) = 2 * encoder.hidden_size "
                         f"({sizes.encoder_hidden}), the size of the bidirectional encoder outputs; set "
                         f"encoder.hidden_size to {sizes.decoder_hidden // 2} or use attention 'general' or "
                         "'additive'.")
    if attention_query not in ("after", "before"):
        raise ValueError(f"Unknown attention_query {attention_query!r}; use 'after' (Luong: the state after the "
                         "step, input feeding) or 'before' (Bahdanau: the state before the step).")
    if tie_embeddings and not attentional_layer:
        raise ValueError("tie_embeddings needs the attentional layer (its output is what the softmax reads); set "
                         "attentional_layer true or tie_embeddings false.")
    if tie_embeddings and sizes.output_size != embedding_size:
        raise ValueError(f"tie_embeddings needs output_size ({sizes.output_size}) to equal embedding_size "
                         f"({embedding_size}); set output_size to {embedding_size}.")
