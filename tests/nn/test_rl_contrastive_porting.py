"""Policy-gradient RL (REINFORCE, PPO, DQN) and contrastive learning (CLIP, SimCLR) as torch
tutorials write them, run in tinyattn and in torch from the same weights, data and random draws:
values, losses, gradients and optimizer steps agree. Also the pieces such code leans on: a 0-d
Parameter made by an op (CLIP's logit_scale), Categorical's torch surface, soft target updates."""

import math

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

LOG_SCALE = float(np.log(1 / 0.07))


def _copy_weights(theirs, ours):
    """torch module -> tinyattn module, through state_dict and NumPy."""
    ours.load_state_dict({k: ta.tensor(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})


def _close(got, want, tol):
    got = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    want = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# ---- a 0-d Parameter made by an op: CLIP's logit_scale -------------------------------------------

def _logit_scale(lib):
    return lib.nn.Parameter(lib.ones([]) * np.log(1 / 0.07))


@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-2)),
    ("SGD", dict(lr=0.01, momentum=0.9, weight_decay=1e-2)),
    ("Adam", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
])
def test_a_zero_dim_parameter_made_by_an_op_steps_as_torch(name, kw):
    """torch.ones([]) * np.log(1 / 0.07) is a 0-d op result: its steps must land in the
    parameter (they were lost, or the momentum buffer went stale)."""
    def run(lib):
        p, q = _logit_scale(lib), (lib.ones([]) * 2.0).requires_grad_()  # (a leaf too)
        opt = getattr(lib.optim, name)([p, q], **kw)
        seen = []
        for _ in range(4):
            opt.zero_grad()
            ((p.exp() * 0.3 - p * q) ** 2).backward()
            opt.step()
            seen.append((p.item(), q.item()))
        return np.array(seen)

    np.testing.assert_allclose(run(ta), run(torch), rtol=1e-5)


def test_load_state_dict_into_a_zero_dim_parameter_or_buffer_made_by_an_op():
    model = ta.nn.Module()
    model.logit_scale = _logit_scale(ta)
    model.register_buffer("count", ta.ones([]) * 3.0)
    model.load_state_dict({"logit_scale": ta.tensor(1.5), "count": ta.tensor(4.0)})
    assert model.logit_scale.item() == 1.5 and model.count.item() == 4.0
    model.count = model.count * 0.5  # a buffer rebound to an op's result, as an EMA counter is
    model.load_state_dict({"logit_scale": ta.tensor(2.5), "count": ta.tensor(7.0)})
    assert model.logit_scale.item() == 2.5 and model.count.item() == 7.0


def test_detach_of_a_zero_dim_op_result_shares_its_memory():
    for lib in (ta, torch):
        p = _logit_scale(lib)
        d = p.detach()
        d.add_(1.0)  # torch: detach() shares the memory, so p sees the write
        assert p.item() == pytest.approx(LOG_SCALE + 1, rel=1e-6), lib.__name__
        x = lib.ones([]) * 2.0
        y = x.detach()
        y.mul_(3.0)
        assert x.item() == 6.0, lib.__name__


# ---- Categorical's torch surface that RL code reaches for ----------------------------------------

D, TD = ta.distributions, torch.distributions
LOGITS = np.array([[0.1, 2.0, -1.0], [0.3, 0.0, 0.5]])
OTHER = np.array([[1.0, -0.5, 0.2], [0.0, 0.0, 0.0]])


