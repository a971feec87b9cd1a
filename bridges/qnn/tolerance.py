"""The QNN tolerance policy: how far an HTP result may drift and still be "ok".

Errors are ``minic.compare.Errors`` (max abs, and max abs / max |reference|),
ok when either is within the bound, as in ``minic.verify.tolerance``.

* fp16 (an fp32 model run as fp16 on the HTP): every tensor is stored with 11
  significant bits (unit roundoff 2^-11 ~ 4.9e-4) and the HTP's fp16 matrix
  units round partial sums too; a model of ~40 layers compounds that to ~1e-2
  of the output's scale.  The bound is minic's own f16 bound (2e-2), for the
  same reasons, measured against the fp32 reference (PyTorch or ORT CPU).
* QDQ 8-bit activations: every activation is rounded to one of 256 codes over
  its calibrated range (step = range / 255, error up to step / 2 ~ 2e-3 of the
  range) and weights to 256 codes per tensor; the rounding of ~2 dozen tensors
  adds up through the model, and inputs outside the calibration range are
  clipped.  0.15 of the output's scale is the bound (the zoo's worst measured
  error is stated in the README next to it).
* QDQ 16-bit activations (8-bit weights): activation steps 256x finer, so the
  8-bit weights dominate: 0.1.
* Against ORT's CPU provider running the *same QDQ model*: both compute the
  same quantized graph, but not the same way: the HTP requantizes inside its
  fused ops (RMSNorm's Pow -> ReduceMean -> Sqrt -> Div, Softmax, LayerNorm)
  in fixed point and rounds each result to a code of its own, where the CPU
  provider dequantizes to fp32 and back; one code of difference (1/255 of a
  tensor's range at 8 bits) per op compounds through the ~20 quantized ops of
  a transformer layer just as the quantization error does.  So the same bounds
  hold (llama-tiny small, int8: 0.11 of the output's scale vs CPU, 0.09 vs
  PyTorch).
"""
from __future__ import annotations

from minic.verify.tolerance import F16, QDQ16, QDQ8

FP16 = F16
QDQ = {"uint8": QDQ8, "int8": QDQ8, "uint16": QDQ16, "int16": QDQ16}
QDQ_VS_CPU = QDQ


def bound(family: str, activation_type: str = "", against: str = "reference") -> float:
    """The bound for a mode ("fp16" or "qdq" with its activation type), against the fp32
    reference ("reference") or ORT CPU running the same QDQ model ("cpu-qdq")."""
    if family == "fp16":
        return FP16
    table = QDQ_VS_CPU if against == "cpu-qdq" else QDQ
    return table[activation_type]
