"""Helpers every layer may use, importing nothing of the package: argument checks and typed option groups
(:mod:`.arguments`), user paths (:mod:`.paths`), known noise silenced (:mod:`.quiet`), plain progress lines
(:mod:`.progress`), the W&B logger with its grouped hyperparameters (:mod:`.loggers`) and the object an import path
names (:mod:`.imports`)."""
