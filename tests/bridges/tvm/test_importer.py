"""Import (torch.export and ONNX) and the well-formedness check."""
import numpy as np
import pytest
import torch

from bridges.tvm.build import VMRunner, as_target, build
from bridges.tvm.importer import check_well_formed, from_onnx, from_torch, signature
from bridges.tvm.passes import optimize
from minic import models
from minic.errors import MinicError, UnsupportedError, UserError


def _run(imported, inputs):
    mod, _ = optimize(imported.mod)
    return VMRunner(build(mod, as_target(None)), imported.input_shapes, imported.input_dtypes)(*inputs)


def test_import_gives_a_typed_well_formed_main(zoo_arrays):
    module, inputs, _ = zoo_arrays("mlp", "small")
    imported = from_torch(module, inputs, "mlp")
    check_well_formed(imported.mod, "test")
    assert signature(imported.mod) == ('main(x: R.Tensor((2, 64), dtype="float32")) -> '
                                       'R.Tensor((2, 10), dtype="float32")')
    assert imported.input_names == ("x",)


@pytest.mark.parametrize("name", models.names())
def test_every_zoo_model_matches_pytorch_untuned(name, zoo_arrays):
    module, inputs, reference = zoo_arrays(name, "small")
    output = _run(from_torch(module, inputs, name), inputs)
    assert output.shape == reference.shape
    np.testing.assert_allclose(output, reference, atol=1e-4, rtol=1e-4)


def test_onnx_file_matches_pytorch(tmp_path, zoo_arrays):
    module, inputs, reference = zoo_arrays("cnn", "small")
    path = tmp_path / "cnn.onnx"
    torch.onnx.export(module, tuple(torch.from_numpy(a) for a in inputs), str(path),
                      input_names=["image"], dynamo=False)
    imported = from_onnx(path, inputs)
    assert imported.input_names == ("image",)
    np.testing.assert_allclose(_run(imported, inputs), reference, atol=1e-4, rtol=1e-4)


def test_ill_formed_module_is_reported():
    import tvm
    from tvm import relax
    x = relax.Var("x", relax.TensorType((2,), "float32"))
    undefined = relax.Var("y", relax.TensorType((2,), "float32"))
    mod = tvm.IRModule({"main": relax.Function([x], undefined)})
    with pytest.raises(MinicError, match="not well formed"):
        check_well_formed(mod, "hand-made module")


def test_untraceable_model_is_a_user_error():
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return x + 1 if x.sum() > 0 else x - 1
    with pytest.raises(UnsupportedError, match="torch.export failed"):
        from_torch(DataDependent(), (np.ones((2, 2), np.float32),), "data-dependent")


def test_missing_onnx_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot read ONNX file"):
        from_onnx(tmp_path / "absent.onnx", (np.ones((1, 3), np.float32),))


def test_onnx_input_count_mismatch_is_a_user_error(tmp_path, zoo_arrays):
    module, inputs, _ = zoo_arrays("mlp", "small")
    path = tmp_path / "mlp.onnx"
    torch.onnx.export(module, tuple(torch.from_numpy(a) for a in inputs), str(path), dynamo=False)
    with pytest.raises(UserError, match="has 1 inputs"):
        from_onnx(path, inputs + inputs)
