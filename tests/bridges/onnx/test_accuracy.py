"""Accuracy: ONNX Runtime vs PyTorch on 100 inputs (50 synthetic, 50 English text)."""
import numpy as np

from bridges.onnx.compare import accuracy, ort_session, torch_outputs
from bridges.onnx.inputs import InputSpec, accuracy_inputs, byte_tokens, load_text
from bridges.onnx.quantize import quantize_int8, text_calibration

TOLERANCE = 1e-4


def test_shipped_text_is_english_bytes_within_the_vocab():
    text = load_text()
    assert not text.startswith("# Source")               # header line skipped
    tokens = byte_tokens(text)
    assert len(tokens) > 4000 and tokens.max() < 256
    assert "We hold these truths to be self-evident" in text


def inputs_for(exported, module):
    spec = InputSpec(exported.example_inputs[0], exported.dynamic_axes[0])
    return accuracy_inputs(spec, 100, vocab=module.embed.num_embeddings,
                           max_seq=module.max_seq_len)


def test_inputs_are_half_text_half_synthetic_over_several_shapes(llama_small):
    batches = inputs_for(*llama_small)
    kinds = [k for k, _ in batches]
    assert kinds.count("text") == 50 and kinds.count("synthetic") == 50
    assert len({x.shape for _, x in batches}) >= 5


def test_exported_and_optimized_match_pytorch_within_1e4(llama_small, llama_small_opt):
    exported, module = llama_small
    batches = inputs_for(exported, module)
    references = torch_outputs(module, batches)
    for label, model in (("exported", exported.model), ("homemade", llama_small_opt[0])):
        row = accuracy(label, ort_session(model), batches, references)
        assert row.inputs == 100 and len(row.shapes) >= 5
        assert set(row.by_kind) == {"synthetic", "text"}
        assert row.within(TOLERANCE), (label, row.max_abs_error)
        assert row.top1_agreement == 1.0


def test_int8_qdq_is_close_but_not_fp32_exact(llama_small, llama_small_opt):
    exported, module = llama_small
    int8 = quantize_int8(llama_small_opt[0], text_calibration("input_ids"))
    ops = {n.op_type for n in int8.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    batches = inputs_for(exported, module)[:20]
    row = accuracy("int8", ort_session(int8), batches, torch_outputs(module, batches))
    # INT8 is a lossy encoding: a documented, looser bound (README: accuracy table)
    assert TOLERANCE < row.max_abs_error < 0.25 * row.max_abs_reference
    assert row.top1_agreement > 0.85
    assert np.isfinite(row.max_abs_error)
