"""The named pairs that max, min, sort, topk, cummax, cummin, median and kthvalue return with a
dim, as torch.return_types.

    values, indices = x.max(dim=1)      # or: x.max(dim=1).values / .indices
"""

from collections import namedtuple

max = namedtuple("max", ["values", "indices"])  # noqa: A001 - torch.return_types' names
min = namedtuple("min", ["values", "indices"])  # noqa: A001
sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
cummax = namedtuple("cummax", ["values", "indices"])
cummin = namedtuple("cummin", ["values", "indices"])
median = namedtuple("median", ["values", "indices"])
kthvalue = namedtuple("kthvalue", ["values", "indices"])
aminmax = namedtuple("aminmax", ["min", "max"])