@pytest.mark.parametrize("kind", ["logits", "probs"])
def test_categorical_expand_support_mean_perplexity_as_torch(kind):
    values = LOGITS if kind == "logits" else np.exp(LOGITS)
    ours = ta.distributions.Categorical(**{kind: ta.tensor(values)})
    theirs = torch.distributions.Categorical(**{kind: torch.tensor(values)})
    assert ta.distributions.Categorical.has_enumerate_support is True
    for expand in (True, False):
        got, want = ours.enumerate_support(expand), theirs.enumerate_support(expand)
        assert got.shape == tuple(want.shape) and got.dtype == np.int64
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    s = ours.support
    assert (s.lower_bound, s.upper_bound) == (0, 2) and repr(s) == repr(theirs.support)
    np.testing.assert_array_equal(s.check(ta.tensor([0, 2, 3, -1])).numpy(),
                                  theirs.support.check(torch.tensor([0, 2, 3, -1])).numpy())
    wide, twide = ours.expand((4, 2)), theirs.expand(torch.Size([4, 2]))
    assert wide.batch_shape == (4, 2) and tuple(wide.probs.shape) == (4, 2, 3)
    _close(wide.log_prob(ta.tensor([1, 2])), twide.log_prob(torch.tensor([1, 2])), 1e-12)
    _close(wide.entropy(), twide.entropy(), 1e-12)
    assert wide.sample((5,)).shape == (5, 4, 2)
    _close(ours.perplexity(), theirs.perplexity(), 1e-12)
    assert np.isnan(ours.mean.numpy()).all() and ours.mean.shape == tuple(theirs.mean.shape)
    assert np.isnan(ours.variance.numpy()).all() and ours.variance.shape == (2,)
    fresh = torch.distributions.Categorical(**{kind: torch.tensor(values)})  # (torch's repr
    assert repr(ours) == repr(fresh).replace("torch.Size([2, 3])", "(2, 3)")  # grows on use)
    with pytest.warns(FutureWarning):
        assert ours.sample_n(7).shape == (7, 2)


def test_kl_divergence_of_categoricals_and_normals_as_torch_with_gradients():
    x, tx = ta.tensor(LOGITS, requires_grad=True), torch.tensor(LOGITS, requires_grad=True)
    probs = np.array([[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]])  # a zero: 0 log 0 adds 0, p/0 is inf
    got = D.kl_divergence(D.Categorical(logits=x), D.Categorical(logits=ta.tensor(OTHER)))
    want = TD.kl_divergence(TD.Categorical(logits=tx), TD.Categorical(logits=torch.tensor(OTHER)))
    _close(got, want, 1e-12)
    got.sum().backward()
    want.sum().backward()
    _close(x.grad, tx.grad, 1e-10)
    got = D.kl.kl_divergence(D.Categorical(probs=ta.tensor(probs)),
                             D.Categorical(probs=ta.tensor(probs[::-1].copy())))
    want = TD.kl.kl_divergence(TD.Categorical(probs=torch.tensor(probs)),
                               TD.Categorical(probs=torch.tensor(probs[::-1].copy())))
    _close(got, want, 1e-12)
    from tinyattn.distributions.kl import kl_divergence  # torch's import line
    m, s = ta.tensor([0.0, 1.0], requires_grad=True), ta.tensor([1.0, 0.5], requires_grad=True)
    tm, ts = torch.tensor([0.0, 1.0], requires_grad=True), torch.tensor([1.0, 0.5],
                                                                        requires_grad=True)
    got = kl_divergence(D.Normal(m, s), D.Normal(0.5, ta.tensor([2.0, 1.0])))
    want = TD.kl_divergence(TD.Normal(tm, ts), TD.Normal(0.5, torch.tensor([2.0, 1.0])))
    _close(got, want, 1e-6)
    got.sum().backward()
    want.sum().backward()
    _close(m.grad, tm.grad, 1e-6)
    _close(s.grad, ts.grad, 1e-6)
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Categorical(logits=x), D.Normal(0.0, 1.0))


# ---- REINFORCE on a toy NumPy environment --------------------------------------------------------

class _Walk:
    """A 1-d walk: the state is (position, velocity, bias, 1); action 0/1/2 pushes left, not at
    all, right; the reward is -|position|. Written in NumPy, as gym environments are."""

    def __init__(self, rng):
        self.rng, self.s = rng, rng.standard_normal(4) * 0.1

    def step(self, a):
        self.s = self.s + np.array([self.s[1], a - 1.0, 0.0, 0.0]) * 0.1
        return self.s.copy(), -abs(self.s[0])


