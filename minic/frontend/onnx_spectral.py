"""ONNX's DFT and STFT as constant linear maps (matmuls) along the transformed axis.

A DFT of length N is linear in the real and imaginary parts of its input:
``out_re = re·A + im·B`` and ``out_im = re·C + im·D`` with A..D the cosine and
sine tables (N×N, or the first N/2+1 bins when ``onesided``; scaled by 1/N and
conjugated when ``inverse``).  An inverse one-sided DFT (irfft) reads half a
spectrum and writes a real signal: each bin but the first and the Nyquist one
counts twice.  Inputs shorter than N are zero-padded, longer ones cut, as
numpy's ``n=`` does.  STFT gathers its frames with one constant index, applies
the window, and runs the same DFT along the frame.  MelWeightMatrix is a
constant (its scalar inputs known at import).
"""
from __future__ import annotations

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose
from minic.frontend.onnx_builder import ONNX_DTYPES, Builder, OnnxImportError, converter_table
from minic.ir.graph import Value
from minic.ir.types import DType
from minic.limits import ensure_array_fits

CONVERTERS = converter_table()
converts = CONVERTERS.add


def _tables(n_in: int, length: int, inverse: bool, onesided: bool) -> tuple[np.ndarray, ...]:
    """A, B, C, D (rows: input index; columns: output index) and whether the output is real."""
    if inverse and onesided:                       # irfft: n_in bins -> `length` real samples
        used = min(n_in, length // 2 + 1)
        j, k = np.arange(used)[:, None], np.arange(length)[None, :]
        weight = np.where((j == 0) | ((length % 2 == 0) & (j == length // 2)), 1.0, 2.0)
        angle = 2 * np.pi * j * k / length
        a, b = weight * np.cos(angle) / length, -weight * np.sin(angle) / length
        pad = np.zeros((n_in - used, length))
        return np.vstack([a, pad]), np.vstack([b, pad]), None, None
    outs = length // 2 + 1 if onesided else length
    used = min(n_in, length)
    j, k = np.arange(used)[:, None], np.arange(outs)[None, :]
    angle = 2 * np.pi * j * k / length
    sign, scale = (1.0, 1.0 / length) if inverse else (-1.0, 1.0)
    cos, sin = np.cos(angle) * scale, sign * np.sin(angle) * scale
    pad = np.zeros((n_in - used, outs))
    cos, sin = np.vstack([cos, pad]), np.vstack([sin, pad])
    return cos, -sin, sin, cos                      # (re + i im)(cos + i sin) = re cos - im sin + i (re sin + im cos)


def dft(b: Builder, x: Value, axis: int, length: int | None, inverse: bool, onesided: bool) -> Value:
    """ONNX's DFT of ``x`` [..., 1 | 2] along ``axis`` (an axis before the last)."""
    rank = x.type.rank
    axis %= rank
    if axis == rank - 1:
        raise OnnxImportError(f"{b.where}: the axis of a DFT cannot be the last (real/imaginary) one")
    n_in = compose.static(b, x, axis, "a DFT")
    if length is None:
        length = 2 * (n_in - 1) if inverse and onesided else n_in
    parts = x.type.shape[-1]
    if parts not in (1, 2):
        raise OnnxImportError(f"{b.where}: the last axis of a DFT input has 1 (real) or 2 (complex) entries, got {parts}")

    # In f64 whatever the input's float type, as ONNX's reference (numpy's FFT) computes: a bin that
    # cancels to about 0 comes out at the input's rounding, not at the f32 sum's.
    wide = b.cast(x, DType.f64)

    def component(k: int) -> tuple[Value, tuple[int, ...]]:
        """The real (0) or imaginary (1) part, the transformed axis moved last."""
        v = b.one("squeeze", b.one("slice", wide, axes=(rank - 1,), starts=(k,), ends=(k + 1,), steps=(1,)),
                  axes=(rank - 1,))
        return compose.move_last(b, v, axis)
    re, back = component(0)
    im = component(1)[0] if parts == 2 else None
    a, bt, c, d = _tables(n_in, length, inverse, onesided)

    def apply(p: np.ndarray, q: np.ndarray) -> Value:
        y = b.one("matmul", re, b.const(p))
        if im is not None:
            y = b.one("add", y, b.one("matmul", im, b.const(q)))
        return b.one("unsqueeze", compose.put_back(b, y, back), axes=(rank - 1,))
    y = apply(a, bt) if c is None else b.one("concat", apply(a, bt), apply(c, d), axis=rank - 1)  # real: [..., 1]
    return b.cast(y, x.type.dtype)


@converts("DFT")
def _dft(b: Builder, x: list[Value], a: dict) -> list[Value]:
    x = x + [None] * (3 - len(x))
    length = int(b.scalar(x[1], "dft_length")) if x[1] is not None else None
    axis = int(b.scalar(x[2], "the axis", -2)) if b.opset >= 20 else a.get("axis", 1)
    return [dft(b, x[0], axis, length, bool(a.get("inverse", 0)), bool(a.get("onesided", 0)))]


@converts("STFT")
def _stft(b: Builder, x: list[Value], a: dict) -> list[Value]:
    x = x + [None] * (4 - len(x))
    signal, step_v, window, length_v = x
    step = int(b.scalar(step_v, "frame_step"))
    if length_v is not None:
        frame = int(b.scalar(length_v, "frame_length"))
    elif window is not None and isinstance(window.type.shape[0], int):
        frame = window.type.shape[0]
    else:
        raise OnnxImportError(f"{b.where}: STFT needs a window or a frame_length")
    n = signal.type.shape[1]
    if not isinstance(n, int) or frame > n or step < 1:
        raise OnnxImportError(f"{b.where}: frames of {frame} every {step} do not fit a signal of {n}")
    frames = (n - frame) // step + 1
    index = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    framed = b.one("gather", signal, b.const(index.astype(np.int64)), axis=1)      # [B, frames, frame, 1|2]
    if window is not None:
        framed = b.one("mul", framed, b.one("reshape", window, shape=(frame, 1)))
    onesided = bool(a.get("onesided", 1))
    return [dft(b, framed, 2, frame, False, onesided)]


@converts("MelWeightMatrix")
def _mel_weight_matrix(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """A constant [dft_length/2 + 1, num_mel_bins] matrix of triangular filters, once its scalar
    inputs are known (an input's value is specialised on, as for Range): the spec's formula,
    mel = 2595·log10(1 + hz/700), the band edges spaced evenly in mels."""
    num_mel_bins, dft_length, sample_rate, low_hz, high_hz = (
        np.asarray(b.need_known(v, what)).reshape(()) for v, what in
        zip(x, ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")))
    dtype = ONNX_DTYPES.get(int(a.get("output_datatype", 1)))
    if dtype is None or not dtype.is_float:
        raise UnsupportedError(f"{b.where}: output_datatype {a.get('output_datatype')} is not supported")
    bins, mels = int(dft_length) // 2 + 1, int(num_mel_bins)
    if mels < 1 or bins < 1 or sample_rate <= 0:
        raise OnnxImportError(f"{b.where}: needs num_mel_bins, dft_length and sample_rate above 0")
    ensure_array_fits((bins, mels), np.float64, f"{b.where}: the mel weight matrix")
    low_mel, high_mel = (2595 * np.log1p(hz / 700) / np.log(10) for hz in (low_hz, high_hz))
    edges = np.arange(mels + 2) * ((high_mel - low_mel) / (mels + 2)) + low_mel
    edges = ((dft_length + 1) * (700 * np.expm1(edges / 2595 * np.log(10)))) // sample_rate
    edges = edges.astype(np.int64)                               # [left, center, right] of filter i: edges[i:i+3]
    if edges.min() < 0 or edges.max() >= bins:
        raise OnnxImportError(f"{b.where}: the mel bands reach bins {edges.min()}..{edges.max()}, "
                              f"outside 0..{bins - 1}")
    out = np.zeros((bins, mels))
    for i in range(mels):
        left, center, right = edges[i:i + 3]
        if center == left:
            out[center, i] = 1
        else:
            out[left:center + 1, i] = (np.arange(left, center + 1) - left) / (center - left)
        if right > center:
            out[center:right, i] = (right - np.arange(center, right)) / (right - center)
    return [b.const(out.astype(dtype.numpy))]
