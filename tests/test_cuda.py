"""On a CUDA device: every cell equals itself on CPU (eager, compiled, and compiled as CUDA graphs), LSTM,
GRU and Elman run through cuDNN, bf16 and fp16 autocast work, and two GPUs under DDP train as one GPU on the
doubled batch.

Marked ``cuda``; skipped, with the reason, where torch sees no CUDA device (``-m cuda`` selects them).
"""
from __future__ import annotations

import copy
from typing import Dict

import pytest
import torch

from lit_rnncells.cells import available_cells, get_cell
from lit_rnncells.nn import Recurrent
from lit_rnncells.nn.compiled import MODE_VARIABLE

from .cell_cases import cell_cases
from .test_compiled import INPUT, HIDDEN, _assert_same, _run, set_compiled_pays

CASES = cell_cases()
NO_GPU = "needs a CUDA device; torch.cuda.is_available() is False on this machine"
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)]


@pytest.fixture(autouse=True)
def compile_every_cell_on_cuda(monkeypatch):
    """Elman and GRU keep their eager step on CUDA for speed (the backend table's ``compiled_pays`` False); they
    compile here, so their compiled step is tested on CUDA too."""
    for name in available_cells():
        set_compiled_pays(monkeypatch, get_cell(name), "cuda", True)


@pytest.fixture(autouse=True)
def full_precision_cudnn(monkeypatch):
    """cuDNN may run its fused LSTM in TF32 on Ampere and later (``torch.backends.cudnn.allow_tf32`` is on by
    default), about 3 decimal digits: the equality tests compare float32 with float32."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)


def _to_cpu(result: Dict[str, object]) -> Dict[str, object]:
    return {"out": result["out"].cpu(), "state": tuple(s.cpu() for s in result["state"]), "aux": result["aux"].cpu(),
            "grads": {n: None if g is None else g.cpu() for n, g in result["grads"].items()}}


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("name", list(CASES))
def test_cell_on_cuda_equals_cpu_forward_and_backward(name: str, compiled: bool) -> None:
    _assert_cuda_equals_cpu(name, compiled)


@pytest.mark.parametrize("name", ["GRU", "SatMZU", "CapMZU", "GRUDT", "MuFuRU", "MultiChannel(LSTM,n=4)"])
def test_cuda_graph_step_equals_cpu(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled step recorded as CUDA graphs (``reduce-overhead``): two layers, both directions, padded and
    not, forward and backward, each step's graph replayed many times within one forward."""
    monkeypatch.setenv(MODE_VARIABLE, "reduce-overhead")
    _assert_cuda_equals_cpu(name, compiled=True)


