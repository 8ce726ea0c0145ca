"""The benchmark and sweep scripts run (tiny settings), so they do not rot; no timing is asserted."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_script(*args: str) -> str:
    result = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_bench_cells_quick_lists_every_cell_with_mac_ratios():
    out = run_script("scripts/bench_cells.py", "--quick")
    for cell in ("torch.nn.GRU", "GRU", "LSTM", "MuFuRU", "CARU", "SatMZU", "GRUDT"):
        assert f"| {cell} |" in out
    gru_row = next(line for line in out.splitlines() if line.startswith("| GRU |"))
    assert gru_row.split("|")[7].strip() == "1.00"  # MAC ratio of GRU to itself


def test_bench_cells_padded_quick_times_padded_batches_beside_torch_packed():
    out = run_script("scripts/bench_cells.py", "--padded", "--quick", "--cells", "GRU", "CARU")
    for cell in ("torch.nn.GRU", "torch.nn.LSTM", "GRU", "CARU"):
        assert f"| {cell} | B4 T6 I8 H8 padded |" in out
    assert "MZU cells" not in out and "MC-RNN at" not in out


def test_sweep_logic_prints_a_table(tmp_path):
    out = run_script("scripts/sweep_logic.py", "--cells", "GRU", "--hidden", "4", "--seeds", "0", "--epochs", "1",
                     "--out", str(tmp_path), "--no-wandb", "--", "--data.init_args.train_size", "64",
                     "--data.init_args.val_size", "32", "--data.init_args.test_size", "32")
    assert "| hidden | GRU |" in out and "| 4 | " in out and "failed" not in out
    assert (tmp_path / "runs.csv").is_file()


def test_benchmarks_keep_freed_memory_on_glibc():
    """The benchmarks' allocator setting takes effect where glibc is the C library (here)."""
    import platform

    code = "from lit_rnncells.nn.benchmark import allocator_setting as a; print(a(False)); print(a(True))"
    out = run_script("-c", code).splitlines()
    expected = "malloc keeps freed memory" if platform.libc_ver()[0] == "glibc" else "system malloc defaults"
    assert out == [expected, "system malloc defaults"]


def test_bench_memory_quick_measures_each_variant_in_its_own_process():
    out = run_script("scripts/bench_memory.py", "--quick", "--cells", "GRU", "CARU")
    assert "| torch.nn.GRU |" in out and "| CARU |" in out and "ratio to torch.nn.GRU" in out


@pytest.mark.slow
def test_bench_memory_fit_reports_peaks_growth_and_memory_per_mac(tmp_path):
    """Four tiny PTB char fits through the command line (a tiny copy of the corpus)."""
    from .test_language_model import ptb_char_corpus

    folder = ptb_char_corpus(tmp_path / "ptb")
    out = run_script("scripts/bench_memory.py", "--fit", "GRU", "MuFuRU", "--fit-steps", "0", "2", "--fit-hidden",
                     "16", "--fit-embedding", "8", "--fit-batch", "2", "--fit-bptt", "10", "--data-dir", str(folder))
    rows = {line.split("|")[1].strip(): line.split("|")[2:-1] for line in out.splitlines() if line.startswith("| ")}
    assert rows["GRU"][0].strip() == "1,152"  # 3·16·8 input + 3·16·16 step multiply-adds per token
    assert rows["GRU"][-1].strip() == "1.00×" and "≤ 1.3×" in rows["MuFuRU"][-1]
    assert all(float(cells[1]) > 0 and float(cells[2]) >= float(cells[1]) * 0.9 for cells in
               (rows["GRU"], rows["MuFuRU"]))  # peaks in MiB: a process that trained holds about as much


