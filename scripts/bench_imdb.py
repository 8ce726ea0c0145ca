"""IMDB side by side: the plain-PyTorch reference (``imdb_gru.py``, given by ``--reference`` or ``$LIT_RNNCELLS_ANCHORS``) and our DocumentClassifier.

One run trains the reference, then our DocumentClassifier with a GRU at the reference's settings
(first 256 tokens, lowercased, ``<br />`` stripped, regex words, 25k-word vocabulary of the training
reviews' kept tokens, embedding 128, hidden 256, last real state, dropout 0.5, Adam 1e-3, batch 64,
gradient clip 5, 2,500 training reviews held out, the same number of epochs), then MGU and CARU
(Chan et al., ICONIP 2020, Fig. 2) at the same sizes. Both programs run with the same number of threads and the same
glibc allocator setting (``lit_rnncells.nn.benchmark.keep_freed_memory`` here, ``GLIBC_TUNABLES`` for
the reference's process). Prints a markdown table: test accuracy (the final model, as the reference
reports), seconds per training epoch, training tokens/s and our/reference ratio, and the two bars
(our GRU within 1 point of the reference's accuracy or above; tokens/s ratio ≥ 0.9).

    python scripts/bench_imdb.py --epochs 2                 # the real comparison
    python scripts/bench_imdb.py --limit 500 --epochs 1     # a quick check of the script
"""
from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch
from lightning.pytorch import Callback, Trainer, seed_everything

from lit_rnncells.nn.benchmark import (ANCHORS_ENV, GLIBC_KEEP_FREED, SYSTEM_MALLOC_HELP, allocator_setting,
                                       reference_program, run_reference)
from lit_rnncells.data.sentiment import DocumentSentimentDataModule
from lit_rnncells.tasks import DocumentClassifier

DATA = Path(os.environ.get("LIT_RNNCELLS_DATA", "data"))
ANCHOR = "imdb_gru.py"
EPOCH_LINE = re.compile(r"^epoch \d+ .* sec (\d+(?:\.\d+)?) tok/s (\d+)", re.M)


class BenchIMDB(DocumentSentimentDataModule):
    """The IMDB DataModule as the reference reads it: each review cut to its first ``max_length`` tokens
    before the vocabulary is fitted, and with ``limit`` only that many (seeded) train and test reviews."""

    def __init__(self, limit: int = 0, **kwargs: Any) -> None:
        self.limit = limit
        super().__init__(**kwargs)

    def _options(self) -> Dict[str, Any]:
        return {**super()._options(), "bench_limit": self.limit, "bench_cut": self.max_length}

    def _tokens(self, text: str) -> List[str]:
        tokens = super()._tokens(text)
        return tokens if self.max_length is None else tokens[:self.max_length]

    def _build_imdb(self, raw, vocab):
        if self.limit:
            rng = random.Random(self.seed)
            raw = {split: [items[i] for i in sorted(rng.sample(range(len(items)), self.limit))]
                   for split, items in raw.items()}
        return super()._build_imdb(raw, vocab)


