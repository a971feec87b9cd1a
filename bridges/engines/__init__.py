"""Engines that ``minic bench`` times as references beside the bridges: OpenVINO's
CPU plugin and tinygrad.  Each runs the same ``torch.onnx.export`` of the model as
the ``onnxruntime`` backend (``bridges.onnx.backend.to_onnx``), behind the common
backend protocol; neither is a lab of its own."""
