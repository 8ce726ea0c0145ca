"""Experiments over runs: the comparison runner (the ``compare`` package: plan, runner and launchers, child, CLI),
what it writes (``report``), parameter matching (``param_match``), the learning-curve callback (``curves``), the
papers' reproduction reports (``reproduce``, written into a page by ``report_page``) and their paper-size settings
(``paper_scale``), and the cells x tasks leaderboard over the runner (``leaderboard``). ``python -m
lit_rnncells.compare``, ``python -m lit_rnncells.reproduce`` and ``python -m lit_rnncells.leaderboard`` run them."""
