"""Classic torch tutorials ported with `torch` replaced by `ta`: the DCGAN (ConvTranspose2d
generator, strided-Conv2d discriminator, weights_init through model.apply, BCELoss, two Adams),
the CIFAR-10 CNN classifier (train/eval loop, no_grad accuracy), the seq2seq GRU with Bahdanau
attention (and the older batch-1 AttnDecoderRNN that writes encoder outputs into a zeros
tensor), a spectral-/weight-normed discriminator (torch's parametrizations and its older
hook-based nn.utils.spectral_norm / weight_norm), and the CPU-only nn.DataParallel that the
tutorials' device code reaches. Each runs next to the same torch code from the same weights and
data, step by step: losses, predictions and every state-dict entry after a few optimizer steps.
"""
# the tutorials' code as users paste it: netG, errD_real, initHidden, super(Net, self)
# ruff: noqa: N802, N803, N806, UP008

import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as TF

torch = pytest.importorskip("torch")

TOL = {"float64": dict(rtol=1e-8, atol=1e-10), "float32": dict(rtol=2e-4, atol=2e-5)}


def _libs(lib):
    return (torch.nn.functional, torch.utils.data) if lib is torch else (TF, ta.utils.data)


def copy_weights(ours, theirs):
    ours.load_state_dict({k: ta.tensor(v.numpy()) for k, v in theirs.state_dict().items()})


def same_state(ours, theirs, dtype, loose=()):
    """Every entry equal; those in `loose` (a bias whose gradient is 0 up to rounding, which
    Adam's normalized step turns into steps of ±lr either way) only within the steps taken."""
    mine = ours.state_dict()
    assert list(mine) == list(theirs.state_dict())
    for k, v in theirs.state_dict().items():
        tol = dict(rtol=0, atol=0.05) if k in loose else TOL[dtype]
        np.testing.assert_allclose(mine[k].numpy(), v.numpy(), err_msg=k, **tol)


# ---- 1. DCGAN ------------------------------------------------------------------------------

NZ, NGF, NDF, NC = 4, 4, 4, 1


