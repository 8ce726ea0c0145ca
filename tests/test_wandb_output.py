"""What the default W&B logger prints, through the command line as a user runs it: with stdout and stderr
redirected to files no ANSI escape code reaches either (W&B's own service process used to print the end-of-run
lines, always coloured, to stdout); on a terminal W&B's lines keep their colours. W&B runs offline here (no
account, no network), as for a user who has not logged in."""
from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[1]
ESCAPE = "\x1b["
STYLE = re.compile(r"\x1b\[[0-9;]*m")
# A tiny fit that needs no data: the logic task generates its formulas (one epoch of 2 batches, then test).
FIT = [sys.executable, "-m", "lit_rnncells", "fit", "--config", str(ROOT / "configs" / "logic" / "gru.yaml"),
       "--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false",
       "--data.init_args.train_size", "64", "--data.init_args.val_size", "32", "--data.init_args.test_size", "32"]


def _env(tmp_path: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}  # no account, key or mode given
    return {**env, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path / "wandb_home"),
            "WANDB_CONFIG_DIR": str(tmp_path / "wandb_config"), "WANDB_CACHE_DIR": str(tmp_path / "wandb_cache"),
            "NETRC": str(tmp_path / "no_netrc"), "LIT_RNNCELLS_RUN_DIR": "", "TERM": "xterm-256color"}


def _offline_run(tmp_path: Path) -> Path:
    runs = sorted((tmp_path / "runs").glob("*/wandb/offline-run-*"))
    assert len(runs) == 1, runs
    return runs[0]


def test_redirected_output_has_no_colour_codes_and_keeps_the_sync_line(tmp_path: Path) -> None:
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.run(FIT, cwd=tmp_path, env=_env(tmp_path), stdin=subprocess.DEVNULL, stdout=stdout,
                              stderr=stderr, timeout=600)
    printed_out, printed_err = out.read_text(), err.read_text()
    assert proc.returncode == 0, printed_err[-3000:]
    assert ESCAPE not in printed_out, [line for line in printed_out.splitlines() if ESCAPE in line]
    assert ESCAPE not in printed_err, [line for line in printed_err.splitlines() if ESCAPE in line]
    run = _offline_run(tmp_path)
    # nothing W&B said is lost: where the offline run is, and the command that uploads it, as plain lines
    assert f"wandb: Run data is saved locally in {run}" in printed_err
    assert f"wandb: wandb sync {run}" in printed_err
    assert "wandb:" not in printed_out  # stdout holds the run's own lines only (W&B's go to stderr)
    # W&B's end-of-run tables are left out: the command line printed the metrics already
    assert "Run history:" not in printed_err and "Run summary:" not in printed_err


def _read_terminal(command: List[str], tmp_path: Path, timeout: float = 600) -> str:
    """Run ``command`` with stdin, stdout and stderr on a pseudo-terminal; everything it printed there."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(command, cwd=tmp_path, env=_env(tmp_path), stdin=slave, stdout=slave, stderr=slave,
                            close_fds=True)
    os.close(slave)  # the child holds the terminal now: reading ends (EIO) when every holder has closed it
    chunks: List[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None and not select.select([master], [], [], 0.5)[0]:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last writer has gone
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=max(1.0, deadline - time.monotonic())) == 0, b"".join(chunks)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return b"".join(chunks).decode("utf-8", errors="replace")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pseudo-terminals as Linux opens them")
def test_on_a_terminal_wandb_lines_keep_their_colours(tmp_path: Path) -> None:
    printed = _read_terminal(FIT, tmp_path)
    run = _offline_run(tmp_path)
    wandb_lines = [line for line in printed.splitlines() if STYLE.sub("", line).startswith("wandb:")]
    assert wandb_lines, printed[-3000:]
    assert all(ESCAPE in line for line in wandb_lines), wandb_lines  # every W&B line, coloured as W&B colours it
    plain = [STYLE.sub("", line) for line in wandb_lines]
    assert f"wandb: Run data is saved locally in {run}" in plain, plain
    assert f"wandb: wandb sync {run}" in plain, plain


def test_pickling_the_logger_for_ddp_spawn_leaves_out_wandbs_require_service_line(tmp_path: Path, capfd,
                                                                                    monkeypatch) -> None:
    """Lightning's ``WandbLogger.__getstate__`` (once per ``ddp_spawn`` worker) calls ``wandb.require("service")``,
    which W&B answers with a warning that it is a no-op; W&B's other warnings still show."""
    import pickle

    import wandb

    from lit_rnncells.utils.loggers import DefaultWandbLogger

    monkeypatch.setenv("WANDB_MODE", "disabled")
    logger = DefaultWandbLogger(save_dir=str(tmp_path))
    pickle.dumps(logger)
    wandb.termwarn("another W&B warning")
    err = capfd.readouterr().err
    assert "another W&B warning" in err and "require('service')" not in err
    assert wandb.termwarn.__name__ == "termwarn"  # put back
