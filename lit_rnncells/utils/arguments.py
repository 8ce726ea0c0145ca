"""Argument checks every layer shares (cells, the layer, DataModules, tasks): one clear ``ValueError`` each;
and typed option groups (dataclasses), with the old flat names kept for one release; and the one-line argparse
parser of the commands other than the LightningCLI (:class:`OneLineParser`).

It imports nothing of the package, so any module may use it (tests/test_layers.py keeps it at the bottom).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, fields, replace
from typing import Any, Dict, Mapping, Type, TypeVar, Union


def check_positive(**sizes: int) -> None:
    """Raise one clear ``ValueError`` if any named size is not a positive integer."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}; set it to 1 or more.")


def check_probability(**probabilities: float) -> None:
    """Raise one clear ``ValueError`` if any named dropout-style probability is outside [0, 1).

    1 is excluded: dropping everything trains on nothing (and scales by 1/(1-p) = inf)."""
    for name, value in probabilities.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1), got {value!r}; use 0 to turn it off "
                             "(AWD-LSTM uses 0.1-0.5).")


G = TypeVar("G")
_said_deprecated: set = set()


def option_group(group_type: Type[G], value: Union[G, Mapping[str, Any], None], name: str) -> G:
    """One typed option group (a dataclass) from what a caller passes: the group itself, a mapping (a YAML
    dict, a checkpoint's saved hyperparameters) or ``None`` (every default). A key the group does not have
    is one clear ``ValueError`` naming the group's fields."""
    if value is None:
        return group_type()
    if isinstance(value, group_type):
        return value
    if isinstance(value, Mapping):
        known = {f.name for f in fields(group_type)}  # type: ignore[arg-type]
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"Unknown {name} option(s) {unknown}; {name} takes {', '.join(sorted(known))}.")
        return group_type(**value)
    raise TypeError(f"{name} must be a {group_type.__name__} or a mapping of its fields, got {type(value).__name__}.")


def group_as_dict(group: Any) -> Dict[str, Any]:
    """A group as the plain dict a checkpoint's hyperparameters and a YAML config hold."""
    return asdict(group)


def apply_deprecated_names(owner: str, renames: Mapping[str, str], flat: Mapping[str, Any],
                           groups: Dict[str, Any]) -> Dict[str, Any]:
    """Move options passed under their old flat names into their typed groups.

    ``renames`` maps each old name to its new ``group.field`` key; ``groups`` holds the groups as built so far
    (dataclass instances) and is returned updated. Each old name prints one deprecation line per process naming
    its new key. A name that is neither is the ``TypeError`` Python gives any unknown keyword argument. Checkpoints
    saved before the groups existed load through here: their hyperparameters carry the old names."""
    unknown = [key for key in flat if key not in renames]
    if unknown:
        raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}.")
    for group, given in regroup_flat_mapping(owner, renames, flat).items():
        groups[group] = replace(groups[group], **given)
    return groups


def regroup_flat_mapping(owner: str, renames: Mapping[str, str], init_args: Mapping[str, Any]) -> Dict[str, Any]:
    """A config's ``init_args`` with its old flat names moved under their groups (``{"beam_size": 5}`` →
    ``{"decoding": {"beam_size": 5}}``), one deprecation line per old name. What the old and the new name
    both set is an error: the config would say two things."""
    out: Dict[str, Any] = {k: v for k, v in init_args.items() if k not in renames}
    for key in init_args:
        if key not in renames:
            continue
        group, _, field = renames[key].partition(".")
        target = out.setdefault(group, {})
        if not isinstance(target, dict):  # the group given as an object: leave it to the parser's check
            target = out[group] = dict(target) if isinstance(target, Mapping) else target
        if isinstance(target, dict):
            if field in target:
                raise ValueError(f"{owner} option `{key}` and its new name `{renames[key]}` are both set; keep "
                                 f"only `{renames[key]}`.")
            target[field] = init_args[key]
        say_deprecated_name(owner, key, renames[key])
    return out


def say_deprecated_name(owner: str, old: str, new: str) -> None:
    """The one deprecation line of an old flat option name, once per process and name, to standard error."""
    if (owner, old) not in _said_deprecated:
        _said_deprecated.add((owner, old))
        print(f"lit_rnncells: {owner} option `{old}` is deprecated and goes in the next release; use `{new}`.",
              file=sys.stderr, flush=True)


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (``error: ...; see <prog> --help.``) and exit code 2, for every
    command of the package that is not the LightningCLI (compare, leaderboard, reproduce, analysis, data); its
    subcommands' parsers are of this class too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"error: {message}; see {self.prog} --help.", file=sys.stderr)
        raise SystemExit(2)
