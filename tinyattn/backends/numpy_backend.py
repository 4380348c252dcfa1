"""The NumPy backend: the default, and the reference every other backend is tested against.

It adds to the readable primitives of `Backend` the conversions NumPy needs and one faster
primitive: `scatter_add` of rows (the embedding VJP) by sorting, not `np.add.at`.
"""

import numpy as np

from .base import Backend


class NumpyBackend(Backend):
    name = "numpy"
    xp = np

    def to_numpy(self, array):
        return np.asarray(array)

    def scatter_add(self, out, index, values):
        """out[index] += values. For rows picked by a 1-D integer index (an embedding's gradient):
        sort the index, sum each run of equal ids with one `np.add.reduceat`, add once per id;
        about 4x faster than `np.add.at`, which the base class uses everywhere else."""
        if not (isinstance(index, np.ndarray) and index.ndim == 1 and index.dtype.kind in "iu"
                and index.size and values.shape == index.shape + out.shape[1:]
                and index.min() >= 0):  # a negative id and its positive twin must meet
            return super().scatter_add(out, index, values)
        order = np.argsort(index, kind="stable")
        ids = index[order]
        starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
        out[ids[starts]] += np.add.reduceat(values[order], starts, axis=0)
