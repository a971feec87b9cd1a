"""ONNX's storage-only element types: f8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ), f4 (E2M1),
int4/uint4 and int2/uint2.

No CPU computes in them, and ONNX only converts to and from them (Cast, CastLike,
QuantizeLinear, DequantizeLinear; Identity passes one on).  minic holds such a
tensor in a *carrier* type it has: the bits of a float in u8, the value of a
small integer in i8/u8 (one per byte, unpacked, as numpy's ml_dtypes arrays hold
them).  The conversions are ordinary minic ops, so both paths compile them:

- widening a float: a 256-entry (16 for f4) f32 table of every bit pattern's value,
  gathered by the bits (exact: f32 holds every f8 and f4 value);
- narrowing a float: round to nearest, ties to even, by counting the thresholds —
  the midpoints between neighbouring values — below ``|x|``: for these formats the
  codes of the non-negative values increase with the value, so the count *is*
  the code; the sign bit, NaN and overflow (saturate to the largest finite value,
  or the format's inf / NaN) are selects around it;
- integers: a cast (widening), and for narrowing what ONNX's reference (ml_dtypes)
  does: a float truncates toward zero and one outside the type's range becomes 0;
  an integer keeps its low bits (wraps), as a C cast does.

The backend (``onnx_backend.MinicRep``) converts the graph's inputs and outputs of
these types to and from their carriers.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from minic.errors import UnsupportedError
from minic.ir.graph import Value
from minic.ir.types import DType


@dataclass(frozen=True)
class Storage:
    """One storage-only ONNX element type."""
    name: str                 # ONNX's name (TensorProto.DataType)
    code: int                 # ONNX's element-type code
    is_float: bool
    bits: int                 # 8, 4 or 2
    nan: int | None = None    # the code of NaN (floats; None: the format has no NaN)
    overflow: int | None = None   # the code a too-large value gets without saturation (inf or NaN)
    unsigned_zero: bool = False   # FNUZ: no negative zero (0x80 is NaN)
    lo: int = 0               # integers: the range
    hi: int = 0

    @cached_property
    def numpy(self) -> np.dtype:
        """The numpy (ml_dtypes) dtype ONNX's arrays of this type have."""
        import onnx
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(self.code))

    @property
    def carrier(self) -> DType:
        return DType.i8 if not self.is_float and self.lo < 0 else DType.u8

    @property
    def sign_bit(self) -> int:
        return 1 << (self.bits - 1)

    @cached_property
    def values(self) -> np.ndarray:
        """Every code's value, in f32 (floats)."""
        codes = np.arange(1 << self.bits, dtype=np.uint8)
        return codes.view(self.numpy).astype(np.float32)

    @cached_property
    def largest(self) -> int:
        """The code of the largest finite value."""
        positive = self.values[:self.sign_bit]
        return int(np.flatnonzero(np.isfinite(positive))[-1])

    def thresholds(self, saturate: bool, dtype: np.dtype) -> np.ndarray:
        """The values ``|x|`` must exceed for each step up of the code (ties to even: the
        midpoint above an odd code belongs to the even code above it)."""
        v = self.values[:self.largest + 1].astype(np.float64)
        mids = list((v[:-1] + v[1:]) / 2)
        if not saturate and self.overflow is not None:
            mids.append(v[-1] + (v[-1] - v[-2]) / 2)      # half a step past the largest: overflow
        out = np.asarray(mids, dtype=dtype)
        odd = np.arange(len(out)) % 2 == 1                # a tie at an odd code's midpoint rounds up
        out[odd] = np.nextafter(out[odd], np.asarray(0, dtype), dtype=dtype)
        return out

    def to_carrier(self, a: np.ndarray) -> np.ndarray:
        """An ONNX array of this type as minic holds it."""
        a = np.asarray(a)
        if self.is_float:
            return a.view(np.uint8) & np.uint8((1 << self.bits) - 1)
        return a.astype(self.carrier.numpy)

    def from_carrier(self, a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        return a.view(self.numpy) if self.is_float else a.astype(self.numpy)


STORAGE: dict[int, Storage] = {s.code: s for s in [
    Storage("FLOAT8E4M3FN", 17, True, 8, nan=0x7F, overflow=0x7F),
    Storage("FLOAT8E4M3FNUZ", 18, True, 8, nan=0x80, overflow=0x80, unsigned_zero=True),
    Storage("FLOAT8E5M2", 19, True, 8, nan=0x7F, overflow=0x7C),
    Storage("FLOAT8E5M2FNUZ", 20, True, 8, nan=0x80, overflow=0x80, unsigned_zero=True),
    Storage("UINT4", 21, False, 4, lo=0, hi=15),
    Storage("INT4", 22, False, 4, lo=-8, hi=7),
    Storage("FLOAT4E2M1", 23, True, 4, nan=0x8),          # no NaN: ml_dtypes writes NaN as -0; always saturates
    Storage("UINT2", 25, False, 2, lo=0, hi=3),
    Storage("INT2", 26, False, 2, lo=-2, hi=1),
]}


def widen(b, v: Value, st: Storage, to: DType) -> Value:
    """The carrier ``v`` of a ``st`` tensor as ``to`` values."""
    if not st.is_float:
        return b.one("cast", v, dtype=to)               # a new value even when ``to`` is the carrier
    table = b.const(st.values)
    f = b.one("gather", table, b.one("cast", v, dtype=DType.i64), axis=0)
    return f if to == DType.f32 else b.one("cast", f, dtype=to)


def narrow(b, v: Value, st: Storage, saturate: bool = True) -> Value:
    """``v`` (any minic type) converted to ``st``, as its carrier."""
    if not st.is_float:
        return _narrow_int(b, v, st)
    x = v if v.type.dtype in (DType.f32, DType.f64) else b.one("cast", v, dtype=DType.f32)
    dtype = x.type.dtype
    zero = b.const(0, like=x)
    t = b.const(st.thresholds(saturate or st.overflow is None, dtype.numpy))
    above = b.one("gt", b.one("unsqueeze", b.one("abs", x), axes=(x.type.rank,)), t)
    count = b.one("reduce_sum", b.one("cast", above, dtype=DType.i32), axes=(x.type.rank,))
    negative = b.one("or", b.one("lt", x, zero),              # -0 too: 1/-0 is -inf
                     b.one("and", b.one("eq", x, zero), b.one("lt", b.one("div", b.const(1, like=x), x), zero)))
    if st.unsigned_zero:          # no -0, and the overflow code (NaN, 0x80) carries no sign
        nonzero = b.one("gt", count, b.const(0, like=count))
        negative = b.one("and", negative, b.one("and", nonzero, b.one("lt", count, b.const(st.sign_bit, like=count))))
    code = b.one("where", negative, b.one("add", count, b.const(st.sign_bit, like=count)), count)
    code = b.one("where", b.one("eq", x, x), code, b.const(st.nan, like=count))
    return b.one("cast", code, dtype=st.carrier)


def _narrow_int(b, v: Value, st: Storage) -> Value:
    if v.type.dtype.is_float:
        # truncation toward zero; outside (lo - 1, hi + 1), and NaN, the result is 0
        inside = b.one("and", b.one("gt", v, b.const(st.lo - 1, like=v)), b.one("lt", v, b.const(st.hi + 1, like=v)))
        return b.one("cast", b.one("where", inside, v, b.const(0, like=v)), dtype=st.carrier)
    w = b.cast(v, DType.i32)
    low = b.one("and", w, b.const((1 << st.bits) - 1, like=w))          # the low bits
    if st.lo < 0:                                                       # sign-extend them
        half = b.const(st.sign_bit, like=w)
        low = b.one("sub", b.one("xor", low, half), half)
    return b.one("cast", low, dtype=st.carrier)


def convert(b, v: Value, source: Storage | None, to: DType | Storage, saturate: bool = True) -> Value:
    """A Cast whose source or target (or both) is a storage type."""
    if source is not None:
        if isinstance(to, Storage):
            v, source = widen(b, v, source, DType.f32 if source.is_float else DType.i32), None
        else:
            return widen(b, v, source, to)
    return narrow(b, v, to, saturate)


# The ONNX ops that take or make a storage-typed value.
STORAGE_OPS = frozenset({"Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "Identity"})


def storage_of(code: int) -> Storage | None:
    return STORAGE.get(code)


def refuse_use(where: str, st: Storage) -> UnsupportedError:
    return UnsupportedError(f"{where}: element type {st.name} is a storage type for minic; only "
                            f"{', '.join(sorted(STORAGE_OPS))} take it")
