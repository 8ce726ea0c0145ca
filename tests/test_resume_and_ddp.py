"""Every example-level task through the command line: SIGTERM mid-epoch and resume gives the uninterrupted
losses (dropout on: the random state is in the checkpoint), and 2 DDP processes × batch B train exactly as
1 process × batch 2B (the LM's versions of both are in test_reliability.py)."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Callable, Dict, List

import pytest

from lit_rnncells.cli import run

from .test_reliability import assert_ddp_matches_one_process, losses, recorder, with_callbacks

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.real_data


def logic(data_dir: Path, cache: Path, root: Path, batch: int, dropout: float) -> List[str]:
    # the logic model has no dropout option; a dropout-free task still checks the data position
    return ["--config", str(ROOT / "configs" / "logic" / "gru.yaml"), "--data.init_args.train_size", "96",
            "--data.init_args.val_size", "16", "--data.init_args.test_size", "16", "--data.init_args.batch_size",
            str(batch), "--trainer.limit_val_batches", "2"] + common(root)


def seq2seq(data_dir: Path, cache: Path, root: Path, batch: int, dropout: float) -> List[str]:
    return ["--config", str(ROOT / "configs" / "seq2seq" / "multi30k_de_en_gru.yaml"),
            "--model.init_args.embedding_size", "16", "--model.init_args.hidden_size", "24",
            "--model.init_args.dropout", str(dropout), "--model.init_args.eval_metrics", "[]",
            "--model.init_args.lr_scheduler", "null",
            "--data.init_args.data_dir", str(data_dir / "multi30k"), "--data.init_args.limit", "80",
            "--data.init_args.subword_vocab_size", "300", "--data.init_args.batch_size", str(batch),
            "--data.init_args.cache_dir", str(cache), "--trainer.limit_val_batches", "2"] + common(root)


def absa(data_dir: Path, cache: Path, root: Path, batch: int, dropout: float) -> List[str]:
    return ["--config", str(ROOT / "configs" / "classification" / "absa_restaurants_gru_dt.yaml"),
            "--model.init_args.embedding_size", "16", "--model.init_args.hidden_size", "12",
            "--model.init_args.dropout", str(dropout), "--model.init_args.pretrained_embeddings", "null",
            "--data.init_args.batch_size", str(batch), "--data.init_args.cache_dir", str(cache),
            "--trainer.limit_val_batches", "2"] + common(root)


def common(root: Path) -> List[str]:
    return ["--trainer.max_epochs", "1", "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
            "--trainer.enable_model_summary", "false", "--trainer.default_root_dir", str(root),
            "--trainer.accelerator", "cpu", "--test_after_fit", "false", "--seed_everything", "7"]


TASKS: Dict[str, Callable[..., List[str]]] = {"logic": logic, "seq2seq": seq2seq, "absa": absa}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("task", sorted(TASKS))
def test_sigterm_mid_epoch_then_resume_gives_the_uninterrupted_losses(task, data_dir, cache, tmp_path, capsys):
    """Stopped by SIGTERM after step 3 of 8 (mid-epoch) and resumed from the checkpoint it saved: steps 4-8 have
    the losses of the run that was never stopped, dropout masks included."""
    args = lambda root: ["fit", *TASKS[task](data_dir, cache, root, 8, 0.3), "--trainer.max_steps", "8"]
    full = tmp_path / "full.jsonl"
    assert run(args(tmp_path / "a") + with_callbacks(recorder(full))) == 0
    cut = tmp_path / "cut.jsonl"
    stop = {"class_path": "tests.examples.recorders.SigtermAtStep", "init_args": {"step": 3}}
    assert run(args(tmp_path / "b") + with_callbacks(recorder(cut), stop)) == 143
    ckpt = next((tmp_path / "b").rglob("interrupted.ckpt"))
    assert f"--ckpt_path {ckpt}" in capsys.readouterr().err
    assert run(args(tmp_path / "b") + with_callbacks(recorder(cut)) + ["--ckpt_path", str(ckpt)]) == 0
    uninterrupted, resumed = losses(full), losses(cut)
    assert sorted(resumed) == sorted(uninterrupted) == list(range(1, 9))
    for step in uninterrupted:
        assert resumed[step] == pytest.approx(uninterrupted[step], rel=1e-6), (step, uninterrupted, resumed)


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(TASKS))
def test_two_ddp_processes_train_exactly_as_one_process_on_the_same_global_batch(task, data_dir, cache, tmp_path):
    """2 ranks × batch 4 and 1 rank × batch 8: each step the ranks hold the single process's 8 examples between
    them, and the loss is the mean over the global batch, so after 3 SGD steps the weights agree."""
    assert_ddp_matches_one_process(
        lambda devices, batch: TASKS[task](data_dir, cache, tmp_path / f"run{devices}", batch, 0.0), tmp_path)


def lm(data_dir: Path, cache: Path, root: Path, batch: int, dropout: float) -> List[str]:
    from .test_reliability import small_lm

    args = small_lm(root)[1:]  # without "fit"
    cut = args.index("--data.init_args.batch_size")
    args[cut + 1] = str(batch)
    return args + ["--trainer.max_epochs", "1", "--test_after_fit", "false", "--seed_everything", "7"]


def imdb(data_dir: Path, cache: Path, root: Path, batch: int, dropout: float) -> List[str]:
    return ["--config", str(ROOT / "configs" / "classification" / "imdb_gru.yaml"),
            "--model.init_args.embedding_size", "16", "--model.init_args.hidden_size", "12",
            "--model.init_args.dropout", str(dropout), "--data.init_args.max_length", "48",
            "--data.init_args.max_vocab_size", "3000", "--data.init_args.batch_size", str(batch),
            "--data.init_args.eval_batch_size", "32", "--data.init_args.cache_dir", str(cache),
            "--trainer.limit_val_batches", "2"] + common(root)


STEP_LIMIT_TASKS: Dict[str, Callable[..., List[str]]] = {**TASKS, "lm": lm, "imdb": imdb}


@pytest.mark.parametrize("task", sorted(STEP_LIMIT_TASKS))
def test_a_max_steps_stop_then_resume_gives_the_uninterrupted_losses(task, data_dir, cache, tmp_path, capsys):
    """Issue 19 item 16: ``fit --trainer.max_steps 5`` stops mid-epoch, before any validation; Lightning then
    validates and saves last.ckpt at the stop, counting the epoch as done; resuming it with ``--trainer.max_steps 10`` continues that epoch at its next batch:
    steps 6-10 have the losses of a run that went to 10 at once (dropout on where the task has it)."""
    def args(root: Path, steps: int) -> List[str]:
        task_args = STEP_LIMIT_TASKS[task](data_dir, cache, root, 8, 0.3)
        config = Path(task_args[task_args.index("--config") + 1]).read_text()
        keep = {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                "init_args": {"monitor": "val/loss", "mode": "min", "save_last": True}}
        return ["fit", *task_args, "--trainer.max_steps", str(steps), "--trainer.val_check_interval", "null"] + \
            ([] if "ModelCheckpoint" in config else with_callbacks(keep))  # the config's own, when it has one

    full = tmp_path / "full.jsonl"
    assert run(args(tmp_path / "a", 10) + with_callbacks(recorder(full))) == 0
    cut = tmp_path / "cut.jsonl"
    assert run(args(tmp_path / "b", 5) + with_callbacks(recorder(cut))) == 0
    last = next((tmp_path / "b").rglob("last.ckpt"))  # in the run folder: resuming writes there too
    resume = args(tmp_path / "b", 10) + with_callbacks(recorder(cut)) + ["--ckpt_path", str(last)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run(resume) == 0
    # Lightning warns that a mid-epoch resume "can cause unreliable results" unless the dataloader is stateful;
    # ours resume exactly (the losses below), so the command line drops that warning for our DataModules.
    assert not [w for w in caught if "ended before the epoch ended" in str(w.message)]
    uninterrupted, resumed = losses(full), losses(cut)
    assert sorted(resumed) == sorted(uninterrupted) == list(range(1, 11))
    for step in uninterrupted:
        assert resumed[step] == pytest.approx(uninterrupted[step], rel=1e-6), (step, uninterrupted, resumed)


@pytest.mark.parametrize("task", ["lm", "logic"])
def test_an_epoch_end_checkpoint_resumes_at_the_next_epoch_with_the_uninterrupted_losses(task, data_dir, cache,
                                                                                          tmp_path):
    """A checkpoint saved at a training epoch's end with no validation there (``compare --test-every-epoch
    --keep-epoch-checkpoints`` keeps these in ``<run>/epochs/``; validation every 4 of 6 batches) holds an epoch
    Lightning has processed but not completed. Resumed with more epochs, it trains the next epoch, whose losses
    are those of the run that was never stopped, rather than ending at once."""
    per_epoch = {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                 "init_args": {"dirpath": str(tmp_path / "epochs"), "filename": "epoch={epoch}-step={step}",
                               "save_top_k": -1, "every_n_epochs": 1, "save_on_train_epoch_end": True,
                               "auto_insert_metric_name": False}}

    def args(root: Path, epochs: int) -> List[str]:
        return ["fit", *STEP_LIMIT_TASKS[task](data_dir, cache, root, 8, 0.3), "--trainer.max_epochs", str(epochs),
                "--trainer.limit_train_batches", "6", "--trainer.val_check_interval", "4"]

    full = tmp_path / "full.jsonl"
    assert run(args(tmp_path / "a", 2) + with_callbacks(recorder(full), per_epoch)) == 0
    first_epoch_end = tmp_path / "epochs" / "epoch=0-step=6.ckpt"
    assert first_epoch_end.is_file(), sorted((tmp_path / "epochs").iterdir())
    cut = tmp_path / "cut.jsonl"
    assert run(args(tmp_path / "b", 2) + with_callbacks(recorder(cut)) + ["--ckpt_path", str(first_epoch_end)]) == 0
    uninterrupted, resumed = losses(full), losses(cut)
    assert sorted(uninterrupted) == list(range(1, 13))
    assert sorted(resumed) == list(range(7, 13))
    for step in resumed:
        assert resumed[step] == pytest.approx(uninterrupted[step], rel=1e-6), (step, uninterrupted, resumed)
