"""The model zoo: pure-torch models with seeded random weights (nothing is downloaded).

    model, example_inputs = minic.models.get("llama-tiny", size="small", seed=0)
    logits = model(*example_inputs)

Each model comes in two sizes: "full" (the real architecture, for benchmarks)
and "small" (the same code, scaled down, for fast tests). Models are float32,
in eval mode, and export with torch.export (dynamic axes as in `info`) and with
torch.onnx.export. For token models, bound the sequence axis by the model's
`max_seq_len`, e.g. `torch.export.Dim("T", max=model.max_seq_len)`. torch.export
specializes axes of size 1, so a dynamic batch needs an example with B >= 2
(the full-size resnet50, bert-base and llama-tiny examples have B = 1).
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from minic.errors import UserError
from minic.models import bert, cnn, llama, mlp, resnet

SIZES = ("full", "small")

Builder = Callable[[str, int], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]


@dataclass(frozen=True)
class ModelInfo:
    """What a caller needs to know about a model without building it."""

    name: str
    description: str
    input_names: tuple[str, ...]
    dynamic_axes: tuple[dict[int, str], ...]  # one per input: axis -> symbol name


_MODELS: list[tuple[ModelInfo, Builder]] = [
    (ModelInfo("mlp", "two-layer perceptron, [B, 784] -> [B, 10]",
               ("x",), ({0: "B"},)), mlp.build),
    (ModelInfo("cnn", "conv-batchnorm-relu-maxpool stages, [B, 3, 32, 32] -> [B, 10]",
               ("image",), ({0: "B"},)), cnn.build),
    (ModelInfo("resnet50", "ResNet-50 v1.5, [B, 3, 224, 224] -> [B, 1000]",
               ("image",), ({0: "B"},)), resnet.build),
    (ModelInfo("bert-base", "BERT-base encoder, token ids [B, T] -> hidden [B, T, 768]",
               ("input_ids",), ({0: "B", 1: "T"},)), bert.build),
    (ModelInfo("llama-tiny", "4-layer LLaMA decoder, token ids [B, T] -> logits [B, T, 1024]",
               ("input_ids",), ({0: "B", 1: "T"},)), llama.build),
]
_ZOO: dict[str, tuple[ModelInfo, Builder]] = {info.name: (info, build) for info, build in _MODELS}


def names() -> list[str]:
    """The names of all models in the zoo."""
    return list(_ZOO)


def info(name: str) -> ModelInfo:
    """The description, input names and dynamic axes of model `name`."""
    if name not in _ZOO:
        raise UserError(f"unknown model '{name}'; available: {', '.join(_ZOO)}")
    return _ZOO[name][0]


def get(name: str, size: str = "full",
        seed: int = 0) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Build model `name` at `size` with weights and example inputs drawn from `seed`.

    The global torch random state is left as it was.
    """
    info(name)  # raises for an unknown name
    if size not in SIZES:
        raise UserError(f"unknown size '{size}'; available: {', '.join(SIZES)}")
    with torch.random.fork_rng(devices=[]):
        return _ZOO[name][1](size, seed)
