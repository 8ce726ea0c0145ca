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
* ``attention="none"``: the plain encoder-decoder (Sutskever, Vinyals & Le 2014; Cho et al. 2014,
  "On the properties of neural machine translation"): no attention and nothing fed back, the decoder
  reads the previous target embedding alone and learns the source only through the bridge, and the
  output layer reads ``[s_t; E y_{t−1}]``: the CARU paper's description of its Multi30k model ("two
  independent simple recursive models"), where CARU's word weight σ(W_vn v_t) sees the word alone;
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

from dataclasses import replace
from typing import Any, ClassVar, Dict, List, NamedTuple, Optional, Tuple

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn
from torch.nn import functional as F

from ..utils.arguments import (apply_deprecated_names, check_positive, check_probability, option_group,
                               say_deprecated_name)
from ..cells.base import RecurrentCell, State
from ..nn.attention import Attention
from ..nn.beam_search import select_batch
from ..nn.backend import Plan, resolve
from ..nn.recurrent import (Recurrent, check_hooked_weights_not_graphed, map_state, refresh_hooked_weights,
                            step_cell)
from .base import CellSpec, RecurrentTask, cell_config, resolve_cell
from .seq2seq_eval import Seq2SeqEvaluation, saved_tokenizers
from .seq2seq_options import (DECODING_OPTIONS, DEPRECATED_NAMES, DecodingConfig, SideConfig, Sizes,
                              check_architecture, check_specials, resolve_sizes, search_configs, side_as_dict)

__all__ = ["Seq2Seq", "DecodingConfig", "SideConfig", "EncoderOutput", "DECODING_OPTIONS"]
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


