"""LBFGS: torch.optim.LBFGS's algorithm, step for step (heavily inspired by minFunc, as torch's).

`step(closure)` runs up to max_iter L-BFGS iterations on all the parameters seen as one flat
vector: the two-loop recursion over the last history_size curvature pairs, a first step of
min(1, 1/|g|₁) lr, then lr; with line_search_fn="strong_wolfe", torch's strong-Wolfe line
search (cubic interpolation, bracketing and zoom, c1 = 1e-4, c2 = 0.9). It stops on the same
tests as torch's (tolerance_grad on max |g|, tolerance_change on the step and the loss, max_eval
closure calls). The state has torch's names (d, t, old_dirs, old_stps, ro, H_diag, al,
prev_flat_grad, prev_loss, func_evals, n_iter), kept on the first parameter, and the numbers
are computed in the parameters' dtype with the same operations in the same order, so a float64
run follows torch's to rounding (dot products may sum in another order; see the tests).
One parameter group only, as torch's. The closure must clear the gradients, compute the loss,
call backward() and return the loss; it is called with grad enabled.
"""

from ..autograd import TensorBase, bump_version, enable_grad, no_grad, side_effect
from ..errors import fmt_shape
from ..tensor import Tensor


def _cubic_interpolate(xp, x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), within bounds (torch's
    _cubic_interpolate)."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = xp.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(xp, obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """torch's _strong_wolfe: (f, g, t, evaluations) at the step found along d. Its two
    phases are _Search's methods: a bracket found, then zoomed into."""
    search = _Search(xp, obj_func, x, d, f, gtd, c1, c2)
    bracket, done = search.bracket(t, g, max_ls)
    low = search.zoom(bracket, done, max_ls, tolerance_change, abs(d).max())
    ts, fs, gs, _ = bracket
    return fs[low], gs[low], ts[low], search.evals


class _Search:
    """One strong-Wolfe line search along d from x (loss f, directional derivative gtd)."""

    def __init__(self, xp, obj_func, x, d, f, gtd, c1, c2):
        self.xp, self.obj_func, self.x, self.d = xp, obj_func, x, d
        self.f, self.gtd, self.c1, self.c2 = f, gtd, c1, c2
        self.evals = self.iters = 0

    def evaluate(self, t):
        f_new, g_new = self.obj_func(self.x, t, self.d)
        self.evals += 1
        return f_new, g_new, g_new.dot(self.d)

    def bracket(self, t, g, max_ls):
        """Phase one, torch's: ([steps, losses, gradients, directional derivatives], whether
        a step already satisfies the conditions)."""
        f, gtd, c1, c2 = self.f, self.gtd, self.c1, self.c2
        g = g.copy()
        f_new, g_new, gtd_new = self.evaluate(t)
        t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
        while self.iters < max_ls:
            if f_new > (f + c1 * t * gtd) or (self.iters > 1 and f_new >= f_prev):
                return [[t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()],
                        [gtd_prev, gtd_new]], False
            if abs(gtd_new) <= -c2 * gtd:
                return [[t], [f_new], [g_new], None], True
            if gtd_new >= 0:
                return [[t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()],
                        [gtd_prev, gtd_new]], False
            # interpolate
            min_step = t + 0.01 * (t - t_prev)
            max_step = t * 10
            tmp = t
            t = _cubic_interpolate(self.xp, t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                   bounds=(min_step, max_step))
            t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
            f_new, g_new, gtd_new = self.evaluate(t)
            self.iters += 1
        # reached the maximum number of line-search iterations
        return [[0, t], [f, f_new], [g, g_new], None], False

    def zoom(self, bracket, done, max_ls, tolerance_change, d_norm):
        """Phase two, torch's: shrink the bracket (in place) until a point satisfies the
        conditions; the position of the best point in it."""
        ts, fs, gs, gtds = bracket
        insuf_progress = False
        low, high = (0, 1) if fs[0] <= fs[-1] else (1, 0)
        while not done and self.iters < max_ls:
            if abs(ts[1] - ts[0]) * d_norm < tolerance_change:  # the bracket is too small
                break
            t = _cubic_interpolate(self.xp, ts[0], fs[0], gtds[0], ts[1], fs[1], gtds[1])
            t, insuf_progress = _safeguarded(t, ts, insuf_progress)
            f_new, g_new, gtd_new = self.evaluate(t)
            self.iters += 1
            if f_new > (self.f + self.c1 * t * self.gtd) or f_new >= fs[low]:
                # Armijo condition not satisfied or not lower than the lowest point
                ts[high], fs[high], gs[high], gtds[high] = t, f_new, g_new.copy(), gtd_new
                low, high = (0, 1) if fs[0] <= fs[1] else (1, 0)
            else:
                if abs(gtd_new) <= -self.c2 * self.gtd:  # Wolfe conditions satisfied
                    done = True
                elif gtd_new * (ts[high] - ts[low]) >= 0:  # the old high becomes the old low
                    ts[high], fs[high], gs[high], gtds[high] = ts[low], fs[low], gs[low], \
                        gtds[low]
                ts[low], fs[low], gs[low], gtds[low] = t, f_new, g_new.copy(), gtd_new
        return low


