"""Why MZU trailed GRU on PTB char at the CPU reproduction's size: a short ablation with gradient norms per zone.

Every variant trains the reproduction's PTB character model (embedding 64, batch 32, BPTT 100, locked dropout
0.1 on the output, Adam, gradient clip 5; ``python -m lit_rnncells.reproduce mzu``) for ``--steps`` optimiser
steps from the start of the training split, then measures validation BPC on the first ``--val-batches``
windows of the validation split. Unless a variant fixes its hidden size, it is matched to the parameters of a
GRU of 256 (≈263k), as the reproduction matches. One line per variant::

    LIT_RNNCELLS_DATA=<data folder> python scripts/ablate_mzu.py --steps 100 --seed 1
    LIT_RNNCELLS_DATA=<data folder> python scripts/ablate_mzu.py --only cap-repro cap-ln --seed 2

Columns: hidden size and parameters; the training BPC of the last 25 steps and the validation BPC; the
standard deviation of the M-function's output (the pre-activation of h~, before layer norm) at the first
and the last step, over a batch; and the gradient norms, averaged over the steps, of depth 0's parameters
by part: zone generation per zone (rows of ``W_i`` of eq. 4, M_h's zones), the zone composition
(Q/K/V, W_g or W^c), the FFN (eq. 5) and the final affine map, each for M_h and M_g, next to the
embedding's. A second table gives the per-zone gradient norms of the variants that have zones.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lit_rnncells.cells import MZU, get_cell  # noqa: E402
from lit_rnncells.data.language_model import EvalStreams, LanguageModelDataModule, TrainStreams  # noqa: E402
from lit_rnncells.experiments.param_match import count_parameters, match_hidden_size  # noqa: E402
from lit_rnncells.tasks import LanguageModel  # noqa: E402

LN2 = math.log(2.0)
PAPER = dict(layer_norm=True, candidate_dropout=0.5, share_transition=True)
"""The paper's PTB settings beyond the reproduction's (zones 4, J 2, T 3 and λ 1 are the cells' defaults)."""


@dataclass
class Variant:
    """One ablation run: a cell with options, the learning rate, the task's auxiliary-loss weight, and a
    fixed hidden size (``None``: matched to the target parameter count)."""

    name: str
    cell: str
    options: Dict[str, Any] = field(default_factory=dict)
    lr: float = 1e-3
    aux_weight: float = 1.0
    hidden: Optional[int] = None


DT = dict(transition_depth=1)
VARIANTS: List[Variant] = [
    Variant("gru", "GRU"),
    Variant("gru-h136", "GRU", hidden=136),
    Variant("gru-h188", "GRU", hidden=188),
    Variant("grudt", "GRUDT", dict(DT)),
    Variant("cap-repro", "CapMZU", dict(DT)),
    Variant("cap-ln", "CapMZU", dict(DT, layer_norm=True)),
    Variant("cap-ln-drop", "CapMZU", dict(DT, layer_norm=True, candidate_dropout=0.5)),
    Variant("cap-ln-shared", "CapMZU", dict(DT, layer_norm=True, share_transition=True)),
    Variant("cap-paper", "CapMZU", dict(DT, **PAPER)),
    Variant("cap-lambda0", "CapMZU", dict(DT, disagreement_weight=0.0)),
    Variant("cap-ln-lambda0", "CapMZU", dict(DT, layer_norm=True, disagreement_weight=0.0)),
    Variant("cap-lr3e-3", "CapMZU", dict(DT), lr=3e-3),
    Variant("cap-zones2", "CapMZU", dict(DT, zones=2)),
    Variant("cap-h256", "CapMZU", dict(DT), hidden=256),
    Variant("cap-ln-h256", "CapMZU", dict(DT, layer_norm=True), hidden=256),
    Variant("sat-repro", "SatMZU", dict(DT)),
    Variant("sat-ln", "SatMZU", dict(DT, layer_norm=True)),
]


def build(variant: Variant, vocab: int, hidden: int, dropout: float) -> LanguageModel:
    factory = partial(get_cell(variant.cell), **variant.options)
    return LanguageModel(cell=factory, vocab_size=vocab, embedding_size=64, hidden_size=hidden, dropout=dropout,
                         aux_loss_weight=variant.aux_weight)


def matched_hidden(variant: Variant, vocab: int, target: int) -> int:
    def count(h: int) -> Optional[int]:
        try:
            return count_parameters(build(variant, vocab, h, 0.0))
        except ValueError:
            return None
    return match_hidden_size(count, target, variant.name).hidden_size


def part_norms(model: LanguageModel) -> Dict[str, float]:
    """Gradient norms of depth 0's parameters by part and M-function (index 0 = M_h, 1 = M_g), and per zone."""
    cell = model.rnns[0].module.cells[0]
    out = {"embedding": model.embedding.weight.grad.norm().item()}
    if not isinstance(cell, MZU):
        grads = [p.grad for n, p in cell.named_parameters() if "weight_hh" in n and p.grad is not None]
        out["recurrent W_hh"] = grads[0].norm().item()
        return out
    block, dh = cell.blocks[0], cell.hidden_size
    zf = block.zone_fns
    dz = dh // cell.zones
    gen = torch.cat([cell.weight_ih.grad, block.weight_hh.grad], dim=1)  # (2 d_h, d_x + d_h)
    parts = {"sat": ("w_qkv",), "gcn": ("w_g",), "cap": ("w_c",)}[zf.composition]
    for m, which in enumerate(("M_h", "M_g")):
        rows = gen[m * dh:(m + 1) * dh]
        out[f"{which} generation"] = rows.norm().item()
        for z in range(cell.zones):
            out[f"{which} zone {z + 1}"] = rows[z * dz:(z + 1) * dz].norm().item()
        out[f"{which} composition"] = math.sqrt(sum(getattr(zf, n).grad[m].norm().item() ** 2 for n in parts))
        out[f"{which} FFN"] = math.sqrt(sum(getattr(zf, n).grad[m].norm().item() ** 2
                                            for n in ("ffn_w1", "ffn_b1", "ffn_w2", "ffn_b2")))
        out[f"{which} out"] = math.sqrt(zf.out_w.grad[m].norm().item() ** 2 + zf.out_b.grad[m].norm().item() ** 2)
    return out


def m_output_std(model: LanguageModel, inputs: torch.Tensor) -> float:
    """Std over a batch of depth 0's M_h output (before layer norm) at the first step from a zero state; for a
    cell without M-functions, of its input projection (the GRU's gate and candidate pre-activations)."""
    cell = model.rnns[0].module.cells[0]
    if not isinstance(cell, MZU):
        with torch.no_grad():
            return cell.project_input(model.embedding(inputs[:, 0])).std(0).mean().item()
    with torch.no_grad():
        x = model.embedding(inputs[:, 0])
        h = torch.zeros(x.shape[0], cell.hidden_size)
        block = cell.blocks[0]
        gen = torch.addmm(cell.project_input(x), h, block.weight_hh.t())
        zf = block.zone_fns
        b = gen.shape[0]
        z = gen.view(b, 2, cell.hidden_size).transpose(0, 1).reshape(2, b, zf.zones, zf.zone_size)
        out, _ = zf(z)
        return out[0].std(0).mean().item()  # the part of M_h that depends on the input


def validate(model: LanguageModel, data: torch.Tensor, batches: int) -> float:
    model.eval()
    total, count, state = 0.0, 0, None
    with torch.no_grad():
        for i, batch in enumerate(EvalStreams(data, 10, 100)):
            if i >= batches:
                break
            logits, state, _ = model(batch["inputs"], state)
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["targets"].reshape(-1),
                                     reduction="sum").item()
            count += batch["targets"].numel()
    model.train()
    return total / count / LN2


