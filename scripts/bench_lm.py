"""Language-model benchmarks on PTB char (needs ``$LIT_RNNCELLS_DATA`` or ``--data-dir``).

(a) Same wall-clock budget per model, same sizes: train each cell for ``--budget-minutes``
    through ``Trainer.fit(max_time=...)``, then evaluate validation BPC over the whole split.
(b) Training throughput of the task loop (data + model + optimiser, a real ``Trainer.fit`` with
    ``limit_train_batches``) as a ratio to the bare ``Recurrent`` forward + backward + Adam step
    at the same sizes, and to the bare full network (embedding + Recurrent + softmax), one run.

    python scripts/bench_lm.py --budget-minutes 10 --cells GRU CARU MuFuRU SatMZU CapMZU
    python scripts/bench_lm.py --skip-budget            # only the throughput table
Defaults match the reference run (nn.GRU char LM: embedding 128, hidden 512, batch 64,
bptt 150, Adam 1e-3, 2 CPU threads).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import time
from datetime import timedelta
from typing import Any, Dict, List

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from torch.nn import functional as F

from lit_rnncells.cells import get_cell
from lit_rnncells.data import LanguageModelDataModule
from lit_rnncells.nn import Recurrent
from lit_rnncells.tasks import LanguageModel

MZU_OPTIONS = {"share_transition": True}  # the MZU paper shares M across depth on PTB; default depth 1 (+DT)


def cell_factory(name: str):
    cls = get_cell(name)
    return functools.partial(cls, **MZU_OPTIONS) if name.lower().endswith("mzu") else cls


def trainer(**kwargs: Any) -> L.Trainer:
    base = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False, num_sanity_val_steps=0, gradient_clip_val=5.0)
    base.update(kwargs)
    return L.Trainer(**base)


class StepTimer(Callback):
    """Wall-clock time of the training steps after ``warmup`` (batch fetch to optimiser step)."""

    def __init__(self, warmup: int = 2) -> None:
        self.warmup, self.start, self.end, self.steps, self.tokens = warmup, 0.0, 0.0, 0, 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if batch_idx == self.warmup:
            self.start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.end = time.perf_counter()
        if batch_idx >= self.warmup:
            self.steps += 1
            self.tokens += batch["targets"].numel()


def model_for(args: argparse.Namespace, cell: str, vocab_size: int) -> LanguageModel:
    return LanguageModel(cell_factory(cell), vocab_size=vocab_size, embedding_size=args.embedding_size,
                         hidden_size=args.hidden_size,
                         optimizer=functools.partial(torch.optim.Adam, lr=args.lr))


def budget_run(args: argparse.Namespace, dm: LanguageModelDataModule, cell: str) -> Dict[str, Any]:
    torch.manual_seed(args.seed)
    model = model_for(args, cell, dm.vocab_size)
    timer = StepTimer(warmup=0)
    t0 = time.perf_counter()
    trainer(max_time=timedelta(minutes=args.budget_minutes), max_epochs=1000, limit_val_batches=0,
            callbacks=[timer]).fit(model, dm)
    train_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    val = trainer().validate(model, dm, verbose=False)[0]
    return {"cell": cell, "params": sum(p.numel() for p in model.parameters()), "steps": timer.steps,
            "train_tok_s": timer.tokens / max(train_s, 1e-9), "train_s": train_s,
            "val_bpc": val["val/bpc"], "eval_s": time.perf_counter() - t1}


def bare_tokens_per_s(args: argparse.Namespace, cell: str, vocab_size: int, full: bool) -> float:
    """Bare loop: ``Recurrent`` (or the whole network when ``full``) fwd + bwd + Adam step."""
    torch.manual_seed(args.seed)
    b, t = args.batch_size, args.bptt
    if full:
        net = model_for(args, cell, vocab_size)
        tokens = torch.randint(vocab_size, (b, t + 1))
    else:
        net = Recurrent(cell_factory(cell), args.embedding_size, args.hidden_size, batch_first=True)
        x = torch.randn(b, t, args.embedding_size)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    state, elapsed, n = None, 0.0, 0
    for i in range(args.throughput_steps + 2):
        start = time.perf_counter()
        if full:
            logits, state, _ = net(tokens[:, :-1], state)
            loss = F.cross_entropy(logits.reshape(-1, vocab_size), tokens[:, 1:].reshape(-1))
        else:
            out, state = net(x, state)
            loss = out.square().mean()
        state = state.detach() if isinstance(state, torch.Tensor) else tuple(
            s.detach() if isinstance(s, torch.Tensor) else tuple(u.detach() for u in s) for s in state)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
        opt.step()
        if i >= 2:
            elapsed += time.perf_counter() - start
            n += b * t
    return n / elapsed


def task_tokens_per_s(args: argparse.Namespace, dm: LanguageModelDataModule, cell: str) -> float:
    torch.manual_seed(args.seed)
    timer = StepTimer(warmup=2)
    trainer(max_epochs=1, limit_train_batches=args.throughput_steps + 2, limit_val_batches=0,
            callbacks=[timer]).fit(model_for(args, cell, dm.vocab_size), dm)
    return timer.tokens / (timer.end - timer.start)


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=None, help="PTB folder (default $LIT_RNNCELLS_DATA/ptb)")
    p.add_argument("--cells", nargs="+", default=["GRU", "GRUDT", "CARU", "MuFuRU", "SatMZU", "CapMZU"])
    p.add_argument("--budget-minutes", type=float, default=10.0)
    p.add_argument("--hidden-size", type=int, default=512)
    p.add_argument("--embedding-size", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--eval-batch-size", type=int, default=64)
    p.add_argument("--bptt", type=int, default=150)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--throughput-steps", type=int, default=10)
    p.add_argument("--throughput-cells", nargs="+", default=["GRU"])
    p.add_argument("--rounds", type=int, default=3, help="interleaved throughput repetitions (best is kept)")
    p.add_argument("--skip-budget", action="store_true")
    p.add_argument("--skip-throughput", action="store_true")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("WANDB_MODE", "disabled")
    dm = LanguageModelDataModule("ptb_char", args.data_dir, batch_size=args.batch_size,
                                 eval_batch_size=args.eval_batch_size, bptt=args.bptt)
    results: Dict[str, List[Dict[str, Any]]] = {"throughput": [], "budget": []}
    sizes = f"E={args.embedding_size} H={args.hidden_size} B={args.batch_size} bptt={args.bptt}, " \
            f"{args.threads} threads"
    print(f"load average at the start (1/5/15 min): {os.getloadavg()}")
    if not args.skip_throughput:
        print(f"\n(b) training throughput, tokens/s ({sizes}, {args.throughput_steps} timed steps)\n")
        print("| cell | bare Recurrent | bare network | task loop (Trainer.fit) | task / bare Recurrent "
              "| task / bare network |\n|---|---|---|---|---|---|")
        for cell in args.throughput_cells:
            runs: Dict[str, List[float]] = {"rnn": [], "net": [], "task": []}
            for _ in range(args.rounds):  # interleaved; best of each resists load from other processes
                runs["rnn"].append(bare_tokens_per_s(args, cell, dm.vocab_size, full=False))
                runs["net"].append(bare_tokens_per_s(args, cell, dm.vocab_size, full=True))
                runs["task"].append(task_tokens_per_s(args, dm, cell))
                print(f"  round: bare Recurrent {runs['rnn'][-1]:,.0f}, bare network {runs['net'][-1]:,.0f}, "
                      f"task loop {runs['task'][-1]:,.0f} tokens/s", flush=True)
            rnn, net, task = max(runs["rnn"]), max(runs["net"]), max(runs["task"])
            results["throughput"].append({"cell": cell, "bare_rnn": rnn, "bare_net": net, "task": task})
            print(f"| {cell} | {rnn:,.0f} | {net:,.0f} | {task:,.0f} | {task / rnn:.3f} | {task / net:.3f} |",
                  flush=True)
    if not args.skip_budget:
        print(f"\n(a) PTB char, {args.budget_minutes:g} min training per model ({sizes}, Adam {args.lr}, "
              "clip 5, no dropout); validation BPC over the whole split\n")
        print("| cell | params | steps | train tokens/s | valid BPC |\n|---|---|---|---|---|")
        for cell in args.cells:
            r = budget_run(args, dm, cell)
            results["budget"].append(r)
            print(f"| {cell} | {r['params']:,} | {r['steps']} | {r['train_tok_s']:,.0f} | {r['val_bpc']:.3f} |",
                  flush=True)
    print(f"\nload average at the end (1/5/15 min): {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
