"""The model zoo: shapes, determinism, and export through torch.export and torch.onnx."""

import pytest
import torch

import minic.models as zoo
from minic.errors import UserError

SMALL_OUTPUT_SHAPES = {
    "mlp": (2, 10),
    "cnn": (2, 10),
    "resnet50": (2, 10),
    "bert-base": (2, 16, 64),
    "llama-tiny": (2, 16, 256),
}
FULL_OUTPUT_SHAPES = {
    "mlp": (8, 10),
    "cnn": (8, 10),
    "resnet50": (1, 1000),
    "bert-base": (1, 128, 768),
    "llama-tiny": (1, 64, 1024),
}
# resnet50 matches torchvision's count; bert-base is BERT-base less its pooler.
FULL_PARAMETERS = {
    "mlp": 407_050,
    "cnn": 94_762,
    "resnet50": 25_557_032,
    "bert-base": 108_891_648,
    "llama-tiny": 3_737_856,
}


def run(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    with torch.no_grad():
        return model(*inputs)


def reshaped(inputs: tuple[torch.Tensor, ...], name: str,
             model: torch.nn.Module) -> tuple[torch.Tensor, ...]:
    """New inputs: one more row in the batch and, for token models, the longest sequence."""
    result = []
    for x, axes in zip(inputs, zoo.info(name).dynamic_axes):
        x = torch.cat([x, x[:1].flip(-1)])
        if 1 in axes:
            repeats = -(-model.max_seq_len // x.shape[1])  # ceil division
            x = x.repeat(1, repeats)[:, :model.max_seq_len]
        result.append(x)
    return tuple(result)


def test_names_and_info() -> None:
    assert zoo.names() == ["mlp", "cnn", "resnet50", "bert-base", "llama-tiny"]
    for name in zoo.names():
        info = zoo.info(name)
        assert info.name == name
        assert len(info.input_names) == len(info.dynamic_axes) == 1


def test_unknown_name_and_size() -> None:
    with pytest.raises(UserError, match="unknown model 'xyz'; available: mlp, cnn"):
        zoo.get("xyz")
    with pytest.raises(UserError, match="unknown model"):
        zoo.info("xyz")
    with pytest.raises(UserError, match="unknown size 'huge'; available: full, small"):
        zoo.get("mlp", size="huge")


@pytest.mark.parametrize("name", zoo.names())
def test_small_forward_and_determinism(name: str) -> None:
    model, inputs = zoo.get(name, "small", seed=0)
    assert not model.training
    output = run(model, inputs)
    assert output.shape == SMALL_OUTPUT_SHAPES[name]
    assert output.dtype == torch.float32
    assert torch.isfinite(output).all()
    assert 0.05 < output.std() < 20  # activations neither vanish nor explode

    again, same_inputs = zoo.get(name, "small", seed=0)
    assert all(torch.equal(a, b) for a, b in zip(inputs, same_inputs))
    assert torch.equal(run(again, same_inputs), output)

    other, other_inputs = zoo.get(name, "small", seed=1)
    assert not torch.equal(run(other, inputs), output)
    assert not all(torch.equal(a, b) for a, b in zip(inputs, other_inputs))


def test_get_leaves_global_random_state_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    zoo.get("mlp", "small", seed=7)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("name", zoo.names())
def test_torch_export_with_dynamic_axes(name: str) -> None:
    model, inputs = zoo.get(name, "small")
    max_size = {"B": None, "T": getattr(model, "max_seq_len", None)}
    dynamic_shapes = tuple(
        {axis: torch.export.Dim(symbol, max=max_size[symbol]) for axis, symbol in axes.items()}
        for axes in zoo.info(name).dynamic_axes
    )
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    for args in (inputs, reshaped(inputs, name, model)):
        torch.testing.assert_close(program.module()(*args), run(model, args))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # dynamo=False is the legacy exporter
@pytest.mark.parametrize("name", zoo.names())
def test_onnx_export_with_dynamic_axes(name: str, tmp_path) -> None:
    import onnxruntime as ort
    model, inputs = zoo.get(name, "small")
    info = zoo.info(name)
    path = tmp_path / f"{name}.onnx"
    torch.onnx.export(
        model, inputs, path, dynamo=False, opset_version=17,
        input_names=list(info.input_names), output_names=["output"],
        dynamic_axes=dict(zip(info.input_names, info.dynamic_axes)),
    )
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    args = reshaped(inputs, name, model)
    (output,) = session.run(None, {n: x.numpy() for n, x in zip(info.input_names, args)})
    torch.testing.assert_close(torch.from_numpy(output), run(model, args), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", zoo.names())
def test_full_forward(name: str) -> None:
    model, inputs = zoo.get(name, "full")
    assert sum(p.numel() for p in model.parameters()) == FULL_PARAMETERS[name]
    output = run(model, inputs)
    assert output.shape == FULL_OUTPUT_SHAPES[name]
    assert torch.isfinite(output).all()