def _policy(lib, n_in=4, n_out=3):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(n_in, 16), lib.nn.ReLU(), lib.nn.Linear(16, n_out))


def _reinforce(lib, policy, opt, draws, probs_form):
    """One episode of the pytorch/examples REINFORCE loop; actions from NumPy uniforms (the
    inverse CDF of the policy's probs) so both libraries take the same ones."""
    env = _Walk(np.random.default_rng(0))
    s, log_probs, entropies, rewards = env.s.copy(), [], [], []
    for u in draws:
        logits = policy(lib.tensor(s).unsqueeze(0))
        dist = (lib.distributions.Categorical(probs=lib.nn.functional.softmax(logits, dim=1))
                if probs_form else lib.distributions.Categorical(logits=logits))
        assert tuple(dist.sample().shape) == (1,) and tuple(dist.sample((5,)).shape) == (5, 1)
        a = int(np.searchsorted(np.cumsum(dist.probs.detach().numpy()[0]), u))
        log_probs.append(dist.log_prob(lib.tensor([a])))
        entropies.append(dist.entropy())
        s, r = env.step(a)
        rewards.append(r)
    ret, returns = 0.0, []
    for r in rewards[::-1]:
        ret = r + 0.99 * ret
        returns.insert(0, ret)
    returns = lib.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    loss = -(lib.cat(log_probs) * returns).sum() - 0.01 * lib.stack(entropies).mean()
    opt.zero_grad()
    loss.backward()
    grads = [p.grad.numpy().copy() for p in policy.parameters()]
    opt.step()
    return loss.item(), grads


@pytest.mark.parametrize("probs_form", [False, True])
def test_reinforce_matches_torch_in_float64(probs_form):
    theirs, ours = _policy(torch).double(), _policy(ta).double()
    _copy_weights(theirs, ours)
    t_opt, o_opt = torch.optim.Adam(theirs.parameters(), 1e-2), ta.optim.Adam(ours.parameters(),
                                                                                  1e-2)
    rng = np.random.default_rng(1)
    for _ in range(3):
        draws = rng.random(12)
        want, t_grads = _reinforce(torch, theirs, t_opt, draws, probs_form)
        got, o_grads = _reinforce(ta, ours, o_opt, draws, probs_form)
        assert got == pytest.approx(want, rel=1e-10, abs=1e-12)
        for g, tg in zip(o_grads, t_grads, strict=True):
            _close(g, tg, 1e-9)
    for (k, v), (k2, v2) in zip(theirs.state_dict().items(), ours.state_dict().items(),
                                strict=True):
        assert k == k2
        _close(v2, v, 1e-10)


# ---- PPO: GAE, clipped surrogate, value loss, minibatches, grad clipping ----------------------

