"""Experiments over runs: the comparison runner (``compare``), what it writes (``report``), parameter
matching (``param_match``), the learning-curve callback (``curves``) and the papers' reproduction reports
(``reproduce``). ``python -m lit_rnncells.compare`` and ``python -m lit_rnncells.reproduce`` run them."""
