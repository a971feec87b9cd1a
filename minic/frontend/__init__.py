"""Frontends: bring a model from outside into minic's tensor IR (a Graph).

* ``minic.frontend.torch.from_torch(module, example_inputs, dynamic_axes)``:
  a ``torch.nn.Module`` through ``torch.export`` and core ATen
  (the per-op table is ``minic.frontend.torch_ops``).
* ``minic.frontend.onnx.from_onnx_file(path)``: an ONNX model
  (the per-op table is ``minic.frontend.onnx_ops``).

Each frontend is imported on its own, so that reading a text file never pays
for importing torch.
"""
