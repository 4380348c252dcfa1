"""AdaptiveLogSoftmaxWithLoss, torch's efficient softmax over many classes (Grave et al.): a
head over the shortlist of frequent classes and one entry per cluster, and a low-rank tail per
cluster of rarer ones. Its forward returns torch's named tuple _ASMoutput(output, loss); log_prob
and predict as torch's; parameter names, shapes and initialisation as torch's, so torch's
state_dict loads."""

from collections import namedtuple

from .. import functional as F
from ..errors import DimError, ShapeError, fmt_shape
from ..tensor import Tensor, _fresh
from .layers import Linear
from .module import Module, ModuleList, Sequential

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class _TargetRangeError(DimError, RuntimeError):
    """A target class out of range: a DimError and, as torch raises it, a RuntimeError."""


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax over n_classes, split by cutoffs (sorted, unique, in 1..n_classes-1)
    into a shortlist [0, cutoffs[0]) and clusters; cluster i's tail projects in_features to
    in_features // div_value ** (i + 1), then to its classes. head_bias: a bias on the head."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             f"n_classes-1 (AdaptiveLogSoftmaxWithLoss: got {cutoffs} for "
                             f"n_classes={n_classes})")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        kw = dict(device=device, dtype=dtype)
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, **kw),
                                        Linear(hsz, osz, bias=False, **kw)))

    def reset_parameters(self):
        """torch's initialisation of the head and every tail layer, again."""
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        """_ASMoutput(output, loss): each row's log-probability of its target (N,) (or () for an
        unbatched (in_features,) input and 0-d target) and the mean negative of it."""
        x, target = self._check(input_, target_)
        batched = target.ndim > 0
        if not batched:
            x, target = x.unsqueeze(0), target.unsqueeze(0)
        xp = target.backend.xp
        t = target._data
        output = x.new_zeros(t.shape[0])
        gather_inds = xp.array(t, copy=True)
        bounds = [0] + self.cutoffs
        for i in range(1, len(bounds) - 1):
            rows = xp.nonzero((t >= bounds[i]) & (t < bounds[i + 1]))[0]
            if rows.size == 0:
                continue
            index = _fresh(rows, backend=x.backend)
            relative = _fresh(t[rows] - bounds[i], backend=x.backend)
            gather_inds[rows] = self.shortlist_size + i - 1
            logp = F.log_softmax(self.tail[i - 1](x.index_select(0, index)), dim=1)
            output = output.index_copy(0, index, logp.gather(1, relative.unsqueeze(1)).squeeze(1))
        if t.size and (int(t.min()) < 0 or int(t.max()) >= self.n_classes):
            raise _TargetRangeError(f"AdaptiveLogSoftmaxWithLoss: Target values should be in "
                                    f"[0, {self.n_classes - 1}], but values in range "
                                    f"[{int(t.min())}, {int(t.max())}] were found")
        head = F.log_softmax(self.head(x), dim=1)
        inds = _fresh(gather_inds, backend=x.backend).unsqueeze(1)
        output = output + head.gather(1, inds).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _check(self, x, target):
        x = x if isinstance(x, Tensor) else _fresh(x)
        target = target if isinstance(target, Tensor) else _fresh(target, backend=x.backend)
        name = "AdaptiveLogSoftmaxWithLoss"
        shapes = f"input {fmt_shape(x.shape)}, target {fmt_shape(target.shape)}"
        if target.ndim > 1:
            raise ShapeError(f"{name}: 0D or 1D target tensor expected, multi-target not "
                             f"supported ({shapes})")
        if target.ndim == 1 and x.shape[0] != target.shape[0]:
            raise ShapeError(f"{name}: Input and target should have the same size in the batch "
                             f"dimension ({shapes})")
        if x.ndim != target.ndim + 1:
            raise ShapeError(f"{name}: a {target.ndim}D target expects a {target.ndim + 1}D "
                             f"input ({shapes})")
        return x, target

    def _get_full_log_prob(self, x, head_output):
        """(N, n_classes) log-probabilities: the head's for the shortlist, each cluster's own
        plus its head entry for its classes."""
        head = F.log_softmax(head_output, dim=1)
        parts = [head[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](x), dim=1)
            parts.append(cluster + head[:, self.shortlist_size + i].unsqueeze(1))
        return F.cat(parts, dim=1)

    def log_prob(self, input):  # noqa: A002 - torch's argument name
        """Log-probabilities of all n_classes for each row of (N, in_features)."""
        x = input if isinstance(input, Tensor) else _fresh(input)
        return self._get_full_log_prob(x, self.head(x))

    def predict(self, input):  # noqa: A002 - torch's argument name
        """The most probable class of each row: log_prob(input).argmax(1), computing the
        clusters only for rows whose head picks a cluster."""
        x = input if isinstance(input, Tensor) else _fresh(input)
        head_output = self.head(x)
        output = head_output.argmax(dim=1)
        outside = (output >= self.shortlist_size)._data
        if not outside.any():
            return output
        if outside.all():
            return self._get_full_log_prob(x, head_output).argmax(dim=1)
        rows = _fresh(x.backend.xp.nonzero(outside)[0], backend=x.backend)
        picked = self._get_full_log_prob(x.index_select(0, rows),
                                         head_output.index_select(0, rows)).argmax(dim=1)
        return output.detach().index_copy(0, rows, picked)
