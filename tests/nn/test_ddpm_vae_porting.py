"""Two small generative models ported from torch tutorials, run in both libraries from the same
weights on the same data and noise (drawn in NumPy and passed in): a DDPM on 2-D points (beta
schedules as buffers, alphas_cumprod[t][:, None], a sinusoidal timestep embedding, an EMA copy,
the reverse sampling loop) and a VAE (reparameterization, BCE-with-logits, the closed-form KL and
torch.distributions' Normal / kl_divergence), plus the variations a porter writes."""

import copy
import math

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as TF

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=1e-5, atol=1e-6)}
GRAD_TOL = {"float64": dict(rtol=1e-8, atol=1e-12), "float32": dict(rtol=1e-4, atol=1e-6)}
T_STEPS = 12


def close(ours, theirs, dtype):
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    got = ours.detach().numpy() if hasattr(ours, "detach") else np.asarray(ours)
    assert got.shape == theirs.shape
    np.testing.assert_allclose(got, theirs, **TOL[dtype])


def diffusion(lib, fn, dtype, schedule):
    """The tutorials' DDPM: the schedule as buffers and a timestep-conditioned MLP."""
    nn = lib.nn

    class Diffusion(nn.Module):
        def __init__(self, steps=T_STEPS, emb=8):
            super().__init__()
            if schedule == "linear":
                betas = lib.linspace(1e-4, 0.2, steps, dtype=dtype)
            else:  # Nichol & Dhariwal's cosine schedule
                x = lib.linspace(0, steps, steps + 1, dtype=dtype)
                ac = lib.cos(((x / steps) + 0.008) / 1.008 * math.pi * 0.5) ** 2
                betas = lib.clip(1 - (ac[1:] / ac[:-1]), 0.0001, 0.9999)
            alphas = 1.0 - betas
            alphas_cumprod = lib.cumprod(alphas, dim=0)
            prev = fn.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
            self.register_buffer("betas", betas)
            self.register_buffer("alphas", alphas)
            self.register_buffer("alphas_cumprod", alphas_cumprod)
            self.register_buffer("sqrt_ac", lib.sqrt(alphas_cumprod))
            self.register_buffer("sqrt_1m_ac", lib.sqrt(1.0 - alphas_cumprod))
            self.register_buffer("post_var", betas * (1.0 - prev) / (1.0 - alphas_cumprod))
            self.T, self.emb = steps, emb
            self.net = nn.Sequential(nn.Linear(2 + emb, 32), nn.SiLU(), nn.Linear(32, 32),
                                     nn.SiLU(), nn.Linear(32, 2))

        def embed(self, t):
            half = self.emb // 2
            freqs = lib.exp(-math.log(10000) * lib.arange(half, dtype=dtype) / half)
            args = t[:, None] * freqs[None]  # int64 timesteps meet float freqs: float
            return lib.cat([lib.sin(args), lib.cos(args)], dim=-1)

        def forward(self, x, t):
            return self.net(lib.cat([x, self.embed(t)], dim=1))

        def q_sample(self, x0, t, noise):
            return self.sqrt_ac[t][:, None] * x0 + self.sqrt_1m_ac[t].view(-1, 1) * noise

    return Diffusion().to(dtype)


