"""tinyattn.nn: modules with PyTorch's names — Module and Parameter, layers, a tiny GPT.

module.py holds Module, Parameter and the containers; layers.py the basic layers;
transformer.py the attention, MLP and block that make TinyTransformer.
"""

from . import init, utils
from .attention import MultiheadAttention, RotaryEmbedding
from .layers import (
    GELU,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    Linear,
    LogSoftmax,
    ReLU,
    RMSNorm,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
    Unflatten,
)
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import Module, ModuleDict, ModuleList, Parameter, ParameterList, Sequential
from .transformer import (
    MLP,
    CausalSelfAttention,
    TinyTransformer,
    TransformerBlock,
    TransformerConfig,
)

__all__ = [
    "Module", "Parameter", "Sequential", "ModuleList", "Linear", "Embedding", "LayerNorm",
    "Dropout", "GELU", "ReLU", "Tanh", "CausalSelfAttention", "MLP", "TransformerBlock",
    "TinyTransformer", "TransformerConfig",
    "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "NLLLoss", "CrossEntropyLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss", "Identity", "Sigmoid", "SiLU", "Softmax", "LogSoftmax",
    "Flatten", "Unflatten", "RMSNorm", "ModuleDict", "ParameterList", "init", "utils",
    "MultiheadAttention", "RotaryEmbedding",
]
