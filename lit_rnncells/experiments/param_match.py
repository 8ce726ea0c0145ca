"""Parameter matching: the hidden size at which each cell's model has about a target number of parameters.

The papers compare cells at "about equal" parameters (MuFuRU §4, MZU Table 2, CARU Table 2). For a task
config, :class:`ParamCounter` builds the config once through the CLI (so the DataModule's vocabulary sizes
reach the model), then rebuilds ``type(model)`` from ``model.hparams`` with another ``cell`` and
``hidden_size`` to count parameters. A model's parameter count grows monotonically with its hidden size for
every registered cell, so :func:`match_hidden_size` bisects over integers; sizes a cell refuses (MZU's zones
must divide the hidden size) raise ``ValueError`` and are skipped.

    counter = ParamCounter("configs/logic/gru.yaml")
    target = counter.target("GRU@8")            # or a number: counter.target("5000")
    match = counter.match("MuFuRU", target)     # Match(cell='MuFuRU', hidden_size=..., params=..., gap=...)
"""
from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from ..cells.registry import get_cell
from ..nn.parameters import count_parameters  # kept importable from here
from ..cli import main
from ..utils.quiet import no_lightning_info

CellSpec = Union[str, Dict[str, Any]]
"""A registered cell name, or ``{"class_path": name, "init_args": {...}}`` (cells that need options)."""

MAX_HIDDEN = 1 << 16
"""The largest hidden size the search tries."""
SKIP_LIMIT = 256
"""How many consecutive refused sizes the search steps over before giving up."""


@dataclass(frozen=True)
class Match:
    """The hidden size chosen for ``cell``, its model's parameter count and the gap to ``target``."""

    cell: str
    hidden_size: int
    params: int
    target: int

    @property
    def gap(self) -> float:
        """Relative gap ``(params - target) / target``."""
        return (self.params - self.target) / self.target

    def describe(self) -> str:
        return (f"{self.cell}: hidden {self.hidden_size}, {self.params:,} parameters "
                f"({self.gap:+.2%} of {self.target:,})")


def cell_name(cell: CellSpec) -> str:
    """The class name of a cell spec, for tables (``"MultiChannel"`` for a dict spec of it)."""
    name = str(cell["class_path"] if isinstance(cell, dict) else cell)
    try:
        return get_cell(name).__name__  # a registered name or an import path
    except ValueError:
        return get_cell(name.rsplit(".", 1)[-1]).__name__


def rebuild(model: torch.nn.Module, **changes: Any) -> torch.nn.Module:
    """A new model of ``type(model)`` from its saved hyperparameters with ``changes`` applied.

    Built on the meta device (no memory, no initialisation cost) when the constructor allows it."""
    cls = type(model)
    accepted = inspect.signature(cls.__init__).parameters
    hparams = {k: v for k, v in dict(model.hparams).items() if k in accepted}
    unknown = [k for k in changes if k not in accepted]
    if unknown:
        raise ValueError(f"{cls.__name__} has no parameter {', '.join(unknown)}; pick a task with a hidden_size "
                         "and a cell.")
    hparams.update(changes)
    try:
        with torch.device("meta"):
            return cls(**hparams)
    except ValueError:
        raise
    except Exception:  # noqa: BLE001 - a constructor that needs real tensors: build it on the CPU
        return cls(**hparams)


