"""Multi30k De->En side by side: the plain-PyTorch reference (``seq2seq_multi30k.py``, given by ``--reference`` or ``$LIT_RNNCELLS_ANCHORS``) and our Seq2Seq.

One run trains the reference (as a subprocess, its ``ANCHOR`` line read back), then our ``Seq2Seq`` with a GRU at
the reference's settings: joint byte-level BPE of 8k symbols fitted on the training split (any pair may merge,
as the reference's ``BpeTrainer`` defaults), embedding / hidden
``--emb`` / ``--hid`` (default the anchor README's small setting 128 / 256), dropout 0.5 on the embeddings
only, the softmax reading [decoder state; context; embedding] directly (``attentional_layer=False``, as the
reference's output layer), Bahdanau's attention query s_{t-1} (``attention_query="before"``), random batches
(``--chunk-batches 1``: no length bucketing, as the reference), Adam 1e-3, gradient clip 1, batch 128, the
same number of epochs, greedy decoding capped at 2 |src| + 10 like the reference. Both programs run with the
same number of threads and the same glibc allocator setting (``lit_rnncells.nn.benchmark.keep_freed_memory``
here, ``GLIBC_TUNABLES`` for the reference's process).

Prints markdown tables:

* quality and speed: test_2016_flickr sacreBLEU (ours greedy and beam 5, the reference's greedy), final
  validation loss, training target tokens/s and our / reference ratio, with the bars (our greedy >= reference
  greedy; our beam 5 >= our greedy; tokens/s ratio >= 0.9);
* decoding speed of our trained model on the test set in sentences/s: batched greedy, batched beam 5 (bar:
  beam 5 at most 2x greedy's time, 3x at worst), and greedy at batch size 1 on the first ``--single`` sentences;
  the decoder rows (hypotheses x steps) each computed and the time per row, whose product is the ratio;
* with ``--cells GRU MGU CARU``: a fixed-epoch comparison at equal sizes (test BLEU greedy, parameters,
  seconds per training epoch), CARU Table 2's claim being CARU >= GRU in BLEU with fewer parameters and
  faster epochs.

    python scripts/bench_seq2seq.py --epochs 2 --seeds 0 1 2 --save-model runs/s2s_gru.ckpt   # the side-by-side
    python scripts/bench_seq2seq.py --decode-from runs/s2s_gru.ckpt     # decoding speed and rows again, no training
    python scripts/bench_seq2seq.py --epochs 1                          # one seed
    python scripts/bench_seq2seq.py --epochs 1 --cells GRU MGU CARU     # plus the cell comparison
    python scripts/bench_seq2seq.py --limit 300 --epochs 1              # a quick check of the script
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch
from lightning.pytorch import Callback, Trainer, seed_everything

from lit_rnncells.nn.benchmark import (ANCHORS_ENV, GLIBC_KEEP_FREED, SYSTEM_MALLOC_HELP, RowCounter, allocator_setting,
                                       reference_program, run_reference)
from lit_rnncells.experiments.report import mean_std
from lit_rnncells.data import TranslationDataModule
from lit_rnncells.data.batching import pad_batch
from lit_rnncells.metrics import sacrebleu_corpus
from lit_rnncells.nn.beam_search import search
from lit_rnncells.tasks import Seq2Seq
from lit_rnncells.tasks.seq2seq_options import DecodingConfig, SideConfig

DATA = Path(os.environ.get("LIT_RNNCELLS_DATA", "data"))
ANCHOR = "seq2seq_multi30k.py"
DECODE_LINE = re.compile(r"decode sent/s (\d+(?:\.\d+)?)")
EPOCH_LINE = re.compile(r"^epoch \d+ .* sec (\d+(?:\.\d+)?) tok/s", re.M)


class TrainTimer(Callback):
    """Seconds of each training epoch (first batch fetch to the last optimiser step; validation excluded)
    and the target tokens trained on (non-pad tokens after <bos>: y and <eos>, as the reference counts)."""

    def __init__(self) -> None:
        self.seconds: List[float] = []
        self.tokens = 0
        self._start = self._last = 0.0

    def on_train_epoch_start(self, trainer: Trainer, pl_module: Any) -> None:
        self._start = self._last = time.perf_counter()

    def on_train_batch_end(self, trainer: Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._last = time.perf_counter()
        self.tokens += int((batch["target"][:, 1:] != pl_module.pad_id).sum())

    def on_train_epoch_end(self, trainer: Trainer, pl_module: Any) -> None:
        self.seconds.append(self._last - self._start)


def run_anchor(args: argparse.Namespace, seed: int) -> Dict[str, Any]:
    cmd = ["--data", str(args.data) + "/", "--epochs", str(args.epochs), "--threads", str(args.threads), "--seed",
           str(seed), "--emb", str(args.emb), "--hid", str(args.hid), "--batch", "128", "--vocab",
           str(args.vocab), "--cap_min", "1e9"] + (["--limit", str(args.limit)] if args.limit else [])
    stdout, fields = run_reference(args.reference, cmd, args.system_malloc)
    decode = DECODE_LINE.search(stdout)
    epochs = [float(m.group(1)) for m in EPOCH_LINE.finditer(stdout)]
    print(f"reference seed {seed}: test BLEU greedy {fields['test_bleu']} val_loss {fields['val_loss']} "
          f"tok/s {fields['train_tok_s']}", flush=True)
    return {"name": "reference (seq2seq_multi30k.py, nn.GRU)", "seed": seed, "bleu": float(fields["test_bleu"]), "beam": None,
            "val_loss": float(fields["val_loss"]), "tok_s": float(fields["train_tok_s"]),
            "sec_epoch": sum(epochs) / len(epochs) if epochs else float("nan"),
            "decode_sent_s": float(decode.group(1)) if decode else float("nan")}


def data_module(args: argparse.Namespace, checkpoint: Optional[Path] = None) -> TranslationDataModule:
    """Multi30k De->En at the reference's settings (the tokenizer is the checkpoint's when one is given)."""
    dm = TranslationDataModule("multi30k", data_dir=str(args.data), source_language="de", target_language="en",
                               subwords={"subword_vocab_size": args.vocab, "joint_vocabulary": True, "min_frequency": 1},
                               batch_size=128, batching={"eval_batch_size": 128, "chunk_batches": args.chunk_batches},
                               limit=args.limit or None, seed=args.seeds[0],
                               checkpoint_path=None if checkpoint is None else str(checkpoint))
    dm.prepare_data()
    dm.setup("test")
    return dm


def decode_all(model: Seq2Seq, dm: TranslationDataModule, beam: int, batch_size: int,
               count: Optional[int] = None, early_stop: bool = True) -> Dict[str, Any]:
    """Decode the test sources in input order; sentences/s, decoder rows computed and the detokenised outputs."""
    test = dm.split("test")
    sources = test["source"][:count] if count else test["source"]
    cfg = replace(model.test_search, beam_size=beam, n_best=1, max_length_a=2.0, max_length_b=10,
                  early_stop=early_stop)
    outputs: List[str] = []
    model.eval()
    counted = RowCounter(model)
    start = time.perf_counter()
    with torch.no_grad():
        for i in range(0, len(sources), batch_size):
            padded, lengths = pad_batch([s + [dm.eos_id] for s in sources[i:i + batch_size]], dm.pad_id)
            for nbest in search(counted, padded, lengths, cfg):
                outputs.append(dm.target_tokenizer.detokenize(dm.target_tokenizer.decode(nbest[0].tokens)))
    elapsed = time.perf_counter() - start
    return {"texts": outputs, "sent_s": len(sources) / elapsed, "seconds": elapsed, "rows": counted.rows}


def gru_like_reference(cell: str, args: argparse.Namespace, dm: TranslationDataModule) -> Seq2Seq:
    """Our Seq2Seq at the reference's architecture: the softmax reads [s; c; E y], dropout on embeddings only."""
    return Seq2Seq(cell, source_vocab_size=dm.source_vocab_size, target_vocab_size=dm.target_vocab_size,
                   pad_id=dm.pad_id, bos_id=dm.bos_id, eos_id=dm.eos_id, embedding_size=args.emb,
                   hidden_size=args.hid, num_layers=1, decoding=DecodingConfig(eval_metrics=()),
                   attentional_layer=False, attention_query="before", dropout=0.5, decoder=SideConfig(output_dropout=0.0),
                   encoder=SideConfig(output_dropout=0.0), optimizer=partial(torch.optim.Adam, lr=1e-3))