class Seq2Seq(Seq2SeqEvaluation, RecurrentTask):
    """RNNSearch encoder-decoder over any cell (see the module docstring).

    Args:
        cell: the cell of both sides unless ``encoder.cell`` / ``decoder.cell`` say otherwise.
        source_vocab_size: linked from the data.
        target_vocab_size: linked from the data.
        pad_id: linked from the data (as ``bos_id`` and ``eos_id``).
        unk_id: the unknown token (the data's is 1).
        bos_id: linked from the data.
        eos_id: linked from the data.
        embedding_size: both embeddings.
        hidden_size: both sides' state size unless ``encoder.hidden_size`` / ``decoder.hidden_size`` say
            otherwise (the encoder's per direction: its outputs, the attention's keys, are twice that).
        num_layers: both sides unless ``encoder.num_layers`` / ``decoder.num_layers`` say otherwise.
        dropout: on embeddings and between layers; also on each side's outputs unless its ``output_dropout``
            says otherwise.
        encoder: the encoder's own cell, layers, hidden size and output dropout (:class:`SideConfig`).
        decoder: the decoder's own cell, layers, hidden size and output dropout (:class:`SideConfig`).
        attention: ``additive`` (default), ``dot`` (needs the decoder's hidden size = 2 × the encoder's),
            ``general``, or ``none``: the plain encoder-decoder (the source reaches the decoder only through
            the bridge; nothing is fed back; decoding returns zero attention weights).
        attention_size: additive score width (default: the decoder's hidden size).
        attention_query: ``after`` (default): the query is the top layer's state after the step (Luong,
            with input feeding); ``before``: the state before it, s_{t−1}, and the context c_t joins this
            step's input (Bahdanau et al. 2015, the RNNSearch of the MC-RNN paper's baseline).
        attentional_layer: True (default): the softmax reads ``a_t = tanh(W [s_t; c_t; E y_{t−1}])``, which is
            fed back (Luong's input feeding). False: the softmax reads ``[s_t; c_t; E y_{t−1}]`` directly and
            the context ``c_t`` is fed back, as plain PyTorch RNNSearch implementations (the anchors) do.
        output_size: size of the attentional vector (default: the decoder's hidden size); must equal
            embedding_size with ``tie_embeddings``.
        tie_embeddings: the softmax's weights are the target embedding.
        bridge: initialise the decoder from the encoder's final states (else zero states).
        label_smoothing: ε of the training loss (validation loss and perplexity are plain NLL).
        aux_loss_weight: multiplies the cells' auxiliary losses.
        max_source_length: longest source (in subwords, EOS included) the model accepts; None = any.
        decoding: beam search and metrics of validate / test / predict (:class:`DecodingConfig`); not saved
            with the weights: set it in the config of ``test`` / ``predict`` or with :meth:`configure_decoding`.
        optimizer: the optimiser (default Adam).
        lr_scheduler: an optional learning-rate scheduler.
        scheduler_monitor: the metric a plateau scheduler watches.
        compile: compile the model with ``torch.compile``.
        backend: the recurrence backend (docs/tasks.md).
    """

    DEPRECATED_NAMES: ClassVar[Dict[str, str]] = DEPRECATED_NAMES

    def __init__(self, cell: CellSpec = "GRU", source_vocab_size: int = 100, target_vocab_size: int = 100,
                 pad_id: int = 0, unk_id: int = 1, bos_id: int = 2, eos_id: int = 3, embedding_size: int = 256,
                 hidden_size: int = 512, num_layers: int = 1, dropout: float = 0.3,
                 encoder: SideConfig = SideConfig(), decoder: SideConfig = SideConfig(),
                 attention: str = "additive", attention_size: Optional[int] = None, attention_query: str = "after",
                 attentional_layer: bool = True, output_size: Optional[int] = None, tie_embeddings: bool = False,
                 bridge: bool = True, label_smoothing: float = 0.0, aux_loss_weight: float = 1.0,
                 max_source_length: Optional[int] = None, decoding: DecodingConfig = DecodingConfig(),
                 optimizer: OptimizerCallable = torch.optim.Adam,
                 lr_scheduler: Optional[LRSchedulerCallable] = None, scheduler_monitor: str = "val/loss",
                 compile: bool = False, backend: Optional[str] = None, **deprecated: Any) -> None:
        super().__init__(cell, optimizer, lr_scheduler, scheduler_monitor, compile=compile, backend=backend)
        groups = apply_deprecated_names(type(self).__name__, self.DEPRECATED_NAMES, deprecated, {
            "encoder": option_group(SideConfig, encoder, "encoder"),
            "decoder": option_group(SideConfig, decoder, "decoder"),
            "decoding": option_group(DecodingConfig, decoding, "decoding")})
        encoder, decoder = groups["encoder"], groups["decoder"]
        sizes = resolve_sizes(hidden_size, num_layers, dropout, encoder, decoder, attention_size, output_size)
        check_positive(source_vocab_size=source_vocab_size, target_vocab_size=target_vocab_size,
                       embedding_size=embedding_size)
        if max_source_length is not None:
            check_positive(max_source_length=max_source_length)
        check_probability(label_smoothing=label_smoothing)
        if aux_loss_weight < 0:
            raise ValueError(f"aux_loss_weight must be >= 0, got {aux_loss_weight}.")
        specials = {"pad_id": pad_id, "unk_id": unk_id, "bos_id": bos_id, "eos_id": eos_id}
        check_specials(specials, target_vocab_size)
        check_architecture(sizes, embedding_size, attention, attention_query, attentional_layer, tie_embeddings)
        self.save_hyperparameters(ignore=["optimizer", "lr_scheduler", "decoding", "deprecated", *deprecated],
                                  logger=False)
        self.hparams.update(cell=cell_config(cell), encoder=side_as_dict(encoder), decoder=side_as_dict(decoder))
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = pad_id, unk_id, bos_id, eos_id
        self.configure_decoding(groups["decoding"])
        # what joins the embedding at the next step's input: the attentional vector (input feeding), the
        # context (without that layer; or with the query before the step, this step's own context), or
        # nothing (no attention: a zero-width vector keeps the state's structure)
        self.query_before = attention_query == "before"
        memory_size = 2 * sizes.encoder_hidden
        if attention == "none":
            self.feed_size = 0
        elif attentional_layer and not self.query_before:
            self.feed_size = sizes.output_size
        else:
            self.feed_size = memory_size
        self.source_embedding = nn.Embedding(source_vocab_size, embedding_size, padding_idx=pad_id)
        self.target_embedding = nn.Embedding(target_vocab_size, embedding_size, padding_idx=pad_id)
        self.encoder = Recurrent(self._side_factory(encoder), embedding_size, sizes.encoder_hidden,
                                 num_layers=sizes.encoder_layers, bidirectional=True,
                                 dropout=dropout if sizes.encoder_layers > 1 else 0.0,  # between layers only
                                 batch_first=True, backend=self.backend)
        self._build_decoder(self._side_factory(decoder), sizes, embedding_size, bridge)
        self.attention = Attention(sizes.decoder_hidden, memory_size, attention, sizes.attention_size) \
            if attention != "none" else None
        self._build_output(sizes, embedding_size, target_vocab_size, attentional_layer, tie_embeddings)
        self.drop = nn.Dropout(dropout)
        self.output_drop = nn.Dropout(sizes.decoder_dropout)
        self.memory_drop = nn.Dropout(sizes.encoder_dropout)
        self._init_evaluation()

    def _side_factory(self, side: SideConfig) -> Any:
        """The cell factory of one side: its own cell, else the model's."""
        return self.cell_factory if side.cell is None else resolve_cell(side.cell)

    def _build_decoder(self, factory: Any, sizes: Sizes, embedding_size: int, bridge: bool) -> None:
        """The decoder's cells (the first reads the embedding and the fed-back vector) and, with ``bridge``, one
        map per floating leaf of each layer's state from the encoder's final outputs."""
        cells = []
        for layer in range(sizes.decoder_layers):
            size_in = embedding_size + self.feed_size if layer == 0 else sizes.decoder_hidden
            built = factory(size_in, sizes.decoder_hidden)
            if not isinstance(built, RecurrentCell):
                raise TypeError(f"The decoder cell factory returned {type(built).__name__}, not a RecurrentCell; "
                                "pass a cell class from lit_rnncells.cells or a factory building one.")
            cells.append(built)
        self.decoder_cells = nn.ModuleList(cells)
        bridges = []
        for c in cells:  # one map per floating leaf of each decoder layer's state
            leaves = _leaves(c.initial_state(1)) if bridge else []
            bridges.append(nn.ModuleList(nn.Linear(2 * sizes.encoder_hidden, leaf.shape[-1]) for leaf in leaves
                                         if leaf.is_floating_point()))
        self.bridges = nn.ModuleList(bridges)

    def _build_output(self, sizes: Sizes, embedding_size: int, target_vocab_size: int, attentional_layer: bool,
                      tie_embeddings: bool) -> None:
        """The attentional layer (or none) and the softmax's linear map (tied to the target embedding or not)."""
        state_and_context = sizes.decoder_hidden + (2 * sizes.encoder_hidden if self.attention is not None else 0)
        self.combine_state: Optional[nn.Linear] = None
        self.combine_embedding: Optional[nn.Linear] = None
        if attentional_layer:
            self.combine_state = nn.Linear(state_and_context, sizes.output_size, bias=False)  # W [s_t; c_t]
            self.combine_embedding = nn.Linear(embedding_size, sizes.output_size)  # W E y_{t−1} + b, all t at once
            self.generator = nn.Linear(sizes.output_size, target_vocab_size)
        else:  # the softmax reads [s_t; c_t; E y_{t−1}] itself
            self.generator = nn.Linear(state_and_context + embedding_size, target_vocab_size)
        if tie_embeddings:
            self.generator.weight = self.target_embedding.weight

    def configure_decoding(self, decoding: Optional[DecodingConfig] = None, **options: Any) -> None:
        """Set how the model decodes and scores, e.g. after loading a checkpoint: a whole
        :class:`DecodingConfig`, or some of its fields over the current ones,
        ``model.configure_decoding(beam_size=10, n_best=3)`` (the old ``length_penalty_alpha`` is ``alpha``).
        Checked here, one clear error each."""
        for old in [key for key in options if key not in DECODING_OPTIONS and key in self.DEPRECATED_NAMES]:
            group, _, field = self.DEPRECATED_NAMES[old].partition(".")
            if group == "decoding":  # an old name of a decoding field (length_penalty_alpha)
                say_deprecated_name(type(self).__name__, old, self.DEPRECATED_NAMES[old])
                options[field] = options.pop(old)
        unknown = sorted(set(options) - set(DECODING_OPTIONS))
        if unknown:
            raise ValueError(f"Unknown decoding options {unknown}; choose from {', '.join(DECODING_OPTIONS)}.")
        current = option_group(DecodingConfig, decoding, "decoding") if decoding is not None \
            else getattr(self, "decoding", DecodingConfig())
        current = replace(current, **options)
        metrics = ("sacrebleu",) if current.eval_metrics is None else tuple(current.eval_metrics)
        current = replace(current, eval_metrics=metrics)
        specials = {"pad_id": self.pad_id, "unk_id": self.unk_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        self.val_search, self.test_search = search_configs(current, specials)
        self.eval_metrics = list(metrics)
        self.decoding = current

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

    def on_load_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        """Also take the tokenizers the checkpoint's DataModule saved, when no DataModule gave them (``setup``
        runs first in a Trainer): ``Seq2Seq.load_from_checkpoint(path)`` then translates text
        (:meth:`translate_lines`) with nothing else at hand."""
        super().on_load_checkpoint(checkpoint)
        if self.target_tokenizer is None:
            saved = saved_tokenizers(checkpoint)
            if saved is not None:
                self.set_tokenizers(*saved)

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
        keys = self.attention.precompute(memory) if self.attention is not None else memory
        return EncoderOutput(memory, keys, mask, torch.stack(summary, 1)), aux

    def encode(self, source: Tensor, source_lengths: Tensor) -> EncoderOutput:
        """Run the encoder once: outputs, attention keys, padding mask and the bridge inputs."""
        return self._encode(source, source_lengths, want_aux=False)[0]

    def initial_decoder_state(self, enc: EncoderOutput) -> DecoderState:
        """Each decoder layer's state from the bridge (or zero), and a zero fed-back vector (zero-width without
        attention)."""
        batch, dtype, device = enc.memory.shape[0], enc.memory.dtype, enc.memory.device
        hooked = refresh_hooked_weights(self.decoder_cells)  # once per decoded batch, as the encoder does per call
        check_hooked_weights_not_graphed(hooked, self._decoder_plans(device.type))
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
        feed = enc.memory.new_zeros(batch, self.feed_size)
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
        if self.attention is None:  # the plain encoder-decoder: the word alone, no context
            return self._plain_decoder_step(embedded, embedded_out, layers, feed, enc, want_aux, real_t)
        if self.query_before:  # Bahdanau: attend with s_{t−1}; c_t joins this step's input
            context, weights = self.attention(self.decoder_cells[-1].output(layers[-1]), enc.proj_keys, enc.memory,
                                              enc.mask)
            feed = context
        x, new_layers, aux = self._step_cells(torch.cat([embedded, feed], -1), layers, want_aux, real_t)
        if not self.query_before:  # Luong: attend with s_t
            context, weights = self.attention(x, enc.proj_keys, enc.memory, enc.mask)
        if self.combine_state is None:  # no attentional layer: the softmax reads [s_t; c_t; E y], c_t is fed back
            out = self.output_drop(torch.cat([x, context, embedded_out], -1))
            return out, (new_layers, context), weights, aux
        attentional = self.output_drop(torch.tanh(self.combine_state(torch.cat([x, context], -1)) + embedded_out))
        return attentional, (new_layers, context if self.query_before else attentional), weights, aux

    def _step_cells(self, x: Tensor, layers: Tuple[State, ...], want_aux: bool, real_t: Optional[Tensor]
                    ) -> Tuple[Tensor, Tuple[State, ...], Optional[Tensor]]:
        """The decoder cells, one step, from the first layer's input ``x``: the top output s_t, the new states
        and the summed auxiliary loss (or None)."""
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
        return x, tuple(new_layers), aux

    def _plain_decoder_step(self, embedded: Tensor, embedded_out: Tensor, layers: Tuple[State, ...], feed: Tensor,
                            enc: EncoderOutput, want_aux: bool, real_t: Optional[Tensor]
                            ) -> Tuple[Tensor, DecoderState, Tensor, Optional[Tensor]]:
        """One step without attention: the cells read the previous target embedding alone; the output layer
        reads s_t and that embedding; the attention weights are zero (B, S)."""
        s, new_layers, aux = self._step_cells(embedded, layers, want_aux, real_t)
        weights = enc.memory.new_zeros(enc.memory.shape[:2])
        if self.combine_state is None:
            return self.output_drop(torch.cat([s, embedded_out], -1)), (new_layers, feed), weights, aux
        out = self.output_drop(torch.tanh(self.combine_state(s) + embedded_out))
        return out, (new_layers, feed), weights, aux

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


def _leaves(state: State) -> List[Tensor]:
    if isinstance(state, tuple):
        return [leaf for s in state for leaf in _leaves(s)]
    return [state]

