"""Typed option groups and their old flat names (lit_rnncells.utils.arguments, lit_rnncells.command.deprecated_names)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from lit_rnncells.utils.arguments import (apply_deprecated_names, group_as_dict, option_group,
                                          regroup_flat_mapping)


@dataclass(frozen=True)
class Search:
    beam_size: int = 5
    n_best: int = 1


RENAMES = {"beam_size": "search.beam_size", "nbest": "search.n_best"}


def test_a_group_comes_from_itself_a_mapping_or_none():
    assert option_group(Search, None, "search") == Search()
    assert option_group(Search, {"beam_size": 3}, "search") == Search(beam_size=3)
    given = Search(n_best=2)
    assert option_group(Search, given, "search") is given
    assert group_as_dict(Search(beam_size=4)) == {"beam_size": 4, "n_best": 1}


def test_an_unknown_group_key_names_the_fields():
    with pytest.raises(ValueError, match=r"Unknown search option\(s\) \['beam'\]; search takes beam_size, n_best"):
        option_group(Search, {"beam": 3}, "search")


def test_old_names_move_into_their_group_with_one_line_each(capsys):
    groups = apply_deprecated_names("Toy", RENAMES, {"beam_size": 10, "nbest": 3}, {"search": Search()})
    assert groups["search"] == Search(beam_size=10, n_best=3)
    err = capsys.readouterr().err
    assert "Toy option `beam_size` is deprecated" in err and "use `search.beam_size`" in err
    apply_deprecated_names("Toy", RENAMES, {"beam_size": 2}, {"search": Search()})
    assert capsys.readouterr().err == ""  # once per process and name


def test_an_unknown_keyword_is_the_usual_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'beam'"):
        apply_deprecated_names("Toy", RENAMES, {"beam": 1}, {"search": Search()})


def test_a_config_mapping_is_regrouped_and_refuses_both_spellings():
    assert regroup_flat_mapping("Toy2", RENAMES, {"beam_size": 7, "hidden": 3}) == {
        "hidden": 3, "search": {"beam_size": 7}}
    assert regroup_flat_mapping("Toy2", RENAMES, {"nbest": 2, "search": {"beam_size": 7}}) == {
        "search": {"beam_size": 7, "n_best": 2}}
    with pytest.raises(ValueError, match="both set; keep only `search.beam_size`"):
        regroup_flat_mapping("Toy2", RENAMES, {"beam_size": 7, "search": {"beam_size": 5}})


def test_old_names_mean_one_thing_per_namespace():
    """Without a class on the command line, ``--model.<old name>`` is rewritten by the names of every task (and
    ``--data.<old name>`` by every DataModule's): across them an old name must map to one new key."""
    from lit_rnncells.command.deprecated_names import NAMESPACES, _subclasses, deprecated_names
    for base in NAMESPACES.values():
        seen = {}
        for cls in _subclasses(base):
            for old, new in deprecated_names(cls).items():
                assert seen.setdefault(old, new) == new, (cls, old)


def test_a_saved_config_naming_a_moved_module_still_loads():
    """A run folder's config.yaml of an earlier release names the logger by its old module (issue 32 moved the
    helpers into utils/ and command/): the loader rewrites it to where the class is now."""
    from lit_rnncells.command.deprecated_names import class_named, rewrite_config
    from lit_rnncells.utils.loggers import DefaultWandbLogger

    old = "lit_rnncells." + "loggers.DefaultWandbLogger"  # spelled so the import rewrite leaves it old
    config = rewrite_config({"trainer": {"logger": {"class_path": old, "init_args": {"project": "p"}}}})
    assert config["trainer"]["logger"] == {"class_path": "lit_rnncells.utils.loggers.DefaultWandbLogger",
                                           "init_args": {"project": "p"}}
    assert class_named(config["trainer"]["logger"]["class_path"]) is DefaultWandbLogger