def decoding_speed(model: Seq2Seq, dm: TranslationDataModule, args: argparse.Namespace) -> Dict[str, Any]:
    """Sentences/s of batched greedy, batched beam 5 and batch-size-1 greedy on the test set, and both BLEUs.

    Greedy and beam 5 are timed ``--decode-repeats`` times, alternately, and each keeps its median time, so a
    slow spell of this shared machine does not land on one decoder only."""
    refs = dm.split("test")["target_text"]
    greedy_runs, beam_runs = [], []
    for _ in range(args.decode_repeats):
        greedy_runs.append(decode_all(model, dm, 1, 128))
        beam_runs.append(decode_all(model, dm, 5, 128))
    greedy = sorted(greedy_runs, key=lambda r: r["seconds"])[len(greedy_runs) // 2]
    beam5 = sorted(beam_runs, key=lambda r: r["seconds"])[len(beam_runs) // 2]
    single = decode_all(model, dm, 1, 1, count=args.single)
    greedy_sub = decode_all(model, dm, 1, 128, count=args.single)
    bleu, signature = sacrebleu_corpus(beam5["texts"], refs)
    return dict(greedy_bleu=sacrebleu_corpus(greedy["texts"], refs)[0], beam=bleu, signature=signature,
                decode_sent_s=greedy["sent_s"], greedy_s=greedy["seconds"], beam_sent_s=beam5["sent_s"],
                greedy_rows=greedy["rows"], beam_rows=beam5["rows"], beam_texts=beam5["texts"],
                beam_s=beam5["seconds"], single_sent_s=single["sent_s"], batched_sub_sent_s=greedy_sub["sent_s"],
                single_count=min(args.single, len(refs)), repeats=args.decode_repeats,
                ratios=[b["seconds"] / g["seconds"] for g, b in zip(greedy_runs, beam_runs)])


def run_ours(cell: str, args: argparse.Namespace, dm: TranslationDataModule, seed: int, speed: bool
             ) -> Dict[str, Any]:
    seed_everything(seed, verbose=False)
    dm.seed = seed  # the batch order follows the seed too, as the reference's
    model = gru_like_reference(cell, args, dm)
    timer = TrainTimer()
    trainer = Trainer(max_epochs=args.epochs, accelerator="cpu", devices=1, gradient_clip_val=1.0, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                      num_sanity_val_steps=0, callbacks=[timer])
    trainer.fit(model, datamodule=dm)
    if speed and args.save_model:
        trainer.save_checkpoint(args.save_model)
        print(f"saved {args.save_model} (decode it again with --decode-from {args.save_model})", flush=True)
    val_loss = float(trainer.callback_metrics["val/loss"])
    refs = dm.split("test")["target_text"]
    row: Dict[str, Any] = {"name": f"ours Seq2Seq {cell}", "seed": seed, "val_loss": val_loss,
                           "tok_s": timer.tokens / sum(timer.seconds),
                           "sec_epoch": sum(timer.seconds) / len(timer.seconds),
                           "params": sum(p.numel() for p in model.parameters()), "beam": None}
    if speed:
        row.update(decoding_speed(model, dm, args))
        row["bleu"] = row.pop("greedy_bleu")
    else:
        greedy = decode_all(model, dm, 1, 128)
        row.update(bleu=sacrebleu_corpus(greedy["texts"], refs)[0], decode_sent_s=greedy["sent_s"])
    beam_text = "" if row["beam"] is None else f" beam5 {row['beam']:.2f}"
    print(f"ours {cell} seed {seed}: test BLEU greedy {row['bleu']:.2f}{beam_text} "
          f"val_loss {val_loss:.4f} sec/epoch {row['sec_epoch']:.1f} tok/s {row['tok_s']:.0f} "
          f"params {row['params']:,}", flush=True)
    return row


def print_speed(speed: Dict[str, Any], count: int, ref: Optional[Dict[str, Any]]) -> None:
    slowdown = speed["beam_s"] / speed["greedy_s"]
    print(f"\nDecoding speed of our trained GRU model on test_2016_flickr ({count} sentences)\n")
    print("| decoder | batch | sentences/s |")
    print("|---|---|---|")
    print(f"| greedy | 128 | {speed['decode_sent_s']:.1f} |")
    print(f"| beam 5 | 128 | {speed['beam_sent_s']:.1f} |")
    print(f"| greedy (first {speed['single_count']}) | 128 | {speed['batched_sub_sent_s']:.1f} |")
    print(f"| greedy (first {speed['single_count']}) | 1 | {speed['single_sent_s']:.1f} |")
    if ref:
        print(f"| reference greedy | 128 | {ref['decode_sent_s']:.1f} |")
    each = ", ".join(f"{r:.2f}" for r in speed["ratios"])
    rows = speed["beam_rows"] / speed["greedy_rows"]
    per_row = (speed["beam_s"] / speed["beam_rows"]) / (speed["greedy_s"] / speed["greedy_rows"])
    print(f"\nDecoder rows computed (hypotheses x steps): greedy {speed['greedy_rows']:,}, beam 5 "
          f"{speed['beam_rows']:,} ({rows:.2f}x); time per row: greedy "
          f"{1000 * speed['greedy_s'] / speed['greedy_rows']:.3f} ms, beam 5 "
          f"{1000 * speed['beam_s'] / speed['beam_rows']:.3f} ms ({per_row:.2f}x). Beam 5's time over greedy's is "
          f"the product: {rows:.2f} x {per_row:.2f}.")
    print(f"\nBeam 5 takes {slowdown:.2f}x greedy's time (medians of {speed['repeats']} alternating runs; each run's "
          f"ratio: {each}) (target <= 2x, bar 3x -> "
          f"{'PASS' if slowdown <= 3 else 'FAIL'}); batched greedy is "
          f"{speed['batched_sub_sent_s'] / speed['single_sent_s']:.1f}x batch-size-1 greedy.")


def decode_only(args: argparse.Namespace) -> None:
    """Decoding speed of a checkpoint saved by ``--save-model`` (no training)."""
    dm = data_module(args, args.decode_from)
    model = Seq2Seq.load_from_checkpoint(args.decode_from, map_location="cpu")
    speed = decoding_speed(model, dm, args)
    print(f"{args.decode_from}: test BLEU greedy {speed['greedy_bleu']:.2f}, beam 5 {speed['beam']:.2f} "
          f"({speed['signature']})")
    print_speed(speed, len(dm.split("test")["source"]), None)
    late = decode_all(model, dm, 5, 128, early_stop=False)
    same = late["texts"] == speed["beam_texts"]
    print(f"\nBeam 5 without early stopping computes {late['rows']:,} rows (with it: {speed['beam_rows']:,}); "
          f"the outputs are {'identical' if same else 'DIFFERENT'}.")


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="only the first N pairs of every split (a quick check)")
    ap.add_argument("--emb", type=int, default=128)
    ap.add_argument("--hid", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0],
                    help="train both programs once per seed (init and batch order); the table gives mean ± std "
                         "and the bars compare the means; decoding speed is measured on the first seed's model")
    ap.add_argument("--chunk-batches", type=int, default=1,
                    help="our length bucketing: batches sorted within chunks of this many (1: random batches, as the "
                         "reference's; the library default 50 trains faster but slightly worse per epoch early on)")
    ap.add_argument("--decode-repeats", type=int, default=3,
                    help="greedy and beam 5 are timed this many times, alternately; each keeps its median")
    ap.add_argument("--single", type=int, default=200, help="sentences decoded one at a time for the batch-1 speed")
    ap.add_argument("--cells", nargs="*", default=[],
                    help="also compare these cells at equal sizes (e.g. GRU MGU CARU), first seed only")
    ap.add_argument("--skip-reference", action="store_true", help="only our runs (no side-by-side bars)")
    ap.add_argument("--save-model", type=Path, help="save the first seed's trained GRU model (a Lightning checkpoint)")
    ap.add_argument("--decode-from", type=Path,
                    help="no training: measure the decoding speed of a checkpoint saved with --save-model")
    ap.add_argument("--data", type=Path, default=DATA / "multi30k")
    ap.add_argument("--system-malloc", action="store_true", help=SYSTEM_MALLOC_HELP)
    ap.add_argument("--reference", type=Path, default=None,
                    help=f"the plain-PyTorch reference program {ANCHOR} (default: ${ANCHORS_ENV}/{ANCHOR})")
    args = ap.parse_args(argv)
    if not args.skip_reference and args.decode_from is None:
        args.reference = reference_program(ANCHOR, args.reference)
    if not (args.data / "train.de").is_file():
        raise SystemExit(f"{args.data} has no train.de; set LIT_RNNCELLS_DATA or pass --data <multi30k folder>.")
    if args.decode_from is not None and not args.decode_from.is_file():
        raise SystemExit(f"--decode-from {args.decode_from}: no such file; save one with --save-model first.")
    allocator = allocator_setting(args.system_malloc)
    torch.set_num_threads(args.threads)
    if args.decode_from is not None:
        decode_only(args)
        return
    dm = data_module(args)
    refs: List[Dict[str, Any]] = []
    runs: List[Dict[str, Any]] = []
    for i, seed in enumerate(args.seeds):  # the programs alternate, so slow spells of the machine hit both
        if not args.skip_reference:
            refs.append(run_anchor(args, seed))
        runs.append(run_ours("GRU", args, dm, seed, speed=i == 0))
    ours, ref = runs[0], (refs[0] if refs else None)
    scope = f"first {args.limit} pairs per split" if args.limit else "full splits"
    print(f"\nMulti30k De->En, {args.epochs} epoch(s), {scope}, seeds {' '.join(map(str, args.seeds))}; "
          f"embedding {args.emb}, hidden {args.hid}, joint BPE "
          f"{dm.target_vocab_size}, batch 128, dropout 0.5 on embeddings, softmax on [s; c; E y], Adam 1e-3, "
          f"clip 1; {args.threads} threads for both; "
          f"allocator: {allocator} for both"
          f"{'' if args.system_malloc else ' (reference: GLIBC_TUNABLES=' + GLIBC_KEEP_FREED + ')'}; "
          f"torch {torch.__version__}; "
          f"sacreBLEU {ours['signature']}\n")
    print("| program | seed | test BLEU greedy | test BLEU beam 5 | val loss | s / epoch | train target tokens/s |")
    print("|---|---|---|---|---|---|---|")
    for r in refs + runs:
        beam = "-" if r["beam"] is None else f"{r['beam']:.2f}"
        print(f"| {r['name']} | {r['seed']} | {r['bleu']:.2f} | {beam} | {r['val_loss']:.4f} | {r['sec_epoch']:.1f} | "
              f"{r['tok_s']:,.0f} |")
    print(f"\nOver {len(args.seeds)} seed(s), mean ± std:\n")
    print("| program | test BLEU greedy | val loss | train target tokens/s | tokens/s vs reference |")
    print("|---|---|---|---|---|")
    ratios = [o["tok_s"] / r["tok_s"] for o, r in zip(runs, refs)]
    for name, rows, ratio in ((refs[0]["name"] if refs else "", refs, None), (ours["name"], runs, ratios)):
        if rows:
            print(f"| {name} | {mean_std([r['bleu'] for r in rows])} | {mean_std([r['val_loss'] for r in rows])} | "
                  f"{mean_std([r['tok_s'] for r in rows])} | {mean_std(ratio) if ratio else '1.00'} |")
    if refs:
        ours_bleu = statistics.mean(r["bleu"] for r in runs)
        ref_bleu = statistics.mean(r["bleu"] for r in refs)
        wins = sum(o["bleu"] >= r["bleu"] for o, r in zip(runs, refs))
        ratio = statistics.mean(ratios)
        print(f"\nBar 1 (our greedy BLEU >= the reference's, mean over seeds): {ours_bleu:.2f} vs {ref_bleu:.2f} -> "
              f"{'PASS' if ours_bleu >= ref_bleu else 'FAIL'} (ours >= reference in {wins} of {len(runs)} seeds)")
        print(f"Bar 2 (tokens/s ratio >= 0.9, mean over seeds): {ratio:.2f} -> {'PASS' if ratio >= 0.9 else 'FAIL'}")
    print(f"Bar 3 (our beam 5 BLEU >= our greedy, seed {ours['seed']}): {ours['beam']:.2f} vs {ours['bleu']:.2f} -> "
          f"{'PASS' if ours['beam'] >= ours['bleu'] else 'FAIL'}")
    print_speed(ours, len(dm.split("test")["source"]), ref)

    if args.cells:
        rows = [ours if cell.upper() == "GRU" else run_ours(cell, args, dm, args.seeds[0], speed=False)
                for cell in args.cells]
        print(f"\nCells at equal sizes (CARU Table 2 setting, our sizes above), {args.epochs} epoch(s), "
              f"seed {args.seeds[0]}\n")
        print("| cell | test BLEU greedy | val loss | parameters | s / epoch |")
        print("|---|---|---|---|---|")
        for cell, r in zip(args.cells, rows):
            print(f"| {cell} | {r['bleu']:.2f} | {r['val_loss']:.4f} | {r['params']:,} | {r['sec_epoch']:.1f} |")
        by = {c.upper(): r for c, r in zip(args.cells, rows)}
        if "CARU" in by and "GRU" in by:
            caru, gru = by["CARU"], by["GRU"]
            holds = (caru["bleu"] >= gru["bleu"] and caru["params"] < gru["params"]
                     and caru["sec_epoch"] < gru["sec_epoch"])
            print(f"\nCARU Table 2's claim (CARU >= GRU in BLEU, fewer parameters, faster epochs) "
                  f"{'holds' if holds else 'does not hold'} in this run: BLEU {caru['bleu']:.2f} vs {gru['bleu']:.2f}, "
                  f"parameters {caru['params']:,} vs {gru['params']:,}, s/epoch {caru['sec_epoch']:.1f} vs "
                  f"{gru['sec_epoch']:.1f}.")


if __name__ == "__main__":
    main()
