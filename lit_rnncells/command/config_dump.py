"""Values jsonargparse writes into a saved config as ``Unable to serialize instance <value>``.

jsonargparse 4.53 writes a plain string given to an option typed ``Union[Callable, str]`` that way (its callable
serializer answers first, with that text); Lightning's ``ModelPruning(pruning_fn="l1_unstructured")`` is one. The
run's ``config.yaml`` then held that text, and the ``Test it`` / ``Resume it`` commands the run printed failed on
it. :func:`repair_unserialized` puts back each such value that is plain YAML (a string, number, bool or null) as
the config holds it, and names the ones it cannot (an object with no import path), so the run can say which
option its saved config lacks."""
from __future__ import annotations

import json
from typing import Any, List, Tuple

import yaml

UNSERIALIZED = "Unable to serialize instance"
_PLAIN = (str, int, float, bool, type(None))
_MISSING = object()  # no value at that place in the config: nothing to put back


def _repair(dumped: Any, raw: Any, path: str, lost: List[str]) -> Any:
    if isinstance(dumped, dict):
        raw = raw if isinstance(raw, dict) else {}
        return {k: _repair(v, raw.get(k, _MISSING), f"{path}.{k}" if path else str(k), lost) for k, v in dumped.items()}
    if isinstance(dumped, list):
        raw = raw if isinstance(raw, list) and len(raw) == len(dumped) else [_MISSING] * len(dumped)
        return [_repair(v, r, f"{path}[{i}]", lost) for i, (v, r) in enumerate(zip(dumped, raw))]
    if isinstance(dumped, str) and dumped.startswith(UNSERIALIZED):
        if raw is not _MISSING and isinstance(raw, _PLAIN) and not (isinstance(raw, str)
                                                                     and raw.startswith(UNSERIALIZED)):
            return raw
        lost.append(path)
    return dumped


def repair_unserialized(text: str, raw: Any, dump_format: str) -> Tuple[str, List[str]]:
    """``text`` (a config jsonargparse dumped as YAML or JSON) with each ``Unable to serialize instance`` value
    replaced by the plain value at the same place in ``raw`` (the config as a dict, before dumping); and the
    dotted paths of those that stay (no plain value to put back). Other formats come back unchanged."""
    if UNSERIALIZED not in text or dump_format not in ("yaml", "json", "json_indented"):
        return text, []
    lost: List[str] = []
    data = _repair(yaml.safe_load(text), raw, "", lost)
    if dump_format == "yaml":
        return yaml.safe_dump(data, default_flow_style=False, allow_unicode=True, sort_keys=False), lost
    return json.dumps(data, ensure_ascii=False, sort_keys=False, indent=2 if dump_format == "json_indented" else None
                      ), lost
