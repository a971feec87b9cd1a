"""``minic.compile(..., backend="qnn")``: fp16 and QDQ runs within the QNN policy."""
import numpy as np
import pytest
import torch

import minic
from minic.compare import errors
from minic.errors import UserError
from bridges.qnn import tolerance
from bridges.qnn.provider import CPU_NAME, EP_NAME, FallbackDisabledError


def torch_reference(name: str, size: str = "small"):
    from minic.api import load
    source = load(name, size=size)
    with torch.no_grad():
        out = source.module(*(torch.from_numpy(x) for x in source.example_inputs)).numpy()
    return source.example_inputs, out


@pytest.mark.parametrize("name", ["mlp", "llama-tiny"])
def test_fp16_within_policy(name):
    inputs, reference = torch_reference(name)
    run = minic.compile(name, size="small", backend="qnn")
    assert set(run.placement.values()) == {EP_NAME}           # fully on the HTP
    err = errors(run(*inputs), reference)
    assert err.within(tolerance.FP16), err
    assert err.abs > 0                                        # it really ran in fp16


@pytest.mark.parametrize("mode,act", [("int8", "uint8"), ("int16", "uint16")])
def test_qdq_within_policy(mode, act):
    inputs, reference = torch_reference("llama-tiny")
    run = minic.compile("llama-tiny", size="small", backend="qnn", mode=mode, calibration=2,
                        fallback=False)
    assert run.config.types[0] == act
    err = errors(run(*inputs), reference)
    assert err.within(tolerance.bound("qdq", act)), err


def test_qdq_activation_and_weight_types_are_options():
    inputs, reference = torch_reference("mlp")
    run = minic.compile("mlp", size="small", backend="qnn", mode="int16", activation_type="int16",
                        weight_type="int8", calibration=1)
    assert run.config.types == ("int16", "int8")
    assert errors(run(*inputs), reference).within(tolerance.bound("qdq", "int16"))
    with pytest.raises(UserError, match="doesn't support data format"):
        minic.compile("mlp", size="small", backend="qnn", mode="int8", activation_type="int8",
                      weight_type="uint8")


def test_other_input_shapes_compile_another_graph():
    run = minic.compile("mlp", size="small", backend="qnn")
    source = minic.api.load("mlp", size="small")
    x = np.random.default_rng(3).standard_normal((5, source.example_inputs[0].shape[1])).astype(np.float32)
    with torch.no_grad():
        reference = source.module(torch.from_numpy(x)).numpy()
    assert errors(run(x), reference).within(tolerance.FP16)


def test_cpu_fallback_on_and_off(erf_module):
    module, inputs = erf_module
    run = minic.compile(module, inputs, backend="qnn")
    assert CPU_NAME in run.placement.values() and EP_NAME in run.placement.values()
    with torch.no_grad():
        reference = module(*inputs).numpy()
    assert errors(run(*(x.numpy() for x in inputs)), reference).within(tolerance.FP16)
    with pytest.raises(FallbackDisabledError, match=r"\(Erf\)"):
        minic.compile(module, inputs, backend="qnn", fallback=False)


@pytest.mark.parametrize("options,message", [
    ({"mode": "int4"}, "mode must be one of"),
    ({"mode": "fp16", "activation_type": "uint8"}, "applies to the QDQ modes"),
    ({"mode": "int8", "weight_type": "float"}, "weight_type must be one of"),
    ({"colour": 1}, "has no option 'colour'"),
    ({"io_quant": "dsp"}, "io_quant must be htp or cpu"),
])
def test_bad_options_are_user_errors(options, message):
    with pytest.raises(UserError, match=message):
        minic.compile("mlp", size="small", backend="qnn", **options)


def test_wrong_input_count_is_a_user_error():
    run = minic.compile("mlp", size="small", backend="qnn")
    with pytest.raises(UserError, match="takes 1 input"):
        run()


def test_a_torch_op_the_exporter_lacks_is_a_user_error():
    class Sinh(torch.nn.Module):
        def forward(self, x):
            return torch.sinh(x)

    with pytest.raises(UserError, match="aten::sinh' to ONNX opset version 17 is not supported"):
        minic.compile(Sinh(), (torch.ones(2, 3),), backend="qnn")
