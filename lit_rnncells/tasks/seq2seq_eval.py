"""Evaluation of a :class:`~lit_rnncells.tasks.Seq2Seq`: decoding the validation / test / predict batches,
gathering the decoded records across ranks and scoring them (:mod:`lit_rnncells.metrics`), each metric's
signature printed and logged once."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from torch.nn import functional as F

from ..nn.backend import say_once
from ..nn.beam_search import Hypothesis, SearchConfig, search
from ..nn.decode_graphs import MAX_DECODE_GRAPHS, GraphedDecoding
from .. import metrics
from ..data.batching import pad_batch
from ..data.subword import SubwordTokenizer

SIGNATURE_LABELS = {"sacrebleu": "sacreBLEU", "tok_bleu": "tokenised BLEU (sacreBLEU)", "rouge": "ROUGE"}
Record = Tuple[int, str, str, Tuple[str, ...], Tuple[str, ...]]
"""An evaluated example: (index, hypothesis in the corpus's form, hypothesis detokenised, its references in the
corpus's form, detokenised); one reference or several (DUC-2004 has four)."""


def saved_tokenizers(checkpoint: Mapping[str, Any]) -> Optional[Tuple[SubwordTokenizer, SubwordTokenizer]]:
    """The (source, target) tokenizers a translation DataModule saved in a checkpoint, or ``None``."""
    for value in checkpoint.values():
        if isinstance(value, Mapping) and "source_tokenizer" in value and "target_tokenizer" in value:
            return (SubwordTokenizer.from_json(value["source_tokenizer"]),
                    SubwordTokenizer.from_json(value["target_tokenizer"]))
    return None


class Seq2SeqEvaluation:
    """The evaluation half of :class:`~lit_rnncells.tasks.Seq2Seq` (a mixin of that LightningModule): it reads
    the model's ``test_search`` / ``val_search``, ``decoding``, ``eval_metrics``, tokenizers and
    ``_real_logits``."""

    def _init_evaluation(self) -> None:
        """No tokenizers (the data gives them in ``setup``), no records, the data's ROUGE standards unknown."""
        self.source_tokenizer: Any = None
        self.target_tokenizer: Any = None
        self._eval_sums: Optional[Tensor] = None
        self._records: List[Record] = []
        self.data_rouge_max_bytes: Optional[int] = None  # the DataModule's standard truncation (setup)
        self.data_rouge_multiref: Optional[str] = None  # the DataModule's standard multi-reference ROUGE (setup)
        self.metric_signatures: Dict[str, str] = {}  # what the last scoring used, by metric name
        self._signatures_logged: set = set()

    # --- decoding ------------------------------------------------------------------------
    def decodable(self) -> Any:
        """What :func:`~lit_rnncells.nn.beam_search.search` decodes: this model; on a CUDA device where the
        decoder cells' plan is ``graphs``, this model with each decoding step replayed as a CUDA graph
        (:class:`~lit_rnncells.nn.decode_graphs.GraphedDecoding`, kept with the model so batches reuse its graphs)."""
        device = next(self.parameters()).device
        if device.type != "cuda" or not any(p.step == "graphs" for p in self._decoder_plans("cuda")):
            return self
        graphed = self.__dict__.get("_graphed_decoding")
        if graphed is None:
            graphed = self.__dict__["_graphed_decoding"] = GraphedDecoding(self)
            say_once("decoding graphs", "decoding: greedy and beam-search steps as CUDA graphs (one per batch's "
                     f"rows and source length, at most {MAX_DECODE_GRAPHS} kept)")
        return graphed

    def translate(self, source: Tensor, source_lengths: Tensor, cfg: Optional[SearchConfig] = None
                  ) -> List[List[Hypothesis]]:
        """Decode a batch (greedy when ``cfg.beam_size == 1``); default: the test/predict decoder."""
        was_training = self.training
        self.eval()
        try:
            return search(self.decodable(), source, source_lengths, cfg or self.test_search)
        finally:
            self.train(was_training)

    @torch.no_grad()
    def translate_lines(self, lines: Sequence[str], batch_size: int = 32) -> List[str]:
        """Translate (or summarise) lines of text in Python as ``predict`` does on the command line: each line
        through the source tokenizer, decoded with the test / predict settings (``decoding.beam_size``, length
        limits, ...; :meth:`configure_decoding` changes them), the best hypothesis detokenised. A model from
        ``Seq2Seq.load_from_checkpoint(path)`` has its checkpoint's tokenizers."""
        if self.source_tokenizer is None or self.target_tokenizer is None:
            raise RuntimeError("This model has no tokenizers: load it with Seq2Seq.load_from_checkpoint(<a "
                               "checkpoint fit wrote>) or fit it with a TranslationDataModule first.")
        if isinstance(lines, str):
            raise TypeError("translate_lines takes a list of lines, got one string; pass [text].")
        for number, line in enumerate(lines):
            if not line.strip():
                raise ValueError(f"lines[{number}] is empty; give one source sentence per item.")
        device = next(self.parameters()).device
        texts: List[str] = []
        for start in range(0, len(lines), batch_size):
            ids = self.source_tokenizer.encode_batch(lines[start:start + batch_size])
            source, lengths = pad_batch([s + [self.hparams.eos_id] for s in ids], self.hparams.pad_id)
            hypotheses = self.translate(source.to(device), lengths.to(device))
            texts.extend(self._texts(nbest[0].tokens)[1] for nbest in hypotheses)
        return texts

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
            hyps = search(self.decodable(), batch["source"], batch["source_lengths"], cfg)
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
        """The bytes ROUGE reads of each text: ``decoding.rouge_max_bytes``, else the data's standard; None: all."""
        chosen = self.decoding.rouge_max_bytes
        chosen = self.data_rouge_max_bytes if chosen is None else chosen
        return chosen or None

    @property
    def rouge_multiref(self) -> Optional[str]:
        """How ROUGE combines several references: ``decoding.rouge_multiref``, else the data's standard; None: the
        metric's own rule (``pooled``, ROUGE-1.5.5 ``-f A``, with several references, ``best`` with one)."""
        return self.decoding.rouge_multiref or self.data_rouge_multiref

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
        ``decoding.n_best > 1`` one line per hypothesis, ``score<TAB>text``, best first), ``nbest``
        [(text, score)] and ``scores`` (per-token log-probabilities of the best, EOS included)."""
        hyps = search(self.decodable(), batch["source"], batch["source_lengths"], self.test_search)
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

