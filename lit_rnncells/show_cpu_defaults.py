"""``python -m lit_rnncells.show_cpu_defaults [--config CONFIG]``: the CPU settings the command line runs with
(for a config: the thread count its model gets)."""
import os
import sys

import torch

from .command.cpu_defaults import SWITCH, keep_freed_memory, threads_for

line = f"threads={torch.get_num_threads()} keep_freed_memory={keep_freed_memory()} {SWITCH}={os.environ.get(SWITCH, '1')}"
if len(sys.argv) > 2 and sys.argv[1] == "--config":
    from .cli import main

    cli = main(["--config", sys.argv[2], "--trainer.logger", "false"], run=False)
    parameters = sum(p.numel() for p in cli.model.parameters())
    line += f" model_parameters={parameters} model_threads={threads_for(cli.model) or torch.get_num_threads()}"
print(line)
