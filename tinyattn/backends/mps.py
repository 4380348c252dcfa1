"""torch.backends.mps's questions: tinyattn has no Metal (Apple GPU) backend, so both are False."""


def is_available():
    return False


def is_built():
    return False
