"""One model on the tasks ``srun`` starts (issue 31, item 3): Lightning's SLURMEnvironment makes each task a DDP
rank, and the trainer config is made to agree with srun (lit_rnncells/command/slurm_tasks.py)."""
from __future__ import annotations


import pytest

from lit_rnncells.command.run_folder import choose
from lit_rnncells.command.slurm_tasks import agree_with_srun, global_rank

from .slurm_cluster import slurm  # noqa: F401  (the fixture)
from .test_reliability import assert_ddp_matches_one_process
from .test_resume_and_ddp import logic


def srun_env(monkeypatch: pytest.MonkeyPatch, tasks: int, per_node: str, nodes: int = 1, rank: int = 0) -> None:
    """The variables ``srun -n <tasks>`` sets in each task (without ``--ntasks-per-node``)."""
    # srun starts each task afresh: none inherits the run folder an earlier fit in this test process exported
    for name in ("SLURM_NTASKS_PER_NODE", "SLURM_JOB_NAME", "LOCAL_RANK", "LIT_RNNCELLS_RUN_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_NTASKS", str(tasks))
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", per_node)
    monkeypatch.setenv("SLURM_NNODES", str(nodes))
    monkeypatch.setenv("SLURM_PROCID", str(rank))


def test_srun_tasks_fill_devices_and_nodes_left_to_choose(monkeypatch):
    srun_env(monkeypatch, 4, "2(x2)", nodes=2)
    trainer = {"devices": "auto", "num_nodes": 1}
    agree_with_srun(trainer)
    assert trainer == {"devices": 2, "num_nodes": 2}
    import os

    assert os.environ["SLURM_NTASKS_PER_NODE"] == "2"  # what Lightning's SLURMEnvironment requires


@pytest.mark.parametrize("per_node, trainer, fix", [
    ("2", {"devices": 1, "num_nodes": 1}, "pass --trainer.devices 2 --trainer.num_nodes 1"),
    ("2", {"devices": 2, "num_nodes": 3}, "pass --trainer.devices 2 --trainer.num_nodes 1"),
    ("2,1", {"devices": "auto", "num_nodes": 1}, "srun --ntasks-per-node"),
])
def test_srun_tasks_that_disagree_with_the_trainer_are_one_sentence(monkeypatch, per_node, trainer, fix):
    srun_env(monkeypatch, 2 if per_node == "2" else 3, per_node, nodes=1 if per_node == "2" else 2)
    with pytest.raises(ValueError, match="srun started") as raised:
        agree_with_srun(trainer)
    assert fix in str(raised.value)


def test_an_srun_rank_other_than_0_creates_and_locks_no_run_folder(monkeypatch, tmp_path):
    """Rank 1 of ``srun -n2`` chooses no folder of its own (rank 0's reaches it through Lightning's broadcasts)
    and takes a resumed run's folder without refusing it as in use."""
    srun_env(monkeypatch, 2, "2", rank=1)
    assert global_rank() == 1
    folder, resumes = choose(None, None, str(tmp_path / "runs"))
    assert (folder, resumes) == (tmp_path / "runs", False) and not (tmp_path / "runs").exists()
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("{}")
    (run / "checkpoints" / "last.ckpt").write_bytes(b"")
    assert choose(None, str(run / "checkpoints" / "last.ckpt"), None) == (run, True)
    assert choose(str(run), None, None) == (run, True)  # rank 0 refuses a folder holding a run; rank 1 follows


@pytest.mark.slow
def test_two_srun_tasks_train_exactly_as_one_process_on_the_same_global_batch(slurm, tmp_path):  # noqa: F811
    """``srun -N1 -n2 python -m lit_rnncells fit ...`` through the real Slurm: 2 tasks × batch 4 after 3 SGD steps
    hold the weights of 1 process × batch 8."""
    assert_ddp_matches_one_process(lambda devices, batch: logic(tmp_path, tmp_path, tmp_path / f"run{devices}",
                                                                batch, 0.0),
                                   tmp_path, launch=["srun", "-N1", "-n2", "--time", "10"])


@pytest.mark.parametrize("in_a_job", [False, True])
def test_lightnings_srun_hint_is_dropped_outside_a_slurm_job_only(monkeypatch, in_a_job):
    """On a machine with Slurm installed Lightning warns on every Trainer that srun is not used: noise outside a
    job (a login node, a workstation), a hint worth keeping inside one."""
    import warnings

    from lit_rnncells.utils.quiet import quiet_known_noise

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    if in_a_job:
        monkeypatch.setenv("SLURM_JOB_ID", "7")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_known_noise()
        warnings.warn("The `srun` command is available on your system but is not used. HINT: ...", UserWarning)
    assert len(caught) == (1 if in_a_job else 0)
