"""Comparisons, logical and bitwise ops, and selection (where, masked_fill, maximum/minimum,
clamp), with tensors and Python numbers."""

import operator

import torch
from row import PARITY_DTYPES, aten, from_opinfo, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

INTEGRAL = (torch.int64, torch.bool)
NUMERIC = (torch.float32, torch.float16, torch.int64)


def _numbers(dtype: torch.dtype):
    """A tensor against Python numbers of every kind: `x > 2.5` on int64 compares in float,
    `x == 1` on bool in int64; NaN compares unequal to everything."""
    for shape, other in [((3, 4), 2.5), ((2, 3, 4), -3), ((3, 4), 0), ((), 1), ((3, 4), True), ((3, 4), float("nan"))]:
        yield SampleInput(tensor(shape, dtype), args=(other,))


def _special(dtype: torch.dtype):
    """NaN, ±inf and ±0 against each other: every pair is one element of the broadcast result."""
    values = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -2.5], dtype=dtype)
    yield SampleInput(values.reshape(-1, 1), args=(values,))


def _bit_numbers(dtype: torch.dtype):
    others = (True, False, 1) if dtype == torch.bool else (3, -6, 0, True)
    for other in others:
        yield SampleInput(tensor((3, 4), dtype), args=(other,))


def _bit_tensors(dtype: torch.dtype):
    for a, b in [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 4), ())]:
        yield SampleInput(tensor(a, dtype), args=(tensor(b, dtype),))


SHIFTED = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def _shift_amounts(dtype: torch.dtype):
    """Negative values (a right shift copies the sign bit), and amounts out of range: negative,
    the width and beyond (a left shift gives 0, a right shift the sign)."""
    width = torch.iinfo(dtype).bits
    low = 0 if dtype == torch.uint8 else -100
    x = torch.arange(low, low + 24, 3, dtype=dtype).reshape(8, 1)
    signed_amounts = dtype if dtype != torch.uint8 else torch.int64
    amounts = torch.tensor([-1, 0, 1, 3, width - 1, width, width + 5, 70], dtype=signed_amounts)
    yield SampleInput(x, args=(amounts,))
    yield SampleInput(tensor((3, 4), dtype), args=(tensor((4,), dtype, low=0, high=width),))


def _shift_numbers(dtype: torch.dtype):
    width = torch.iinfo(dtype).bits
    for amount in (1, 3, width - 1, width, 100, -1):
        yield SampleInput(tensor((3, 4), dtype), args=(amount,))


def _where_number_branch(dtype: torch.dtype):
    """A tensor branch and a Python number: the number takes part in torch's promotion."""
    for other in (0.5, -2, True):
        yield SampleInput(tensor((3, 4), torch.bool), args=(tensor((3, 4), dtype), other))
    yield SampleInput(tensor((2, 3, 4), torch.bool), args=(tensor((4,), dtype), 7))


def _where_numbers(dtype: torch.dtype):
    for a, b in [(1.0, 0), (2, -3), (True, False), (True, 2.5)]:
        yield SampleInput(tensor((3, 4), torch.bool), args=(a, b))


def _fill_values(dtype: torch.dtype):
    """masked_fill keeps the tensor's dtype: the value is cast to it (2.7 into int64 is 2)."""
    for value in (2.7, -3, True):
        yield SampleInput(tensor((3, 4), dtype), args=(tensor((3, 4), torch.bool), value))
    yield SampleInput(tensor((2, 3, 4), dtype), args=(tensor((4,), torch.bool), 0))


def _clamp_numbers(dtype: torch.dtype):
    for lo, hi in [(-1, 2), (0.5, 5.5), (2, -1), (-3, None), (None, 4), (float("nan"), 1.0)]:
        yield SampleInput(tensor((3, 4), dtype), args=(lo, hi))


def _one_bound(bounds):
    def samples(dtype: torch.dtype):
        for bound in bounds:
            yield SampleInput(tensor((2, 3, 4), dtype), args=(bound,))

    return samples


def _with_nan(dtype: torch.dtype):
    """NaN in either operand of maximum/minimum: torch propagates it."""
    x = tensor((3, 4), dtype)
    y = tensor((3, 4), dtype)
    x[0, 0] = y[1, 1] = float("nan")
    yield SampleInput(x, args=(y,))


def _logical_special(dtype: torch.dtype):
    """NaN is true, ±0 false."""
    values = torch.tensor([float("nan"), float("inf"), 0.0, -0.0, 0.5], dtype=dtype)
    yield SampleInput(values.reshape(-1, 1), args=(values,))


