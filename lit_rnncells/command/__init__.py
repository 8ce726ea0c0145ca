"""The training command's machinery (what :mod:`lit_rnncells.cli` runs): the LightningCLI subclass
(:mod:`.lightning_cli`), the checks before work starts (:mod:`.start_checks`), the run folder (:mod:`.run_folder`),
the callbacks it adds (:mod:`.callbacks`), one-line user errors (:mod:`.errors`), CPU defaults (:mod:`.cpu_defaults`),
``srun`` tasks (:mod:`.slurm_tasks`) and the old option names (:mod:`.deprecated_names`)."""