def _safeguarded(t, ts, insuf_progress):
    """torch's check that an interpolated step makes progress (not too near the bracket's
    ends): (the step, whether progress was insufficient)."""
    eps = 0.1 * (max(ts) - min(ts))
    if min(max(ts) - t, t - min(ts)) < eps:
        if insuf_progress or t >= max(ts) or t <= min(ts):
            # evaluate at 0.1 away from the boundary
            t = max(ts) - eps if abs(t - max(ts)) < abs(t - min(ts)) else min(ts) + eps
            return t, False
        return t, True
    return t, False


class LBFGSSteps:
    """L-BFGS, torch's (see the module's doc). lr: the step (1); max_iter: iterations per
    step() (20); max_eval: closure calls per step() (max_iter * 5 // 4); tolerance_grad (1e-7),
    tolerance_change (1e-9); history_size (100); line_search_fn: None or "strong_wolfe".
    (optim.LBFGS is this on optim.Optimizer, made there: this module imports no optim.)"""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if isinstance(lr, TensorBase) and lr.numel() != 1:
            raise ValueError(f"LBFGS: Tensor lr must be 1-element, got {fmt_shape(lr.shape)}")
        if not 0.0 <= lr:
            raise ValueError(f"LBFGS: Invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r} (torch fails at the first step: only "
                             "'strong_wolfe' is supported)")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                    "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                    "history_size": history_size, "line_search_fn": line_search_fn}
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache = None

    def _numel(self):
        if self._numel_cache is None:
            self._numel_cache = sum(p.numel() for p in self._params)
        return self._numel_cache

    def _xp(self):
        return self._params[0].backend.xp

    def _gather_flat_grad(self):
        xp = self._xp()
        views = [xp.zeros(p._data.size, dtype=p._data.dtype) if p.grad is None
                 else p.grad._data.reshape(-1) for p in self._params]
        return xp.concatenate(views, 0)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            numel = p._data.size
            p._data += step_size * update[offset:offset + numel].reshape(p._data.shape)
            bump_version(p)
            offset += numel
        assert offset == self._numel()

    def _clone_param(self):
        return [p._data.copy() for p in self._params]

    def _set_param(self, params_data):
        xp = self._xp()
        for p, pdata in zip(self._params, params_data, strict=True):
            xp.copyto(p._data, pdata)
            bump_version(p)

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    @no_grad()
    def step(self, closure):
        """One optimization step: up to max_iter iterations, each calling `closure` (which
        re-evaluates the model and returns the loss) once or more. Returns the first loss."""
        assert len(self.param_groups) == 1
        side_effect("LBFGS.step()")
        self.steps += 1

        def call():
            with enable_grad():
                return closure()

        group = self.param_groups[0]
        lr = group["lr"].item() if isinstance(group["lr"], TensorBase) else group["lr"]
        # the state, kept on the first parameter (its tensors as arrays here)
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = call()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if abs(flat_grad).max() <= group["tolerance_grad"]:  # optimal condition
            return orig_loss

        mem = {k: _arrays(state.get(k)) for k in _MEMORY}
        n_iter = 0
        while n_iter < group["max_iter"]:
            n_iter += 1
            state["n_iter"] += 1
            self._direction(mem, flat_grad, state["n_iter"] == 1, group["history_size"])
            if mem["prev_flat_grad"] is None:
                mem["prev_flat_grad"] = flat_grad.copy()
            else:
                self._xp().copyto(mem["prev_flat_grad"], flat_grad)
            mem["prev_loss"] = loss
            # the step length
            mem["t"] = (min(1.0, 1.0 / abs(flat_grad).sum()) * lr if state["n_iter"] == 1
                        else lr)
            gtd = flat_grad.dot(mem["d"])  # directional derivative, g * d
            if gtd > -group["tolerance_change"]:  # below the tolerance
                break
            loss, flat_grad, opt_cond, evals = self._advance(call, mem, loss, flat_grad, gtd,
                                                             group, n_iter, current_evals)
            current_evals += evals
            state["func_evals"] += evals
            if self._stops(group, n_iter, current_evals, opt_cond, mem, loss):
                break
        be = self._params[0].backend
        for key in _MEMORY:
            if key != "al" or mem["al"] is not None:
                state[key] = _tensors(mem[key], be)
        return orig_loss

    @staticmethod
    def _direction(mem, flat_grad, first, history_size):
        """The descent direction mem["d"]: -g at the first iteration, else the two-loop
        recursion over the curvature pairs, after the newest pair joins them (the L-BFGS
        update, torch's)."""
        if first:
            mem.update(d=-flat_grad, old_dirs=[], old_stps=[], ro=[], H_diag=1)
            return
        old_dirs, old_stps, ro = mem["old_dirs"], mem["old_stps"], mem["ro"]
        y = flat_grad - mem["prev_flat_grad"]
        s = mem["d"] * mem["t"]
        ys = y.dot(s)  # y*s
        if ys > 1e-10:
            if len(old_dirs) == history_size:  # shift the history
                old_dirs.pop(0)
                old_stps.pop(0)
                ro.pop(0)
            old_dirs.append(y)
            old_stps.append(s)
            ro.append(1.0 / ys)
            mem["H_diag"] = ys / y.dot(y)  # (y*y)
        if mem["al"] is None:
            mem["al"] = [None] * history_size
        al = mem["al"]
        q = -flat_grad
        for i in range(len(old_dirs) - 1, -1, -1):
            al[i] = old_stps[i].dot(q) * ro[i]
            q += -al[i] * old_dirs[i]
        # r = the approximate inverse Hessian times the gradient (in place: r is d)
        mem["d"] = r = q * mem["H_diag"]
        for i in range(len(old_dirs)):
            be_i = old_dirs[i].dot(r) * ro[i]
            r += (al[i] - be_i) * old_stps[i]

    def _advance(self, call, mem, loss, flat_grad, gtd, group, n_iter, current_evals):
        """Move along mem["d"]: by the strong-Wolfe line search's step, or by mem["t"]; (the
        loss, the gradient, whether it is small enough, the closure calls made)."""
        d = mem["d"]
        if group["line_search_fn"] is not None:
            x_init = self._clone_param()

            def obj_func(x, t, direction):
                return self._directional_evaluate(call, x, t, direction)

            loss, flat_grad, mem["t"], evals = _strong_wolfe(
                self._xp(), obj_func, x_init, mem["t"], d, loss, flat_grad, gtd,
                max_ls=group["max_eval"] - current_evals)
            self._add_grad(mem["t"], d)
            return loss, flat_grad, abs(flat_grad).max() <= group["tolerance_grad"], evals
        self._add_grad(mem["t"], d)  # a fixed step
        if n_iter == group["max_iter"]:  # (no use for the loss and gradient there, as torch's)
            return loss, flat_grad, False, 0
        loss = float(call())
        flat_grad = self._gather_flat_grad()
        return loss, flat_grad, abs(flat_grad).max() <= group["tolerance_grad"], 1

    @staticmethod
    def _stops(group, n_iter, current_evals, opt_cond, mem, loss):
        """torch's stopping conditions, in its order."""
        if n_iter == group["max_iter"] or current_evals >= group["max_eval"] or opt_cond:
            return True
        if abs(mem["d"] * mem["t"]).max() <= group["tolerance_change"]:  # lack of progress
            return True
        return abs(loss - mem["prev_loss"]) < group["tolerance_change"]


# the state torch's LBFGS keeps between steps, besides its counts
_MEMORY = ("d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss", "al")


def _arrays(value):
    """A state value as the step computes with it: tensors as their arrays (lists item by
    item); numbers, None as they are."""
    if isinstance(value, TensorBase):
        return value._data
    if isinstance(value, list):
        return [_arrays(v) for v in value]
    return value


def _tensors(value, be):
    """A state value as the state keeps it (torch's): arrays and NumPy scalars as tensors (0-d
    ones for the scalars) on the parameters' backend; lists item by item; numbers as they are."""
    if isinstance(value, list):
        return [_tensors(v, be) for v in value]
    if value is None or type(value) in (int, float):  # (not NumPy's float64, a float too)
        return value
    return Tensor._wrap(be.asarray(value), be)
