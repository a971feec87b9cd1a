"""Resampling one axis, shared by ONNX's Resize and Upsample and torch's interpolate (a part of
``minic.frontend.compose``, in a file of its own).

Resampling is separable, and along one axis every mode is linear in the input, plus a
constant where an output position falls outside the region of interest (ONNX's
``extrapolation_value``).  So along one axis the result is ``W @ x + e``: ``resample_map``
computes the [out, in] weights ``W`` and the offsets ``e`` at import time, ``resample``
applies them -- a gather for a nearest map (any element type), a matmul otherwise.

The weights follow ONNX's Resize spec: an output index ``y`` maps to a source position
``x`` (the coordinate transformation, ``COORDINATES``); the kernel of ``mode`` is centred
there, over the taps nearest to it (the left one preferred, edge taps clamped into range);
``exclude_outside`` drops the taps outside the input and renormalises; ``antialias``
widens a linear or cubic kernel by 1/scale when downsampling.  torch's interpolate uses
the same kernels with its own coordinate maps (ATen's ``area_pixel_compute_source_index``
and ``nearest_idx``), named ``torch_*`` here; its caller passes torch's ``step``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from minic.errors import UserError
from minic.frontend import compose
from minic.ir.graph import Value


@dataclass(frozen=True)
class Resampling:
    """How an axis is resampled (ONNX Resize's attributes, by their meaning)."""
    mode: str = "nearest"                   # nearest | linear | cubic
    coordinates: str = "half_pixel"         # a key of COORDINATES
    nearest_mode: str = "round_prefer_floor"    # floor | ceil | round_prefer_floor | round_prefer_ceil
    cubic_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False
    extrapolation: float = 0.0              # the value outside the roi (tf_crop_and_resize)


@dataclass(frozen=True)
class Axis:
    """One resampled axis: its sizes, ONNX's scale (out per in: given, or out / in), the roi
    (tf_crop_and_resize) and torch's step (in per out: 1 / its scale factor, or in / out)."""
    n_in: int
    n_out: int
    scale: float
    roi: tuple[float, float] = (0.0, 1.0)
    step: float = 0.0

    @property
    def width(self) -> float:
        """The output length the scale gives, before rounding (the spec's ``length_resized``)."""
        return self.scale * self.n_in


def _half_pixel_symmetric(y: np.ndarray, a: Axis) -> np.ndarray:
    offset = a.n_in / 2 * (1 - a.n_out / a.width)       # centres the implicit roi on the output
    return offset + (y + 0.5) / a.scale - 0.5


def _crop(y: np.ndarray, a: Axis) -> np.ndarray:
    lo, hi = a.roi
    x = np.full(len(y), (hi - lo) * (a.n_in - 1) / 2) if a.width == 1 else y * (hi - lo) * (a.n_in - 1) / (a.width - 1)
    return x + lo * (a.n_in - 1)


def _torch_nearest(y: np.ndarray, a: Axis) -> np.ndarray:
    """ATen's nearest: floor(y · step), in float32."""
    return np.floor(y.astype(np.float32) * np.float32(a.step)).astype(np.float64)


# Output index -> source position along an axis: ONNX's coordinate_transformation_mode, and torch's.
COORDINATES: dict[str, Callable[[np.ndarray, Axis], np.ndarray]] = {
    "half_pixel": lambda y, a: (y + 0.5) / a.scale - 0.5,
    "half_pixel_symmetric": _half_pixel_symmetric,
    "pytorch_half_pixel": lambda y, a: np.full(len(y), -0.5) if a.width == 1 else (y + 0.5) / a.scale - 0.5,
    "align_corners": lambda y, a: np.zeros(len(y)) if a.width == 1 else y * (a.n_in - 1) / (a.width - 1),
    "asymmetric": lambda y, a: y / a.scale,
    "tf_crop_and_resize": _crop,
    "torch_half_pixel": lambda y, a: np.maximum((y + 0.5) * a.step - 0.5, 0.0),
    "torch_align_corners": lambda y, a: y * ((a.n_in - 1) / (a.n_out - 1) if a.n_out > 1 else 0.0),
    "torch_nearest": _torch_nearest,
}


def _nearest(r: np.ndarray, how: Resampling) -> np.ndarray:
    """The two taps' weights (left, right) at ratio r in (0, 1]; r = 1 is the right tap itself."""
    right = {"floor": r == 1, "ceil": r > 0, "round_prefer_floor": r > 0.5,
             "round_prefer_ceil": r >= 0.5}[how.nearest_mode] | (r == 1)
    return np.stack([~right, right], axis=1).astype(np.float64)


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel at distance d, with coefficient a."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _kernel(r: np.ndarray, axis: Axis, how: Resampling) -> tuple[np.ndarray, int]:
    """The weights of each output's taps [out, taps] at ratios ``r``, and the first tap's offset
    from the left neighbour."""
    if how.mode == "nearest":
        return _nearest(r, how), 0
    reach = 1 if how.mode == "linear" else 2                # the kernel's half width, in input steps
    shrink = min(axis.scale, 1.0) if how.antialias else 1.0
    start = int(np.floor(-reach / shrink) + 1)
    d = (np.arange(start, 2 - start)[None, :] - r[:, None]) * shrink
    if how.mode == "linear":
        w = np.clip(1 - np.abs(d), 0, 1)
    elif how.mode == "cubic":
        w = _cubic(d, how.cubic_a)
    else:
        raise UserError(f"unknown resize mode {how.mode!r}")
    return (w / w.sum(axis=1, keepdims=True) if how.antialias else w), start


def resample_map(axis: Axis, how: Resampling) -> tuple[np.ndarray, np.ndarray]:
    """The [out, in] weights and [out] offsets of resampling ``axis`` as ``how`` says."""
    if how.coordinates not in COORDINATES:
        raise UserError(f"unknown coordinate transformation {how.coordinates!r}")
    x = COORDINATES[how.coordinates](np.arange(axis.n_out, dtype=np.float64), axis)
    left = np.ceil(x).astype(np.int64) - 1                  # an integer position is its left neighbour's r = 1
    taps, start = _kernel(x - left, axis, how)
    index = left[:, None] + start + np.arange(taps.shape[1])[None, :]
    if how.exclude_outside:
        taps = np.where((index < 0) | (index >= axis.n_in), 0.0, taps)
        total = taps.sum(axis=1, keepdims=True)
        taps = taps / np.where(total == 0, 1.0, total)
    weights = np.zeros((axis.n_out, axis.n_in), np.float64)
    rows = np.broadcast_to(np.arange(axis.n_out)[:, None], index.shape)
    np.add.at(weights, (rows, np.clip(index, 0, axis.n_in - 1)), taps)
    offset = np.zeros(axis.n_out, np.float64)
    if how.coordinates == "tf_crop_and_resize":
        outside = (x < 0) | (x > axis.n_in - 1)
        weights[outside] = 0.0
        offset[outside] = how.extrapolation
    return weights, offset


def resample(b: Any, v: Value, axis: int, weights: np.ndarray, offset: np.ndarray, nearest: bool) -> Value:
    """y = weights @ v + offset along ``axis``: for a nearest map, a gather (any element type,
    exact) and the offset where only it reaches; else a matmul and the offset added."""
    shape = [1] * v.type.rank
    shape[axis] = len(offset)
    outside = np.abs(weights).sum(axis=1) == 0
    if nearest and np.all((weights == 0) | (weights == 1)) and np.all(weights.sum(axis=1) <= 1):
        y = compose.pick(b, v, axis, weights.argmax(axis=1))
        if np.any(outside):
            fill = b.const(offset.reshape(shape).astype(v.type.dtype.numpy))
            y = b.one("where", b.const(outside.reshape(shape)), fill, y)
        return y
    y = compose.along(b, v, axis, weights)
    if np.any(offset):
        y = b.one("add", y, b.const(offset.reshape(shape).astype(v.type.dtype.numpy)))
    return y
