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

from minic.frontend.onnx import Builder, OnnxImportError
from minic.ir.graph import Value

DOMAIN = "ai.onnx.preview.training"


def _groups(b: Builder, x: list[Value], k: int) -> tuple[Value, Value, list[list[Value]]]:
    """R, T and, for each of the n optimized tensors, its k inputs (X, G, then its states)."""
    if len(x) < 2 + k or (len(x) - 2) % k:
        raise OnnxImportError(f"{b.where}: expected R, T and {k} inputs per optimized tensor, got {len(x)} inputs")
    n = (len(x) - 2) // k
    return x[0], x[1], [[x[2 + j * n + i] for j in range(k)] for i in range(n)]


class _Arith:
    """Element-wise arithmetic on the values of one optimized tensor, in its dtype."""

    def __init__(self, b: Builder, like: Value):
        self.b, self.like = b, like

    def c(self, v: float | Value) -> Value:
        """A number as a constant, or a scalar input (R, T) cast to the tensor's dtype."""
        if isinstance(v, Value):
            return v if v.type.dtype == self.like.type.dtype else self.b.one("cast", v, dtype=self.like.type.dtype)
        return self.b.const(v, like=self.like)

    def _op(self, op: str, *vs: float | Value) -> Value:
        return self.b.one(op, *(self.c(v) for v in vs))

    def add(self, u, v): return self._op("add", u, v)          # noqa: E704
    def sub(self, u, v): return self._op("sub", u, v)          # noqa: E704
    def mul(self, u, v): return self._op("mul", u, v)          # noqa: E704
    def div(self, u, v): return self._op("div", u, v)          # noqa: E704
    def pow(self, u, v): return self._op("pow", u, v)          # noqa: E704
    def sqrt(self, u): return self._op("sqrt", u)              # noqa: E704
    def gt(self, u, v): return self._op("gt", u, v)            # noqa: E704

    def where(self, cond: Value, u, v) -> Value:
        return self.b.one("where", cond, self.c(u), self.c(v))

    def regularized(self, x: Value, g: Value, norm: float) -> Value:
        return self.add(self.mul(norm, x), g)


def _adagrad(b: Builder, x: list[Value], a: dict) -> list[Value]:
    r, t, groups = _groups(b, x, 3)
    decay, eps, norm = a.get("decay_factor", 0.0), a.get("epsilon", 1e-6), a.get("norm_coefficient", 0.0)
    xs, hs = [], []
    for xi, gi, hi in groups:
        f = _Arith(b, xi)
        rate = f.div(r, f.add(1.0, f.mul(t, decay)))
        g = f.regularized(xi, gi, norm)
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
        f = _Arith(b, xi)
        g = f.regularized(xi, gi, norm)
        v = f.add(f.mul(alpha, vi), f.mul(1.0 - alpha, g))
        h = f.add(f.mul(beta, hi), f.mul(1.0 - beta, f.mul(g, g)))
        started = f.gt(t, 0.0)
        tf = f.c(t)
        # the bias correction once T > 0 (its denominator is 0 at T = 0: 1 there, unused)
        corrected = f.div(f.mul(r, f.sqrt(f.sub(1.0, f.pow(beta, tf)))),
                          f.where(started, f.sub(1.0, f.pow(alpha, tf)), 1.0))
        rate = f.where(started, corrected, r)
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
        f = _Arith(b, xi)
        g = f.regularized(xi, gi, norm)
        beta_t = f.where(f.gt(t, 0.0), beta, 1.0)     # the gradient counts fully at T = 0
        v = f.add(f.mul(alpha, vi), f.mul(beta_t, g))
        step = v if mode == "standard" else f.add(g, f.mul(alpha, v))
        xs.append(f.sub(xi, f.mul(r, step)))
        vs.append(v)
    return xs + vs


TRAINING = {"Adagrad": _adagrad, "Adam": _adam, "Momentum": _momentum}
