"""Decoding with ``backend: compiled`` (or ``graphs``) ÷ without, greedy and beam 5, on Multi30k De-En test sources.

For each cell, one attentional ``Seq2Seq`` (the cell in the encoder and the decoder) and its ``--backend``
twin with the same weights decode the first ``--sentences`` test sources, greedy and beam 5, ``--batch-size``
sources at a time (beam 5 steps 5x as many rows). Eager and compiled decodes alternate over ``--rounds``
interleaved rounds in a seeded random order; the ratio is taken within each round and its median printed,
beside the time per decoder row (one hypothesis at one target position), the share of sentences whose tokens
the two decoders agree on, and the compile time (the compiled decoder's first call beyond its steady time)
apart. The weights are untrained, so hypotheses run to the length cap (2|src| + 10) and the row counts are
the decoder's work, not a translation's. One thread unless ``--threads``. Needs ``$LIT_RNNCELLS_DATA``.

    python scripts/bench_compile_decode.py                          # the default cells, H256 E128
    python scripts/bench_compile_decode.py --cells SatMZU --rounds 7
    python scripts/bench_compile_decode.py --force-compile          # also compile the cells kept eager on CPU
    python scripts/bench_compile_decode.py --device cuda            # on a GPU (every cell's step compiles)
    python scripts/bench_compile_decode.py --quick                  # tiny sizes, checks the script runs
    python scripts/bench_compile_decode.py --device cuda --backend graphs   # each decoding step a replayed CUDA
                                                                    # graph (nn/decode_graphs.py) ÷ eager

What it answers: whether decoding, which calls the step once per target position on batch × beam rows and
without gradients, gains from the compiled step (docs/measured.md, "Decoding").
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import replace
from typing import Any, Dict, List, Sequence

import torch

from lit_rnncells.nn.backend import let_compile
from lit_rnncells.nn.benchmark import RowCounter, compile_mode_header, interleaved_times, seconds
from lit_rnncells.cells import get_cell
from lit_rnncells.cells.registry import UnknownCellError
from lit_rnncells.data import TranslationDataModule
from lit_rnncells.data.batching import pad_batch
from lit_rnncells.nn.beam_search import search
from lit_rnncells.nn.compiled import use_compiled
from lit_rnncells.tasks import Seq2Seq
from lit_rnncells.tasks.seq2seq_options import DecodingConfig

DEFAULT_CELLS = ["GRU", "SatMZU", "GcnMZU", "CapMZU", "GRUDT", "MuFuRU"]


def data_module(data_dir: str, cache_dir: str, quick: bool) -> TranslationDataModule:
    """Multi30k De->En with the shipped config's joint 8k BPE (fitted on the first 4,000 training pairs)."""
    dm = TranslationDataModule("multi30k", data_dir=data_dir, source_language="de", target_language="en",
                               subwords={"subword_vocab_size": 500 if quick else 8000, "joint_vocabulary": True},
                               limit=4000,
                               cache_dir=cache_dir)
    dm.prepare_data()
    dm.setup("test")
    return dm


def twins(cell: str, dm: TranslationDataModule, hidden: int, embedding: int, device: torch.device,
          backend: str = "compiled") -> List[Seq2Seq]:
    """A Seq2Seq around ``cell`` under the default backend (``eager`` in the table: ``auto``) and its copy under
    ``backend`` with the same weights, in eval mode on ``device``."""
    torch.manual_seed(0)
    kwargs = dict(source_vocab_size=dm.source_vocab_size, target_vocab_size=dm.target_vocab_size,
                  pad_id=dm.pad_id, bos_id=dm.bos_id, eos_id=dm.eos_id, embedding_size=embedding,
                  hidden_size=hidden, num_layers=1, decoding=DecodingConfig(eval_metrics=()))
    eager = Seq2Seq(cell, **kwargs)
    compiled = Seq2Seq(cell, backend=backend, **kwargs)
    compiled.load_state_dict(eager.state_dict())
    return [eager.to(device).eval(), compiled.to(device).eval()]


def batches(dm: TranslationDataModule, count: int, batch_size: int, device: torch.device) -> List[tuple]:
    """The first ``count`` test sources (with <eos>) as padded ``(source, lengths)`` batches, in order."""
    sources = [s + [dm.eos_id] for s in dm.split("test")["source"][:count]]
    return [tuple(t.to(device) for t in pad_batch(sources[i:i + batch_size], dm.pad_id))
            for i in range(0, len(sources), batch_size)]


def decode(model: Seq2Seq, data: List[tuple], beam: int) -> Dict[str, Any]:
    """The decoder rows computed over every batch, and each sentence's best tokens."""
    cfg = replace(model.test_search, beam_size=beam, n_best=1, max_length_a=2.0, max_length_b=10,
                  return_attention=False)
    counted = RowCounter(model.decodable())  # under backend graphs on CUDA: the steps as CUDA graphs
    tokens: List[List[int]] = []
    with torch.no_grad():
        for source, lengths in data:
            tokens += [nbest[0].tokens for nbest in search(counted, source, lengths, cfg)]
    if data and data[0][0].is_cuda:
        torch.cuda.synchronize(data[0][0].device)
    return {"rows": counted.rows, "tokens": tokens}


