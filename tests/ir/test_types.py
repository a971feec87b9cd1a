"""Symbolic dims: monomials closed under multiply and exact divide; derived dims (a size an op
computes) in one canonical affine-floor form."""
from hypothesis import given
from hypothesis import strategies as st

import pytest

from minic.errors import UserError
from minic.ir.types import (DType, TensorType, canon, derived, derived_dims, dim_bind, dim_div, dim_eval, dim_floordiv,
                            dim_mul, dim_prod, dim_sum, symbols)

dims = st.one_of(st.integers(1, 64), st.sampled_from(["B", "T", "B*T", "2*T", "B*B"]))


def test_canonical_spelling():
    assert canon("T*B") == "B*T"
    assert canon("3") == 3
    assert canon("2*T*3") == "6*T"
    assert dim_mul("B", "T") == "B*T"
    assert dim_mul(4, "T") == "4*T"
    assert dim_mul(0, "T") == 0


@given(dims, dims, st.integers(1, 9), st.integers(1, 9))
def test_mul_div_round_trip_and_eval(a, b, bv, tv):
    env = {"B": bv, "T": tv}
    assert dim_div(dim_mul(a, b), b) == canon(a)
    assert dim_eval(dim_mul(a, b), env) == dim_eval(a, env) * dim_eval(b, env)


def test_inexact_division_is_none():
    assert dim_div("B", "T") is None
    assert dim_div(6, 4) is None
    assert dim_div("4*T", 8) is None
    assert dim_prod((2, "B", 3)) == "6*B"


def test_bad_dims_and_unbound_symbols():
    with pytest.raises(UserError, match="bad symbolic dim"):
        canon("B+T")
    with pytest.raises(UserError, match="has no value"):
        dim_eval("B*T", {"B": 2})


def test_tensor_type_prints_and_dtypes():
    assert str(TensorType(("B", 784), DType.f32)) == "f32[B, 784]"
    assert DType.of(DType.f16.numpy) is DType.f16
    assert DType.of("float64") is DType.f64 and DType.of(DType.bf16.numpy) is DType.bf16
    with pytest.raises(UserError, match="complex64 is not supported"):
        DType.of("complex64")


# --- derived dims: a size an op computes, kept as its formula ----------------------

def _window(n, k, stride, pads):
    """PyTorch's rule for a window sweep's output length (floor mode), the reference."""
    return (n + pads - k) // stride + 1


@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 3), st.integers(0, 3)), min_size=1, max_size=4),
       st.integers(1, 200))
def test_windows_over_windows_fold_into_one_formula_that_evaluates_right(layers, h):
    """Any chain of convolutions/pools over H: each derived dim is one floor (no nesting) and
    evaluates to its layer's real length; where a layer's input is too small, that layer's
    dim says so.  (Every value's dims are evaluated when a model is called, so the check
    lives with the layer: a later dim may fold the chain into a form that no longer holds
    it, ``(H - 1) + 1`` = ``H`` for a 2-wide window then a padding of one.)"""
    d, n = "H", h
    for k, stride, pads in layers:
        d = dim_floordiv(d, pads - k, stride, 1)
        form = derived(d)
        assert form is None or all("/" not in term for term, _ in form.terms)   # one floor at most
        if n + pads < k:
            with pytest.raises(UserError, match="too small for the op that computes it"):
                dim_eval(d, {"H": h})
            return
        n = _window(n, k, stride, pads)
        assert dim_eval(d, {"H": h}) == n


def test_one_size_has_one_spelling():
    assert dim_floordiv("H", -2, 2, 1) == "(H/2)"                                  # 2 x 2 pool: (H - 2)/2 + 1
    assert dim_floordiv("H", -1, 2, 1) == "((H + 1)/2)"                            # 3 x 3, pad 1, stride 2
    assert dim_floordiv(dim_floordiv("H", -1, 2, 1), -1, 2, 1) == "((H + 3)/4)"    # ResNet's stem
    assert dim_floordiv("H", 0, 1, 0) == "H" and dim_floordiv("2*H", 0, 2) == "H"
    assert canon("((H - 6)/4 + 1)") == "((H + 2)/4 - 1)" == canon("( (H+2)/4-1 )")
    assert canon("(T + 2 - 2)") == "T" and canon("(T + 3)*B") == "(T + 3)*B"
    assert dim_sum([("T", 1), (3, 1)]) == "(T + 3)" and dim_sum([("(T + 3)", 1)], 2) == "(T + 5)"
    assert dim_sum([("T", 1), ("U", 1), (0, 1)]) == "(T + U)" and dim_sum([("T", 1), (0, 1)]) == "T"
    assert dim_sum([(dim_floordiv("H", -2, 2, 1), 1)], 3) == "(H/2 + 3)"           # a constant joins the floor
    assert str(TensorType(("N", "(H/2)"), DType.f32)) == "f32[N, (H/2)]"


def test_derived_dims_bind_evaluate_and_refuse():
    d = dim_mul("N", dim_floordiv("H", -1, 2, 1))
    assert symbols(d) == {"N", "H"} and derived_dims(d) == {"((H + 1)/2)"}
    assert dim_eval(d, {"N": 3, "H": 9}) == 15
    assert dim_bind(d, {"H": 9}) == "5*N" and dim_bind(d, {"N": 2}) == "2*((H + 1)/2)"
    assert dim_bind(dim_sum([("T", 1), ("U", 1)]), {"T": 4}) == "(U + 4)"
    with pytest.raises(UserError, match=r"size \(H - 2\) is 0 at \{'H': 2\}"):
        dim_eval(dim_sum([("H", 1)], -2), {"H": 2})
    for bad in ("(H", "(H // 2)", "(H ** 2)", "(H/0)", "(H/T)"):
        with pytest.raises(UserError, match="bad symbolic dim"):
            canon(bad)


def test_one_size_has_one_spelling_however_it_is_computed():
    """torch.export writes an upsampled conv's rows as 2·(⌊(H+2)/4⌋ - 2) + 2; minic's ops, as
    2 times the conv's ⌊(H+2)/4⌋ - 1: both are the product 2*((H + 2)/4 - 1)."""
    rows = dim_floordiv("H", 2, 4, -1)
    assert rows == "((H + 2)/4 - 1)"
    by_torch = dim_sum([(dim_floordiv("H", 2, 4, -2), 2)], 2)
    assert by_torch == dim_mul(2, rows) == "2*((H + 2)/4 - 1)"
    assert dim_sum([("T", 2)], 6) == dim_mul(2, dim_sum([("T", 1)], 3)) == "2*(T + 3)"
    assert dim_sum([(rows, 1)], 1) == "((H + 2)/4)"                 # the floor's plus folds back