def _actor_critic(lib):
    lib.manual_seed(0)

    class ActorCritic(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = lib.nn.Sequential(lib.nn.Linear(4, 32), lib.nn.Tanh())
            self.pi, self.v = lib.nn.Linear(32, 3), lib.nn.Linear(32, 1)

        def forward(self, x):
            h = self.body(x)
            return self.pi(h), self.v(h).squeeze(-1)

    return ActorCritic()


def _ppo(lib, model, rollout, perms, value_loss):
    F = lib.nn.functional  # noqa: N806 - torch's spelling
    obs, acts, rews, dones = rollout
    opt = lib.optim.Adam(model.parameters(), lr=3e-3, eps=1e-5)
    o, a = lib.tensor(obs), lib.as_tensor(acts, dtype=lib.long)
    with lib.no_grad():
        logits, values = model(o)
        old_logp = lib.distributions.Categorical(logits=logits).log_prob(a)
    adv, last, n = lib.zeros_like(values), 0.0, len(rews)
    for t in reversed(range(n)):
        next_v = values[t + 1] if t + 1 < n else 0.0
        delta = rews[t] + 0.99 * next_v * (1 - dones[t]) - values[t]
        adv[t] = last = delta + 0.99 * 0.95 * (1 - dones[t]) * last
    ret = adv + values
    seen = []
    for perm in perms:
        for start in range(0, n, 8):
            idx = lib.tensor(perm[start:start + 8])
            logits, v = model(o[idx])
            dist = lib.distributions.Categorical(logits=logits)
            ratio = (dist.log_prob(a[idx]) - old_logp[idx].detach()).exp()
            mb = (adv[idx] - adv[idx].mean()) / (adv[idx].std() + 1e-8)
            surr1, surr2 = ratio * mb, lib.clamp(ratio, 1 - 0.2, 1 + 0.2) * mb
            loss = (-lib.min(surr1, surr2).mean() + 0.5 * getattr(F, value_loss)(v, ret[idx])
                    - 0.01 * dist.entropy().mean())
            opt.zero_grad()
            loss.backward()
            norm = lib.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
            opt.step()
            seen.append((loss.item(), float(norm), ((ratio - 1).abs() > 0.2).float().mean().item()))
    return np.array(seen)


@pytest.mark.parametrize("value_loss", ["smooth_l1_loss", "mse_loss"])
def test_ppo_update_matches_torch(value_loss):
    rng = np.random.default_rng(2)
    rollout = (rng.standard_normal((16, 4)), rng.integers(0, 3, 16), rng.standard_normal(16),
               (rng.random(16) < 0.2).astype(np.float64))
    perms = [rng.permutation(16) for _ in range(3)]  # torch.randperm's, drawn in NumPy
    assert ta.randperm(16).dtype == np.int64 and sorted(ta.randperm(16).tolist()) == list(range(16))
    theirs, ours = _actor_critic(torch).double(), _actor_critic(ta).double()
    _copy_weights(theirs, ours)
    np.testing.assert_allclose(_ppo(ta, ours, rollout, perms, value_loss),
                               _ppo(torch, theirs, rollout, perms, value_loss), rtol=1e-9,
                               atol=1e-12)
    for k, v in theirs.state_dict().items():
        _close(ours.state_dict()[k], v, 1e-10)


# ---- DQN: gather / max targets, target network, soft update ---------------------------------

def _dqn(lib, policy, batch):
    F = lib.nn.functional  # noqa: N806 - torch's spelling
    s, a, r, s2, done = batch
    target = _policy(lib, 4, 3)
    target.load_state_dict(policy.state_dict())
    opt = lib.optim.RMSprop(policy.parameters(), lr=1e-2)
    seen, tau = [], 0.1
    for step in range(3):
        q = policy(lib.from_numpy(s))
        q_sa = lib.gather(q, 1, lib.as_tensor(a).unsqueeze(1)).squeeze(1)
        with lib.no_grad():
            q_next = target(lib.tensor(s2))
            best = q_next.max(1)[0]
            assert (best == q_next.max(dim=1).values).all()
            double = q_next.gather(1, policy(lib.tensor(s2)).argmax(dim=1, keepdim=True))
            y = lib.tensor(r) + 0.99 * best * (1 - lib.tensor(done, dtype=lib.float32))
        loss = F.smooth_l1_loss(q_sa, y) + 0.1 * F.mse_loss(q_sa, double.squeeze(1))
        opt.zero_grad()
        loss.backward()
        lib.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        if step == 1:  # the in-place spelling of the same soft update
            with lib.no_grad():
                for tp, p in zip(target.parameters(), policy.parameters(), strict=True):
                    tp.mul_(1 - tau).add_(p, alpha=tau)
        else:
            for tp, p in zip(target.parameters(), policy.parameters(), strict=True):
                tp.data.copy_(tau * p.data + (1 - tau) * tp.data)
        seen.append(loss.item())
    return seen, [p.detach().numpy().copy() for p in target.parameters()]


def test_dqn_update_with_a_soft_target_network_matches_torch():
    rng = np.random.default_rng(3)
    batch = (rng.standard_normal((8, 4)).astype(np.float32), rng.integers(0, 3, 8),
             rng.standard_normal(8).astype(np.float32),
             rng.standard_normal((8, 4)).astype(np.float32), rng.random(8) < 0.3)
    theirs, ours = _policy(torch), _policy(ta)
    _copy_weights(theirs, ours)
    (t_loss, t_target), (o_loss, o_target) = _dqn(torch, theirs, batch), _dqn(ta, ours, batch)
    np.testing.assert_allclose(o_loss, t_loss, rtol=1e-5)
    for got, want in zip(o_target, t_target, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---- CLIP and SimCLR ---------------------------------------------------------------------------

def _clip(lib):
    lib.manual_seed(0)
    nn = lib.nn

    class CLIP(nn.Module):
        def __init__(self):
            super().__init__()
            self.image = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 8))
            self.text = nn.Sequential(nn.Embedding(10, 8), nn.Flatten(), nn.Linear(24, 8))
            self.logit_scale = nn.Parameter(lib.ones([]) * np.log(1 / 0.07))

        def forward(self, x, tokens):
            a = nn.functional.normalize(self.image(x), dim=-1)
            b = nn.functional.normalize(self.text(tokens), dim=-1)
            return self.logit_scale.exp() * a @ b.t()

    return CLIP()


