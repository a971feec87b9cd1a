"""An ONNX file is read by each engine's own importer (ONNX Runtime runs the file,
OpenVINO's read_model + reshape, TVM's relax.frontend.onnx), never by minic's: a file
holding an op minic refuses (MaxRoiPool: minic has no region-of-interest max pool) still loads, the engines run it, minic's own
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
def roi_file(tmp_path_factory):
    """y = MaxRoiPool(x, rois) over x: f32[1, 1, H, 6], two fixed regions pooled to 2 x 2: an op minic lacks."""
    graph = helper.make_graph(
        [helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=[2, 2], spatial_scale=1.0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "H", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("rois", TensorProto.FLOAT, [2, 5], [0, 0, 0, 3, 3, 0, 1, 1, 5, 4])])  # batch, x1, y1, x2, y2
    path = tmp_path_factory.mktemp("onnx") / "roi.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


X = np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6)
# The maxima by hand: region 1 is rows 0-3 x cols 0-3 in 2 x 2 bins, region 2 rows 1-4 x cols 1-5 (bins of 2 x 2.5).
Y = np.array([[7, 9], [19, 21], [15, 17], [27, 29]], np.float32).reshape(2, 1, 2, 2)
TALLER = 100 - np.arange(48, dtype=np.float32).reshape(1, 1, 8, 6)   # another H: OpenVINO reshapes, TVM recompiles
Y_TALLER = 100 - np.array([[0, 2], [12, 14], [7, 9], [19, 21]], np.float32).reshape(2, 1, 2, 2)


def test_the_engines_run_a_file_minic_refuses_with_their_own_importers(roi_file, monkeypatch):
    import minic.frontend.onnx as minic_onnx
    source = minic.load(roi_file, [X])
    assert backends.reference_name(source) == "onnxruntime" and "MaxRoiPool" in source.extra["minic_refused"]

    def no(*args, **kwargs):
        raise AssertionError("a bridge imported the file through minic's importer")
    monkeypatch.setattr(minic_onnx, "from_onnx", no)
    for name in ENGINES:
        run = backends.get(name)(source)
        np.testing.assert_array_equal(run(X), Y, err_msg=name)
        np.testing.assert_array_equal(run(TALLER), Y_TALLER, err_msg=name)


@pytest.mark.parametrize("name, message", [("minic", r"MaxRoiPool, opset 17\): op is not supported"),
                                           ("interp", r"MaxRoiPool, opset 17\): op is not supported"),
                                           ("tinygrad", r"tinygrad': op='MaxRoiPool' is not supported")])
def test_the_paths_without_the_op_refuse_the_file_naming_it(roi_file, name, message):
    source = minic.load(roi_file, [X])
    with pytest.raises(UnsupportedError, match=message):
        backends.get(name)(source)(X)


def test_coverage_says_which_path_refused_and_why(roi_file):
    result = coverage(minic.load(roi_file), choose_all("minic,onnxruntime,openvino,tvm"))
    assert not result.rows and "minic does not import roi.onnx" in result.note
    assert {p: v.status for p, v in result.whole.items()} == {
        "minic": "refused", "onnxruntime": "supported", "openvino": "supported", "tvm": "supported"}
    assert "MaxRoiPool" in result.whole["minic"].reason
    assert "| **whole model** | | refused [1] | ok | ok | ok |" in result.markdown()
