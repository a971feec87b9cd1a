"""Symbolic dims: monomials closed under multiply and exact divide."""
from hypothesis import given
from hypothesis import strategies as st

import pytest

from minic.errors import UserError
from minic.ir.types import DType, TensorType, canon, dim_div, dim_eval, dim_mul, dim_prod

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