def _nt_xent(lib, z1, z2, temperature, fill):
    F = lib.nn.functional  # noqa: N806 - torch's spelling
    n = z1.shape[0]
    z = F.normalize(lib.cat([z1, z2], dim=0), dim=1)
    sim = F.cosine_similarity(z.unsqueeze(1), z.unsqueeze(0), dim=2) / temperature
    sim = sim.masked_fill(lib.eye(2 * n, dtype=lib.bool), fill)
    labels = lib.cat([lib.arange(n, 2 * n), lib.arange(0, n)])
    return F.cross_entropy(sim, labels), (sim.argmax(1) == labels).float().mean()


def _train_clip(lib, model, images, tokens):
    F = lib.nn.functional  # noqa: N806 - torch's spelling
    opt = lib.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, nesterov=True,
                        weight_decay=1e-4)
    sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=1e-3)
    seen = []
    for i in range(len(images)):
        x, t = lib.tensor(images[i]), lib.tensor(tokens[i])
        logits = model(x, t)
        labels = lib.arange(len(x))
        clip = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
        nt, acc = _nt_xent(lib, model.image(x), model.image(x * 0.9), 0.5,
                           float("-inf") if i % 2 else -9e15)
        loss = clip + 0.5 * nt
        opt.zero_grad()
        loss.backward()
        grad_scale = model.logit_scale.grad.item()
        opt.step()
        sched.step()
        model.logit_scale.data.clamp_(max=math.log(100))
        seen.append((loss.item(), acc.item(), (logits.argmax(1) == labels).float().mean().item(),
                     grad_scale, sched.get_last_lr()[0], model.logit_scale.item()))
    return np.array(seen)


def test_clip_and_simclr_training_match_torch():
    rng = np.random.default_rng(4)
    images = rng.standard_normal((4, 6, 6)).astype(np.float32)
    tokens = rng.integers(0, 10, (4, 6, 3))
    theirs, ours = _clip(torch), _clip(ta)
    _copy_weights(theirs, ours)
    assert ours.logit_scale.dtype == np.float32 and ours.logit_scale.shape == ()
    want = _train_clip(torch, theirs, images, tokens)
    got = _train_clip(ta, ours, images, tokens)
    assert want[-1, -1] < LOG_SCALE  # (the steps moved logit_scale)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)
    for k, v in theirs.state_dict().items():
        _close(ours.state_dict()[k], v, 2e-5)
    # the clamp: a logit_scale pushed past log(100) comes back to it, in place
    for lib, model in ((ta, ours), (torch, theirs)):
        with lib.no_grad():
            model.logit_scale.fill_(7.0)
        model.logit_scale.data.clamp_(max=math.log(100))
        assert model.logit_scale.item() == pytest.approx(math.log(100), rel=1e-6)