def test_bench_memory_fit_without_data_says_where_to_point_it():
    env = {k: v for k, v in os.environ.items() if k != "LIT_RNNCELLS_DATA"}
    result = subprocess.run([sys.executable, "scripts/bench_memory.py", "--fit", "GRU"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 1 and result.stderr.startswith("error: --fit trains on PTB char; set LIT_RNNCELLS_DATA")


def test_bench_gpu_runs_on_cpu_at_tiny_sizes():
    out = run_script("scripts/bench_gpu.py", "--device", "cpu", "--tiny", "--cells", "GRU", "MuFuRU")
    for cell in ("GRU", "MuFuRU"):
        for mode in ("eager", "compiled"):
            assert f"| {cell} | {mode} | B4 T6 I8 H8 |" in out
    assert "time ÷ torch.nn.GRU" in out and "| n/a |" in out  # no CUDA peak memory on CPU


def test_bench_gpu_times_the_deferred_loop_on_cpu_without_compiling():
    out = run_script("scripts/bench_gpu.py", "--device", "cpu", "--tiny", "--cells", "GRUDT", "--backends", "eager",
                     "loop-deferred")
    assert "| GRUDT | eager | B4 T6 I8 H8 |" in out and "| GRUDT | loop-deferred | B4 T6 I8 H8 |" in out
    assert "| compiled |" not in out


def test_bench_gpu_a_backend_that_fails_is_one_row_and_the_others_are_timed(monkeypatch, capsys):
    """On an H200 the graphs with deferred weight gradients failed to capture for CARU, MGU and satMZU
    (docs/measured.md): that row says so, and the run goes on to the other rows and cells."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_gpu_for_test", ROOT / "scripts" / "bench_gpu.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    real = bench.twin_job

    def twin_job(eager, x, name, defer, capture_compiled=False):
        if type(eager.cell()).__name__ == "CARU":
            raise RuntimeError("CUDA error: dependency created on uncaptured work in another stream\nmore")
        return real(eager, x, name, defer, capture_compiled)

    monkeypatch.setattr(bench, "twin_job", twin_job)
    assert bench.main(["--device", "cpu", "--tiny", "--cells", "CARU", "GRU", "--backends", "eager",
                       "loop-deferred"]) == 0
    captured = capsys.readouterr()
    assert "| CARU | loop-deferred | B4 T6 I8 H8 | failed: CUDA error: dependency created on uncaptured work in " \
           "another stream | | | | | |" in captured.out
    assert "| CARU | eager | B4 T6 I8 H8 |" in captured.out and "| GRU | loop-deferred | B4 T6 I8 H8 |" in captured.out
    assert "bench_gpu: CARU loop-deferred failed: CUDA error" in captured.err


def test_bench_gpu_refuses_the_graphs_rows_without_cuda_in_one_line():
    for backends in (["graphs"], ["eager", "graphs-deferred"], ["graphs-compiled"]):
        result = subprocess.run([sys.executable, "scripts/bench_gpu.py", "--device", "cpu", "--tiny", "--backends",
                                 *backends], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == ("error: --backends graphs, graphs-deferred and graphs-compiled need a CUDA device; "
                                 "drop them or use --device cuda\n")


def test_bench_gpu_refuses_an_unknown_compile_mode_in_one_line():
    env = {**os.environ, "LIT_RNNCELLS_COMPILE_MODE": "cudagraphs"}
    result = subprocess.run([sys.executable, "scripts/bench_gpu.py", "--device", "cpu", "--tiny"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: LIT_RNNCELLS_COMPILE_MODE='cudagraphs' is not a torch.compile mode; "
                                    "set it to one of default, reduce-overhead")
    assert len(result.stderr.strip().splitlines()) == 1


def test_bench_cells_compile_quick_prints_the_ratio_table():
    out = run_script("scripts/bench_cells.py", "--compile", "--quick", "--cells", "GRU")
    assert "| GRU | B4 T6 I8 H8 | no (eager) |" in out and "compiled ÷ eager" in out


def test_bench_cells_parameter_gradients_quick_prints_the_share_table():
    out = run_script("scripts/bench_cells.py", "--compile", "--parameter-gradients", "--quick", "--cells", "GRU")
    assert "parameter gradients' share, eager" in out and "| GRU | B4 T6 I8 H8 |" in out


def _bench_cells_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_cells_for_test", ROOT / "scripts" / "bench_cells.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_step_breakdown_finds_the_products_and_the_compiled_calls_parts_in_the_profile():
    """The profiler events the breakdown table sums are the ones this torch emits: an eager step has products
    and nothing compiled; a compiled step has products, call overhead and fused kernels."""
    import torch

    from lit_rnncells.nn.benchmark import compiled_twin, train_step

    bench = _bench_cells_module()
    x = torch.randn(2, 5, 8)
    eager, compiled, _ = compiled_twin("SatMZU", 8, 8, x)
    eager_parts = bench.step_breakdown(train_step(eager, x))
    compiled_parts = bench.step_breakdown(train_step(compiled, x))
    assert eager_parts["products"] > 0 and eager_parts["call_overhead"] == 0 == eager_parts["fused_kernels"]
    assert all(compiled_parts[k] > 0 for k in ("products", "call_overhead", "fused_kernels")), compiled_parts


def test_bench_cells_breakdown_quick_prints_the_table():
    out = run_script("scripts/bench_cells.py", "--compile", "--breakdown", "--quick", "--cells", "CapMZU")
    assert "compiled: calls' overhead" in out and "| CapMZU | B4 T6 I8 H8 | yes |" in out


def test_bench_cells_on_a_missing_gpu_is_one_error_line():
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: scripts/gpu_check.sh runs the GPU tables")
    result = subprocess.run([sys.executable, "scripts/bench_cells.py", "--padded", "--quick", "--device", "cuda"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and result.stderr.startswith("error: --device cuda needs a CUDA GPU")
    assert result.stderr.count("\n") == 1


def test_bench_scan_quick_runs_a_cell_through_scan_with_the_eager_loops_values():
    out = run_script("scripts/bench_scan.py", "--quick", "--cells", "CARU")
    row = next(line for line in out.splitlines() if line.startswith("| CARU | 4 |"))
    assert float(row.strip("|").split("|")[-1]) < 1e-5  # the scan loop's largest difference from the eager loop


def test_frozen_copy_runs_the_recurrence_backward_without_weight_gradients():
    """The frozen twin the parameter-gradient table times: the gradient reaches the input through every step,
    no parameter gets one, and the original module keeps training."""
    import torch

    from lit_rnncells.nn import Recurrent

    bench = _bench_cells_module()
    layer = Recurrent("SatMZU", 4, 8, batch_first=True)
    frozen = bench.frozen_copy(layer)
    x = torch.randn(2, 5, 4, requires_grad=True)
    frozen(x)[0][:, -1].sum().backward()
    assert x.grad is not None and x.grad[:, 0].abs().sum() > 0  # the first step's input: through all steps
    assert all(p.grad is None and not p.requires_grad for p in frozen.parameters())
    assert all(p.requires_grad for p in layer.parameters())


def test_bench_compile_tasks_quick_times_real_fits_both_ways(data_dir):
    """A real PTB char fit eager and compiled through the command line, and the ratio table."""
    out = run_script("scripts/bench_compile_tasks.py", "--quick", "--jobs", "ptb_gru")
    assert "| job | eager s/step | compiled s/step | tokens/s compiled ÷ eager |" in out
    row = next(line for line in out.splitlines() if line.startswith("| ptb_gru |"))
    assert float(row.split("|")[2]) > 0 and float(row.split("|")[3]) > 0


def test_bench_compile_tasks_on_gpu_without_one_is_one_error_line():
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: the GPU fits would run")
    result = subprocess.run([sys.executable, "scripts/bench_compile_tasks.py", "--accelerator", "gpu"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("error: --accelerator gpu needs a CUDA device, and torch sees none here; leave it out to "
                             "run on the CPU\n")


def test_bench_compile_decode_quick_decodes_real_sources_both_ways(data_dir):
    """Greedy and beam 5 over Multi30k test sources, eager and compiled with the same weights: GRU keeps its
    eager step on CPU (so both decoders give the same tokens), satMZU's step compiles."""
    out = run_script("scripts/bench_compile_decode.py", "--quick", "--cells", "GRU", "SatMZU")
    rows = {(cols[1].strip(), cols[2].strip()): cols for cols in
            (line.split("|") for line in out.split("\n\n")[-1].splitlines()[2:])}
    assert set(rows) == {(c, d) for c in ("GRU", "SatMZU") for d in ("greedy", "beam 5")}
    assert rows[("GRU", "greedy")][3].strip() == "no (eager)" and rows[("SatMZU", "greedy")][3].strip() == "yes"
    assert rows[("GRU", "greedy")][9].strip() == rows[("GRU", "beam 5")][9].strip() == "8/8"
    assert rows[("SatMZU", "beam 5")][9].strip().endswith("/8")  # compiled: equal within float tolerance only
    greedy, beam = (int(rows[("SatMZU", decoder)][4].replace(",", "")) for decoder in ("greedy", "beam 5"))
    assert greedy > 0 and beam > greedy  # beam 5 steps more rows


def test_bench_compile_decode_refuses_graphs_without_cuda_in_one_line():
    result = subprocess.run([sys.executable, "scripts/bench_compile_decode.py", "--quick", "--backend", "graphs"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("error: --backend graphs replays CUDA graphs and needs --device cuda; use --backend "
                             "compiled on the CPU.\n")


def test_bench_compile_decode_names_a_missing_data_folder(tmp_path):
    import os

    env = {**os.environ, "LIT_RNNCELLS_DATA": str(tmp_path)}
    result = subprocess.run([sys.executable, "scripts/bench_compile_decode.py", "--quick"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith("error: no Multi30k copy found")


def test_gpu_check_refuses_a_machine_without_cuda_and_a_used_folder(tmp_path):
    """scripts/gpu_check.sh runs the GPU checks on the first CUDA machine; without one it is one error line."""
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: run bash scripts/gpu_check.sh itself")
    used = tmp_path / "used"
    used.mkdir()
    (used / "cuda_tests.txt").write_text("an earlier run's output")
    result = subprocess.run(["bash", "scripts/gpu_check.sh", str(used)], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2 and result.stderr.startswith(f"error: {used} already holds files")
    assert (used / "cuda_tests.txt").read_text() == "an earlier run's output"
    result = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "new")], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith("error: torch sees no CUDA device here")
    assert not (tmp_path / "new").exists()


def test_gpu_check_names_an_unknown_stage_before_anything_runs(tmp_path):
    result = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "new"), "tests", "cell"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.startswith("error: unknown stage 'cell'; pick from: tests cells")
    assert "padded" in result.stderr
    assert result.stderr.count("\n") == 1 and not (tmp_path / "new").exists()
    result = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "new"), "reproduce-caru+whole-test"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)  # a stage of a group run at once
    assert result.returncode == 2 and result.stderr.startswith("error: unknown stage 'whole-test'; pick from:")
    assert not (tmp_path / "new").exists()


def test_gpu_check_names_a_bad_stage_limit_before_anything_runs(tmp_path):
    result = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "new"), "tests"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "GPU_CHECK_STAGE_SECONDS": "2m"})
    assert result.returncode == 2 and result.stderr.startswith("error: GPU_CHECK_STAGE_SECONDS='2m' is not a whole")
    assert result.stderr.count("\n") == 1 and not (tmp_path / "new").exists()


