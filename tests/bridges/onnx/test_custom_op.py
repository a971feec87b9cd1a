"""A custom-domain op: exported, refused by ONNX Runtime, then run three other ways."""
import numpy as np
import pytest
import torch

from bridges.onnx import custom_op as demo
from bridges.onnx.compare import ort_session


@pytest.fixture(scope="module")
def custom():
    return demo.export_with_custom_rmsnorm("small")


def reference(module, ids):
    with torch.no_grad():
        return module(torch.from_numpy(ids)).numpy()


def test_export_writes_custom_domain_nodes(custom):
    exported, _ = custom
    nodes = [n for n in exported.model.graph.node if n.domain == demo.DOMAIN]
    assert len(nodes) == 5 and {n.op_type for n in nodes} == {demo.OP}   # 2 layers x 2 + final
    assert nodes[0].attribute[0].name == "epsilon"
    assert any(o.domain == demo.DOMAIN and o.version == 1 for o in exported.model.opset_import)


def test_onnx_runtime_refuses_the_unknown_op(custom):
    error = demo.ort_error(custom[0].model)
    assert error is not None and "ai.minic:RMSNorm" in error and "not a registered" in error


def test_reference_evaluator_runs_it_with_a_python_kernel(custom):
    exported, module = custom
    ids = np.random.default_rng(0).integers(0, 256, size=(3, 7))
    out = demo.run_with_python_kernel(exported.model, {"input_ids": ids})
    np.testing.assert_allclose(out, reference(module, ids), atol=1e-4, rtol=0)


def test_onnx_runtime_runs_it_given_a_function_definition(custom):
    exported, module = custom
    model = demo.with_function_definition(exported.model)
    assert demo.ort_error(model) is None
    ids = np.random.default_rng(1).integers(0, 256, size=(2, 9))
    out = ort_session(model).run(None, {"input_ids": ids})[0]
    np.testing.assert_allclose(out, reference(module, ids), atol=1e-4, rtol=0)


def test_minic_importer_takes_it_with_the_converter_registered():
    from minic.errors import UnsupportedError
    from minic.frontend.onnx import from_onnx
    from minic.ir.interpret import interpret

    exported, module = demo.export_with_custom_rmsnorm("small", dynamic=False)
    with pytest.raises(UnsupportedError, match="RMSNorm"):
        from_onnx(exported.model)                           # not registered: refused
    graph = demo.import_into_minic(exported.model)
    assert sum(n.op == "rsqrt" for n in graph.nodes) == 5
    ids = exported.example_inputs[0]
    np.testing.assert_allclose(interpret(graph, [ids])[0], reference(module, ids),
                               atol=1e-4, rtol=0)
