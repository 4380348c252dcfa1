"""Train a tiny GPT to reverse digit strings, written out plainly against the tinyattn API.

This is what `tinyattn train` does, without the run folder and the plots: make data, build a
model, then loop over forward, loss, backward and an optimizer step. Run it from the repository:

    python examples/train_tiny_transformer.py

It prints the loss as it goes, then held-out accuracy and a few reversals (about 30 s on a laptop).
"""

import os

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn, optim

# ---- data: "31415926>62951413", the model learns the part after ">" ---------------------------

DIGITS, SEP, IGNORE = 8, 10, -100  # 8 digits per problem; token 10 is ">"
VOCAB = 11
rng = np.random.default_rng(0)


def get_batch(n):
    digits = rng.integers(0, 10, size=(n, DIGITS))  # (B, 8)
    seqs = np.concatenate([digits, np.full((n, 1), SEP), digits[:, ::-1]], axis=1)  # (B, 17)
    x, y = seqs[:, :-1], seqs[:, 1:].copy()  # (B, 16) each: y[t] is the token after x[t]
    y[:, :DIGITS] = IGNORE  # no loss on the prompt: it is random, nothing to learn
    return ta.tensor(x), ta.tensor(y)


# ---- model: token + position embeddings, 2 pre-LN blocks, tied output head ---------------------

ta.manual_seed(0)
model = nn.TinyTransformer(vocab_size=VOCAB, d_model=64, n_heads=4, n_layers=2, max_len=16)
print(f"{model.num_parameters():,} parameters")

# ---- optimizer: AdamW, weight decay on matrices only, warm-up then cosine decay ------------------

decay = [p for p in model.parameters() if p.ndim == 2]
no_decay = [p for p in model.parameters() if p.ndim != 2]
opt = optim.AdamW([{"params": decay, "weight_decay": 0.01},
                   {"params": no_decay, "weight_decay": 0.0}], lr=3e-3, betas=(0.9, 0.98))
steps = int(os.environ.get("STEPS", 400))  # STEPS=20 for a quick look
schedule = optim.CosineSchedule(opt, total=steps, warmup=50)

# ---- training loop -------------------------------------------------------------------------------

for step in range(1, steps + 1):
    x, y = get_batch(64)
    logits = model(x)  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))  # masked entries ignored
    opt.zero_grad()
    loss.backward()
    optim.clip_grad_norm(model.parameters(), 1.0)
    opt.step()
    schedule.step()
    if step % 50 == 0:
        print(f"step {step:4d}  loss {loss.item():.4f}  lr {opt.lr:.2e}")

# ---- evaluation: token accuracy on fresh problems, then a few reversals by greedy decoding -------

model.eval()
with ta.no_grad():
    x, y = get_batch(512)
    pred = model(x).argmax(dim=-1).numpy()  # (B, T)
    scored = y.numpy() != IGNORE
    accuracy = (pred == y.numpy())[scored].mean()
print(f"token accuracy on 512 fresh problems: {accuracy:.2%}")

for _ in range(3):
    x, _ = get_batch(1)
    prompt = x[:, : DIGITS + 1]  # "31415926>"
    out = model.generate(prompt, DIGITS, greedy=True).numpy()[0]  # (17,)
    show = "".join(">" if t == SEP else str(t) for t in out)
    print(f"{show[:DIGITS + 1]} {show[DIGITS + 1:]}")
