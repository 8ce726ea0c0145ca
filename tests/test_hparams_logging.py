"""Hyperparameters reach any logger grouped as ``model`` and ``data``: a name both sides use with different
values (``max_source_length``: the model's input limit, the data's training filter) never stops a run, as
Lightning's flat merge did (issue 17: both IWSLT14 configs crashed before the first step with any logger)."""
from __future__ import annotations

import ast
from pathlib import Path

import yaml
from lightning.pytorch import Trainer
from lightning.pytorch.loggers import CSVLogger

from lit_rnncells.data import TranslationDataModule
from lit_rnncells.tasks import Seq2Seq
from tests.test_translation_data import DE, EN, write_parallel

PACKAGE = Path(__file__).resolve().parents[1] / "lit_rnncells"


def test_every_task_and_datamodule_leaves_hparams_logging_to_the_grouped_logger() -> None:
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "save_hyperparameters":
                logger = next((k.value for k in node.keywords if k.arg == "logger"), None)
                calls.append((path.relative_to(PACKAGE).as_posix(), isinstance(logger, ast.Constant)
                              and logger.value is False))
    assert len(calls) >= 9  # 4 tasks, 5 DataModules
    assert all(ok for _, ok in calls), [name for name, ok in calls if not ok]


def test_a_name_in_both_model_and_data_hparams_is_logged_in_two_groups(tmp_path: Path) -> None:
    # a validation pair the training files lack: a train split holding all of dev is refused before training
    folder = write_parallel(tmp_path / "corpus", {"train": (DE * 10, EN * 10), "valid": (DE[:3] + ["kinder spielen ."],
                                                  EN[:3] + ["children play ."]), "test": (DE[::-1], EN[::-1])})
    data = TranslationDataModule(dataset="parallel", data_dir=str(folder), source_language="de", target_language="en",
                                 subword_vocab_size=330, min_frequency=1, batch_size=4, eval_batch_size=4,
                                 cache_dir="", max_source_length=30)
    model = Seq2Seq(source_vocab_size=data.source_vocab_size, target_vocab_size=data.target_vocab_size,
                    embedding_size=8, hidden_size=8, max_source_length=50, eval_metrics=[])
    logger = CSVLogger(tmp_path / "logs")
    trainer = Trainer(max_steps=2, limit_val_batches=2, logger=logger, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=False, accelerator="cpu")
    trainer.fit(model, datamodule=data)
    assert trainer.global_step == 2
    saved = yaml.safe_load((Path(logger.log_dir) / "hparams.yaml").read_text())
    assert saved["model"]["max_source_length"] == 50 and saved["data"]["lengths"]["max_source_length"] == 30
    assert saved["model"]["hidden_size"] == 8 and saved["data"]["dataset"] == "parallel"
    assert "max_source_length" not in saved  # nothing logged flat beside the groups