def dcgan(lib, dtype):
    nn = lib.nn

    class Generator(nn.Module):
        def __init__(self, ngpu=0):
            super(Generator, self).__init__()
            self.ngpu = ngpu
            self.main = nn.Sequential(
                nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False),
                nn.BatchNorm2d(NGF * 2), nn.ReLU(True),
                nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False),
                nn.BatchNorm2d(NGF), nn.ReLU(True),
                nn.ConvTranspose2d(NGF, NC, 4, 2, 1, bias=False), nn.Tanh())

        def forward(self, input):  # noqa: A002
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self, ngpu=0):
            super(Discriminator, self).__init__()
            self.ngpu = ngpu
            self.main = nn.Sequential(
                nn.Conv2d(NC, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())

        def forward(self, input):  # noqa: A002
            return self.main(input)

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find('Conv') != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find('BatchNorm') != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    netG, netD = Generator().to(dtype), Discriminator().to(dtype)
    assert netG.apply(weights_init) is netG
    netD.apply(weights_init)
    return netG, netD


def dcgan_train(lib, dtype, netG, netD, data, noises):
    nn, optim = lib.nn, lib.optim
    device = lib.device("cuda:0" if (lib.cuda.is_available() and netG.ngpu > 0) else "cpu")
    criterion = nn.BCELoss()
    optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
    real_label, fake_label = 1., 0.
    hist = []
    for real, noise in zip(data, noises, strict=True):
        netD.zero_grad()
        real_cpu = lib.tensor(real).to(device).to(dtype)
        b_size = real_cpu.size(0)
        label = lib.full((b_size,), real_label, dtype=dtype, device=device)
        output = netD(real_cpu).view(-1)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        fake = netG(lib.tensor(noise).to(dtype))
        label.fill_(fake_label)
        output = netD(fake.detach()).view(-1)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake).view(-1)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        hist.append((errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
    with lib.no_grad():
        fake = netG(lib.tensor(noises[0]).to(dtype)).detach().cpu()
    return np.array(hist), fake.numpy()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_dcgan_matches_torch_step_by_step(dtype):
    torch.manual_seed(0)
    tG, tD = dcgan(torch, getattr(torch, dtype))
    oG, oD = dcgan(ta, getattr(ta, dtype))
    copy_weights(oG, tG)
    copy_weights(oD, tD)
    rng = np.random.default_rng(0)
    data = [rng.uniform(-1, 1, (3, NC, 16, 16)) for _ in range(3)]
    noises = [rng.standard_normal((3, NZ, 1, 1)) for _ in range(3)]
    theirs = dcgan_train(torch, getattr(torch, dtype), tG, tD, data, noises)
    ours = dcgan_train(ta, getattr(ta, dtype), oG, oD, data, noises)
    for t, o in zip(theirs, ours, strict=True):
        np.testing.assert_allclose(o, t, **TOL[dtype])
    same_state(oG, tG, dtype)
    same_state(oD, tD, dtype)


# ---- 2. the CIFAR-10 classifier ------------------------------------------------------------

CLASSES = ('plane', 'car', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck')


def cifar_net(lib, dtype):
    nn, F = lib.nn, _libs(lib)[0]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.dropout = nn.Dropout(0.5)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = F.max_pool2d(F.relu(self.conv2(x)), (2, 2))
            x = lib.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout(F.relu(self.fc2(x)))
            return self.fc3(x)

    net = Net().to(dtype)
    net.dropout.p = 0.0  # (the two libraries' dropout masks differ; forward reads p)
    return net


def cifar_evaluate(lib, net, test):
    correct, total = 0, 0
    correct_pred = {c: 0 for c in CLASSES}
    net.eval()
    with lib.no_grad():
        for images, labels in test:
            outputs = net(images)
            _, predicted = lib.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
            assert (outputs.argmax(1) == labels).type(lib.float).sum().item() == \
                (predicted == labels).sum().item()
            for label, prediction in zip(labels, predicted, strict=True):
                if label == prediction:
                    correct_pred[CLASSES[label]] += 1
    return [100 * correct // total] + list(correct_pred.values())


def cifar_train(lib, dtype, net, train, test):
    data = _libs(lib)[1]
    to = lambda xy: data.TensorDataset(lib.tensor(xy[0]).to(dtype), lib.tensor(xy[1]))  # noqa
    trainloader = data.DataLoader(to(train), batch_size=4, shuffle=False)
    testloader = data.DataLoader(to(test), batch_size=4)
    criterion = lib.nn.CrossEntropyLoss()
    optimizer = lib.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    hist = []
    for _ in range(2):
        net.train()
        running_loss = 0.0
        for inputs, labels in trainloader:
            optimizer.zero_grad()
            loss = criterion(net(inputs), labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            hist.append(loss.item())
        hist += [running_loss] + cifar_evaluate(lib, net, testloader)
    return np.array(hist)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cifar_classifier_matches_torch(dtype):
    torch.manual_seed(0)
    theirs, ours = cifar_net(torch, getattr(torch, dtype)), cifar_net(ta, getattr(ta, dtype))
    copy_weights(ours, theirs)
    rng = np.random.default_rng(1)
    train = (rng.standard_normal((12, 3, 32, 32)), rng.integers(0, 10, 12))
    test = (rng.standard_normal((8, 3, 32, 32)), rng.integers(0, 10, 8))
    np.testing.assert_allclose(cifar_train(ta, getattr(ta, dtype), ours, train, test),
                               cifar_train(torch, getattr(torch, dtype), theirs, train, test),
                               **TOL[dtype])
    same_state(ours, theirs, dtype)


# ---- 3. seq2seq with Bahdanau attention ------------------------------------------------------

SOS_token, EOS_token, MAX_LENGTH = 0, 1, 5


def seq2seq(lib, dtype, input_size=7, output_size=8, hidden_size=6, dropout_p=0.0):
    nn, F = lib.nn, _libs(lib)[0]

    class EncoderRNN(nn.Module):
        def __init__(self, input_size, hidden_size, dropout_p=0.1):
            super(EncoderRNN, self).__init__()
            self.hidden_size = hidden_size
            self.embedding = nn.Embedding(input_size, hidden_size)
            self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, input):  # noqa: A002
            embedded = self.dropout(self.embedding(input))
            output, hidden = self.gru(embedded)
            return output, hidden

    class BahdanauAttention(nn.Module):
        def __init__(self, hidden_size):
            super(BahdanauAttention, self).__init__()
            self.Wa = nn.Linear(hidden_size, hidden_size)
            self.Ua = nn.Linear(hidden_size, hidden_size)
            self.Va = nn.Linear(hidden_size, 1)

        def forward(self, query, keys):
            scores = self.Va(lib.tanh(self.Wa(query) + self.Ua(keys)))
            scores = scores.squeeze(2).unsqueeze(1)
            weights = F.softmax(scores, dim=-1)
            context = lib.bmm(weights, keys)
            return context, weights

    class AttnDecoderRNN(nn.Module):
        def __init__(self, hidden_size, output_size, dropout_p=0.1):
            super(AttnDecoderRNN, self).__init__()
            self.embedding = nn.Embedding(output_size, hidden_size)
            self.attention = BahdanauAttention(hidden_size)
            self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
            self.out = nn.Linear(hidden_size, output_size)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
            batch_size = encoder_outputs.size(0)
            decoder_input = lib.empty(batch_size, 1, dtype=lib.long,
                                      device="cpu").fill_(SOS_token)
            decoder_hidden = encoder_hidden
            decoder_outputs, attentions = [], []
            for i in range(MAX_LENGTH):
                decoder_output, decoder_hidden, attn_weights = self.forward_step(
                    decoder_input, decoder_hidden, encoder_outputs)
                decoder_outputs.append(decoder_output)
                attentions.append(attn_weights)
                if target_tensor is not None:
                    decoder_input = target_tensor[:, i].unsqueeze(1)  # Teacher forcing
                else:
                    _, topi = decoder_output.topk(1)
                    decoder_input = topi.squeeze(-1).detach()
            decoder_outputs = lib.cat(decoder_outputs, dim=1)
            decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
            attentions = lib.cat(attentions, dim=1)
            return decoder_outputs, decoder_hidden, attentions

        def forward_step(self, input, hidden, encoder_outputs):  # noqa: A002
            embedded = self.dropout(self.embedding(input))
            query = hidden.permute(1, 0, 2)
            context, attn_weights = self.attention(query, encoder_outputs)
            input_gru = lib.cat((embedded, context), dim=2)
            output, hidden = self.gru(input_gru, hidden)
            output = self.out(output)
            return output, hidden, attn_weights

    return (EncoderRNN(input_size, hidden_size, dropout_p).to(dtype),
            AttnDecoderRNN(hidden_size, output_size, dropout_p).to(dtype))


def seq2seq_train(lib, encoder, decoder, pairs, n_epochs=3):
    data = _libs(lib)[1]
    train_data = data.TensorDataset(lib.LongTensor(pairs[0]), lib.LongTensor(pairs[1]))
    dataloader = data.DataLoader(train_data, batch_size=2)
    encoder_optimizer = lib.optim.Adam(encoder.parameters(), lr=0.01)
    decoder_optimizer = lib.optim.Adam(decoder.parameters(), lr=0.01)
    criterion = lib.nn.NLLLoss()
    hist = []
    for _ in range(n_epochs):
        total_loss = 0
        for input_tensor, target_tensor in dataloader:
            encoder_optimizer.zero_grad()
            decoder_optimizer.zero_grad()
            encoder_outputs, encoder_hidden = encoder(input_tensor)
            decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)
            loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)),
                             target_tensor.view(-1))
            loss.backward()
            encoder_optimizer.step()
            decoder_optimizer.step()
            total_loss += loss.item()
        hist.append(total_loss / len(dataloader))
    return hist