def pair(dtype, schedule="linear"):
    theirs = diffusion(torch, F, getattr(torch, dtype), schedule)
    ours = diffusion(ta, TF, getattr(ta, dtype), schedule)
    ours.load_state_dict({k: ta.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_schedule_buffers_match_torch(dtype, schedule):
    ours = diffusion(ta, TF, getattr(ta, dtype), schedule)
    theirs = diffusion(torch, F, getattr(torch, dtype), schedule)
    assert [k for k, _ in ours.named_buffers()] == [k for k, _ in theirs.named_buffers()]
    for (name, b), (_, tb) in zip(ours.named_buffers(), theirs.named_buffers(), strict=True):
        assert b.dtype == np.dtype(dtype), name
        np.testing.assert_allclose(b.numpy(), tb.numpy(), rtol=1e-6 if dtype == "float32"
                                   else 1e-12, atol=1e-15, err_msg=name)


def ema_step(how, ema, model, decay, lib):
    """The three ways EMA code is written (under no_grad, in place)."""
    for e, p in zip(ema.parameters(), model.parameters(), strict=True):
        if how == "mul_add":
            e.mul_(decay).add_(p, alpha=1 - decay)
        elif how == "lerp_":
            e.lerp_(p, 1 - decay)
        else:
            e.copy_(lib.lerp(e, p, weight=1 - decay))


@pytest.mark.parametrize("ema_update", ["mul_add", "lerp_", "torch.lerp"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_ddpm_training_steps_and_ema_match_torch(dtype, ema_update):
    ours, theirs = pair(dtype, "cosine" if ema_update == "lerp_" else "linear")
    ema, tema = copy.deepcopy(ours).requires_grad_(False), copy.deepcopy(theirs)
    tema.requires_grad_(False)
    opt = ta.optim.Adam(ours.parameters(), lr=1e-2)
    topt = torch.optim.Adam(theirs.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x0, noise = (rng.standard_normal((16, 2)).astype(dtype) for _ in range(2))
        t = rng.integers(0, T_STEPS, 16)
        xt = ours.q_sample(ta.tensor(x0), ta.tensor(t), ta.tensor(noise))
        txt = theirs.q_sample(torch.tensor(x0), torch.tensor(t), torch.tensor(noise))
        close(xt, txt, dtype)
        loss = TF.mse_loss(ours(xt, ta.tensor(t)), ta.tensor(noise))
        tloss = F.mse_loss(theirs(txt, torch.tensor(t)), torch.tensor(noise))
        close(loss, tloss, dtype)
        opt.zero_grad()
        topt.zero_grad()
        loss.backward()
        tloss.backward()
        for p, tp in zip(ours.parameters(), theirs.parameters(), strict=True):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), **GRAD_TOL[dtype])
        opt.step()
        topt.step()
        with ta.no_grad(), torch.no_grad():
            ema_step(ema_update, ema, ours, 0.9, ta)
            ema_step(ema_update, tema, theirs, 0.9, torch)
    for e, te in zip(ema.state_dict().values(), tema.state_dict().values(), strict=True):
        np.testing.assert_allclose(e.numpy(), te.numpy(), **GRAD_TOL[dtype])
    assert all(not p.requires_grad for p in ema.parameters())
    assert all(p.requires_grad for p in ours.parameters())


def sample_loop(lib, model, x, noises):
    """The reverse process, as the tutorials write it."""
    with lib.no_grad():
        for t in reversed(range(model.T)):
            tb = lib.full((x.shape[0],), t, dtype=lib.long)
            eps = model(x, tb)
            a, ab = model.alphas[tb][:, None], model.alphas_cumprod[tb][:, None]
            mean = (1 / lib.sqrt(a)) * (x - model.betas[tb][:, None] / lib.sqrt(1 - ab) * eps)
            x = mean + lib.sqrt(model.post_var[t]) * noises[t] if t > 0 else mean
        return x.clamp(-3, 3)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_reverse_sampling_loop_matches_torch(dtype):
    ours, theirs = pair(dtype)
    ours.eval(), theirs.eval()
    rng = np.random.default_rng(1)
    x_end = rng.standard_normal((8, 2)).astype(dtype)
    noises = rng.standard_normal((T_STEPS, 8, 2)).astype(dtype)
    got = sample_loop(ta, ours, ta.tensor(x_end), ta.tensor(noises))
    want = sample_loop(torch, theirs, torch.tensor(x_end), torch.tensor(noises))
    assert got.dtype == np.dtype(dtype) and not got.requires_grad
    np.testing.assert_allclose(got.numpy(), want.numpy(),
                               rtol=1e-9 if dtype == "float64" else 1e-4, atol=1e-7)


def test_manual_seed_repeats_tinyattn_own_draws():
    ours, _ = pair("float32")

    def run():
        ta.manual_seed(1234)
        x0 = ta.randn(8, 2)
        t = ta.randint(0, T_STEPS, (8,))
        noise = ta.randn_like(x0)
        z = ta.distributions.Normal(ta.zeros(8, 2), 1.0).rsample()
        return [x0, t, noise, z, sample_loop(ta, ours, ta.randn(8, 2), ta.randn(T_STEPS, 8, 2))]

    first, second = run(), run()
    assert first[1].dtype == np.int64 and first[2].dtype == np.float32
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(first[0].numpy(), first[2].numpy())


@pytest.mark.parametrize("expr", [
    lambda m: m.arange(4)[:, None] * m.exp(-m.arange(3.0))[None, :],
    lambda m: m.arange(4) / 10,
    lambda m: m.arange(4).float()[:, None] / m.tensor(7),
    lambda m: m.tensor([3, 0, 9]) * 0.5 + m.tensor(0.25, dtype=m.float64),
    lambda m: m.ones(3) + m.tensor([1, 2, 3]),
    lambda m: m.linspace(0.1, 1, 10).gather(-1, m.tensor([3, 0, 9])).reshape(3, *((1,) * 2)),
    lambda m: m.linspace(0.1, 1, 10, dtype=m.float64)[m.tensor([3, 0, 9], dtype=m.int32)],
    lambda m: (1 - (m.tensor([0, 1, 2]) == 0).float()).reshape(3, 1),
    lambda m: m.full((3,), 4),
    lambda m: m.randint(low=0, high=10, size=(5,)) * 0,
    lambda m: m.cat((m.ones(2, 3).sin(), m.zeros(2, 3).cos()), axis=-1),
    lambda m: m.cumprod(m.linspace(0.9, 0.99, 5), axis=0),
    lambda m: m.clamp(m.linspace(0, 1, 5), min=1e-20).log(),
    lambda m: m.zeros(3).lerp_(m.ones(3), weight=0.25),
    lambda m: m.ones(3).mul_(0.9).add_(other=m.full((3,), 2.0), alpha=1 - 0.9),
], ids=lambda f: "")
def test_timestep_and_schedule_variations_match_torch(expr):
    got, want = expr(ta), expr(torch)
    assert str(got.dtype) == str(want.dtype).replace("torch.", "")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


# --- the VAE -------------------------------------------------------------------------------

def vae(lib, fn, dtype, d=6, h=16, z=3):
    nn = lib.nn

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc21, self.fc22 = nn.Linear(d, h), nn.Linear(h, z), nn.Linear(h, z)
            self.fc3, self.fc4 = nn.Linear(z, h), nn.Linear(h, d)

        def encode(self, x):
            h1 = fn.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def decode(self, z):
            return self.fc4(fn.relu(self.fc3(z)))

        def forward(self, x, eps):
            mu, logvar = self.encode(x.view(-1, d))
            return self.decode(mu + lib.exp(0.5 * logvar) * eps), mu, logvar

    return VAE().to(dtype)


def vae_loss(lib, fn, logits, x, mu, logvar, kl):
    bce = fn.binary_cross_entropy_with_logits(logits, x.view(-1, 6), reduction="sum")
    if kl == "closed form":
        return bce + -0.5 * lib.sum(1 + logvar - mu.pow(2) - logvar.exp())
    q = lib.distributions.Normal(mu, lib.exp(0.5 * logvar))
    return bce + lib.distributions.kl_divergence(q, lib.distributions.Normal(0, 1)).sum()


@pytest.mark.parametrize("kl", ["closed form", "kl_divergence"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_vae_training_and_decoding_match_torch(dtype, kl):
    theirs = vae(torch, F, getattr(torch, dtype))
    ours = vae(ta, TF, getattr(ta, dtype))
    ours.load_state_dict({k: ta.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    opt, topt = ta.optim.Adam(ours.parameters()), torch.optim.Adam(theirs.parameters())
    rng = np.random.default_rng(2)
    for _ in range(3):
        x = (rng.random((8, 6)) > 0.5).astype(dtype)
        eps = rng.standard_normal((8, 3)).astype(dtype)
        loss = vae_loss(ta, TF, *ours(ta.tensor(x), ta.tensor(eps))[:1], ta.tensor(x),
                        *ours(ta.tensor(x), ta.tensor(eps))[1:], kl)
        tloss = vae_loss(torch, F, *theirs(torch.tensor(x), torch.tensor(eps))[:1],
                         torch.tensor(x), *theirs(torch.tensor(x), torch.tensor(eps))[1:], kl)
        assert loss.dtype == np.dtype(dtype)
        close(loss, tloss, dtype)
        opt.zero_grad(), topt.zero_grad()
        loss.backward(), tloss.backward()
        for p, tp in zip(ours.parameters(), theirs.parameters(), strict=True):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), **GRAD_TOL[dtype])
        opt.step(), topt.step()
    ours.eval(), theirs.eval()
    z = rng.standard_normal((4, 3)).astype(dtype)
    with ta.no_grad(), torch.no_grad():
        close(ta.sigmoid(ours.decode(ta.tensor(z))), torch.sigmoid(theirs.decode(
            torch.tensor(z))), dtype)


def test_normal_rsample_is_the_reparameterization():
    mu = ta.tensor([[0.1, -0.3], [0.5, 0.0]], requires_grad=True)
    logvar = ta.tensor([[0.2, -1.0], [0.0, 0.4]], requires_grad=True)
    q = ta.distributions.Normal(mu, ta.exp(0.5 * logvar))
    assert q.has_rsample and not ta.distributions.Categorical(logits=mu).has_rsample
    z = q.rsample(generator=ta.Generator().manual_seed(5))
    eps = ta.randn(2, 2, generator=ta.Generator().manual_seed(5))
    np.testing.assert_allclose(z.detach().numpy(), (mu + ta.exp(0.5 * logvar) * eps)
                               .detach().numpy(), rtol=1e-6)
    z.sum().backward()
    np.testing.assert_allclose(mu.grad.numpy(), np.ones((2, 2)))
    np.testing.assert_allclose(logvar.grad.numpy(),
                               0.5 * np.exp(0.5 * logvar.detach().numpy()) * eps.numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("q_args,p_args", [
    (([[0.1, -0.3]], [0.5, 2.0]), ([1.0, 2.0], 3.0)),
    (([0.1, -0.3], [0.5, 2.0]), (0, 1)),
    ((0.5, 2.0), ([[0.0], [1.0]], [0.5, 4.0])),
])
def test_kl_divergence_of_normals_matches_torch_with_gradients(q_args, p_args):
    def make(lib, args):
        return [lib.tensor(a, dtype=lib.float64, requires_grad=True) if isinstance(a, list)
                else a for a in args]

    ours, theirs = make(ta, q_args) + make(ta, p_args), make(torch, q_args) + make(torch, p_args)
    kl = ta.distributions.kl_divergence(ta.distributions.Normal(*ours[:2]),
                                        ta.distributions.Normal(*ours[2:]))
    tkl = torch.distributions.kl_divergence(torch.distributions.Normal(*theirs[:2]),
                                            torch.distributions.Normal(*theirs[2:]))
    close(kl, tkl, "float64")
    (kl * ta.arange(1, kl.numel() + 1).reshape(kl.shape)).sum().backward()
    (tkl * torch.arange(1, tkl.numel() + 1).reshape(tkl.shape)).sum().backward()
    for a, b in zip(ours, theirs, strict=True):
        if isinstance(a, ta.Tensor):
            close(a.grad, b.grad, "float64")


def test_kl_divergence_of_categoricals_and_the_kl_module():
    from tinyattn.distributions.kl import kl_divergence, register_kl

    probs = [[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]
    other = [[0.5, 0.0, 0.5], [0.1, 0.1, 0.8]]
    got = kl_divergence(ta.distributions.Categorical(probs=ta.tensor(probs)),
                        ta.distributions.Categorical(logits=ta.tensor(other).log()))
    want = torch.distributions.kl_divergence(
        torch.distributions.Categorical(probs=torch.tensor(probs)),
        torch.distributions.Categorical(logits=torch.tensor(other).log()))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert got.numpy()[0] == np.inf
    with pytest.raises(NotImplementedError, match="Normal and q type Categorical"):
        kl_divergence(ta.distributions.Normal(0.0, 1.0),
                      ta.distributions.Categorical(probs=ta.tensor([0.5, 0.5])))

    class Wide(ta.distributions.Normal):
        pass

    @register_kl(Wide, ta.distributions.Normal)
    def _kl_wide(p, q):
        return ta.zeros(p.batch_shape)

    assert kl_divergence(Wide(0.0, 2.0), ta.distributions.Normal(0.0, 1.0)).item() == 0.0
    assert kl_divergence(ta.distributions.Normal(0.0, 1.0), Wide(0.0, 1.0)).item() == 0.0


def test_normal_expand_matches_torch():
    mu = ta.tensor([0.1, -0.3], dtype=ta.float64, requires_grad=True)
    wide = ta.distributions.Normal(mu, 2.0).expand((3, 2))
    twide = torch.distributions.Normal(torch.tensor([0.1, -0.3], dtype=torch.float64),
                                       2.0).expand((3, 2))
    assert wide.batch_shape == tuple(twide.batch_shape) == (3, 2)
    value = np.linspace(-1, 1, 6).reshape(3, 2)
    close(wide.log_prob(ta.tensor(value)), twide.log_prob(torch.tensor(value)), "float64")
    wide.log_prob(ta.tensor(value)).sum().backward()
    assert mu.grad.shape == (2,)
    assert ta.distributions.Normal(0.0, 1.0).expand(ta.Size([4])).sample().shape == (4,)
    with pytest.raises(RuntimeError):  # torch's error type
        ta.distributions.Normal(ta.zeros(2), 1.0).expand((3,))


def test_tensor_new_is_torchs_legacy_constructor():
    std = ta.ones(2, 3, dtype=ta.float64, requires_grad=True)
    eps = std.data.new(std.size()).normal_()  # the old pytorch/examples VAE
    assert eps.shape == (2, 3) and eps.dtype == np.float64 and not eps.requires_grad
    tstd = torch.ones(2, 3, dtype=torch.float64)
    for args in [(), (2, 3), ([1, 2],), ((2, 3),)]:
        got, want = std.new(*args), tstd.new(*args)
        assert got.shape == tuple(want.shape) and got.dtype == np.float64
        if args and not isinstance(args[0], int):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(TypeError):
        std.new(ta.tensor([1, 2]))
    assert std.new(std).shape == (2, 3)