def measure(cell: str, dm: TranslationDataModule, args: argparse.Namespace) -> List[Dict[str, Any]]:
    device = torch.device(args.device)
    models = dict(zip(("eager", "compiled"), twins(cell, dm, args.hidden, args.embedding, device, args.backend)))
    data = batches(dm, args.sentences, args.batch_size, device)
    results = []
    for name, beam in (("greedy", 1), ("beam 5", 5)):
        first = seconds(lambda: decode(models["compiled"], data, beam))  # compiles the no-gradient graph(s)
        outputs: Dict[str, Dict[str, Any]] = {}
        jobs = {mode: (lambda mode=mode: outputs.__setitem__(mode, decode(models[mode], data, beam)))
                for mode in models}
        times = interleaved_times(jobs, args.rounds, warmup=0, seed=args.seed)
        ratios = [c / e for e, c in zip(times["eager"], times["compiled"])]
        eager_s, compiled_s = statistics.median(times["eager"]), statistics.median(times["compiled"])
        same = sum(a == b for a, b in zip(outputs["eager"]["tokens"], outputs["compiled"]["tokens"]))
        rows = outputs["eager"]["rows"]
        results.append({"cell": cell, "decoder": name, "rows": rows,
                        "compiles": args.backend == "graphs" or use_compiled(models["compiled"].decoder_cells[0], device),
                        "backend": args.backend,
                        "eager_ms_row": 1000 * eager_s / rows, "compiled_ms_row": 1000 * compiled_s / rows,
                        "ratio": statistics.median(ratios), "best": min(ratios),
                        "same": f"{same}/{len(outputs['eager']['tokens'])}",
                        "compile_s": max(0.0, first - compiled_s)})
    return results


def format_rows(rows: Sequence[Dict[str, Any]]) -> str:
    b = rows[0]["backend"] if rows else "compiled"
    step = "step compiled" if b == "compiled" else "steps as graphs"
    first = "compile s (first call)" if b == "compiled" else "capture s (first call)"
    out = [f"| cell | decoder | {step} | decoder rows | eager ms/row | {b} ms/row | "
           f"{b} ÷ eager (median of rounds) | best round | same tokens | {first} |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['cell']} | {r['decoder']} | {'yes' if r['compiles'] else 'no (eager)'} | {r['rows']:,} | "
                   f"{r['eager_ms_row']:.3f} | {r['compiled_ms_row']:.3f} | {r['ratio']:.2f} | {r['best']:.2f} | "
                   f"{r['same']} | {r['compile_s']:.1f} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--cells", nargs="+", default=DEFAULT_CELLS, help="registered cell names")
    parser.add_argument("--sentences", type=int, default=128, help="test sources decoded per run")
    parser.add_argument("--batch-size", type=int, default=32, help="sources per batch (beam 5: 5x the rows)")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--embedding", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved eager/compiled rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, ...")
    parser.add_argument("--seed", type=int, default=0, help="seeds the order within each round")
    parser.add_argument("--force-compile", action="store_true",
                        help="also compile the cells the backend table keeps eager on CPU")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 8 sentences, 1 round")
    parser.add_argument("--backend", choices=["compiled", "graphs"], default="compiled",
                        help="the twin timed against eager: compiled (default; the compiled step) or graphs (each "
                             "decoding step a replayed CUDA graph; CUDA only)")
    args = parser.parse_args(argv)
    if args.backend == "graphs" and torch.device(args.device).type != "cuda":
        print("error: --backend graphs replays CUDA graphs and needs --device cuda; use --backend compiled on the CPU.",
              file=sys.stderr)
        return 2
    data_dir = os.environ.get("LIT_RNNCELLS_DATA")
    if not data_dir or not os.path.isdir(os.path.join(data_dir, "multi30k")):
        print("error: no Multi30k copy found; set LIT_RNNCELLS_DATA to the folder holding multi30k/ "
              "(python -m lit_rnncells.data prepare multi30k fetches it).", file=sys.stderr)
        return 2
    for name in args.cells:
        try:
            get_cell(name)
        except UnknownCellError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    mode = compile_mode_header()  # or one error line and exit 2
    if args.quick:
        args.sentences, args.batch_size, args.hidden, args.embedding, args.rounds = 8, 4, 16, 16, 1
    torch.set_num_threads(args.threads)
    if args.force_compile:
        for name in args.cells:
            let_compile(get_cell(name), "cpu")
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        print(f"error: --device {args.device} needs a CUDA device and torch sees none; use --device cpu.",
              file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, {args.device}, {torch.get_num_threads()} CPU thread(s); no gradients; "
          f"{args.sentences} Multi30k test sources, {args.batch_size} per batch, H{args.hidden} E{args.embedding}; "
          f"{args.rounds} interleaved rounds; {mode}\n", flush=True)
    rows: List[Dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        dm = data_module(os.path.join(data_dir, "multi30k"), tmp, args.quick)
        for cell in args.cells:
            rows += measure(cell, dm, args)
            print("\n".join(format_rows(rows[-2:]).split("\n")[2:]), flush=True)
    print("\n" + format_rows(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
