"""Every layer class in ``torch.nn.modules``, in eval mode with representative arguments,
through the torch frontend on the interpreter and compiled, against eager within the
tolerance policy — or refused for a stated reason (``minic.frontend.core_aten.NN_REFUSED``,
printed by ``python -m minic ops --torch``).

The class list is read from ``torch.nn.modules`` itself: a class that is neither here nor
refused fails ``test_every_layer_class_is_classified``.  ``--all-layers`` compiles every
layer; by default the compiled path runs a fixed sample (the interpreter runs them all).
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from minic.compare import errors
from minic.frontend.core_aten import NN_REFUSED
from minic.frontend.torch import from_torch
from minic.ir.interpret import interpret
from minic.runtime import CompileOptions, compile_graph
from minic.verify.tolerance import tolerance


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def ids(high, *shape, seed=0):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


class Call(nn.Module):
    """A layer whose forward takes extra arguments or returns a structure, as a module of tensors."""

    def __init__(self, layer, fn):
        super().__init__()
        self.layer, self.fn = layer, fn

    def forward(self, *xs):
        return self.fn(self.layer, *xs)


def pooled_then_unpooled(dims):
    pool = getattr(nn, f"MaxPool{dims}d")(2, return_indices=True)
    unpool = getattr(nn, f"MaxUnpool{dims}d")(2)
    return Call(nn.ModuleList([pool, unpool]), lambda m, x: m[1](*m[0](x)))


def loss(cls, *args, **kw):
    return lambda: cls(*args, **kw)


X1, X2, X3 = (2, 4, 9), (2, 4, 7, 6), (1, 4, 5, 6, 4)
PROB = lambda: torch.rand(3, 5, generator=torch.Generator().manual_seed(1)).clamp(0.05, 0.95)

# name -> (layer factory, inputs factory)
LAYERS = {
    # containers and shape helpers
    "Identity": (lambda: nn.Identity(), lambda: (r(3, 4),)),
    "Sequential": (lambda: nn.Sequential(nn.Linear(4, 5), nn.ReLU()), lambda: (r(3, 4),)),
    "Flatten": (lambda: nn.Flatten(), lambda: (r(*X2),)),
    "Unflatten": (lambda: nn.Unflatten(1, (2, 2)), lambda: (r(3, 4),)),
    "ChannelShuffle": (lambda: nn.ChannelShuffle(2), lambda: (r(*X2),)),
    "PixelShuffle": (lambda: nn.PixelShuffle(2), lambda: (r(1, 8, 3, 2),)),
    "PixelUnshuffle": (lambda: nn.PixelUnshuffle(2), lambda: (r(1, 2, 4, 6),)),
    "Fold": (lambda: nn.Fold((5, 6), (2, 3), dilation=1, padding=1, stride=(1, 2)), lambda: (r(2, 12, 18),)),
    "Unfold": (lambda: nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=2), lambda: (r(*X2),)),
    # linear and embeddings
    "Linear": (lambda: nn.Linear(4, 5), lambda: (r(2, 3, 4),)),
    "LazyLinear": (lambda: nn.LazyLinear(5), lambda: (r(2, 3, 4),)),
    "Bilinear": (lambda: nn.Bilinear(4, 3, 5), lambda: (r(2, 4), r(2, 3, seed=1))),
    "Embedding": (lambda: nn.Embedding(10, 4, padding_idx=0), lambda: (ids(10, 2, 5),)),
    "EmbeddingBag": (lambda: nn.EmbeddingBag(10, 4, mode="mean"), lambda: (ids(10, 3, 4),)),
    # convolutions
    "Conv1d": (lambda: nn.Conv1d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2), lambda: (r(*X1),)),
    "Conv2d": (lambda: nn.Conv2d(4, 6, (3, 2), padding="same", padding_mode="reflect"), lambda: (r(*X2),)),
    "Conv3d": (lambda: nn.Conv3d(4, 2, 2, stride=(1, 2, 1), padding=1, padding_mode="circular"), lambda: (r(*X3),)),
    "ConvTranspose1d": (lambda: nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
                        lambda: (r(*X1),)),
    "ConvTranspose2d": (lambda: nn.ConvTranspose2d(4, 3, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
                        lambda: (r(*X2),)),
    "ConvTranspose3d": (lambda: nn.ConvTranspose3d(4, 2, 2, stride=2), lambda: (r(*X3),)),
    "LazyConv1d": (lambda: nn.LazyConv1d(6, 3), lambda: (r(*X1),)),
    "LazyConv2d": (lambda: nn.LazyConv2d(6, 3, padding=1), lambda: (r(*X2),)),
    "LazyConv3d": (lambda: nn.LazyConv3d(2, 2), lambda: (r(*X3),)),
    "LazyConvTranspose1d": (lambda: nn.LazyConvTranspose1d(3, 3, stride=2), lambda: (r(*X1),)),
    "LazyConvTranspose2d": (lambda: nn.LazyConvTranspose2d(3, 2), lambda: (r(*X2),)),
    "LazyConvTranspose3d": (lambda: nn.LazyConvTranspose3d(2, 2), lambda: (r(*X3),)),
    # pooling
    "MaxPool1d": (lambda: nn.MaxPool1d(3, 2, 1, dilation=2), lambda: (r(*X1),)),
    "MaxPool2d": (lambda: nn.MaxPool2d(3, 2, 1, ceil_mode=True), lambda: (r(*X2),)),
    "MaxPool3d": (lambda: nn.MaxPool3d(2, (1, 2, 2)), lambda: (r(*X3),)),
    "AvgPool1d": (lambda: nn.AvgPool1d(3, 2, 1), lambda: (r(*X1),)),
    "AvgPool2d": (lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=False), lambda: (r(*X2),)),
    "AvgPool3d": (lambda: nn.AvgPool3d(2, 1), lambda: (r(*X3),)),
    "AdaptiveAvgPool1d": (lambda: nn.AdaptiveAvgPool1d(4), lambda: (r(*X1),)),
    "AdaptiveAvgPool2d": (lambda: nn.AdaptiveAvgPool2d((3, 4)), lambda: (r(*X2),)),
    "AdaptiveAvgPool3d": (lambda: nn.AdaptiveAvgPool3d((2, 4, 3)), lambda: (r(*X3),)),
    "AdaptiveMaxPool1d": (lambda: nn.AdaptiveMaxPool1d(4), lambda: (r(*X1),)),
    "AdaptiveMaxPool2d": (lambda: nn.AdaptiveMaxPool2d((3, 4)), lambda: (r(*X2),)),
    "AdaptiveMaxPool3d": (lambda: nn.AdaptiveMaxPool3d((2, 4, 3)), lambda: (r(*X3),)),
    "LPPool1d": (lambda: nn.LPPool1d(2, 3, 2), lambda: (r(*X1),)),
    "LPPool2d": (lambda: nn.LPPool2d(3, (2, 3)), lambda: (r(*X2),)),
    "LPPool3d": (lambda: nn.LPPool3d(2, 2), lambda: (r(*X3),)),
    "MaxUnpool1d": (lambda: pooled_then_unpooled(1), lambda: (r(*X1),)),
    "MaxUnpool2d": (lambda: pooled_then_unpooled(2), lambda: (r(*X2),)),
    "MaxUnpool3d": (lambda: pooled_then_unpooled(3), lambda: (r(1, 2, 4, 4, 6),)),
    # padding
    **{f"{kind}Pad{d}d": ((lambda kind=kind, d=d: getattr(nn, f"{kind}Pad{d}d")(
        *((1, 0.5) if kind == "Constant" else (1,)))), (lambda d=d: (r(*(X1, X2, X3)[d - 1]),)))
       for kind in ("Constant", "Zero", "Reflection", "Replication", "Circular") for d in (1, 2, 3)},
    # normalisation
    "BatchNorm1d": (lambda: nn.BatchNorm1d(4), lambda: (r(*X1),)),
    "BatchNorm2d": (lambda: nn.BatchNorm2d(4), lambda: (r(*X2),)),
    "BatchNorm3d": (lambda: nn.BatchNorm3d(4), lambda: (r(*X3),)),
    "LazyBatchNorm1d": (lambda: nn.LazyBatchNorm1d(), lambda: (r(*X1),)),
    "LazyBatchNorm2d": (lambda: nn.LazyBatchNorm2d(), lambda: (r(*X2),)),
    "LazyBatchNorm3d": (lambda: nn.LazyBatchNorm3d(), lambda: (r(*X3),)),
    "SyncBatchNorm": (lambda: nn.SyncBatchNorm(4), lambda: (r(*X2),)),
    "InstanceNorm1d": (lambda: nn.InstanceNorm1d(4, affine=True), lambda: (r(*X1),)),
    "InstanceNorm2d": (lambda: nn.InstanceNorm2d(4), lambda: (r(*X2),)),
    "InstanceNorm3d": (lambda: nn.InstanceNorm3d(4, affine=True), lambda: (r(*X3),)),
    "LazyInstanceNorm1d": (lambda: nn.LazyInstanceNorm1d(), lambda: (r(*X1),)),
    "LazyInstanceNorm2d": (lambda: nn.LazyInstanceNorm2d(), lambda: (r(*X2),)),
    "LazyInstanceNorm3d": (lambda: nn.LazyInstanceNorm3d(), lambda: (r(*X3),)),
    "LayerNorm": (lambda: nn.LayerNorm((3, 4)), lambda: (r(2, 3, 4),)),
    "GroupNorm": (lambda: nn.GroupNorm(2, 4), lambda: (r(*X2),)),
    "RMSNorm": (lambda: nn.RMSNorm(4), lambda: (r(2, 3, 4),)),
    "LocalResponseNorm": (lambda: nn.LocalResponseNorm(3), lambda: (r(*X2),)),
    # dropout (the identity in eval mode)
    "Dropout1d": (lambda: nn.Dropout1d(0.5), lambda: (r(*X1),)),
    **{name: ((lambda name=name: getattr(nn, name)(0.5)), (lambda: (r(*X2),)))
       for name in ("Dropout", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout")},
    # recurrent
    "RNN": (lambda: nn.RNN(4, 5, num_layers=2, nonlinearity="relu", batch_first=True), lambda: (r(2, 3, 4),)),
    "LSTM": (lambda: nn.LSTM(4, 5, num_layers=2, bidirectional=True), lambda: (r(3, 2, 4),)),
    "GRU": (lambda: nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True), lambda: (r(2, 3, 4),)),
    "RNNCell": (lambda: nn.RNNCell(4, 5), lambda: (r(2, 4), r(2, 5, seed=1))),
    "LSTMCell": (lambda: Call(nn.LSTMCell(4, 5), lambda m, x, h, c: m(x, (h, c))),
                 lambda: (r(2, 4), r(2, 5, seed=1), r(2, 5, seed=2))),
    "GRUCell": (lambda: nn.GRUCell(4, 5), lambda: (r(2, 4), r(2, 5, seed=1))),
    # attention and transformers
    "MultiheadAttention": (lambda: Call(nn.MultiheadAttention(8, 2, batch_first=True),
                                        lambda m, q, k, mask: m(q, k, k, attn_mask=mask)),
                           lambda: (r(2, 3, 8), r(2, 5, 8, seed=1), ids(2, 3, 5).bool())),
    "TransformerEncoderLayer": (lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), lambda: (r(2, 3, 8),)),
    "TransformerDecoderLayer": (lambda: nn.TransformerDecoderLayer(8, 2, 16, norm_first=True),
                                lambda: (r(3, 2, 8), r(4, 2, 8, seed=1))),
    "TransformerEncoder": (lambda: Call(nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2,
                                                              enable_nested_tensor=False),
                                        lambda m, x: m(x, mask=nn.Transformer.generate_square_subsequent_mask(3),
                                                             is_causal=True)),
                           lambda: (r(3, 2, 8),)),
    "TransformerDecoder": (lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16), 2),
                           lambda: (r(3, 2, 8), r(4, 2, 8, seed=1))),
    "Transformer": (lambda: nn.Transformer(8, 2, 1, 1, 16, batch_first=True), lambda: (r(2, 4, 8), r(2, 3, 8, seed=1))),
    # distances
    "CosineSimilarity": (lambda: nn.CosineSimilarity(dim=1), lambda: (r(3, 5), r(3, 5, seed=1))),
    "PairwiseDistance": (lambda: nn.PairwiseDistance(p=3.0), lambda: (r(3, 5), r(3, 5, seed=1))),
    # activations
    **{name: ((lambda name=name: getattr(nn, name)()), (lambda: (r(2, 3, 4) * 3,)))
       for name in ("CELU", "ELU", "GELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU",
                    "LogSigmoid", "Mish", "PReLU", "ReLU", "ReLU6", "RReLU", "SELU", "SiLU", "Sigmoid", "Softplus",
                    "Softshrink", "Softsign", "Tanh", "Tanhshrink")},
    "Threshold": (lambda: nn.Threshold(0.1, 20.0), lambda: (r(2, 3, 4),)),
    "Softmax": (lambda: nn.Softmax(dim=1), lambda: (r(2, 3, 4),)),
    "Softmin": (lambda: nn.Softmin(dim=1), lambda: (r(2, 3, 4),)),
    "LogSoftmax": (lambda: nn.LogSoftmax(dim=-1), lambda: (r(2, 3, 4),)),
    "Softmax2d": (lambda: nn.Softmax2d(), lambda: (r(*X2),)),
    "Upsample": (lambda: nn.Upsample(scale_factor=2, mode="nearest"), lambda: (r(*X2),)),
    "UpsamplingNearest2d": (lambda: nn.UpsamplingNearest2d(size=(5, 9)), lambda: (r(*X2),)),
    "UpsamplingBilinear2d": (lambda: nn.UpsamplingBilinear2d(scale_factor=1.5), lambda: (r(*X2),)),
    # losses: the value a criterion computes, at inference too
    "L1Loss": (loss(nn.L1Loss), lambda: (r(3, 5), r(3, 5, seed=1))),
    "MSELoss": (loss(nn.MSELoss, reduction="sum"), lambda: (r(3, 5), r(3, 5, seed=1))),
    "HuberLoss": (loss(nn.HuberLoss, delta=0.5), lambda: (r(3, 5), r(3, 5, seed=1))),
    "SmoothL1Loss": (loss(nn.SmoothL1Loss, beta=0.5), lambda: (r(3, 5), r(3, 5, seed=1))),
    "SoftMarginLoss": (loss(nn.SoftMarginLoss), lambda: (r(3, 5), r(3, 5, seed=1).sign())),
    "BCELoss": (loss(nn.BCELoss), lambda: (PROB(), PROB().round())),
    "BCEWithLogitsLoss": (loss(nn.BCEWithLogitsLoss), lambda: (r(3, 5), PROB())),
    "KLDivLoss": (loss(nn.KLDivLoss, reduction="batchmean"), lambda: (r(3, 5).log_softmax(1), PROB())),
    "PoissonNLLLoss": (loss(nn.PoissonNLLLoss), lambda: (r(3, 5), PROB())),
    "CrossEntropyLoss": (loss(nn.CrossEntropyLoss, label_smoothing=0.1), lambda: (r(3, 5), ids(5, 3))),
    "LinearCrossEntropyLoss": (loss(nn.LinearCrossEntropyLoss, 4, 5), lambda: (r(3, 4), ids(5, 3))),
    "NLLLoss": (loss(nn.NLLLoss), lambda: (r(3, 5).log_softmax(1), ids(5, 3))),
    "NLLLoss2d": (loss(nn.NLLLoss2d), lambda: (r(2, 5, 3, 4).log_softmax(1), ids(5, 2, 3, 4))),
    "MultiMarginLoss": (loss(nn.MultiMarginLoss), lambda: (r(3, 5), ids(5, 3))),
    "MultiLabelSoftMarginLoss": (loss(nn.MultiLabelSoftMarginLoss), lambda: (r(3, 5), PROB().round())),
    "MultiLabelMarginLoss": (loss(nn.MultiLabelMarginLoss), lambda: (r(3, 5), torch.tensor([[3, 0, -1, 1, 2]] * 3))),
    "HingeEmbeddingLoss": (loss(nn.HingeEmbeddingLoss), lambda: (r(3, 5), r(3, 5, seed=1).sign())),
    "MarginRankingLoss": (loss(nn.MarginRankingLoss, margin=0.2), lambda: (r(4), r(4, seed=1), r(4, seed=2).sign())),
    "CosineEmbeddingLoss": (loss(nn.CosineEmbeddingLoss), lambda: (r(3, 5), r(3, 5, seed=1), r(3, seed=2).sign())),
    "TripletMarginLoss": (loss(nn.TripletMarginLoss), lambda: (r(3, 5), r(3, 5, seed=1), r(3, 5, seed=2))),
    "TripletMarginWithDistanceLoss": (loss(nn.TripletMarginWithDistanceLoss, swap=True),
                                      lambda: (r(3, 5), r(3, 5, seed=1), r(3, 5, seed=2))),
    "AdaptiveLogSoftmaxWithLoss": (lambda: Call(nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8]),
                                                lambda m, x: m.log_prob(x)), lambda: (r(3, 8),)),
}

# Sampled on the compiled path by default (every layer runs on the interpreter): one of each family.
COMPILED_SAMPLE = ("Conv1d", "ConvTranspose2d", "Conv3d", "MaxPool3d", "AdaptiveMaxPool2d", "LPPool2d", "Fold",
                   "InstanceNorm1d", "LSTM", "MultiheadAttention", "TransformerEncoderLayer", "Bilinear",
                   "EmbeddingBag", "Upsample", "GELU", "ReflectionPad2d", "CrossEntropyLoss")


def all_classes() -> dict[str, type]:
    m = torch.nn.modules
    return {c.__name__: c for n in dir(m) for c in [getattr(m, n)]
            if inspect.isclass(c) and issubclass(c, nn.Module)}


def test_every_layer_class_is_classified():
    """Each class in torch.nn.modules is tested or refused with a reason, not both, not neither."""
    names = set(all_classes())
    unclassified = sorted(names - set(LAYERS) - set(NN_REFUSED))
    assert not unclassified, f"torch.nn.modules classes neither tested nor refused: {unclassified}"
    assert not set(LAYERS) & set(NN_REFUSED)
    assert set(LAYERS) | set(NN_REFUSED) <= names


def build(name):
    make, inputs = LAYERS[name]
    torch.manual_seed(0)
    layer, xs = make().eval(), inputs()
    with torch.no_grad():
        want = layer(*xs)                      # (also gives lazy layers their shapes)
    want = tuple(w for w in torch.utils._pytree.tree_leaves(want) if w is not None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = from_torch(layer, xs)
    return graph, [x.numpy() for x in xs], [torch.as_tensor(w).numpy() for w in want]


def check(path, got, want):
    got = got if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want), path
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{path}: {g.dtype}{list(g.shape)} != {w.dtype}{list(w.shape)}"
    e = errors(got, want)
    assert e.within(max(tolerance(w.dtype) for w in want)), f"{path}: {e}"


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_matches_eager(name, tmp_path, request):
    graph, xs, want = build(name)
    check("interp", interpret(graph, xs), want)
    if name in COMPILED_SAMPLE or request.config.getoption("--all-layers"):
        check("minic", compile_graph(graph, CompileOptions(cache_dir=tmp_path))(*xs), want)
