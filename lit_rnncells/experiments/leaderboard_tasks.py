"""The leaderboard's tasks: a small table of task configs by name, each with the metric it is ranked on and,
where a paper reports one, the paper's figure (read from the reproduction experiments of
:mod:`lit_rnncells.experiments.reproduce`, never copied here).

A :class:`Task` holds two sizes: the CPU size (``extra`` arguments shrink the config, ``match_params`` is a
small reference model) and the paper size (the config as it is, its own cell and hidden size as the reference,
its own ``max_epochs`` as the budget)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import yaml

from .compare import mode_of
from .paper_scale import SCALES, PaperScale
from .papers import LM_SMALL, PAPERS, Experiment
from .reproduce import ROOT


@dataclass(frozen=True)
class Task:
    """A task config the leaderboard ranks cells on.

    ``metric`` is the ``runs.csv`` column compared (a test metric of the best-validation checkpoint), shown times
    ``scale``; ``match_params`` the parameter target at the CPU size (``CELL@HIDDEN`` or a number); ``extra`` the
    CLI arguments of the CPU size; ``figure`` the ``(paper, experiment)`` of :data:`papers.PAPERS` whose paper
    values are shown beside ours."""

    name: str
    title: str
    config: str
    metric: str
    match_params: str
    scale: float = 1.0
    extra: Tuple[str, ...] = ()
    figure: Optional[Tuple[str, str]] = None

    @property
    def lower_is_better(self) -> bool:
        return mode_of(self.metric) == "min"

    @property
    def config_path(self) -> Path:
        return Path(self.config) if Path(self.config).is_absolute() else ROOT / self.config

    def metric_label(self) -> str:
        """``test/acc ×100 ↑``: the metric, its scale and its direction."""
        scale = f" ×{self.scale:g}" if self.scale != 1 else ""
        return f"{self.metric}{scale} {'↓' if self.lower_is_better else '↑'}"

    def experiment(self) -> Optional[Experiment]:
        """The reproduction experiment holding this task's paper figures, if any."""
        if self.figure is None:
            return None
        paper, name = self.figure
        return next(e for e in PAPERS[paper][1] if e.name == name)

    def paper_scale(self) -> Optional[PaperScale]:
        """The reproduction's paper-size settings of this task's experiment (``reproduce --scale paper``), if any."""
        return None if self.figure is None else SCALES.get(self.figure[0], {}).get(self.figure[1])

    def paper_sized(self) -> "Task":
        """The task at the paper's size: the paper-size config of its reproduction experiment, else its own config,
        unchanged, every cell matched to the parameters of that config's own cell and size."""
        scale = self.paper_scale()
        config = scale.config if scale is not None else self.config
        return replace(self, config=config, extra=(), match_params=own_reference(ROOT / config))

    def paper_budget(self) -> str:
        """The paper's training length: the reproduction's paper-size budget, else the config's own
        ``max_epochs`` (or ``max_steps``)."""
        scale = self.paper_scale()
        if scale is not None:
            return scale.budget
        trainer = (yaml.safe_load(self.config_path.read_text()) or {}).get("trainer") or {}
        if trainer.get("max_steps", -1) not in (None, -1):
            return f"steps={trainer['max_steps']}"
        return f"epochs={trainer.get('max_epochs') or 1000}"


def own_reference(config: Path) -> str:
    """``CELL@HIDDEN`` of a config's own model (``GRU@800``): the parameter target at the paper's size."""
    model = (yaml.safe_load(config.read_text()) or {}).get("model", {}).get("init_args", {})
    cell = model.get("cell", "GRU")
    name = cell.get("class_path", "GRU") if isinstance(cell, dict) else str(cell)
    return f"{name.rsplit('.', 1)[-1]}@{model.get('hidden_size', 256)}"


def overridden(args: Sequence[str], changes: Dict[str, str]) -> Tuple[str, ...]:
    """CLI ``--key value`` pairs with the values of ``changes`` in place (keys not in ``args`` appended)."""
    pairs = dict(zip(args[::2], args[1::2]))
    pairs.update(changes)
    return tuple(item for pair in pairs.items() for item in pair)


def paper_task(name: str, title: str, paper: str, experiment: str, **changes: object) -> Task:
    """A task from a reproduction experiment: its config, metric, scale, CPU-size arguments and parameter target."""
    exp = next(e for e in PAPERS[paper][1] if e.name == experiment)
    target = exp.match_params or f"{next(iter(exp.cells)).split('(')[0]}@{exp.hidden_size}"
    fields: Dict[str, object] = dict(name=name, title=title, config=exp.config, metric=exp.metric,
                                     match_params=target, scale=exp.scale, extra=tuple(exp.extra),
                                     figure=(paper, experiment))
    fields.update(changes)
    return Task(**fields)  # type: ignore[arg-type]


ABSA_SMALL = next(e for e in PAPERS["mzu"][1] if e.name == "absa_restaurants").extra
"""The CPU size of the ABSA experiment of the MZU reproduction (no pretrained vectors, embedding 100, batch 32)."""

TASKS: Dict[str, Task] = {task.name: task for task in (
    Task("logic", "Propositional logic (MuFuRU §4.1): test accuracy % on 11-20 gates",
         "configs/logic/gru.yaml", "test/acc", "GRU@8", scale=100.0),
    paper_task("ptb_char", "PTB characters (MZU Table 1): test bits per character", "mzu", "ptb_char",
               # eager (a few hundred steps do not pay back the MZU cells' compile time); validation every 50
               # steps on 20 batches, so a short budget still draws curves
               extra=overridden(LM_SMALL, {"--trainer.val_check_interval": "50", "--trainer.limit_val_batches": "20"})),
    paper_task("ptb_word", "PTB words (MC-RNN Table 4): test perplexity", "mcrnn", "ptb_word"),
    paper_task("absa_restaurants", "SemEval-2014 Restaurants (MZU Table 6): test accuracy %", "mzu",
               "absa_restaurants"),
    Task("absa_laptops", "SemEval-2014 Laptops: test accuracy %", "configs/classification/absa_laptops_gru_dt.yaml",
         "test/acc", "GRUDT@64", scale=100.0, extra=tuple(ABSA_SMALL)),
    paper_task("imdb", "IMDB reviews (CARU Fig. 2): test accuracy %", "caru", "imdb"),
    Task("multi30k", "Multi30k De→En: test sacreBLEU", "configs/seq2seq/multi30k_de_en_gru.yaml",
         "test/sacrebleu", "GRU@128",
         extra=("--model.init_args.embedding_size", "128", "--data.init_args.batch_size", "64",
                "--trainer.limit_val_batches", "5")),
)}
"""The tasks ``--tasks`` names."""
