"""Greedy and batched beam search over batch × beam for any model following :class:`Decodable`.

What fairseq and OpenNMT-py users rely on, all here:

* the encoder runs once and its outputs are expanded over the beam (``reorder_encoder``);
* decoder states are reordered by beam index every step (``reorder_decoder_state``);
* only beam 0 is live at the first step (it runs on one row per sentence and is expanded after),
  so the beam is never filled with copies of one hypothesis;
* 2 × beam candidates are taken per sentence: end-of-sequence candidates ranked within the
  first ``beam`` are finalised, and the best ``beam`` others continue, so an EOS never shrinks the
  beam (Wu et al. 2016 / fairseq's ``SequenceGenerator``);
* each sentence is finalised on its own once it has ``beam`` finished hypotheses (or reaches its
  maximum length) and is dropped from the active batch; every row is computed independently of the
  others, so a sentence decodes the same alone or in any batch;
* exact early stopping (``early_stop``, on by default): a sentence also stops as soon as no live
  hypothesis can still reach its n-best list (its cumulative log-probability divided by the length
  penalty of the longest allowed output bounds every continuation), so the results are those of
  decoding until ``beam`` hypotheses are finished, in fewer steps;
* length penalty: GNMT ``((5 + |y|) / 6) ** alpha`` (Wu et al. 2016 eq. 14), ``average`` (|y|) or
  ``none``; |y| counts the generated tokens including the final EOS;
* minimum length (EOS banned before it) and maximum length ``floor(a · |src| + b)`` per sentence,
  where |src| is the source length as given (with its EOS); at the maximum only EOS is allowed;
* n-best lists, best first, with the normalised score, the raw log-probability, the per-token
  log-probabilities and the attention of every generated token;
* optional no-repeat n-gram blocking (an n-gram never appears twice in a hypothesis; EOS exempt);
* padding and BOS are never produced, unknown tokens optionally never. If every token of a row is
  banned, EOS is allowed, so decoding always ends.

Greedy search (:func:`greedy_search`) is the same procedure with one hypothesis and argmax;
``beam_size=1`` beam search gives the same tokens and scores.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Protocol, Tuple

import torch
from torch import Tensor

from .step import map_leaves

LENGTH_PENALTIES = ("gnmt", "average", "none")


class Decodable(Protocol):
    """What a model provides to be decoded. ``enc`` and ``state`` are any nesting of tuples /
    lists / dicts of batch-first tensors; :func:`select_batch` is a correct ``reorder_*``."""

    def encode(self, source: Tensor, source_lengths: Tensor) -> Any: ...

    def initial_decoder_state(self, enc: Any) -> Any: ...

    def decode_step(self, prev_tokens: Tensor, state: Any, enc: Any) -> Tuple[Tensor, Any, Tensor]:
        """``prev_tokens`` (N,) → log-probabilities (N, V), the new state, attention weights (N, S)."""
        ...

    def reorder_decoder_state(self, state: Any, index: Tensor) -> Any: ...

    def reorder_encoder(self, enc: Any, index: Tensor) -> Any: ...


def select_batch(obj: Any, index: Tensor) -> Any:
    """Rows ``index`` of every tensor in a nested structure (tuples, named tuples, lists, dicts)."""
    return map_leaves(lambda t: t.index_select(0, index), obj)


@dataclass(frozen=True)
class SearchOptions:
    """What a user chooses of a search (see the module docstring); the one place these options are defined
    (a task's decoding group extends this class).

    Args:
        beam_size: hypotheses kept per sentence (1: greedy search).
        n_best: hypotheses returned per sentence, best first (at most ``beam_size``).
        length_penalty: ``gnmt`` (Wu et al. 2016 eq. 14), ``average`` (|y|) or ``none``.
        alpha: the GNMT length penalty's exponent α.
        min_length: end-of-sequence is banned before this many tokens.
        max_length_a: outputs stop at ``floor(max_length_a · |source| + max_length_b)`` tokens.
        max_length_b: see ``max_length_a``.
        no_repeat_ngram_size: no n-gram of this size appears twice in a hypothesis (0: off).
        ban_unk: never produce the unknown token.
    """

    beam_size: int = 5
    n_best: int = 1
    length_penalty: str = "gnmt"
    alpha: float = 0.6
    min_length: int = 0
    max_length_a: float = 1.5
    max_length_b: int = 10
    no_repeat_ngram_size: int = 0
    ban_unk: bool = False


@dataclass(frozen=True)
class SearchConfig(SearchOptions):
    """A search as it runs: the user's :class:`SearchOptions`, exact early stopping, whether attention is kept,
    and the special ids (default: the data's fixed ones). Checked on creation (one clear ``ValueError``)."""

    early_stop: bool = True
    return_attention: bool = True
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3

    def __post_init__(self) -> None:
        for name in ("beam_size", "n_best"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}; set it to 1 or more.")
        if self.n_best > self.beam_size:
            raise ValueError(f"n_best={self.n_best} exceeds beam_size={self.beam_size}; a beam keeps at most "
                             "beam_size hypotheses, so raise beam_size or lower n_best.")
        if self.length_penalty not in LENGTH_PENALTIES:
            raise ValueError(f"Unknown length_penalty {self.length_penalty!r}; use one of "
                             f"{', '.join(LENGTH_PENALTIES)}.")
        if self.alpha < 0:
            raise ValueError(f"The length penalty alpha must be >= 0 (GNMT uses 0.6), got {self.alpha}.")
        if self.min_length < 0 or self.no_repeat_ngram_size < 0:
            raise ValueError("min_length and no_repeat_ngram_size must be >= 0 (0 turns them off), got "
                             f"{self.min_length} and {self.no_repeat_ngram_size}.")
        if self.max_length_a < 0 or self.max_length_b < 0 or self.max_length_a == self.max_length_b == 0:
            raise ValueError(f"The maximum length a*|src|+b needs a, b >= 0 and not both 0, got a={self.max_length_a}, "
                             f"b={self.max_length_b}.")


@dataclass
class Hypothesis:
    """One decoded output. ``tokens`` excludes BOS and the final EOS; ``token_scores`` and
    ``attention`` have one row per generated token including that EOS."""

    tokens: List[int]
    score: float
    log_prob: float
    token_scores: Tensor
    attention: Optional[Tensor] = field(default=None, repr=False)


def length_penalty(lengths: Tensor, kind: str, alpha: float) -> Tensor:
    """The divisor of the log-probability for hypotheses of ``lengths`` tokens (EOS included)."""
    lengths = lengths.to(torch.float64)
    if kind == "gnmt":
        return ((5.0 + lengths) / 6.0) ** alpha
    if kind == "average":
        return lengths
    return torch.ones_like(lengths)


def max_lengths(source_lengths: Tensor, a: float, b: int) -> Tensor:
    """``floor(a · |src| + b)`` per sentence: the most tokens generated before the forced EOS."""
    return torch.floor(source_lengths.to(torch.float64) * a + b).long()


def _mask_log_probs(lp: Tensor, history: Tensor, step: int, max_len: Tensor, cfg: SearchConfig) -> Tensor:
    """Apply the bans to ``lp`` (N, V) in place: pad/BOS (and unk), EOS before the minimum length,
    repeated n-grams; only EOS at the maximum length; EOS if a row has nothing left."""
    eos_lp = lp[:, cfg.eos_id].clone()
    lp[:, cfg.pad_id] = float("-inf")
    lp[:, cfg.bos_id] = float("-inf")
    if cfg.ban_unk:
        lp[:, cfg.unk_id] = float("-inf")
    if cfg.min_length > 0:
        too_short = step < torch.clamp(max_len, max=cfg.min_length)
        lp[:, cfg.eos_id] = torch.where(too_short, torch.full_like(eos_lp, float("-inf")), eos_lp)
    n = cfg.no_repeat_ngram_size
    if n > 0 and step >= n:
        windows = history.unfold(1, n, 1)  # (N, step − n + 1, n): every n-gram generated so far
        if n > 1:
            match = (windows[:, :, :-1] == history[:, step - n + 1:].unsqueeze(1)).all(-1)
        else:
            match = torch.ones(windows.shape[:2], dtype=torch.bool, device=lp.device)
        counts = torch.zeros(lp.shape, dtype=torch.long, device=lp.device)
        counts.scatter_add_(1, windows[:, :, -1], match.long())
        counts[:, cfg.eos_id] = 0
        lp.masked_fill_(counts > 0, float("-inf"))
    force = step >= max_len
    if n > 0 or lp.shape[-1] <= 4:  # only n-gram blocking can ban every token of a real vocabulary
        force = force | torch.isneginf(lp).all(-1)
    if bool(force.any()):
        lp[force] = float("-inf")
        lp[force, cfg.eos_id] = eos_lp[force]
    return lp


def _cannot_improve(ranked_scores: List[List[float]], best_live: Tensor, max_len: Tensor,
                    cfg: SearchConfig) -> Tensor:
    """Per active sentence: whether no continuing hypothesis can still enter its n-best list.

    A hypothesis's later tokens only add log-probabilities <= 0, and every length penalty grows with
    the length, so the normalised score of anything a live hypothesis with cumulative log-probability
    ``c`` (<= 0) can become is at most ``c / lp(max_len + 1)`` (its longest possible length, EOS
    included). Once the ``n_best``-th finished score is at least that bound for the best live
    hypothesis, continuing would only add hypotheses ranked after the current n-best: stopping now
    returns exactly what decoding until ``beam_size`` hypotheses are finished returns.
    ``ranked_scores``: per active sentence, its finished hypotheses' scores, best first."""
    nth = [scores[cfg.n_best - 1] if len(scores) >= cfg.n_best else float("-inf") for scores in ranked_scores]
    longest = length_penalty(max_len + 1, cfg.length_penalty, cfg.alpha)
    bound = best_live.to(torch.float64) / longest
    return torch.tensor(nth, dtype=torch.float64, device=best_live.device) >= bound


def _hypothesis(tokens: List[int], token_scores: Tensor, log_prob: float, attention: Optional[Tensor],
                cfg: SearchConfig) -> Hypothesis:
    lp = float(length_penalty(torch.tensor([len(tokens) + 1]), cfg.length_penalty, cfg.alpha)[0])
    return Hypothesis(tokens, log_prob / lp, log_prob, token_scores, attention)


@torch.no_grad()
def greedy_search(model: Decodable, source: Tensor, source_lengths: Tensor, cfg: SearchConfig
                  ) -> List[List[Hypothesis]]:
    """Batched greedy decoding: one hypothesis per sentence (a one-element list, like beam search's)."""
    batch, device = source.shape[0], source.device
    enc = model.encode(source, source_lengths)
    state = model.initial_decoder_state(enc)
    src_len = source_lengths.tolist()
    max_len = max_lengths(source_lengths, cfg.max_length_a, cfg.max_length_b).to(device)
    active = torch.arange(batch, device=device)
    prev = torch.full((batch,), cfg.bos_id, dtype=torch.long, device=device)
    history = torch.empty(batch, 0, dtype=torch.long, device=device)
    scores: Optional[Tensor] = None
    cum: Optional[Tensor] = None
    attn_hist: Optional[Tensor] = None
    results: List[List[Hypothesis]] = [[] for _ in range(batch)]
    step = 0
    while active.numel():
        lp, state, attn = model.decode_step(prev, state, enc)
        lp = _mask_log_probs(lp, history, step, max_len, cfg)
        best, token = lp.max(-1)
        cum = best if cum is None else cum + best
        history = torch.cat([history, token.unsqueeze(1)], 1)
        scores = best.unsqueeze(1) if scores is None else torch.cat([scores, best.unsqueeze(1)], 1)
        if cfg.return_attention:
            attn_hist = attn.unsqueeze(1) if attn_hist is None else torch.cat([attn_hist, attn.unsqueeze(1)], 1)
        done = token == cfg.eos_id
        if bool(done.any()):
            for i in done.nonzero().flatten().tolist():
                b = int(active[i])
                att = attn_hist[i, :, :src_len[b]].cpu() if attn_hist is not None else None
                results[b] = [_hypothesis(history[i, :-1].tolist(), scores[i].cpu(), float(cum[i]), att, cfg)]
            keep = (~done).nonzero().flatten()
            active, max_len, token, cum = active[keep], max_len[keep], token[keep], cum[keep]
            history, scores = history[keep], scores[keep]
            attn_hist = attn_hist[keep] if attn_hist is not None else None
            if keep.numel():
                state = model.reorder_decoder_state(state, keep)
                enc = model.reorder_encoder(enc, keep)
        prev = token
        step += 1
    return results


@dataclass
class _Beams:
    """The live part of a batched beam search: ``n`` active sentences × ``live`` rows each (1 at the first
    step, then the beam size), in the model's batch-first layout."""

    enc: Any
    state: Any
    active: Tensor  # (n,) the sentences still decoding, by their index in the batch
    max_len: Tensor  # (n,) their maximum lengths
    prev: Tensor  # (n · live,) the previous tokens
    history: Tensor  # (n, live, step) the tokens so far
    live: int = 1
    step: int = 0
    tok_scores: Optional[Tensor] = None  # (n, live, step)
    attn_hist: Optional[Tensor] = None  # (n, live, step, S)
    cum: Optional[Tensor] = None  # (n, live) cumulative log-probabilities

    def first_step(self, lp: Tensor, attn: Tensor, cfg: SearchConfig) -> None:
        """Empty scores (and attention) once the first step shows their shapes and dtypes."""
        n = self.active.numel()
        self.cum = lp.new_zeros(n, 1)
        self.tok_scores = lp.new_empty(n, 1, 0)
        self.attn_hist = attn.new_empty(n, 1, 0, attn.shape[-1]) if cfg.return_attention else None


def _candidates(cum: Tensor, lp: Tensor, live: int, k: int) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """Each sentence's best ``2k`` continuations, best first (padded with dead ones to ``k`` for a tiny
    vocabulary): their scores, beams, tokens and the tokens' log-probabilities, each (n, width)."""
    n, vocab = cum.shape[0], lp.shape[-1]
    cand = (cum.unsqueeze(-1) + lp.view(n, live, vocab)).view(n, live * vocab)
    width = min(2 * k, live * vocab)
    top, idx = cand.topk(width, dim=1)  # sorted best first
    if width < k:  # a tiny vocabulary: pad with dead candidates so k rows continue
        top = torch.cat([top, top.new_full((n, k - width), float("-inf"))], 1)
        idx = torch.cat([idx, idx.new_zeros(n, k - width)], 1)
    return top, idx // vocab, idx % vocab, lp.view(n, live * vocab).gather(1, idx)


def _finish_eos(finished: List[List[Hypothesis]], b: _Beams, candidates: Tuple[Tensor, Tensor, Tensor, Tensor],
                attn: Tensor, src_len: List[int], cfg: SearchConfig) -> Tensor:
    """Add the end-of-sequence candidates ranked within the first ``beam_size`` to ``finished``; returns
    where the candidates are end-of-sequence."""
    top, top_beam, top_tok, top_lp = candidates
    is_eos = top_tok == cfg.eos_id
    final = is_eos & torch.isfinite(top)
    final[:, cfg.beam_size:] = False  # only EOS ranked within the first beam_size candidates finalise
    if not bool(final.any()):
        return is_eos
    attn_k = attn.view(b.active.numel(), b.live, -1)
    for i, j in final.nonzero().tolist():
        s, beam = int(b.active[i]), int(top_beam[i, j])
        scores_ij = torch.cat([b.tok_scores[i, beam], top_lp[i, j:j + 1]]).cpu()
        att = None
        if b.attn_hist is not None:
            att = torch.cat([b.attn_hist[i, beam], attn_k[i, beam].unsqueeze(0)])[:, :src_len[s]].cpu()
        finished[s].append(_hypothesis(b.history[i, beam].tolist(), scores_ij, float(top[i, j]), att, cfg))
    return is_eos


def _continuing(finished: List[List[Hypothesis]], b: _Beams, top: Tensor, top_tok: Tensor, is_eos: Tensor,
                cfg: SearchConfig) -> Tuple[Tensor, Tensor, Tensor]:
    """The ``k`` candidates of each sentence that continue (the best that are not EOS: EOS ones sort after
    every other), their cumulative scores, and the sentences still decoding after this step."""
    n, width = top.shape
    rank = torch.arange(width, device=top.device).expand(n, width)
    order = torch.where(is_eos, rank + width, rank).topk(cfg.beam_size, dim=1, largest=False).indices
    new_cum = top.gather(1, order)
    new_cum = new_cum.masked_fill(top_tok.gather(1, order) == cfg.eos_id, float("-inf"))
    ranked = [sorted((h.score for h in finished[s]), reverse=True) for s in b.active.tolist()]
    count = torch.tensor([len(scores) for scores in ranked], device=top.device)
    done = (count >= cfg.beam_size) | (b.step >= b.max_len) | ~torch.isfinite(new_cum[:, 0])
    if cfg.early_stop:
        done |= _cannot_improve(ranked, new_cum[:, 0], b.max_len, cfg)
    return order, new_cum, (~done).nonzero().flatten()


def _advance(model: Decodable, b: _Beams, keep: Tensor, order: Tensor, new_cum: Tensor,
             candidates: Tuple[Tensor, Tensor, Tensor, Tensor], attn: Tensor, k: int) -> None:
    """Keep the sentences ``keep`` and their continuing candidates ``order``: reorder the decoder state, the
    encoder outputs (expanded over the beam after the first step) and the histories; one step on."""
    _, top_beam, top_tok, top_lp = candidates
    n, live, step, m = b.active.numel(), b.live, b.step, keep.numel()
    new_tok = top_tok.gather(1, order)
    row = (keep.unsqueeze(1) * live + top_beam.gather(1, order)[keep]).view(-1)  # rows of the old (n·live) layout
    b.state = model.reorder_decoder_state(b.state, row)
    if live == 1:
        b.enc = model.reorder_encoder(b.enc, keep.repeat_interleave(k))
    elif m < n:
        beams = torch.arange(k, device=keep.device)
        b.enc = model.reorder_encoder(b.enc, (keep.unsqueeze(1) * k + beams).view(-1))
    b.history = torch.cat([b.history.view(n * live, step)[row], new_tok[keep].view(-1, 1)], 1).view(m, k, step + 1)
    b.tok_scores = torch.cat([b.tok_scores.view(n * live, step)[row],
                              top_lp.gather(1, order)[keep].view(-1, 1)], 1).view(m, k, step + 1)
    if b.attn_hist is not None:
        s = b.attn_hist.shape[-1]
        b.attn_hist = torch.cat([b.attn_hist.view(n * live, step, s)[row], attn[row].unsqueeze(1)], 1
                                ).view(m, k, step + 1, s)
    b.cum = new_cum[keep]
    b.prev = new_tok[keep].view(-1)
    b.active, b.max_len = b.active[keep], b.max_len[keep]
    b.live = k
    b.step += 1


@torch.no_grad()
def beam_search(model: Decodable, source: Tensor, source_lengths: Tensor, cfg: SearchConfig
                ) -> List[List[Hypothesis]]:
    """Batched beam search; returns, per sentence, its ``n_best`` hypotheses best first.

    The first step runs on one row per sentence (only beam 0 is live: the other beams would be
    copies at −inf); the encoder outputs and states are expanded over the beam after it."""
    batch, device, k = source.shape[0], source.device, cfg.beam_size
    enc = model.encode(source, source_lengths)
    b = _Beams(enc, model.initial_decoder_state(enc), torch.arange(batch, device=device),
               max_lengths(source_lengths, cfg.max_length_a, cfg.max_length_b).to(device),
               torch.full((batch,), cfg.bos_id, dtype=torch.long, device=device),
               torch.empty(batch, 1, 0, dtype=torch.long, device=device))
    src_len = source_lengths.tolist()
    finished: List[List[Hypothesis]] = [[] for _ in range(batch)]
    while b.active.numel():
        n = b.active.numel()
        lp, b.state, attn = model.decode_step(b.prev, b.state, b.enc)
        if b.cum is None:
            b.first_step(lp, attn, cfg)
        lp = _mask_log_probs(lp, b.history.view(n * b.live, b.step), b.step, b.max_len.repeat_interleave(b.live),
                             cfg)
        candidates = _candidates(b.cum, lp, b.live, k)
        is_eos = _finish_eos(finished, b, candidates, attn, src_len, cfg)
        order, new_cum, keep = _continuing(finished, b, candidates[0], candidates[2], is_eos, cfg)
        if keep.numel() == 0:
            break
        _advance(model, b, keep, order, new_cum, candidates, attn, k)
    results = []
    for hyps in finished:
        ranked = sorted(range(len(hyps)), key=lambda i: (-hyps[i].score, i))
        results.append([hyps[i] for i in ranked[:cfg.n_best]])
    return results


def search(model: Decodable, source: Tensor, source_lengths: Tensor, cfg: SearchConfig) -> List[List[Hypothesis]]:
    """Greedy search when ``beam_size == 1``, else beam search."""
    if cfg.beam_size == 1:
        return greedy_search(model, source, source_lengths, cfg)
    return beam_search(model, source, source_lengths, cfg)