ROWS = (
    from_opinfo("eq", "eq.Tensor"),
    from_opinfo("ne", "ne.Tensor"),
    from_opinfo("gt", "gt.Tensor"),
    from_opinfo("ge", "ge.Tensor"),
    from_opinfo("lt", "lt.Tensor"),
    from_opinfo("le", "le.Tensor"),
    hand_written("eq.Scalar", fn=operator.eq, samples=_numbers, dtypes=PARITY_DTYPES),
    hand_written("ne.Scalar", fn=operator.ne, samples=_numbers, dtypes=PARITY_DTYPES),
    hand_written("gt.Scalar", fn=operator.gt, samples=_numbers, dtypes=PARITY_DTYPES),
    hand_written("ge.Scalar", fn=operator.ge, samples=_numbers, dtypes=PARITY_DTYPES),
    hand_written("lt.Scalar", fn=operator.lt, samples=_numbers, dtypes=PARITY_DTYPES),
    hand_written("le.Scalar", fn=operator.le, samples=_numbers, dtypes=PARITY_DTYPES),
    hand_written("eq.Tensor", "ne.Tensor", "gt.Tensor", "ge.Tensor", "lt.Tensor", "le.Tensor", id="compare.special",
                 fn=lambda x, o: (x == o, x != o, x > o, x >= o, x < o, x <= o), samples=_special,
                 dtypes=(torch.float32, torch.float16)),
    from_opinfo("logical_and", "logical_and"),
    from_opinfo("logical_or", "logical_or"),
    from_opinfo("logical_xor", "logical_xor"),
    hand_written("logical_and", "logical_or", "logical_xor", id="logical.special",
                 fn=lambda x, o: (torch.logical_and(x, o), torch.logical_or(x, o), torch.logical_xor(x, o)),
                 samples=_logical_special, dtypes=(torch.float32, torch.float16)),
    from_opinfo("bitwise_and", "bitwise_and.Tensor"),
    from_opinfo("bitwise_or", "bitwise_or.Tensor"),
    from_opinfo("bitwise_xor", "bitwise_xor.Tensor"),
    hand_written("bitwise_and.Scalar", fn=torch.bitwise_and, samples=_bit_numbers, dtypes=INTEGRAL),
    hand_written("bitwise_or.Scalar", fn=torch.bitwise_or, samples=_bit_numbers, dtypes=INTEGRAL),
    hand_written("bitwise_xor.Scalar", fn=torch.bitwise_xor, samples=_bit_numbers, dtypes=INTEGRAL),
    # `x & y`, `x | 3`, `x ^ y` in a model record the dunder overloads.
    hand_written("__and__.Tensor", fn=operator.and_, samples=_bit_tensors, dtypes=INTEGRAL),
    hand_written("__and__.Scalar", fn=operator.and_, samples=_bit_numbers, dtypes=INTEGRAL),
    hand_written("__or__.Tensor", fn=operator.or_, samples=_bit_tensors, dtypes=INTEGRAL),
    hand_written("__or__.Scalar", fn=operator.or_, samples=_bit_numbers, dtypes=INTEGRAL),
    hand_written("__xor__.Tensor", fn=operator.xor, samples=_bit_tensors, dtypes=INTEGRAL),
    hand_written("__xor__.Scalar", fn=operator.xor, samples=_bit_numbers, dtypes=INTEGRAL),
    from_opinfo("bitwise_left_shift", "bitwise_left_shift.Tensor"),
    from_opinfo("bitwise_right_shift", "bitwise_right_shift.Tensor"),
    hand_written("__lshift__.Tensor", "__rshift__.Tensor", id="shift.amounts", fn=lambda x, n: (x << n, x >> n),
                 samples=_shift_amounts, dtypes=SHIFTED),
    hand_written("__lshift__.Scalar", "__rshift__.Scalar", "bitwise_left_shift.Tensor_Scalar",
                 "bitwise_right_shift.Tensor_Scalar", id="shift.numbers",
                 fn=lambda x, n: (x << n, x >> n, torch.bitwise_left_shift(x, n), torch.bitwise_right_shift(x, n)),
                 samples=_shift_numbers, dtypes=SHIFTED),
    from_opinfo("where", "where.self"),
    hand_written("where.ScalarOther", fn=lambda c, x, o: torch.where(c, x, o), samples=_where_number_branch, dtypes=PARITY_DTYPES),
    hand_written("where.ScalarSelf", fn=lambda c, x, o: torch.where(c, o, x), samples=_where_number_branch, dtypes=PARITY_DTYPES),
    hand_written("where.Scalar", fn=lambda c, a, b: torch.where(c, a, b), samples=_where_numbers),
    from_opinfo("masked_fill", "masked_fill.Scalar", "masked_fill.Tensor"),
    hand_written("masked_fill_.Scalar", fn=lambda x, m, v: x.clone().masked_fill_(m, v), samples=_fill_values, dtypes=PARITY_DTYPES),
    from_opinfo("maximum", "maximum"),
    from_opinfo("minimum", "minimum"),
    from_opinfo("max", "max.other", variant="binary"),
    from_opinfo("min", "min.other", variant="binary"),
    hand_written("maximum", "minimum", id="maximum.nan", fn=lambda x, o: (torch.maximum(x, o), torch.minimum(x, o)),
                 samples=_with_nan, dtypes=(torch.float32, torch.float16)),
    from_opinfo("clamp", "clamp.Tensor"),
    from_opinfo("clamp_min", "clamp_min.Tensor"),
    from_opinfo("clamp_max", "clamp_max.Tensor"),
    hand_written("clamp", id="clamp.numbers", fn=lambda x, lo, hi: torch.clamp(x, lo, hi), samples=_clamp_numbers, dtypes=NUMERIC),
    hand_written("clamp_min", id="clamp_min.number", fn=torch.clamp_min, samples=_one_bound((-1, 0.5, float("nan"))), dtypes=NUMERIC),
    hand_written("clamp_max", id="clamp_max.number", fn=torch.clamp_max, samples=_one_bound((2, -0.5)), dtypes=NUMERIC),
)