def seq2seq_evaluate(lib, encoder, decoder, sentence):
    with lib.no_grad():
        input_tensor = lib.tensor(sentence, dtype=lib.long, device="cpu").view(1, -1)
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, decoder_hidden, decoder_attn = decoder(encoder_outputs, encoder_hidden)
        _, topi = decoder_outputs.topk(1)
        decoded_ids = topi.squeeze()
        decoded_words = []
        for idx in decoded_ids:
            if idx.item() == EOS_token:
                decoded_words.append('<EOS>')
                break
            decoded_words.append(idx.item())
    return decoded_words, decoder_attn[0, :len(decoded_words), :].cpu().numpy()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_seq2seq_bahdanau_attention_matches_torch(dtype):
    torch.manual_seed(0)
    (te, td), (oe, od) = seq2seq(torch, getattr(torch, dtype)), seq2seq(ta, getattr(ta, dtype))
    copy_weights(oe, te)
    copy_weights(od, td)
    rng = np.random.default_rng(2)
    pairs = (rng.integers(2, 7, (4, MAX_LENGTH)).astype(np.int32),
             rng.integers(1, 8, (4, MAX_LENGTH)).astype(np.int32))
    np.testing.assert_allclose(seq2seq_train(ta, oe, od, pairs),
                               seq2seq_train(torch, te, td, pairs), **TOL[dtype])
    for sentence in ([2, 3, 4, 5, 6], [6, 6, 2]):
        (wo, ao), (wt, at) = (seq2seq_evaluate(ta, oe, od, sentence),
                              seq2seq_evaluate(torch, te, td, sentence))
        assert wo == wt
        np.testing.assert_allclose(ao, at, **TOL[dtype])
    same_state(oe, te, dtype)
    # Va's bias shifts every score alike: softmax cancels it, its gradient is rounding noise
    same_state(od, td, dtype, loose={"attention.Va.bias"} if dtype == "float32" else ())


