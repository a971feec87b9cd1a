"""An ONNX file is read by each engine's own importer (ONNX Runtime runs the file,
OpenVINO's read_model + reshape, TVM's relax.frontend.onnx), never by minic's: a file
holding an op minic refuses (SequenceConstruct: minic has no sequence values) still loads, the engines run it, minic's own
paths refuse it naming the op, and coverage says which path refused and why."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import minic
from minic import backends
from minic.debug.coverage import coverage
from minic.debug.paths import choose_all
from minic.errors import UnsupportedError

ENGINES = ("onnxruntime", "openvino", "tvm")


@pytest.fixture(scope="module")
def sequence_file(tmp_path_factory):
    """y = 2 * concat([x, x]) over x: f32[N], through an ONNX sequence, which minic lacks."""
    graph = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
         helper.make_node("ConcatFromSequence", ["s"], ["c"], axis=0), helper.make_node("Mul", ["c", "two"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    path = tmp_path_factory.mktemp("onnx") / "sequence.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


X = np.array([3, 1, 3, 2, 1, 5, 5, 0], np.float32)


def test_the_engines_run_a_file_minic_refuses_with_their_own_importers(sequence_file, monkeypatch):
    import minic.frontend.onnx as minic_onnx
    source = minic.load(sequence_file, [X])
    assert backends.reference_name(source) == "onnxruntime" and "SequenceConstruct" in source.extra["minic_refused"]

    def no(*args, **kwargs):
        raise AssertionError("a bridge imported the file through minic's importer")
    monkeypatch.setattr(minic_onnx, "from_onnx", no)
    for name in ENGINES:
        run = backends.get(name)(source)
        np.testing.assert_array_equal(run(X), 2 * np.concatenate([X, X]), err_msg=name)
        shorter = np.array([4, 4, -1, 2, 2], np.float32)          # another N: OpenVINO reshapes, TVM recompiles
        np.testing.assert_array_equal(run(shorter), 2 * np.concatenate([shorter, shorter]), err_msg=name)


@pytest.mark.parametrize("name, message", [("minic", r"SequenceConstruct, opset 17\): op is not supported"),
                                           ("interp", r"SequenceConstruct, opset 17\): op is not supported"),
                                           ("tinygrad", r"tinygrad': op='SequenceConstruct' is not supported")])
def test_the_paths_without_the_op_refuse_the_file_naming_it(sequence_file, name, message):
    source = minic.load(sequence_file, [X])
    with pytest.raises(UnsupportedError, match=message):
        backends.get(name)(source)(X)


def test_coverage_says_which_path_refused_and_why(sequence_file):
    result = coverage(minic.load(sequence_file), choose_all("minic,onnxruntime,openvino,tvm"))
    assert not result.rows and "minic does not import sequence.onnx" in result.note
    assert {p: v.status for p, v in result.whole.items()} == {
        "minic": "refused", "onnxruntime": "supported", "openvino": "supported", "tvm": "supported"}
    assert "SequenceConstruct" in result.whole["minic"].reason
    assert "| **whole model** | | refused [1] | ok | ok | ok |" in result.markdown()
