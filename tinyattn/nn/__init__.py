"""tinyattn.nn: modules with PyTorch's names — Module and Parameter, layers, a tiny GPT.

module.py holds Module, Parameter and the containers; layers.py the basic layers;
activation.py the activation modules; conv.py the convolution, pooling and Unfold/Fold
modules; vision.py Upsample, the padding modules, the pixel and channel shuffles,
InstanceNorm1d/2d/3d, Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout and LocalResponseNorm;
loss.py the loss modules (CTCLoss among them); encoder.py torch's Transformer, its encoder
and decoder stacks; recurrent.py RNN, LSTM, GRU and their cells; transformer.py the
attention, MLP and block that make TinyTransformer; pooling.py LPPool1d/2d/3d and
MaxUnpool1d/2d/3d.
lazy.py the lazy modules (LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d, LazyBatchNorm1d/2d/3d,
LazyInstanceNorm1d/2d/3d, UninitializedBuffer and LazyModuleMixin); syncbn.py SyncBatchNorm;
deprecated.py torch's deprecated NLLLoss2d and Container.
spatial.py FractionalMaxPool2d/3d and CrossMapLRN2d; adaptive.py AdaptiveLogSoftmaxWithLoss.
tinyattn.nn.functional is tinyattn.functional itself, so `import tinyattn.nn.functional as F`
works as with torch.
"""

import sys

from .. import functional
from . import grad, init, modules, parallel, utils
from .activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    RReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from .adaptive import AdaptiveLogSoftmaxWithLoss
from .attention import MultiheadAttention, RotaryEmbedding
from .conv import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    Fold,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    Unfold,
)
from .deprecated import Container, NLLLoss2d
from .encoder import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .layers import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    Bilinear,
    CosineSimilarity,
    Dropout,
    Embedding,
    EmbeddingBag,
    Flatten,
    GroupNorm,
    Identity,
    LayerNorm,
    LazyLinear,
    Linear,
    PairwiseDistance,
    RMSNorm,
    Unflatten,
    UninitializedParameter,
)
from .lazy import (
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
    UninitializedBuffer,
)
from .linear_cross_entropy import LinearCrossEntropyLoss
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from .module import (
    Buffer,
    Module,
    ModuleDict,
    ModuleList,
    Parameter,
    ParameterDict,
    ParameterList,
    Sequential,
)
from .parallel import DataParallel
from .pooling import LPPool1d, LPPool2d, LPPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .spatial import CrossMapLRN2d, FractionalMaxPool2d, FractionalMaxPool3d
from .syncbn import SyncBatchNorm
from .transformer import (
    MLP,
    CausalSelfAttention,
    TinyTransformer,
    TransformerBlock,
    TransformerConfig,
)
from .vision import (
    AlphaDropout,
    ChannelShuffle,
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    FeatureAlphaDropout,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LocalResponseNorm,
    PixelShuffle,
    PixelUnshuffle,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)

__all__ = [
    "Module", "Parameter", "Sequential", "ModuleList", "Linear", "Embedding", "LayerNorm",
    "Dropout", "GELU", "ReLU", "Tanh", "CausalSelfAttention", "MLP", "TransformerBlock",
    "TinyTransformer", "TransformerConfig",
    "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "NLLLoss", "CrossEntropyLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss", "Identity", "Sigmoid", "SiLU", "Softmax", "LogSoftmax",
    "Flatten", "Unflatten", "RMSNorm", "ModuleDict", "ParameterList", "ParameterDict", "init",
    "utils", "parallel", "modules",
    "MultiheadAttention", "RotaryEmbedding", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU",
    "Mish", "Softplus", "Softsign", "Hardtanh", "Hardsigmoid", "Hardswish", "LogSigmoid",
    "Softmin", "CosineSimilarity", "PairwiseDistance", "GLU", "TransformerEncoderLayer",
    "TransformerEncoder", "functional", "TransformerDecoderLayer", "TransformerDecoder",
    "Transformer", "BatchNorm1d", "BatchNorm2d", "GroupNorm",
    "Tanhshrink", "Threshold", "Softshrink", "Hardshrink", "PReLU", "RReLU", "Softmax2d",
    "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
    "MarginRankingLoss", "SoftMarginLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss",
    "TripletMarginLoss", "PoissonNLLLoss", "MultiLabelSoftMarginLoss", "GaussianNLLLoss",
    "LazyLinear", "UninitializedParameter",
    "Conv1d", "Conv2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d",
    "Unfold", "Fold", "ConvTranspose1d", "ConvTranspose2d", "AdaptiveAvgPool1d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
    "Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool3d",
    "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
    "DataParallel",
    "ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d",
    "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "CircularPad1d", "CircularPad2d",
    "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "InstanceNorm1d", "InstanceNorm2d",
    "Dropout1d", "Dropout2d",
    "MultiMarginLoss", "MultiLabelMarginLoss", "TripletMarginWithDistanceLoss",
    "Bilinear", "EmbeddingBag",
    "CTCLoss", "LocalResponseNorm", "AlphaDropout", "FeatureAlphaDropout",
    "LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
    "BatchNorm3d", "InstanceNorm3d", "Dropout3d", "ReflectionPad3d", "ReplicationPad3d",
    "ZeroPad3d", "ConstantPad3d", "CircularPad3d", "Buffer", "RNNBase", "RNNCellBase",
    "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
    "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
    "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d", "UninitializedBuffer",
    "SyncBatchNorm", "NLLLoss2d", "Container",
    "FractionalMaxPool2d", "FractionalMaxPool3d", "CrossMapLRN2d", "AdaptiveLogSoftmaxWithLoss",
    "LinearCrossEntropyLoss",
]

sys.modules[__name__ + ".functional"] = functional  # the module, not a copy: one F
functional.grad = grad  # F.grad is nn.grad, as torch.nn.functional.grad is
