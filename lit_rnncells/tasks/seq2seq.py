"""Attention encoder-decoder (RNNSearch) for translation and summarisation, with any cell.

Bahdanau, Cho & Bengio 2015 ("Neural Machine Translation by Jointly Learning to Align and
Translate"), the MC-RNN paper's Baseline-RNN (Xu et al., AAAI 2019, §4) and CARU's Multi30k model:

* encoder: source embedding → bidirectional multi-layer :class:`~lit_rnncells.nn.Recurrent` of the
  encoder cell, lengths-aware (padding never reaches the states or the attention);
* bridge: every float leaf of every decoder layer's initial state is
  ``tanh(W_leaf [h→_l ; h←_l])`` of the encoder's final outputs of layer ``l`` (the top layer's for
  decoder layers beyond the encoder's depth), so tuple states (LSTM's ``(h, c)``, MC-RNN's
  channel history) start from the source as well; ``bridge=False`` starts from the cell's zero state;
* decoder: multi-layer, any cell, stepped with each cell's public ``project_input`` / ``step`` /
  ``output``; input feeding (Luong et al. 2015 §3.3): the previous attentional vector joins the
  embedding of the previous target token;
* attention (:mod:`lit_rnncells.nn.attention`) of the top decoder output s_t over the encoder
  outputs: additive by default (Bahdanau's score), Luong dot / general. The query is the state after
  the step, as in Luong's input-feeding model (the OpenNMT-py default), not Bahdanau's s_{t−1}: the
  context then reaches the recurrence through the fed attentional vector;
* attentional vector ``a_t = dropout(tanh(W [s_t; c_t; E y_{t−1}]))`` (the output layer on decoder
  state, context and embedding, Bahdanau App. A.2.2's deep output with tanh instead of maxout),
  then ``p(y_t) = softmax(W_o a_t)``; with ``tie_embeddings`` ``W_o`` is the target embedding,
  which needs ``output_size == embedding_size``.

Training and decoding share one step (:meth:`Seq2Seq._decoder_step`): teacher forcing runs it
over the target, decoding (:mod:`lit_rnncells.nn.beam_search`) runs it through
:meth:`Seq2Seq.decode_step`. The target-embedding part of ``W`` (and its bias) is one separate
linear map applied to all target positions at once in training; the sum is the same function.
Loss: cross-entropy summed over non-pad target tokens / their number (optional label smoothing),
plus the cells' auxiliary losses (MZU's zone disagreement) from encoder and decoder.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn
from torch.nn import functional as F

from ..utils.arguments import check_positive, check_probability
from ..cells.base import RecurrentCell, State
from ..nn.attention import ATTENTION_KINDS, Attention
from ..nn.beam_search import Hypothesis, SearchConfig, search, select_batch
from ..nn.backend import Plan, resolve
from ..nn.recurrent import Recurrent, map_state, step_cell
from .base import CellSpec, RecurrentTask, cell_config, resolve_cell
from .. import metrics

EVAL_METRICS = ("sacrebleu", "tok_bleu", "rouge")
SIGNATURE_LABELS = {"sacrebleu": "sacreBLEU", "tok_bleu": "tokenised BLEU (sacreBLEU)", "rouge": "ROUGE"}
DECODING_OPTIONS = ("beam_size", "val_beam_size", "n_best", "length_penalty", "length_penalty_alpha", "min_length",
                    "max_length_a", "max_length_b", "no_repeat_ngram_size", "ban_unk", "eval_metrics",
                    "rouge_max_bytes", "rouge_multiref")
"""Inference settings, not part of the model: kept out of the checkpoint's hparams, so the config (or
``--model.init_args.beam_size`` etc.) given to ``test`` / ``predict`` applies to a trained checkpoint."""
Record = Tuple[int, str, str, Tuple[str, ...], Tuple[str, ...]]
"""An evaluated example: (index, hypothesis in the corpus's form, hypothesis detokenised, its references in the
corpus's form, detokenised); one reference or several (DUC-2004 has four)."""
DecoderState = Tuple[Tuple[State, ...], Tensor]
"""Per decoder layer its cell's state, and the previous attentional vector (input feeding)."""


class EncoderOutput(NamedTuple):
    """What the decoder reads from the source, batch first."""

    memory: Tensor  # (B, S, 2H) encoder outputs: attention keys and values
    proj_keys: Tensor  # (B, S, ·) the attention's key-only part, computed once
    mask: Optional[Tensor]  # (B, S) True at real positions; None when nothing is padded
    summary: Tensor  # (B, L_dec, 2H) [forward; backward] final outputs feeding each decoder layer's bridge


def _upcast(x: Tensor) -> Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


class Seq2Seq(RecurrentTask):
    """RNNSearch encoder-decoder over any cell (see the module docstring).

    Args:
        cell: default cell of both sides; ``encoder_cell`` / ``decoder_cell`` override it per side.
        source_vocab_size, target_vocab_size, pad_id, bos_id, eos_id: linked from the data; ``unk_id``.
        embedding_size: both embeddings. hidden_size: decoder size, and the encoder's per direction unless
            ``encoder_hidden_size`` is given (the encoder outputs, attention keys, are 2 × that).
        num_layers: both sides; ``encoder_layers`` / ``decoder_layers`` override it.
        attention: ``additive`` (default), ``dot`` (needs ``hidden_size == 2 * encoder_hidden_size``) or
            ``general``; attention_size: additive score width.
        output_size: size of the attentional vector (default hidden_size); must equal embedding_size
            with ``tie_embeddings``.
        attentional_layer: True (default): the softmax reads ``a_t = tanh(W [s_t; c_t; E y_{t−1}])``, which is
            fed back (Luong's input feeding). False: the softmax reads ``[s_t; c_t; E y_{t−1}]`` directly and
            the context ``c_t`` is fed back, as plain PyTorch RNNSearch implementations (the anchors) do.
        attention_query: ``after`` (default): the query is the top layer's state after the step (Luong,
            with input feeding); ``before``: the state before it, s_{t−1}, and the context c_t joins this
            step's input (Bahdanau et al. 2015, the RNNSearch of the MC-RNN paper's baseline).
        bridge: initialise the decoder from the encoder's final states (else zero states).
        dropout: on embeddings and between layers; also on the encoder outputs and on what the softmax reads
            unless ``encoder_output_dropout`` / ``output_dropout`` say otherwise (0 turns those off).
        label_smoothing: ε of the training loss (validation loss and perplexity are plain NLL).
        aux_loss_weight: multiplies the cells' auxiliary losses.
        max_source_length: longest source (in subwords, EOS included) the model accepts; None = any.
        The decoding options below (:data:`DECODING_OPTIONS`) are not saved as hyperparameters: set them
        in the config of ``test`` / ``predict`` or with :meth:`configure_decoding`.
        beam_size, n_best: decoder of ``test`` / ``predict``; val_beam_size: of validation (1 = greedy).
        length_penalty (gnmt / average / none), length_penalty_alpha, min_length, max_length_a,
            max_length_b, no_repeat_ngram_size, ban_unk: see :mod:`lit_rnncells.nn.beam_search`.
        eval_metrics: computed on the decoded validation / test outputs, any of ``sacrebleu``
            (detokenised), ``tok_bleu`` (BLEU on the corpus' own tokens, what the papers report for
            pre-tokenised corpora) and ``rouge`` (ROUGE-1/2/L F1, recall and precision); every reference of an
            example counts (:mod:`lit_rnncells.metrics`), each metric's signature is printed and logged; empty:
            loss only, no decoding.
        rouge_max_bytes: score ROUGE on the first N bytes of hypothesis and references (ROUGE-1.5.5 ``-b N``);
            ``None`` (default): the data's standard (75 for ``duc2004``, none otherwise); 0: never truncate.
        rouge_multiref: how ROUGE scores an example with several references: ``pooled`` (ROUGE-1.5.5's ``-f A``,
            hits and reference n-grams summed over all references, the published DUC-2004 protocol) or ``best``
            (``rouge-score``'s best-F1 reference per metric); ``None`` (default): the data's standard (``pooled``
            for ``duc2004``), else ``pooled`` when examples have several references and ``best`` with one.
    """

    def __init__(self, cell: CellSpec = "GRU", encoder_cell: Optional[CellSpec] = None,
                 decoder_cell: Optional[CellSpec] = None, source_vocab_size: int = 100,
                 target_vocab_size: int = 100, pad_id: int = 0, unk_id: int = 1, bos_id: int = 2, eos_id: int = 3,
                 embedding_size: int = 256, hidden_size: int = 512, encoder_hidden_size: Optional[int] = None,
                 num_layers: int = 1,
                 encoder_layers: Optional[int] = None, decoder_layers: Optional[int] = None,
                 attention: str = "additive", attention_size: Optional[int] = None,
                 output_size: Optional[int] = None, attentional_layer: bool = True,
                 attention_query: str = "after", bridge: bool = True,
                 dropout: float = 0.3, output_dropout: Optional[float] = None,
                 encoder_output_dropout: Optional[float] = None,
                 label_smoothing: float = 0.0, tie_embeddings: bool = False, aux_loss_weight: float = 1.0,
                 max_source_length: Optional[int] = None, beam_size: int = 5, val_beam_size: int = 1,
                 n_best: int = 1, length_penalty: str = "gnmt", length_penalty_alpha: float = 0.6,
                 min_length: int = 0, max_length_a: float = 1.5, max_length_b: int = 10,
                 no_repeat_ngram_size: int = 0, ban_unk: bool = False, eval_metrics: Optional[List[str]] = None,
                 rouge_max_bytes: Optional[int] = None, rouge_multiref: Optional[str] = None,
                 optimizer: OptimizerCallable = torch.optim.Adam,
                 lr_scheduler: Optional[LRSchedulerCallable] = None, scheduler_monitor: str = "val/loss",
                 compile: bool = False, backend: Optional[str] = None) -> None:
        super().__init__(cell, optimizer, lr_scheduler, scheduler_monitor, compile=compile, backend=backend)
        encoder_layers = num_layers if encoder_layers is None else encoder_layers
        decoder_layers = num_layers if decoder_layers is None else decoder_layers
        output_size = hidden_size if output_size is None else output_size
        attention_size = hidden_size if attention_size is None else attention_size
        encoder_hidden_size = hidden_size if encoder_hidden_size is None else encoder_hidden_size
        check_positive(source_vocab_size=source_vocab_size, target_vocab_size=target_vocab_size,
                       embedding_size=embedding_size, hidden_size=hidden_size,
                       encoder_hidden_size=encoder_hidden_size, encoder_layers=encoder_layers,
                       decoder_layers=decoder_layers, output_size=output_size, attention_size=attention_size)
        if max_source_length is not None:
            check_positive(max_source_length=max_source_length)
        output_dropout = dropout if output_dropout is None else output_dropout
        encoder_output_dropout = dropout if encoder_output_dropout is None else encoder_output_dropout
        check_probability(dropout=dropout, label_smoothing=label_smoothing, output_dropout=output_dropout,
                          encoder_output_dropout=encoder_output_dropout)
        if aux_loss_weight < 0:
            raise ValueError(f"aux_loss_weight must be >= 0, got {aux_loss_weight}.")
        specials = {"pad_id": pad_id, "unk_id": unk_id, "bos_id": bos_id, "eos_id": eos_id}
        for name, value in specials.items():
            if not 0 <= value < target_vocab_size:
                raise ValueError(f"{name}={value} is not a token of the target vocabulary of size "
                                 f"{target_vocab_size}; use the data's special ids (pad 0, unk 1, bos 2, eos 3).")
        if len(set(specials.values())) != 4:
            raise ValueError(f"The special ids must differ, got {specials}; use pad 0, unk 1, bos 2, eos 3.")
        if attention not in ATTENTION_KINDS:
            raise ValueError(f"Unknown attention {attention!r}; use one of {', '.join(ATTENTION_KINDS)}.")
        if attention == "dot" and hidden_size != 2 * encoder_hidden_size:
            raise ValueError(f"dot attention needs hidden_size ({hidden_size}) = 2 * encoder_hidden_size "
                             f"({encoder_hidden_size}), the size of the bidirectional encoder outputs; set "
                             f"encoder_hidden_size to {hidden_size // 2} or use attention 'general' or 'additive'.")
        if attention_query not in ("after", "before"):
            raise ValueError(f"Unknown attention_query {attention_query!r}; use 'after' (Luong: the state after the "
                             "step, input feeding) or 'before' (Bahdanau: the state before the step).")
        if tie_embeddings and not attentional_layer:
            raise ValueError("tie_embeddings needs the attentional layer (its output is what the softmax reads); set "
                             "attentional_layer true or tie_embeddings false.")
        if tie_embeddings and output_size != embedding_size:
            raise ValueError(f"tie_embeddings needs output_size ({output_size}) to equal embedding_size "
                             f"({embedding_size}); set output_size to {embedding_size}.")
        self.save_hyperparameters(ignore=["optimizer", "lr_scheduler", *DECODING_OPTIONS], logger=False)
        self.hparams["cell"] = cell_config(cell)
        self.hparams["encoder_cell"] = None if encoder_cell is None else cell_config(encoder_cell)
        self.hparams["decoder_cell"] = None if decoder_cell is None else cell_config(decoder_cell)
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = pad_id, unk_id, bos_id, eos_id
        self.configure_decoding(beam_size=beam_size, val_beam_size=val_beam_size, n_best=n_best,
                                length_penalty=length_penalty, length_penalty_alpha=length_penalty_alpha,
                                min_length=min_length, max_length_a=max_length_a, max_length_b=max_length_b,
                                no_repeat_ngram_size=no_repeat_ngram_size, ban_unk=ban_unk,
                                eval_metrics=["sacrebleu"] if eval_metrics is None else eval_metrics,
                                rouge_max_bytes=rouge_max_bytes, rouge_multiref=rouge_multiref)
        enc_factory = self.cell_factory if encoder_cell is None else resolve_cell(encoder_cell)
        dec_factory = self.cell_factory if decoder_cell is None else resolve_cell(decoder_cell)
        memory_size = 2 * encoder_hidden_size
        # what joins the embedding at the next step's input: the attentional vector (input feeding), or the
        # context (without that layer; or with the query before the step, this step's own context)
        self.query_before = attention_query == "before"
        self.output_size = output_size if attentional_layer and not self.query_before else memory_size

        self.source_embedding = nn.Embedding(source_vocab_size, embedding_size, padding_idx=pad_id)
        self.target_embedding = nn.Embedding(target_vocab_size, embedding_size, padding_idx=pad_id)
        self.encoder = Recurrent(enc_factory, embedding_size, encoder_hidden_size, num_layers=encoder_layers,
                                 bidirectional=True, dropout=dropout, batch_first=True, backend=self.backend)
        cells = []
        for layer in range(decoder_layers):
            built = dec_factory(embedding_size + self.output_size if layer == 0 else hidden_size, hidden_size)
            if not isinstance(built, RecurrentCell):
                raise TypeError(f"The decoder cell factory returned {type(built).__name__}, not a RecurrentCell; "
                                "pass a cell class from lit_rnncells.cells or a factory building one.")
            cells.append(built)
        self.decoder_cells = nn.ModuleList(cells)
        bridges = []
        for c in cells:  # one map per floating leaf of each decoder layer's state
            leaves = _leaves(c.initial_state(1)) if bridge else []
            bridges.append(nn.ModuleList(nn.Linear(memory_size, leaf.shape[-1]) for leaf in leaves
                                         if leaf.is_floating_point()))
        self.bridges = nn.ModuleList(bridges)
        self.attention = Attention(hidden_size, memory_size, attention, attention_size)
        self.combine_state: Optional[nn.Linear] = None
        self.combine_embedding: Optional[nn.Linear] = None
        if attentional_layer:
            self.combine_state = nn.Linear(hidden_size + memory_size, output_size, bias=False)  # W [s_t; c_t]
            self.combine_embedding = nn.Linear(embedding_size, output_size)  # W E y_{t−1} + b, over all t at once
            self.generator = nn.Linear(output_size, target_vocab_size)
        else:  # the softmax reads [s_t; c_t; E y_{t−1}] itself
            self.generator = nn.Linear(hidden_size + memory_size + embedding_size, target_vocab_size)
        if tie_embeddings:
            self.generator.weight = self.target_embedding.weight
        self.drop = nn.Dropout(dropout)
        self.output_drop = nn.Dropout(output_dropout)
        self.memory_drop = nn.Dropout(encoder_output_dropout)
        self.source_tokenizer: Any = None
        self.target_tokenizer: Any = None
        self._eval_sums: Optional[Tensor] = None
        self._records: List[Record] = []
        self.data_rouge_max_bytes: Optional[int] = None  # the DataModule's standard truncation (setup)
        self.data_rouge_multiref: Optional[str] = None  # the DataModule's standard multi-reference ROUGE (setup)
        self.metric_signatures: Dict[str, str] = {}  # what the last scoring used, by metric name
        self._signatures_logged: set = set()

    def configure_decoding(self, **options: Any) -> None:
        """Set decoding / evaluation options (any of :data:`DECODING_OPTIONS`), e.g. after loading a checkpoint:
        ``model.configure_decoding(beam_size=10, n_best=3)``. Checked here, one clear error each."""
        unknown = sorted(set(options) - set(DECODING_OPTIONS))
        if unknown:
            raise ValueError(f"Unknown decoding options {unknown}; choose from {', '.join(DECODING_OPTIONS)}.")
        current = dict(getattr(self, "decoding", {}))
        current.update(options)
        check_positive(val_beam_size=current["val_beam_size"])
        metrics = list(current["eval_metrics"])
        bad = [m for m in metrics if m not in EVAL_METRICS]
        if bad:
            raise ValueError(f"Unknown eval_metrics {bad}; choose from {', '.join(EVAL_METRICS)}.")
        max_bytes = current["rouge_max_bytes"]
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0):
            raise ValueError(f"rouge_max_bytes must be a number of bytes (75 for DUC-2004), 0 for no truncation or "
                             f"null for the data's standard, got {max_bytes!r}.")
        if current.get("rouge_multiref") not in (None, "pooled", "best"):
            raise ValueError(f"rouge_multiref must be 'pooled' (ROUGE-1.5.5 -f A, every reference counted), 'best' "
                             f"(the best-F1 reference) or null for the data's standard, got "
                             f"{current['rouge_multiref']!r}.")
        shared = dict(length_penalty=current["length_penalty"], alpha=current["length_penalty_alpha"],
                      min_length=current["min_length"], max_length_a=current["max_length_a"],
                      max_length_b=current["max_length_b"], no_repeat_ngram_size=current["no_repeat_ngram_size"],
                      ban_unk=current["ban_unk"], pad_id=self.pad_id, unk_id=self.unk_id, bos_id=self.bos_id,
                      eos_id=self.eos_id)
        val_search = SearchConfig(beam_size=current["val_beam_size"], n_best=1, **shared)
        self.test_search = SearchConfig(beam_size=current["beam_size"], n_best=current["n_best"], **shared)
        self.val_search = val_search
        self.eval_metrics = metrics
        self.decoding = {**current, "eval_metrics": metrics}

    @property
    def has_aux_loss(self) -> bool:
        return self.encoder.has_aux_loss or any(c.has_aux_loss for c in self.decoder_cells)

    @property
    def aux_loss_name(self) -> str:
        names = {c.aux_loss_name for c in [*self.encoder.cells, *self.decoder_cells] if c.has_aux_loss}
        return names.pop() if len(names) == 1 else "aux_loss"

    # --- tokenizers ------------------------------------------------------------------------
    def set_tokenizers(self, source: Any, target: Any) -> None:
        """Use these subword tokenizers (``decode`` / ``detokenize``) for outputs and metrics."""
        for side, tok, size in (("source", source, self.hparams.source_vocab_size),
                                ("target", target, self.hparams.target_vocab_size)):
            if tok is not None and len(tok) != size:
                raise ValueError(f"The {side} tokenizer has {len(tok)} tokens but the model has "
                                 f"{side}_vocab_size={size}; let the CLI link the sizes from the data or use the "
                                 "checkpoint's data.")
        self.source_tokenizer, self.target_tokenizer = source, target

    def setup(self, stage: str) -> None:
        dm = self._trainer.datamodule if self._trainer is not None else None
        if getattr(dm, "target_tokenizer", None) is not None:
            self.set_tokenizers(getattr(dm, "source_tokenizer", None), dm.target_tokenizer)
        self.data_rouge_max_bytes = getattr(dm, "rouge_max_bytes", None)
        self.data_rouge_multiref = getattr(dm, "rouge_multiref", None)

    # --- encoder ---------------------------------------------------------------------------
    def _encode(self, source: Tensor, source_lengths: Tensor, want_aux: bool) -> Tuple[EncoderOutput, Tensor]:
        batch, steps = source.shape
        limit = self.hparams.max_source_length
        if limit is not None and steps > limit and int(source_lengths.max()) > limit:
            raise ValueError(f"A source has {int(source_lengths.max())} subwords but this model accepts at most "
                             f"max_source_length={limit}; shorten or split the input.")
        x = self.drop(self.source_embedding(source))
        lengths = source_lengths.to(source.device)
        full = bool((lengths == steps).all())
        out = self.encoder(x, None, None if full else lengths, return_aux=want_aux)
        memory, final = out[0], out[1]
        aux = out[2] if want_aux else memory.new_zeros(())
        memory = self.memory_drop(memory)
        mask = None if full else torch.arange(steps, device=source.device).unsqueeze(0) < lengths.unsqueeze(1)
        top = self.encoder.num_layers - 1
        summary = []
        for layer in range(len(self.decoder_cells)):
            src = min(layer, top)
            halves = [self.encoder.cell(src, d).output(map_state(lambda s, i=2 * src + d: s[i], final))
                      for d in range(2)]
            summary.append(torch.cat(halves, -1))
        return EncoderOutput(memory, self.attention.precompute(memory), mask, torch.stack(summary, 1)), aux

    def encode(self, source: Tensor, source_lengths: Tensor) -> EncoderOutput:
        """Run the encoder once: outputs, attention keys, padding mask and the bridge inputs."""
        return self._encode(source, source_lengths, want_aux=False)[0]

    def initial_decoder_state(self, enc: EncoderOutput) -> DecoderState:
        """Each decoder layer's state from the bridge (or zero), and a zero attentional vector."""
        batch, dtype, device = enc.memory.shape[0], enc.memory.dtype, enc.memory.device
        layers = []
        for layer, (c, maps) in enumerate(zip(self.decoder_cells, self.bridges)):
            state = c.initial_state(batch, device=device, dtype=dtype)
            if len(maps):
                x, it = enc.summary[:, layer], iter(maps)

                def fill(leaf: Tensor) -> Tensor:
                    if not leaf.is_floating_point():
                        return leaf
                    value = torch.tanh(next(it)(x)).view(batch, *([1] * (leaf.dim() - 2)), -1)
                    return torch.empty_like(leaf).copy_(value.expand_as(leaf))  # keeps the cell's memory layout

                state = map_state(fill, state)
            layers.append(state)
        feed = enc.memory.new_zeros(batch, self.output_size)
        return tuple(layers), feed

    def _decoder_plans(self, device_type: str) -> List[Plan]:
        """The decoder cells' plans on ``device_type``: resolved from the backend table once per device type."""
        plans = self.__dict__.setdefault("_plans_by_device", {})
        if device_type not in plans:
            plans[device_type] = [resolve(type(c), self.backend, device_type) for c in self.decoder_cells]
        return plans[device_type]

    # --- the one decoder step --------------------------------------------------------------
    def _decoder_step(self, embedded: Tensor, embedded_out: Tensor, state: DecoderState, enc: EncoderOutput,
                      want_aux: bool = False, real_t: Optional[Tensor] = None
                      ) -> Tuple[Tensor, DecoderState, Tensor, Optional[Tensor]]:
        """One target position: ``embedded`` (B, E) of the previous token and its output-layer part
        ``embedded_out`` = W_e E y + b (B, A). Returns the attentional vector (B, A), the new state, the
        attention weights (B, S) and the step's auxiliary loss (or None): per example, or summed over the
        real target rows ``real_t`` (B,) when given (teacher forcing gives them).

        The cells step through :func:`~lit_rnncells.nn.recurrent.step_cell` under the task's ``backend`` (the
        layer's compiled loop body where that compiles them, which also keeps the state of the rows ``real_t``
        marks padded: no real position reads them under teacher forcing)."""
        layers, feed = state
        if self.query_before:  # Bahdanau: attend with s_{t−1}; c_t joins this step's input
            context, weights = self.attention(self.decoder_cells[-1].output(layers[-1]), enc.proj_keys, enc.memory,
                                              enc.mask)
            feed = context
        x = torch.cat([embedded, feed], -1)
        new_layers, aux = [], None
        plans = self._decoder_plans(x.device.type)
        for i, c in enumerate(self.decoder_cells):
            if i > 0:
                x = self.drop(x)
            st, a = step_cell(c, c.project_input(x), layers[i], plans[i], real_t, want_aux)
            if a is not None:
                aux = a if aux is None else aux + a
            new_layers.append(st)
            x = c.output(st)
        if not self.query_before:  # Luong: attend with s_t
            context, weights = self.attention(x, enc.proj_keys, enc.memory, enc.mask)
        if self.combine_state is None:  # no attentional layer: the softmax reads [s_t; c_t; E y], c_t is fed back
            out = self.output_drop(torch.cat([x, context, embedded_out], -1))
            return out, (tuple(new_layers), context), weights, aux
        attentional = self.output_drop(torch.tanh(self.combine_state(torch.cat([x, context], -1)) + embedded_out))
        return attentional, (tuple(new_layers), context if self.query_before else attentional), weights, aux

    def _embed_target(self, tokens: Tensor) -> Tuple[Tensor, Tensor]:
        embedded = self.drop(self.target_embedding(tokens))
        return embedded, embedded if self.combine_embedding is None else self.combine_embedding(embedded)

    def decode_step(self, prev_tokens: Tensor, state: DecoderState, enc: EncoderOutput
                    ) -> Tuple[Tensor, DecoderState, Tensor]:
        """Log-probabilities (N, V) of the next token after ``prev_tokens`` (N,), the new state, attention."""
        self.stop_if_terminated()  # a long beam search stops between its steps on SIGTERM
        embedded, embedded_out = self._embed_target(prev_tokens)
        attentional, state, weights, _ = self._decoder_step(embedded, embedded_out, state, enc)
        return F.log_softmax(_upcast(self.generator(attentional)), -1), state, weights

    def reorder_decoder_state(self, state: DecoderState, index: Tensor) -> DecoderState:
        return select_batch(state, index)

    def reorder_encoder(self, enc: EncoderOutput, index: Tensor) -> EncoderOutput:
        return select_batch(enc, index)

    # --- teacher forcing -------------------------------------------------------------------
    def features(self, source: Tensor, source_lengths: Tensor, target: Tensor, want_aux: bool = False
                 ) -> Tuple[Tensor, Tensor]:
        """Attentional vectors ``(B, T−1, A)`` predicting ``target[:, 1:]`` from ``target[:, :-1]`` (teacher
        forcing), and the auxiliary loss (mean over real source and target tokens, encoder + decoder)."""
        enc, aux = self._encode(source, source_lengths, want_aux)
        state = self.initial_decoder_state(enc)
        inputs = target[:, :-1]
        embedded, embedded_out = self._embed_target(inputs)
        outputs, dec_aux = [], None
        real = target[:, 1:] != self.pad_id
        for t in range(inputs.shape[1]):
            attentional, state, _, a = self._decoder_step(embedded[:, t], embedded_out[:, t], state, enc, want_aux,
                                                          real[:, t])
            outputs.append(attentional)
            if a is not None:  # summed over the real rows
                dec_aux = a if dec_aux is None else dec_aux + a
        if dec_aux is not None:
            aux = aux + dec_aux / real.sum().clamp_min(1).to(dec_aux.dtype)
        return torch.stack(outputs, 1), aux

    def forward(self, source: Tensor, source_lengths: Tensor, target: Tensor, want_aux: bool = False
                ) -> Tuple[Tensor, Tensor]:
        """Logits ``(B, T−1, V)`` of ``target[:, 1:]`` (teacher forcing) and the auxiliary loss."""
        feats, aux = self.features(source, source_lengths, target, want_aux)
        return self.generator(feats), aux

    def _real_logits(self, batch: Dict[str, Any], want_aux: bool = False) -> Tuple[Tensor, Tensor, Tensor]:
        """Logits of the real (non-pad) target positions only, their gold ids, and the auxiliary loss:
        the output layer, the costliest map, never runs on padding."""
        target = batch["target"]
        feats, aux = self.features(batch["source"], batch["source_lengths"], target, want_aux)
        gold = target[:, 1:]
        real = gold != self.pad_id
        return _upcast(self.generator(feats[real])), gold[real], aux

    def training_step(self, batch: Dict[str, Any], batch_idx: int) -> Tensor:
        logits, gold, aux = self._real_logits(batch, want_aux=self.has_aux_loss)
        n = max(int(gold.numel()), 1)
        total = F.cross_entropy(logits, gold, label_smoothing=self.hparams.label_smoothing, reduction="sum")
        loss = self.mean_over_devices(total, n)  # the mean over all devices' target tokens
        self.log("train/loss", total.detach() / n, batch_size=n, prog_bar=True, on_step=True, on_epoch=True)
        if self.has_aux_loss:
            self.log_aux_loss("train", aux, self.aux_loss_name, n)
            loss = loss + self.hparams.aux_loss_weight * aux
        return loss

    # --- evaluation ------------------------------------------------------------------------
    def translate(self, source: Tensor, source_lengths: Tensor, cfg: Optional[SearchConfig] = None
                  ) -> List[List[Hypothesis]]:
        """Decode a batch (greedy when ``cfg.beam_size == 1``); default: the test/predict decoder."""
        was_training = self.training
        self.eval()
        try:
            return search(self, source, source_lengths, cfg or self.test_search)
        finally:
            self.train(was_training)

    def _texts(self, tokens: List[int]) -> Tuple[str, str]:
        """(corpus form, natural detokenised text) of a token list; ids joined if no tokenizer."""
        tok = self.target_tokenizer
        if tok is None:
            text = " ".join(map(str, tokens))
            return text, text
        corpus = tok.decode(tokens)
        return corpus, tok.detokenize(corpus)

    def _eval_step(self, batch: Dict[str, Any], cfg: SearchConfig) -> None:
        logits, gold, _ = self._real_logits(batch)
        nll = F.cross_entropy(logits, gold, reduction="sum").double()
        sums = torch.stack([nll, torch.full_like(nll, gold.numel())])
        self._eval_sums = sums if self._eval_sums is None else self._eval_sums + sums
        if self.eval_metrics and "references" in batch:
            hyps = search(self, batch["source"], batch["source_lengths"], cfg)
            tok = self.target_tokenizer
            for index, nbest, ref in zip(batch["index"].tolist(), hyps, batch["references"]):
                corpus, natural = self._texts(nbest[0].tokens)
                refs = (ref,) if isinstance(ref, str) else tuple(ref)  # one reference, or several
                self._records.append((int(index), corpus, natural, refs,
                                      refs if tok is None else tuple(tok.detokenize(r) for r in refs)))

    def _gather_records(self) -> List[Record]:
        records, self._records = self._records, []
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            gathered: List[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, records)
            records = [r for part in gathered for r in part]
        unique = {r[0]: r for r in records}  # a sampler may repeat examples to even out ranks
        return [unique[i] for i in sorted(unique)]

    def _eval_epoch_end(self, stage: str) -> Dict[str, float]:
        sums = self._eval_sums if self._eval_sums is not None else torch.zeros(2, dtype=torch.float64,
                                                                                  device=self.device)
        self._eval_sums = None
        if self._trainer is not None and self.trainer.world_size > 1:
            sums = self.trainer.strategy.reduce(sums, reduce_op="sum")
        mean = (sums[0] / sums[1].clamp_min(1)).float()
        # every rank holds the same values now: sync_dist only averages identical numbers
        self.log(f"{stage}/loss", mean, prog_bar=True, sync_dist=True)
        self.log(f"{stage}/ppl", torch.exp(mean.clamp(max=50)), sync_dist=True)
        scores = self.score_records(self._gather_records())
        for name, value in scores.items():
            self.log(f"{stage}/{name}", value, prog_bar=name in ("sacrebleu", "rouge1"), sync_dist=True)
        return scores

    @property
    def rouge_truncation(self) -> Optional[int]:
        """The bytes ROUGE reads of each text: ``rouge_max_bytes``, else the data's standard; None: all."""
        chosen = self.decoding["rouge_max_bytes"]
        chosen = self.data_rouge_max_bytes if chosen is None else chosen
        return chosen or None

    @property
    def rouge_multiref(self) -> Optional[str]:
        """How ROUGE combines several references: ``rouge_multiref``, else the data's standard; None: the
        metric's own rule (``pooled``, ROUGE-1.5.5 ``-f A``, with several references, ``best`` with one)."""
        return self.decoding.get("rouge_multiref") or self.data_rouge_multiref

    def score_records(self, records: List[Record]) -> Dict[str, float]:
        """The configured metrics of (index, hyp corpus form, hyp detokenised, refs, refs detokenised) records
        (a single reference may be given as a string). Each metric's signature goes to
        :attr:`metric_signatures`, and is printed and logged the first time it appears."""
        if not records:
            return {}
        _, hyp_corpus, hyp_text, ref_corpus, ref_text = map(list, zip(*records))
        scores: Dict[str, float] = {}
        signatures: Dict[str, str] = {}
        for name in self.eval_metrics:
            if name == "sacrebleu":
                scores["sacrebleu"], signatures["sacrebleu"] = metrics.sacrebleu_corpus(hyp_text, ref_text)
            elif name == "tok_bleu":
                scores["tok_bleu"], signatures["tok_bleu"] = metrics.tokenized_bleu_corpus(hyp_corpus, ref_corpus)
            else:
                rouge, signatures["rouge"] = metrics.rouge_corpus(hyp_corpus, ref_corpus,
                                                                  max_bytes=self.rouge_truncation,
                                                                  multiref=self.rouge_multiref)
                scores.update(rouge)
        self.metric_signatures = signatures
        self._announce_signatures(signatures)
        return scores

    def _announce_signatures(self, signatures: Dict[str, str]) -> None:
        """Print and log each metric's signature once (again if it changes, e.g. a test set with 4 references)."""
        if self.global_rank != 0:
            return
        for name, signature in signatures.items():
            if (name, signature) in self._signatures_logged:
                continue
            self._signatures_logged.add((name, signature))
            rank_zero_info(f"{SIGNATURE_LABELS[name]} signature: {signature}")
            if self._trainer is not None:
                for logger in self.trainer.loggers:
                    logger.log_hyperparams({f"{name}_signature": signature})

    def on_validation_epoch_start(self) -> None:
        self._eval_sums, self._records = None, []

    def validation_step(self, batch: Dict[str, Any], batch_idx: int) -> None:
        self._eval_step(batch, self.val_search)

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_start(self) -> None:
        self._eval_sums, self._records = None, []

    def test_step(self, batch: Dict[str, Any], batch_idx: int) -> None:
        self._eval_step(batch, self.test_search)

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    # --- predict ---------------------------------------------------------------------------
    def predict_step(self, batch: Dict[str, Any], batch_idx: int) -> List[Dict[str, Any]]:
        """One record per input line: ``index``, ``text`` (the best hypothesis, detokenised; with
        ``n_best > 1`` one line per hypothesis, ``score<TAB>text``, best first), ``nbest``
        [(text, score)] and ``scores`` (per-token log-probabilities of the best, EOS included)."""
        hyps = search(self, batch["source"], batch["source_lengths"], self.test_search)
        records = []
        for index, nbest in zip(batch["index"].tolist(), hyps):
            texts = [(self._texts(h.tokens)[1], h.score) for h in nbest]
            if self.test_search.n_best == 1:
                text = texts[0][0]
            else:
                text = "\n".join(f"{score:.4f}\t{t}" for t, score in texts)
            records.append({"index": int(index), "text": text, "nbest": texts,
                            "scores": nbest[0].token_scores.tolist()})
        return records


def _leaves(state: State) -> List[Tensor]:
    if isinstance(state, tuple):
        return [leaf for s in state for leaf in _leaves(s)]
    return [state]