def run(variant: Variant, dm: LanguageModelDataModule, target: int, args: argparse.Namespace) -> Dict[str, Any]:
    vocab = dm.vocab_size
    hidden = variant.hidden or matched_hidden(variant, vocab, target)
    torch.manual_seed(args.seed)
    model = build(variant, vocab, hidden, 0.1)
    opt = torch.optim.Adam(model.parameters(), lr=variant.lr)
    streams = TrainStreams(dm.splits["train"], 32, 100)
    norms: Dict[str, List[float]] = {}
    bpcs: List[float] = []
    std_first = std_last = float("nan")
    state, start = None, time.time()
    for step, batch in enumerate(streams):
        if step >= args.steps:
            break
        if step == 0:
            std_first = m_output_std(model, batch["inputs"])
        logits, state, extra = model(batch["inputs"], state)
        state = tuple(s.detach() if torch.is_tensor(s) else s for s in state)
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["targets"].reshape(-1))
        opt.zero_grad(set_to_none=True)
        (nll + variant.aux_weight * extra["aux"]).backward()
        for key, value in part_norms(model).items():
            norms.setdefault(key, []).append(value)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        bpcs.append(nll.item() / LN2)
        if step == args.steps - 1:
            std_last = m_output_std(model, batch["inputs"])
    return {"name": variant.name, "hidden": hidden, "params": count_parameters(model),
            "train": statistics.fmean(bpcs[-25:]), "val": validate(model, dm.splits["valid"], args.val_batches),
            "std0": std_first, "std1": std_last, "seconds": time.time() - start,
            "norms": {k: statistics.fmean(v) for k, v in norms.items()}}


