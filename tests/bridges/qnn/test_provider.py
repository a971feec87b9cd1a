"""The QNN plugin: registration, sessions on the HTP, and the silent-CPU form refused."""
import numpy as np
import onnxruntime as ort
import onnxruntime_qnn
import pytest

from bridges.qnn import provider
from bridges.qnn.provider import EP_NAME, SilentCpuError
from bridges.qnn.prepare import fix_shapes
from tests.bridges.qnn.conftest import sinh_erf_model


def static_model():
    return fix_shapes(sinh_erf_model(), {"x": (2, 8)})


def test_plugin_registers_once_and_offers_the_htp():
    provider.register()
    provider.register()                          # a second call is a no-op, not ORT's "already registered"
    devices = provider.devices()
    assert devices and all(d.ep_name == EP_NAME for d in devices)
    assert EP_NAME in ort.get_available_providers()


def test_session_puts_supported_nodes_on_the_htp():
    qnn = provider.session(static_model())
    assert qnn.placed["fc1"] == EP_NAME and qnn.placed["fc2"] == EP_NAME
    assert qnn.placed["sinh"] == provider.CPU_NAME          # no Sinh in the QNN EP
    y = qnn.run({"x": np.ones((2, 8), np.float32)})[0]
    assert y.shape == (2, 4) and np.isfinite(y).all()


def test_classic_providers_form_runs_on_cpu_and_is_refused():
    provider.register()                          # even with the plugin registered, providers=[...] misses it
    options = ort.SessionOptions()
    options.add_session_config_entry(provider.ASSIGNMENT_KEY, "1")
    classic = ort.InferenceSession(sinh_erf_model().SerializeToString(), options,
                                   providers=[(EP_NAME, {"backend_path": onnxruntime_qnn.get_qnn_htp_path()})])
    assert classic.get_providers() == [provider.CPU_NAME]
    with pytest.raises(SilentCpuError, match="silently runs on the CPU"):
        provider.require_qnn(classic)


def test_require_qnn_needs_the_assignment_record():
    plain = ort.InferenceSession(sinh_erf_model().SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(provider.UserError, match="record_ep_graph_assignment_info"):
        provider.require_qnn(plain)


def test_fallback_disabled_names_the_blocking_nodes():
    with pytest.raises(provider.FallbackDisabledError, match=r"2 node\(s\).*sinh \(Sinh\), erf \(Erf\)"):
        provider.session(static_model(), fallback=False)


def test_dynamic_shapes_are_not_taken():
    # The HTP compiles static graphs: with x[B, 8] the EP takes no node at all.
    with pytest.raises(provider.UnsupportedError, match=r"took none of the model.s 4 node\(s\) \(MatMul x2, Sinh x1, Erf x1\)"):
        provider.session(sinh_erf_model())
