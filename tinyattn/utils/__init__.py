"""tinyattn.utils: torch.utils's place for what is not a layer or an op: `data` (Dataset,
TensorDataset, DataLoader, random_split, samplers) and `checkpoint` (activation checkpointing)."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
