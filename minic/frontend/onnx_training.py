"""The optimizers of ONNX's ``ai.onnx.preview.training`` domain, composed from element-wise ops.

Each takes a learning rate ``R`` and an update count ``T`` (scalars), then n tensors to
optimize with their gradients and states, and returns the n updated tensors, then the
updated states (the spec's formulas, one tensor at a time):

- ``Adagrad``: ``r = R / (1 + T·decay_factor)``, ``g = norm_coefficient·X + G``,
  ``H' = H + g²``, ``X' = X - r·g / (sqrt(H') + epsilon)``.
- ``Adam``: ``V' = alpha·V + (1 - alpha)·g``, ``H' = beta·H + (1 - beta)·g²``, the rate corrected
  by ``sqrt(1 - beta^T) / (1 - alpha^T)`` once ``T > 0``, ``X' = (1 - norm_coefficient_post)·
  (X - r·V' / (sqrt(H') + epsilon))``.
- ``Momentum``: ``V' = alpha·V + beta'·g`` (``beta' = 1`` while ``T = 0``); ``X' = X - R·V'``,
  or with ``mode="nesterov"`` ``X' = X - R·(g + alpha·V')``.

``T`` is data: the choices on ``T > 0`` are ``where`` nodes, not import-time branches.
"""
from __future__ import annotations

from minic.frontend import compose
from minic.frontend.onnx_builder import Builder, OnnxImportError
from minic.ir.graph import Value

DOMAIN = "ai.onnx.preview.training"


def _groups(b: Builder, x: list[Value], k: int) -> tuple[Value, Value, list[list[Value]]]:
    """R, T and, for each of the n optimized tensors, its k inputs (X, G, then its states)."""
    if len(x) < 2 + k or (len(x) - 2) % k:
        raise OnnxImportError(f"{b.where}: expected R, T and {k} inputs per optimized tensor, got {len(x)} inputs")
    n = (len(x) - 2) // k
    return x[0], x[1], [[x[2 + j * n + i] for j in range(k)] for i in range(n)]


def _regularized(f: compose.Arith, x: Value, g: Value, norm: float) -> Value:
    return f.add(f.mul(x, norm), g)


def _adagrad(b: Builder, x: list[Value], a: dict) -> list[Value]:
    r, t, groups = _groups(b, x, 3)
    decay, eps, norm = a.get("decay_factor", 0.0), a.get("epsilon", 1e-6), a.get("norm_coefficient", 0.0)
    xs, hs = [], []
    for xi, gi, hi in groups:
        f, rf, tf = compose.Arith(b, xi), b.cast(r, xi.type.dtype), b.cast(t, xi.type.dtype)
        rate = f.div(rf, f.add(f.mul(tf, decay), 1.0))
        g = _regularized(f, xi, gi, norm)
        h = f.add(hi, f.mul(g, g))
        xs.append(f.sub(xi, f.div(f.mul(rate, g), f.add(f.sqrt(h), eps))))
        hs.append(h)
    return xs + hs


def _adam(b: Builder, x: list[Value], a: dict) -> list[Value]:
    r, t, groups = _groups(b, x, 4)
    alpha, beta, eps = a.get("alpha", 0.9), a.get("beta", 0.999), a.get("epsilon", 1e-6)
    norm, post = a.get("norm_coefficient", 0.0), a.get("norm_coefficient_post", 0.0)
    xs, vs, hs = [], [], []
    for xi, gi, vi, hi in groups:
        f, rf, tf = compose.Arith(b, xi), b.cast(r, xi.type.dtype), b.cast(t, xi.type.dtype)
        g = _regularized(f, xi, gi, norm)
        v = f.add(f.mul(vi, alpha), f.mul(g, 1.0 - alpha))
        h = f.add(f.mul(hi, beta), f.mul(f.mul(g, g), 1.0 - beta))
        started = f.gt(tf, 0.0)
        # the bias correction once T > 0 (its denominator is 0 at T = 0: 1 there, unused)
        corrected = f.div(f.mul(rf, f.sqrt(f.sub(1.0, f.pow(f.c(beta), tf)))),
                          f.where(started, f.sub(1.0, f.pow(f.c(alpha), tf)), f.c(1.0)))
        rate = f.where(started, corrected, rf)
        step = f.sub(xi, f.mul(rate, f.div(v, f.add(f.sqrt(h), eps))))
        xs.append(f.mul(1.0 - post, step))
        vs.append(v)
        hs.append(h)
    return xs + vs + hs


def _momentum(b: Builder, x: list[Value], a: dict) -> list[Value]:
    r, t, groups = _groups(b, x, 3)
    alpha, beta, norm = a["alpha"], a["beta"], a["norm_coefficient"]
    mode = a.get("mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise OnnxImportError(f"{b.where}: mode must be 'standard' or 'nesterov', got '{mode}'")
    xs, vs = [], []
    for xi, gi, vi in groups:
        f, rf, tf = compose.Arith(b, xi), b.cast(r, xi.type.dtype), b.cast(t, xi.type.dtype)
        g = _regularized(f, xi, gi, norm)
        beta_t = f.where(f.gt(tf, 0.0), f.c(beta), f.c(1.0))     # the gradient counts fully at T = 0
        v = f.add(f.mul(vi, alpha), f.mul(beta_t, g))
        step = v if mode == "standard" else f.add(g, f.mul(v, alpha))
        xs.append(f.sub(xi, f.mul(rf, step)))
        vs.append(v)
    return xs + vs


TRAINING = {"Adagrad": _adagrad, "Adam": _adam, "Momentum": _momentum}
