"""The example graphs `tinyattn graph` draws: a model, one batch, a forward and backward pass
recorded so the picture can show every value and gradient (the app side of tinyattn.viz)."""

import numpy as np

from . import functional as F  # noqa: N812 - the usual name
from . import nn
from .tensor import manual_seed, randn, tensor
from .train import TrainConfig, build
from .viz import record


def example(model="tiny", seed=0):
    """(loss, params, recording) for one of the example graphs: "tiny" (the default
    TinyTransformer of `tinyattn train` on two reverse-task examples), "mlp" (a two-layer MLP
    on four points) or "attention" (one causal attention call on 4 tokens). The forward and
    backward passes ran inside `record()`, so the picture can show every value and gradient."""
    manual_seed(seed)
    rng = np.random.default_rng(seed)
    with record() as rec:
        if model == "tiny":
            task, net, _, _ = build(TrainConfig(seed=seed))
            x, y = task.batch(rng, 2)  # (B, T) each
            logits = net(tensor(x))  # (B, T, V)
            loss = F.cross_entropy(logits.reshape(-1, task.vocab_size), tensor(y.reshape(-1)))
            params = net
        elif model == "mlp":
            net = nn.Sequential(nn.Linear(3, 8), nn.GELU(), nn.Linear(8, 2))
            x = tensor(rng.standard_normal((4, 3)), dtype="float32")  # (N, 3)
            loss = F.cross_entropy(net(x), tensor(np.array([0, 1, 1, 0])))
            params = net
        elif model == "attention":
            q, k, v = (randn(1, 4, 8, requires_grad=True) for _ in range(3))  # (B, T, d)
            q.name, k.name, v.name = "q", "k", "v"
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, impl="composite")
            loss = (out * out).mean()
            params = {"q": q, "k": k, "v": v}
        else:
            raise ValueError(f"example: model must be 'tiny', 'mlp' or 'attention', got {model!r}")
        loss.name = "loss"
        loss.backward(retain_graph=True)  # keep what each op saved: show_saved can list it
    return loss, params, rec