def _gpu_check_stages() -> dict:
    """Each stage of scripts/gpu_check.sh and its command, as the script's ``case`` lines give them."""
    import re

    text = (ROOT / "scripts" / "gpu_check.sh").read_text()
    stages = {}
    for names, cmd in re.findall(r'^    ([a-z|-]+)\) cmd="(.*)" ;;$', text, flags=re.M):
        for stage in names.split("|"):
            stages[stage] = cmd.replace("${stage#reproduce-}", stage.removeprefix("reproduce-")).replace(
                "$stage", stage)
    return stages


# Parses each command given as JSON argv lists, in this one interpreter (torch and Lightning imported once, not
# once a stage), and prints one JSON line per command. ``ArgumentParser.parse_args`` is wrapped to stop the command
# right after its options parse, so nothing runs; an unknown option, a bad choice or a bad number is argparse's
# exit code 2, with its message.
_PARSE_EACH = """
import argparse, contextlib, io, json, runpy, sys

class Parsed(Exception):
    pass

parse_args = argparse.ArgumentParser.parse_args

def parse_then_stop(self, args=None, namespace=None):
    parse_args(self, args, namespace)
    raise Parsed

argparse.ArgumentParser.parse_args = parse_then_stop
for words in json.loads(sys.argv[1]):
    module = words[1] if words[0] == "-m" else None
    sys.argv = [module or words[0], *words[2 if module else 1:]]
    err, outcome = io.StringIO(), "ran past its options"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            if module:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(words[0], run_name="__main__")
        except Parsed:
            outcome = "parsed"
        except SystemExit as stop:
            outcome = f"exit {stop.code}"
    print(json.dumps({"outcome": outcome, "err": err.getvalue()[-2000:]}))
"""


