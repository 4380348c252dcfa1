"""tinyattn.utils: torch.utils's place for what is not a layer or an op; so far `data`
(Dataset, TensorDataset, DataLoader, random_split, samplers)."""

from . import data

__all__ = ["data"]