class EpochTimer(Callback):
    """Wall-clock seconds and real (non-pad) tokens of each training epoch, validation excluded."""

    def __init__(self) -> None:
        self.seconds: List[float] = []
        self.tokens: List[int] = []
        self._start: Optional[float] = None
        self._count = 0

    def on_train_epoch_start(self, trainer: Trainer, pl_module: Any) -> None:
        self._start, self._count = time.perf_counter(), 0

    def on_train_batch_end(self, trainer: Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._count += int(batch["lengths"].sum())

    def _close(self) -> None:
        if self._start is not None:
            self.seconds.append(time.perf_counter() - self._start)
            self.tokens.append(self._count)
            self._start = None

    def on_validation_start(self, trainer: Trainer, pl_module: Any) -> None:
        self._close()

    def on_train_epoch_end(self, trainer: Trainer, pl_module: Any) -> None:
        self._close()


def run_anchor(args: argparse.Namespace) -> Dict[str, Any]:
    cmd = ["--epochs", str(args.epochs), "--threads", str(args.threads), "--data", str(args.data), "--seed",
           str(args.seed)] + (["--limit", str(args.limit)] if args.limit else [])
    stdout, fields = run_reference(args.reference, cmd, args.system_malloc)
    epochs = [float(m.group(1)) for m in EPOCH_LINE.finditer(stdout)]
    return {"name": "reference nn.GRU (imdb_gru.py)", "test_acc": float(fields["test_acc"]),
            "val_acc": float(fields["val_acc"]), "tok_s": float(fields["train_tok_s"]),
            "sec_epoch": statistics.fmean(epochs) if epochs else float("nan")}


def run_ours(cell: str, args: argparse.Namespace) -> Dict[str, Any]:
    seed_everything(args.seed, verbose=False)
    data = BenchIMDB(limit=args.limit, dataset="imdb", data_dir=str(args.data), max_length=256, truncation="head",
                     tokenizer="regex", lowercase=True, max_vocab_size=25_000,
                     val_size=args.limit // 10 if args.limit else 2500, batch_size=64, eval_batch_size=256,
                     seed=args.seed)
    model = DocumentClassifier(cell, vocab_size=data.vocab_size, num_classes=data.num_classes, pad_id=data.pad_id,
                               embedding_size=128, hidden_size=256, readout="last", dropout=0.5)
    timer = EpochTimer()
    trainer = Trainer(max_epochs=args.epochs, accelerator="cpu", devices=1, gradient_clip_val=5.0, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                      num_sanity_val_steps=0, callbacks=[timer])
    trainer.fit(model, datamodule=data)
    val_acc = float(trainer.callback_metrics["val/acc"])
    test_acc = float(trainer.test(model, datamodule=data, verbose=False)[0]["test/acc"])
    tok_s = sum(timer.tokens) / sum(timer.seconds)
    print(f"ours {cell}: test_acc {test_acc:.4f} val_acc {val_acc:.4f} sec/epoch {statistics.fmean(timer.seconds):.1f} "
          f"tok/s {tok_s:.0f} vocab {data.vocab_size}", flush=True)
    return {"name": f"ours DocumentClassifier {cell}", "test_acc": test_acc, "val_acc": val_acc, "tok_s": tok_s,
            "sec_epoch": statistics.fmean(timer.seconds)}


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="only N train and N test reviews (a quick check)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cells", nargs="+", default=["GRU", "MGU", "CARU"], help="our cells; the first is compared")
    ap.add_argument("--data", type=Path, default=DATA / "imdb" / "aclImdb_v1.tar.gz")
    ap.add_argument("--system-malloc", action="store_true", help=SYSTEM_MALLOC_HELP)
    ap.add_argument("--reference", type=Path, default=None,
                    help=f"the plain-PyTorch reference program {ANCHOR} (default: ${ANCHORS_ENV}/{ANCHOR})")
    args = ap.parse_args(argv)
    args.reference = reference_program(ANCHOR, args.reference)
    if not args.data.is_file():
        raise SystemExit(f"{args.data} does not exist; set LIT_RNNCELLS_DATA or pass --data aclImdb_v1.tar.gz.")
    allocator = allocator_setting(args.system_malloc)
    torch.set_num_threads(args.threads)
    rows = [run_anchor(args)] + [run_ours(cell, args) for cell in args.cells]
    ref = rows[0]
    size = f"{args.limit} sampled reviews per split" if args.limit else "full splits"
    malloc_note = "" if args.system_malloc else f" (reference: GLIBC_TUNABLES={GLIBC_KEEP_FREED})"
    print(f"\nIMDB, {args.epochs} epoch(s), {size}; {args.threads} threads for both; allocator: {allocator} for "
          f"both{malloc_note}; torch {torch.__version__}\n")
    print("| program | test acc (%) | val acc (%) | s / epoch | train tokens/s | tokens/s vs reference |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {100 * r['test_acc']:.2f} | {100 * r['val_acc']:.2f} | {r['sec_epoch']:.1f} | "
              f"{r['tok_s']:,.0f} | {r['tok_s'] / ref['tok_s']:.2f} |")
    ours = rows[1]
    gap = 100 * (ours["test_acc"] - ref["test_acc"])
    ratio = ours["tok_s"] / ref["tok_s"]
    print(f"\nBar 1 (our {args.cells[0]} within 1 point of the reference or above): {gap:+.2f} points -> "
          f"{'PASS' if gap >= -1.0 else 'FAIL'}")
    print(f"Bar 2 (tokens/s ratio >= 0.9): {ratio:.2f} -> {'PASS' if ratio >= 0.9 else 'FAIL'}")


if __name__ == "__main__":
    main()