def test_every_gpu_check_stage_command_parses_its_options_here():
    """A lent GPU's minutes are few: each stage's command line is parsed here by its own parser, stopped right
    after parsing (an unknown option, a bad choice or value fails), and each pytest stage's test file exists. The
    commands are parsed in one interpreter, so torch is imported once."""
    import json
    import shlex

    stages = _gpu_check_stages()
    named = (ROOT / "scripts" / "gpu_check.sh").read_text().split('STAGES="', 1)[1].split('"', 1)[0].split()
    assert sorted(stages) == sorted(named)
    commands = {}
    for stage, cmd in stages.items():
        words = shlex.split(cmd.replace("env $graphs ", "").replace("$out", "results").replace("$minutes", "8"))
        assert words[0] == "python", (stage, cmd)
        if words[1:3] == ["-m", "pytest"]:
            assert (ROOT / words[3]).is_file(), stage
            continue
        commands[stage] = words[1:]
    result = subprocess.run([sys.executable, "-c", _PARSE_EACH, json.dumps(list(commands.values()))],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    outcomes = [json.loads(line) for line in result.stdout.splitlines() if line.startswith('{"outcome"')]
    assert len(outcomes) == len(commands), result.stdout[-3000:]
    for stage, outcome in zip(commands, outcomes):
        assert outcome["outcome"] == "parsed", (stage, outcome)


@pytest.mark.slow
def test_measure_startup_times_a_paper_size_run_up_to_its_first_step():
    if not os.environ.get("LIT_RNNCELLS_DATA"):
        pytest.skip("LIT_RNNCELLS_DATA is not set: the paper-size run reads PTB char from it")
    out = run_script("scripts/measure_startup.py", "--cells", "GRU", "--repeats", "1")
    row = next(ln for ln in out.splitlines() if ln.startswith("| GRU |"))
    imported, built, loaded, first = (float(v) for v in row.strip("| \n").split(" | ")[1:])
    assert 0 < imported < built <= loaded <= first


def test_measure_startup_without_data_says_where_to_point_it():
    env = {k: v for k, v in os.environ.items() if k != "LIT_RNNCELLS_DATA"}
    result = subprocess.run([sys.executable, "scripts/measure_startup.py"], cwd=ROOT, env=env, capture_output=True,
                            text=True)
    assert result.returncode == 1 and result.stderr.strip().startswith("error: LIT_RNNCELLS_DATA is not set")
    assert len(result.stderr.strip().splitlines()) == 1


def test_test_time_by_module_sums_each_file_and_shares_the_files_between_workers(tmp_path):
    log = tmp_path / "pytest.log"
    log.write_text("============ slowest durations ============\n"
                   "30.00s call     tests/test_a.py::test_one\n"
                   "2.50s setup    tests/test_a.py::test_one\n"
                   "10.00s call     tests/test_b.py::test_x[1]\n"
                   "10.00s call     tests/test_b.py::test_x[2]\n"
                   "10.00s call     tests/test_b.py::test_x[3]\n"
                   "0.50s teardown tests/test_c.py::TestK::test_y\n"
                   "1 passed in 63.00s\n")
    out = run_script("scripts/test_time_by_module.py", str(log), "--workers", "2")
    assert "| tests/test_a.py | 32.5 | 1 |" in out and "| tests/test_b.py | 30.0 | 3 |" in out
    assert "| tests/test_c.py | 0.5 | 1 |" in out
    assert "3 files, 63 s of tests; 2 workers: at best 32 s each" in out  # 31.5, printed to the second
    # loadscope's order hands out b (3 tests) first, then a, then c to the less loaded: 30.5 / 32.5
    assert "loadscope's order (most tests first): 30 / 32 s" in out
    assert "slowest file first:                   32 / 30 s" in out
    missing = subprocess.run([sys.executable, "scripts/test_time_by_module.py", str(tmp_path / "none.log")],
                             cwd=ROOT, capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.startswith("error: ") and len(missing.stderr.splitlines()) == 1
