"""The package's imports run one way, with no circles.

Every import of the package's own modules is read from the source (``ast``, function-local imports
included) and checked against the layer order below: a module may import its own layer and the layers
before it, never a later one. A circle between modules fails too, whatever their layers.
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path
from typing import Dict, List, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "lit_rnncells"

LAYERS: List[Tuple[str, Tuple[str, ...]]] = [
    # Helpers that import nothing of the package above them: argument checks, paths, logging; the metrics.
    ("helpers", ("utils", "metrics")),
    ("cells", ("cells",)),
    # The package's own __init__ exports Recurrent; nn/benchmark.py measures cells and the layer for scripts/.
    ("nn", ("nn", "")),
    ("data", ("data",)),
    ("tasks", ("tasks",)),
    # The training command: its entry point cli.py (main, run) and its machinery in command/ (the LightningCLI,
    # start checks, the run folder, callbacks, errors, CPU defaults). Experiments run it, so they come after it.
    ("cli", ("cli", "command")),
    ("experiments", ("experiments",)),
    ("analysis", ("analysis",)),
    # Entry points (python -m ...): nothing imports them.
    ("entry points", ("__main__", "compare", "reproduce", "leaderboard", "show_cpu_defaults", "analysis.__main__",
                      "data.__main__")),
]


def modules(root: Path) -> Dict[str, Path]:
    """Every module of the package under ``root``, by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: Dict[str, Path]) -> str:
    """The module an import of ``name`` loads (``pkg.mod.Class`` → ``pkg.mod``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def imports(root: Path) -> Dict[str, Set[str]]:
    """Module → the package's modules it imports anywhere in its source (a submodule's own parent packages,
    which Python imports first anyway, left out)."""
    known = modules(root)
    edges: Dict[str, Set[str]] = {}
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        targets: List[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                targets += [f"{origin}.{a.name}" if f"{origin}.{a.name}" in known else origin for a in node.names]
        for target in targets:
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                module = _resolve(target, known)
                if module and module != name and not name.startswith(module + "."):
                    edges.setdefault(name, set()).add(module)
    return edges


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of the longest entry naming ``module`` or a package above it."""
    rest = module[len(PACKAGE) + 1:] if module != PACKAGE else ""
    best, best_length = -1, -1
    for index, (_, names) in enumerate(LAYERS):
        for entry in names:
            if (rest == entry or (entry and rest.startswith(entry + "."))) and len(entry) > best_length:
                best, best_length = index, len(entry)
    return best


def circles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def problems(root: Path) -> List[str]:
    """Every module with no layer, import against the layer order, and circle, one line each."""
    edges = imports(root)
    out = [f"{m} has no layer in tests/test_layers.py" for m in modules(root) if layer_of(m) < 0]
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            if layer_of(target) > layer_of(source) >= 0:
                out.append(f"{source} ({LAYERS[layer_of(source)][0]}) imports {target} "
                           f"({LAYERS[layer_of(target)][0]}), a later layer")
    out += [f"circle: {' <-> '.join(group)}" for group in circles(edges)]
    return out


def test_imports_follow_the_layer_order_without_circles():
    assert problems(ROOT) == []


def test_the_check_finds_a_planted_circle_and_an_upward_import(tmp_path):
    shutil.copytree(ROOT / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    compiled = tmp_path / PACKAGE / "nn" / "compiled.py"
    compiled.write_text(compiled.read_text() + "\n\ndef _planted():\n    from .recurrent import Recurrent\n")
    classic = tmp_path / PACKAGE / "cells" / "classic.py"
    classic.write_text(classic.read_text() + "\nfrom ..tasks import base as _planted_base\n")
    found = problems(tmp_path)
    circles = [line.split(": ", 1)[1].split(" <-> ") for line in found if line.startswith("circle: ")]
    # the planted import closes a circle through every module between the two (nn.graphs imports nn.compiled)
    assert any({"lit_rnncells.nn.compiled", "lit_rnncells.nn.recurrent"} <= set(group) for group in circles), found
    assert ("lit_rnncells.cells.classic (cells) imports lit_rnncells.tasks.base (tasks), a later layer"
            in found)


def test_the_top_level_holds_only_entry_points():
    """Helpers live in utils/, metrics/ and command/ (issue 32): the package's own folder keeps its ``__init__``
    and the modules ``python -m`` (or the ``lit-rnncells`` script) runs."""
    top = {p.stem for p in (ROOT / PACKAGE).glob("*.py")}
    assert top == {"__init__", "__main__", "cli", "compare", "reproduce", "leaderboard", "show_cpu_defaults"}