COLUMNS = ["embedding", "recurrent W_hh", "M_h generation", "M_h composition", "M_h FFN", "M_h out",
           "M_g generation", "M_g composition", "M_g FFN", "M_g out"]


def row_line(r: Dict[str, Any]) -> str:
    """One variant's line of the main table."""
    cells = [f"{r['norms'][c]:.3f}" if c in r["norms"] else "–" for c in COLUMNS]
    std = "–" if math.isnan(r["std0"]) else f"{r['std0']:.3f} → {r['std1']:.3f}"
    return (f"| {r['name']} | {r['hidden']} | {r['params']:,} | {r['train']:.3f} | {r['val']:.3f} | {std} | "
            + " | ".join(cells) + " |")


def print_tables(rows: Sequence[Dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\nPTB char, {args.steps} steps, seed {args.seed}, validation BPC on {args.val_batches} windows")
    print("| variant | hidden | params | train BPC (last 25) | val BPC | std M_h(x) start → end | "
          + " | ".join(f"‖∇‖ {c}" for c in COLUMNS) + " |")
    print("|---|" + "---|" * (5 + len(COLUMNS)))
    for r in rows:
        print(row_line(r))
    zoned = [r for r in rows if "M_h zone 1" in r["norms"]]
    if zoned:
        print("\nGradient norm per zone of zone generation (rows of W_i, eq. 4), mean over steps")
        print("| variant | M_h zones | M_g zones |")
        print("|---|---|---|")
        for r in zoned:
            zones = sorted(int(k.rsplit(" ", 1)[1]) for k in r["norms"] if k.startswith("M_h zone "))
            fmt = lambda m: ", ".join(f"{r['norms'][f'{m} zone {z}']:.3f}" for z in zones)  # noqa: E731
            print(f"| {r['name']} | {fmt('M_h')} | {fmt('M_g')} |")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=100, help="optimiser steps per variant")
    ap.add_argument("--val-batches", type=int, default=20, help="validation windows (10 streams x 100 chars)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", nargs="+", choices=[v.name for v in VARIANTS], help="run only these variants")
    ap.add_argument("--init-only", action="store_true",
                    help="train nothing: print each variant's hidden size, parameters and the std over a batch of "
                         "its M_h output at initialisation (GRU: of its input projection)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on a loaded machine more threads only wait on each other)")
    args = ap.parse_args(argv)
    if not os.environ.get("LIT_RNNCELLS_DATA"):
        print("error: set LIT_RNNCELLS_DATA to the data folder holding ptb/ (PTB character level).", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    dm = LanguageModelDataModule("ptb_char", batch_size=32, bptt=100)
    target = count_parameters(build(Variant("gru", "GRU"), dm.vocab_size, 256, 0.0))
    rows = []
    for variant in VARIANTS:
        if args.only and variant.name not in args.only:
            continue
        if args.init_only:
            hidden = variant.hidden or matched_hidden(variant, dm.vocab_size, target)
            torch.manual_seed(args.seed)
            model = build(variant, dm.vocab_size, hidden, 0.1)
            first = next(iter(TrainStreams(dm.splits["train"], 32, 100)))["inputs"]
            print(f"| {variant.name} | {hidden} | {count_parameters(model):,} | {m_output_std(model, first):.4f} |")
            continue
        row = run(variant, dm, target, args)
        rows.append(row)
        zones = ", ".join(f"{k.split(' zone ')[0]} z{k.rsplit(' ', 1)[1]} {v:.3f}" for k, v in row["norms"].items()
                          if " zone " in k)
        print(f"ablate: {row['name']}: hidden {row['hidden']}, val BPC {row['val']:.3f}, {row['seconds']:.0f} s\n"
              f"  {row_line(row)}\n  per zone: {zones or '–'}", file=sys.stderr, flush=True)
    if rows:
        print_tables(rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
