"""The command line's warning and log filters reach the processes Lightning's ``ddp_spawn`` starts, and the
recurrence line is printed once, by rank 0 (every rank of a DDP run printed it, and two ranks' lines ran into
one). The runs themselves: tests/test_cli.py's DDP and ``ddp_spawn`` fits."""
from __future__ import annotations

import pickle
import warnings

from lit_rnncells.command.callbacks import QuietInSpawnedProcesses
from lit_rnncells.nn import backend
from lit_rnncells.utils import quiet


def test_the_parents_filters_are_installed_when_the_callback_is_unpickled() -> None:
    with warnings.catch_warnings():
        warnings.resetwarnings()
        quiet.quiet_known_noise()
        quiet.quiet_evaluation_warnings()  # a per-run filter (test / validate) travels too
        parent = quiet.installed_patterns()
        assert quiet.CALLBACKS_NOT_RESTORED_WARNING in parent
        assert r"torch\.distributed\.nn\.functional\.all_gather is deprecated" in parent
        sent = pickle.dumps(QuietInSpawnedProcesses())
    with warnings.catch_warnings():
        warnings.resetwarnings()  # a spawned process: none of the filters
        assert quiet.installed_patterns() == []
        pickle.loads(sent)
        assert sorted(quiet.installed_patterns()) == sorted(parent)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            quiet.install_patterns(parent)  # the "always" above went first; the callback's filters win again
            warnings.warn("torch.distributed.nn.functional.all_gather is deprecated, use ...", FutureWarning)
            warnings.warn("a warning of the run's own", UserWarning)
        assert [str(w.message) for w in caught] == ["a warning of the run's own"]


def test_the_recurrence_line_is_said_by_rank_zero_only_in_one_write(monkeypatch, capsys) -> None:
    from lightning_utilities.core.rank_zero import rank_zero_only

    monkeypatch.setattr(rank_zero_only, "rank", 1, raising=False)
    backend.say_once("test rank one", "recurrence: from rank 1")
    monkeypatch.setattr(rank_zero_only, "rank", 0)
    backend.say_once("test rank zero", "recurrence: from rank 0")
    backend.say_once("test rank zero", "recurrence: from rank 0")
    assert capsys.readouterr().err == "recurrence: from rank 0\n"