def old_seq2seq(lib, dtype, input_size=7, output_size=8, hidden_size=6):
    """The tutorial's earlier batch-1 version: attention weights from a Linear over
    [embedded, hidden], encoder outputs written row by row into a zeros tensor."""
    nn, F = lib.nn, _libs(lib)[0]

    class EncoderRNN(nn.Module):
        def __init__(self, input_size, hidden_size):
            super(EncoderRNN, self).__init__()
            self.hidden_size = hidden_size
            self.embedding = nn.Embedding(input_size, hidden_size)
            self.gru = nn.GRU(hidden_size, hidden_size)

        def forward(self, input, hidden):  # noqa: A002
            output = self.embedding(input).view(1, 1, -1)
            output, hidden = self.gru(output, hidden)
            return output, hidden

        def initHidden(self):
            return lib.zeros(1, 1, self.hidden_size, device="cpu", dtype=dtype)

    class AttnDecoderRNN(nn.Module):
        def __init__(self, hidden_size, output_size, dropout_p=0.0, max_length=MAX_LENGTH + 1):
            super(AttnDecoderRNN, self).__init__()
            self.hidden_size, self.output_size = hidden_size, output_size
            self.embedding = nn.Embedding(self.output_size, self.hidden_size)
            self.attn = nn.Linear(self.hidden_size * 2, max_length)
            self.attn_combine = nn.Linear(self.hidden_size * 2, self.hidden_size)
            self.dropout = nn.Dropout(dropout_p)
            self.gru = nn.GRU(self.hidden_size, self.hidden_size)
            self.out = nn.Linear(self.hidden_size, self.output_size)

        def forward(self, input, hidden, encoder_outputs):  # noqa: A002
            embedded = self.dropout(self.embedding(input).view(1, 1, -1))
            attn_weights = F.softmax(self.attn(lib.cat((embedded[0], hidden[0]), 1)), dim=1)
            attn_applied = lib.bmm(attn_weights.unsqueeze(0), encoder_outputs.unsqueeze(0))
            output = lib.cat((embedded[0], attn_applied[0]), 1)
            output = F.relu(self.attn_combine(output).unsqueeze(0))
            output, hidden = self.gru(output, hidden)
            output = F.log_softmax(self.out(output[0]), dim=1)
            return output, hidden, attn_weights

    return EncoderRNN(input_size, hidden_size).to(dtype), \
        AttnDecoderRNN(hidden_size, output_size).to(dtype)


def old_train_step(lib, dtype, pair, models, optimizers, teacher_forcing):
    (encoder, decoder), criterion = models, lib.nn.NLLLoss()
    input_tensor = lib.tensor(pair[0], dtype=lib.long, device="cpu").view(-1, 1)
    target_tensor = lib.tensor(pair[1], dtype=lib.long, device="cpu").view(-1, 1)
    encoder_hidden = encoder.initHidden()
    for opt in optimizers:
        opt.zero_grad()
    encoder_outputs = lib.zeros(MAX_LENGTH + 1, encoder.hidden_size, device="cpu", dtype=dtype)
    loss = 0
    for ei in range(input_tensor.size(0)):
        encoder_output, encoder_hidden = encoder(input_tensor[ei], encoder_hidden)
        encoder_outputs[ei] = encoder_output[0, 0]
    decoder_input, decoder_hidden = lib.tensor([[SOS_token]], device="cpu"), encoder_hidden
    for di in range(target_tensor.size(0)):
        decoder_output, decoder_hidden, _ = decoder(decoder_input, decoder_hidden,
                                                    encoder_outputs)
        loss += criterion(decoder_output, target_tensor[di])
        if teacher_forcing:
            decoder_input = target_tensor[di]
        else:
            topv, topi = decoder_output.topk(1)
            decoder_input = topi.squeeze().detach()
            if decoder_input.item() == EOS_token:
                break
    loss.backward()
    grads = [p.grad.norm().item() for p in encoder.parameters()]
    for opt in optimizers:
        opt.step()
    return [loss.item() / target_tensor.size(0)] + grads