@pytest.mark.parametrize("name", ["CARU", "SatMZU", "MultiChannel(LSTM,n=4)"])
def test_cuda_graph_step_without_gradients_equals_cpu(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without gradients (validation, encoding for decoding) each replay of a step's CUDA graph writes into the
    same memory; every step's state must survive until the outputs are computed after the loop."""
    monkeypatch.setenv(MODE_VARIABLE, "reduce-overhead")
    torch.manual_seed(0)
    cpu = Recurrent(CASES[name], INPUT, HIDDEN, num_layers=2, bidirectional=True, batch_first=True)
    gpu = copy.deepcopy(cpu).cuda()
    gpu.compiled = True
    x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(1))
    for lengths in (None, torch.tensor([5, 2, 4])):
        with torch.no_grad():
            want, want_state = cpu(x, lengths=lengths)
            for _ in range(2):  # the second forward replays the recorded graphs
                got, got_state = gpu(x.cuda(), lengths=None if lengths is None else lengths.cuda())
        torch.testing.assert_close(got.cpu(), want, atol=1e-4, rtol=1e-3)
        for a, b in zip(got_state if isinstance(got_state, tuple) else (got_state,),
                        want_state if isinstance(want_state, tuple) else (want_state,)):
            torch.testing.assert_close(a.cpu(), b, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"], ids=["compiled", "cuda-graphs"])
@pytest.mark.parametrize("cell", ["CARU", "SatMZU"])
def test_seq2seq_decodes_on_cuda_as_on_cpu(cell: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Greedy and beam-5 translations through the compiled step on CUDA, CUDA graphs included, are the CPU eager
    model's."""
    from lit_rnncells.nn.beam_search import SearchConfig

    from .test_seq2seq import make, pairs

    monkeypatch.setenv(MODE_VARIABLE, mode)
    cpu = make(torch.float32, cell=cell, num_layers=2).eval()
    gpu = make(torch.float32, cell=cell, num_layers=2, compile=True).eval()
    gpu.load_state_dict(cpu.state_dict())
    gpu = gpu.cuda()
    batch = pairs([5, 3, 7], [4, 1, 6])
    for beam in (1, 5):
        cfg = SearchConfig(beam_size=beam, max_length_b=5, max_length_a=0.0)
        with torch.no_grad():
            want = cpu.translate(batch["source"], batch["source_lengths"], cfg)
            got = gpu.translate(batch["source"].cuda(), batch["source_lengths"].cuda(), cfg)
        assert [[h.tokens for h in hyps] for hyps in got] == [[h.tokens for h in hyps] for hyps in want]
        for hyps_got, hyps_want in zip(got, want):
            assert [h.score for h in hyps_got] == pytest.approx([h.score for h in hyps_want], abs=1e-3)


def _assert_cuda_equals_cpu(name: str, compiled: bool) -> None:
    torch.manual_seed(0)
    cpu = Recurrent(CASES[name], INPUT, HIDDEN, num_layers=2, bidirectional=True, batch_first=True)
    gpu = copy.deepcopy(cpu).cuda()
    gpu.compiled = compiled
    x = torch.randn(3, 5, INPUT, generator=torch.Generator().manual_seed(1))
    lengths = torch.tensor([5, 2, 4])
    for lens in (None, lengths):
        want = _run(cpu, x, lens)
        got = _to_cpu(_run(gpu, x.cuda(), None if lens is None else lens.cuda()))
        _assert_same(want, got, atol=1e-4, rtol=1e-3)  # TF32 is off by default for matmuls in torch


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("name", ["LSTM", "GRU", "Elman"])
def test_fused_cells_run_through_cudnn(name: str, padded: bool) -> None:
    """Unpadded batches, and padded ones as packed sequences (``backend.FUSED_PACKED_DEVICES``), run cuDNN's kernel;
    ``_assert_cuda_equals_cpu`` checks their values against the CPU's step loop."""
    layer = Recurrent(name, INPUT, HIDDEN, batch_first=True).cuda()
    x = torch.randn(4, 6, INPUT, device="cuda")
    lengths = torch.tensor([6, 2, 5, 1], device="cuda") if padded else None
    with torch.autograd.profiler.profile() as prof:
        layer(x, lengths=lengths)[0].sum().backward()
        torch.cuda.synchronize()
    names = {e.name for e in prof.function_events}
    assert any("cudnn_rnn" in n for n in names), sorted(names)[:40]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("compiled", [False, True, "reduce-overhead"], ids=["eager", "compiled", "cuda-graphs"])
@pytest.mark.parametrize("name", ["GRU", "LSTM", "SatMZU", "MuFuRU", "MultiChannel(LSTM,n=4)"])
def test_autocast_on_cuda(name: str, compiled, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    if compiled == "reduce-overhead":
        monkeypatch.setenv(MODE_VARIABLE, compiled)
    torch.manual_seed(0)
    full = Recurrent(CASES[name], INPUT, HIDDEN, num_layers=2, bidirectional=True, batch_first=True).cuda()
    half = copy.deepcopy(full)
    half.compiled = bool(compiled)
    x = torch.randn(3, 5, INPUT, device="cuda")
    lengths = torch.tensor([5, 3, 1], device="cuda")
    want = _run(full, x, lengths)
    with torch.autocast("cuda", dtype=dtype):
        got = _run(half, x, lengths)
    assert got["state"][0].dtype == torch.float32  # the state keeps its precision
    _assert_same(want, got, atol=5e-2, rtol=5e-2)


@pytest.mark.slow
@pytest.mark.real_data
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
@pytest.mark.parametrize("compiled", ["false", "true"], ids=["eager", "compiled"])
def test_two_gpu_ddp_step_equals_one_gpu_on_the_doubled_batch(compiled: str, data_dir, tmp_path) -> None:
    from .test_reliability import assert_ddp_matches_one_process
    from .test_resume_and_ddp import logic

    cache = tmp_path / "cache"
    assert_ddp_matches_one_process(
        lambda devices, batch: logic(data_dir, cache, tmp_path / f"run{devices}", batch, 0.0)
        + ["--trainer.accelerator", "gpu", "--model.init_args.compile", compiled], tmp_path)


def test_device_cuda_builds_the_layer_on_the_gpu_and_runs_there() -> None:
    """``Recurrent(..., device="cuda")``, as torch.nn.GRU takes it."""
    layer = Recurrent("GRU", 4, 8, num_layers=2, device="cuda", dtype=torch.float32)
    assert {p.device.type for p in layer.parameters()} == {"cuda"}
    output, state = layer(torch.randn(5, 3, 4, device="cuda"))
    assert output.device.type == state.device.type == "cuda"