class ParamCounter:
    """Counts the parameters of a config's model with any cell and hidden size (results cached).

    Args:
        config: a CLI config (``configs/...yaml``).
        args: further CLI arguments (``--data.init_args.x 1``), applied after the config.
        model: an already built task to rebuild instead of building the config.

    A plain cell name that matches the class of the config's own cell keeps the config's cell options (e.g.
    GRUDT's transition depth), as ``--model.init_args.cell NAME`` does on the command line.
    """

    def __init__(self, config: Optional[str] = None, args: Sequence[str] = (),
                 model: Optional[torch.nn.Module] = None) -> None:
        if model is None:
            cli_args = (["--config", config] if config else []) + list(args)
            argv, sys.argv = sys.argv, sys.argv[:1]  # LightningCLI warns when the process has arguments of its own
            try:
                with no_lightning_info():  # a library call: no Trainer banners
                    model = main(cli_args, run=False, parser_kwargs={"exit_on_error": False}).model
            finally:
                sys.argv = argv
        self.model = model
        self._cache: Dict[Tuple[str, int], Optional[int]] = {}
        self._refusals: Dict[Tuple[str, int], str] = {}

    def cell_spec(self, cell: CellSpec) -> Any:
        """``cell`` as the model's ``cell`` hyperparameter: the config's own spec when it names the same class."""
        own = self.model.hparams.get("cell")
        if isinstance(cell, str) and isinstance(own, dict) and "class_path" in own:
            if cell_name(own["class_path"]) == cell_name(cell):
                return own
        return cell

    def count(self, cell: CellSpec, hidden_size: int) -> Optional[int]:
        """Parameters of the model with ``cell`` at ``hidden_size``; ``None`` when the cell refuses that size."""
        key = (repr(cell), int(hidden_size))
        if key not in self._cache:
            try:
                model = rebuild(self.model, cell=self.cell_spec(cell), hidden_size=int(hidden_size))
                self._cache[key] = count_parameters(model)
            except ValueError as error:
                if "has no parameter" in str(error):
                    raise
                self._cache[key] = None
                self._refusals[key] = str(error)
        return self._cache[key]

    def refusal(self, cell: CellSpec, hidden_size: int) -> Optional[str]:
        """Why the model refuses ``cell`` at ``hidden_size`` (the constructor's message, e.g. ``zones must be a
        positive integer, got 0; ...``); ``None`` when it builds."""
        self.count(cell, hidden_size)
        return self._refusals.get((repr(cell), int(hidden_size)))

    def target(self, spec: Union[int, str]) -> int:
        """A target count: a number (``"120000"``, ``"1.2e5"``) or a reference ``"CELL@HIDDEN"`` (``"GRU@256"``)."""
        if isinstance(spec, int):
            return spec
        text = str(spec).strip()
        if "@" in text:
            cell, _, size = text.partition("@")
            try:
                hidden = int(size)
            except ValueError:
                raise ValueError(f"--match-params {text!r}: the hidden size after '@' must be an integer, e.g. "
                                 "GRU@256.") from None
            count = self.count(cell.strip(), hidden)
            if count is None:
                raise ValueError(f"--match-params {text!r}: {cell} does not accept hidden size {hidden}; pick "
                                 "another size.")
            return count
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"--match-params {text!r} is neither a number nor CELL@HIDDEN; use e.g. 120000 or "
                             "GRU@256.") from None
        if value < 1:
            raise ValueError(f"--match-params {text!r}: the target must be a positive number of parameters.")
        return int(round(value))

    def match(self, cell: CellSpec, target: int) -> Match:
        """The hidden size whose parameter count is nearest to ``target`` (ties: the smaller size)."""
        return match_hidden_size(lambda h: self.count(cell, h), target, cell_name(cell),
                                 why=lambda h: self.refusal(cell, h))


def _valid_at_or_above(count: Callable[[int], Optional[int]], h: int) -> Optional[Tuple[int, int]]:
    """The first size ``>= h`` the cell accepts, with its count (``None`` after ``SKIP_LIMIT`` refusals)."""
    for size in range(h, min(h + SKIP_LIMIT, MAX_HIDDEN + 1)):
        n = count(size)
        if n is not None:
            return size, n
    return None


def _valid_below(count: Callable[[int], Optional[int]], h: int) -> Optional[Tuple[int, int]]:
    """The largest size ``< h`` (and ``>= 1``) the cell accepts, with its count."""
    for size in range(h - 1, max(0, h - 1 - SKIP_LIMIT), -1):
        n = count(size)
        if n is not None:
            return size, n
    return None


def match_hidden_size(count: Callable[[int], Optional[int]], target: int, name: str = "cell",
                      why: Optional[Callable[[int], Optional[str]]] = None) -> Match:
    """Bisection over integer hidden sizes for the count nearest ``target``; ``count(h)`` is ``None`` for a
    size the cell refuses and non-decreasing over the sizes it accepts. ``why(h)``, when given, says why a size
    was refused; a cell that refuses every size it is tried at is one error ending with the last size's reason."""
    first = _valid_at_or_above(count, 1)
    if first is None:
        reason = why(SKIP_LIMIT) if why is not None else None
        raise ValueError(f"{name} accepts none of the hidden sizes 1..{SKIP_LIMIT}; check its options"
                         + (f" (at {SKIP_LIMIT}: {reason.rstrip('.')})." if reason else "."))
    if first[1] >= target:
        return Match(name, first[0], first[1], target)
    lo, hi = first[0], max(2, 2 * first[0])  # invariant: count at next_valid(lo) < target
    while True:
        found = _valid_at_or_above(count, hi)
        if found is None or hi > MAX_HIDDEN:
            raise ValueError(f"{name} does not reach {target:,} parameters below hidden size {MAX_HIDDEN}; "
                             "lower the target.")
        if found[1] >= target:
            break
        lo, hi = found[0], 2 * hi
    while hi - lo > 1:  # smallest h with count(next_valid(h)) >= target lies in (lo, hi]
        mid = (lo + hi) // 2
        found = _valid_at_or_above(count, mid)
        if found is not None and found[1] >= target:
            hi = mid
        else:
            lo = mid
    above = _valid_at_or_above(count, hi)
    below = _valid_below(count, above[0])
    candidates: List[Tuple[int, int]] = [above] + ([below] if below is not None else [])
    size, n = min(candidates, key=lambda c: (abs(c[1] - target), c[0]))
    return Match(name, size, n, target)