def test_older_batch_one_attention_decoder_matches_torch():
    torch.manual_seed(0)
    theirs, ours = old_seq2seq(torch, torch.float64), old_seq2seq(ta, ta.float64)
    for o, t in zip(ours, theirs, strict=True):
        copy_weights(o, t)
    rng = np.random.default_rng(3)
    pairs = [(list(rng.integers(2, 7, 4)) + [EOS_token], list(rng.integers(2, 8, 3)) +
              [EOS_token]) for _ in range(4)]
    hist = {}
    for lib, models in ((torch, theirs), (ta, ours)):
        opts = [lib.optim.SGD(m.parameters(), lr=0.01) for m in models]
        hist[lib] = [old_train_step(lib, lib.float64, p, models, opts, i % 2 == 0)
                     for i, p in enumerate(pairs)]
    assert all(g > 0 for g in hist[ta][0][1:])  # the encoder learns through the copies
    np.testing.assert_allclose(hist[ta], hist[torch], **TOL["float64"])
    for o, t in zip(ours, theirs, strict=True):
        same_state(o, t, "float64")


# ---- 4. spectral- / weight-normed discriminators ---------------------------------------------


def normed_discriminator(lib, dtype, legacy):
    nn, utils = lib.nn, lib.nn.utils
    sn = utils.spectral_norm if legacy else utils.parametrizations.spectral_norm
    wn = utils.weight_norm if legacy else utils.parametrizations.weight_norm

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                sn(nn.Conv2d(1, 4, 4, 2, 1)), nn.LeakyReLU(0.2, inplace=True),
                sn(nn.Conv2d(4, 8, 4, 2, 1), n_power_iterations=2),
                nn.LeakyReLU(0.2, inplace=True),
                wn(nn.Conv2d(8, 8, 3, 1, 1)), nn.LeakyReLU(0.2),
                sn(nn.ConvTranspose2d(8, 4, 2, 2)), nn.LeakyReLU(0.2),
                wn(nn.Conv2d(4, 2, 3, 2, 1), dim=None))
            self.fc = sn(nn.Linear(2 * 4 * 4, 1))

        def forward(self, x):
            return self.fc(lib.flatten(self.main(x), 1))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # (torch's weight_norm is deprecated)
        return Discriminator().to(dtype)


def normed_train(lib, D, dtype, x):
    F = _libs(lib)[0]
    optimizer = lib.optim.Adam(D.parameters(), lr=2e-3, betas=(0.0, 0.9))
    hist = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = F.softplus(-D(lib.tensor(x).to(dtype))).mean()  # the hinge/softplus GAN loss
        loss.backward()
        optimizer.step()
        hist.append(loss.item())
    D.eval()
    with lib.no_grad():
        hist.append(D(lib.tensor(x).to(dtype)).sum().item())
    return hist


