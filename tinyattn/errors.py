"""The errors tinyattn raises on bad input.

Every error is a `TinyattnError` and also the built-in exception a Python user would expect
(`ShapeError` a `ValueError` and, as torch's, a `RuntimeError`; `DimError` an `IndexError`, ...),
so both kinds of `except` work.
Messages name the op (or key, or file) and the shapes involved, and say what to do.
Warnings go through `warn_user`, which points them at the user's line.
"""

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message, category=UserWarning):
    """warnings.warn, pointing at the user's line: the innermost frame outside the tinyattn
    package, however many of its functions and wrappers lie between (no stacklevel to count)."""
    frame, level = sys._getframe(1), 2  # (level 2: warn_user's caller)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


class TinyattnError(Exception):
    """Base class of every error raised by tinyattn on purpose."""


class ShapeError(TinyattnError, ValueError, RuntimeError):
    """Shapes that do not fit together (matmul, broadcasting, reshape, view, masks, attention):
    a ValueError and, as torch raises them, a RuntimeError, so a torch habit such as
    `try: x.view(s) except RuntimeError: x.reshape(s)` works too."""


class LinAlgError(TinyattnError, RuntimeError):
    """A matrix that a linear-algebra routine cannot take: singular (linalg.inv, linalg.solve),
    not positive-definite (linalg.cholesky). A RuntimeError, as torch.linalg.LinAlgError is;
    also ta.linalg.LinAlgError."""


class DimError(TinyattnError, IndexError):
    """A `dim` argument out of range for the tensor it applies to."""


class DTypeError(TinyattnError, TypeError):
    """A dtype an op cannot take (float targets, integer tensors with grad, object arrays)."""


class BackendError(TinyattnError, RuntimeError):
    """A backend that cannot be used here (no CuPy, no GPU), or two backends mixed in one op."""


class GraphError(TinyattnError, RuntimeError):
    """Misuse of the graph: backward through a freed graph, non-scalar backward without gradient."""


class GradcheckError(TinyattnError, AssertionError):
    """An analytic gradient that disagrees with finite differences."""


class CheckpointError(TinyattnError, ValueError):
    """A checkpoint file that is corrupt, truncated, of the wrong kind, or not for this model."""


class StateDictError(CheckpointError, RuntimeError):
    """A state dict that does not fit the module it is loaded into (missing or unexpected keys,
    shapes): a CheckpointError (a ValueError) and, as torch's load_state_dict raises, a
    RuntimeError, so both kinds of `except` work."""


def fmt_shape(shape):
    """(2, 3) -> '(2, 3)', () -> '()': shapes in messages always read like tuples."""
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"
