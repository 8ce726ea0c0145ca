"""``python -m lit_rnncells.show_cpu_defaults``: the CPU settings the command line runs with."""
import os

import torch

from .cpu_defaults import SWITCH, keep_freed_memory

print(f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset: OpenMP spins)')} threads={torch.get_num_threads()} "
      f"keep_freed_memory={keep_freed_memory()} {SWITCH}={os.environ.get(SWITCH, '1')}")