@pytest.mark.parametrize("legacy", [False, True], ids=["parametrizations", "hooks"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_spectral_and_weight_normed_discriminator_matches_torch(dtype, legacy):
    torch.manual_seed(0)
    theirs = normed_discriminator(torch, getattr(torch, dtype), legacy)
    ours = normed_discriminator(ta, getattr(ta, dtype), legacy)
    copy_weights(ours, theirs)  # (the power iteration's u and v too)
    x = np.random.default_rng(4).standard_normal((3, 1, 16, 16))
    np.testing.assert_allclose(normed_train(ta, ours, getattr(ta, dtype), x),
                               normed_train(torch, theirs, getattr(torch, dtype), x),
                               **TOL[dtype])
    same_state(ours, theirs, dtype)


def test_legacy_hook_norms_keep_torchs_names_and_remove():
    """torch.nn.utils.weight_norm / spectral_norm (the forward-pre-hook versions, still in
    torch and in much GAN and vocoder code): weight_g/weight_v parameters, weight_orig with
    weight_u/weight_v buffers, `weight` a plain tensor recomputed before each forward; the
    remove_* functions put a Parameter back with the current value."""
    for lib in (torch, ta):
        nn = lib.nn
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            w = nn.utils.weight_norm(nn.Linear(3, 2))
        s = nn.utils.spectral_norm(nn.ConvTranspose1d(3, 2, 2))
        assert [n for n, _ in w.named_parameters()] == ["bias", "weight_g", "weight_v"]
        assert tuple(w.weight_g.shape) == (2, 1)
        assert [n for n, _ in s.named_parameters()] == ["bias", "weight_orig"]
        assert [n for n, _ in s.named_buffers()] == ["weight_u", "weight_v"]
        assert tuple(s.weight_u.shape) == (2,) and tuple(s.weight_v.shape) == (6,)
        assert not isinstance(s.weight, nn.Parameter)
        with pytest.raises(RuntimeError, match="two spectral_norm hooks"):
            nn.utils.spectral_norm(s)
        s.eval()
        s(lib.ones(1, 3, 4))  # (the hook sets the normalized weight before each forward)
        before = s.weight.detach().clone()
        assert nn.utils.remove_spectral_norm(s) is s and isinstance(s.weight, nn.Parameter)
        assert list(s.state_dict()) == ["bias", "weight"]
        np.testing.assert_allclose(s.weight.detach().numpy(), before.numpy(), rtol=1e-6)
        nn.utils.remove_weight_norm(w)
        assert [n for n, _ in w.named_parameters()] == ["bias", "weight"]
        with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
            nn.utils.remove_weight_norm(w)


def test_cpu_data_parallel_is_the_module_itself():
    """The tutorials' `if device.type == 'cuda' and ngpu > 1: net = nn.DataParallel(net, ...)`
    and DCGAN's older nn.parallel.data_parallel(self.main, input, range(self.ngpu)): with no
    GPU, torch's DataParallel calls the module (its state dict under "module."), and
    data_parallel refuses."""
    assert not ta.cuda.is_available()  # (the CPU case, as torch's here)
    for lib in (torch, ta):
        parallel = lib.nn.parallel
        net = lib.nn.Linear(3, 2)
        x = lib.ones(4, 3)
        dp = parallel.DataParallel(net, device_ids=list(range(2)))
        assert dp.module is net and dp.device_ids == []
        assert list(dp.state_dict()) == ["module.weight", "module.bias"]
        np.testing.assert_allclose(dp(x).detach().numpy(), net(x).detach().numpy())
        with pytest.raises(RuntimeError, match="device type could not be determined"):
            parallel.data_parallel(net, x, range(2))


def test_rnns_take_a_packed_sequence_as_torchs():
    """The packing matches torch's, and a GRU run on it gives torch's packed output and h_n
    (in the batch's original order) from the same weights."""
    rnn = ta.nn.utils.rnn
    x = np.random.default_rng(5).standard_normal((3, 4, 2))
    ours = rnn.pack_padded_sequence(ta.tensor(x), ta.tensor([4, 2, 3]), batch_first=True,
                                    enforce_sorted=False)
    theirs = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), torch.tensor([4, 2, 3]),
                                                     batch_first=True, enforce_sorted=False)
    np.testing.assert_array_equal(ours.data.numpy(), theirs.data.numpy())
    np.testing.assert_array_equal(ours.batch_sizes.numpy(), theirs.batch_sizes.numpy())
    theirs_gru = torch.nn.GRU(2, 3, batch_first=True).double()
    ours_gru = ta.nn.GRU(2, 3, batch_first=True).double()
    copy_weights(ours_gru, theirs_gru)
    (out_a, h_a), (out_b, h_b) = ours_gru(ours), theirs_gru(theirs)
    assert isinstance(out_a, rnn.PackedSequence)
    np.testing.assert_array_equal(out_a.batch_sizes.numpy(), out_b.batch_sizes.numpy())
    for a, b in ((out_a.data, out_b.data), (h_a, h_b)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL["float64"])


def test_nn_dataparallel_is_the_parallel_modules_class():
    """torch code writes nn.DataParallel(model): the same class as nn.parallel's."""
    assert ta.nn.DataParallel is ta.nn.parallel.DataParallel
    wrapped = ta.nn.DataParallel(ta.nn.Linear(2, 3))
    assert list(wrapped.state_dict()) == ["module.weight", "module.bias"]
