"""The NumPy backend: the default, and the reference every other backend is tested against.

It adds nothing to the readable primitives of `Backend` but the conversions NumPy needs.
"""

import numpy as np

from .base import Backend


class NumpyBackend(Backend):
    name = "numpy"
    xp = np

    def to_numpy(self, array):
        return np.asarray(array)
