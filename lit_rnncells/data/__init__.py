"""LightningDataModules for each dataset (hub or local files in the official format)."""
from .logic import LogicDataModule

__all__ = ["LogicDataModule"]
