"""Binary arithmetic, with tensors, Python numbers and in place."""

import math
import operator

import torch
from row import PARITY_DTYPES, aten, binary, from_opinfo, hand_written, tensor, with_scalar
from torch.testing._internal.opinfo.core import SampleInput

NUMERIC = (torch.float32, torch.float16, torch.int64)
FLOATS = (torch.float32, torch.float16)

# Values where rounding, sign conventions and IEEE special cases show: as a column against the
# same values as a row, every pair is one element of the broadcast result.
_SPECIAL_FLOATS = (float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, -7.0, 1e-3)
_SPECIAL_INTS = (0, 1, -1, 2, -3, 7, -9)


def _special_values(dtype: torch.dtype, nonzero_divisor: bool = False) -> torch.Tensor:
    values = _SPECIAL_FLOATS if dtype.is_floating_point else _SPECIAL_INTS
    if nonzero_divisor:
        values = tuple(v for v in values if v != 0)
    return torch.tensor(values, dtype=dtype)


def _special_pairs(dtype: torch.dtype, nonzero_divisor: bool = False):
    """One sample: every special value against every other (integer division by zero raises in
    torch, so `nonzero_divisor` leaves 0 out of integer divisors)."""
    left = _special_values(dtype).reshape(-1, 1)
    yield SampleInput(left, args=(_special_values(dtype, nonzero_divisor and not dtype.is_floating_point),))


def _with_numbers(dtype: torch.dtype, alphas: tuple = ()):
    """Python numbers against a tensor; for bool tensors also a bool, which keeps the result
    bool (torch's + and * on bool are `or` and `and`)."""
    yield from with_scalar(dtype, alphas)
    if dtype == torch.bool:
        yield SampleInput(tensor((3, 4), dtype), args=(True,))
        yield SampleInput(tensor((3, 4), dtype), args=(False,))


def _scalar_mode_samples(dtype: torch.dtype):
    for mode in (None, "trunc", "floor"):
        for other in (3, -2.5):
            yield SampleInput(tensor((3, 4), dtype), args=(other,), kwargs={"rounding_mode": mode})


def _tensor_scalar_samples(dtype: torch.dtype):
    """A tensor against nonzero Python ints and floats of both signs."""
    for shape, other in [((3, 4), 3), ((2, 3), -2), ((3, 4), 2.5), ((), -0.75)]:
        yield SampleInput(tensor(shape, dtype), args=(other,))


def _power_scalar_exponents(dtype: torch.dtype):
    """Whole exponents on bases of both signs; fractional ones on positive bases (a float
    result for integer tensors)."""
    for exponent in (2, 3, 0) + ((-1,) if dtype.is_floating_point else ()):
        yield SampleInput(tensor((3, 4), dtype), args=(exponent,))
    for exponent in (0.5, -2.5):
        yield SampleInput(tensor((3, 4), dtype, low=1), args=(exponent,))


def _power_scalar_bases(dtype: torch.dtype):
    for base in (2, -3, 0.5, 0):
        yield SampleInput(tensor((3, 4), dtype, low=0, high=6), args=(base,))


def _integer_powers(dtype: torch.dtype):
    """Integer bases and exponents of both signs, 0 ** -n included (torch gives 0)."""
    base = torch.tensor([0, 1, -1, 2, -2, 3, -3], dtype=dtype).reshape(-1, 1)
    yield SampleInput(base, args=(torch.tensor([-3, -2, -1, 0, 1, 2, 3, 5], dtype=dtype),))


def _atan2_out_samples(dtype: torch.dtype):
    for sample in binary(dtype):
        out_shape = torch.broadcast_shapes(sample.input.shape, sample.args[0].shape)
        out_dtype = torch.atan2(sample.input, sample.args[0]).dtype
        yield SampleInput(sample.input, args=sample.args, kwargs={"out": torch.empty(out_shape, dtype=out_dtype)})


def _hypot_special(dtype: torch.dtype):
    """IEEE special values against each other, ±inf beside NaN (inf, as C's hypot gives), and
    magnitudes whose squares overflow or underflow the dtype where torch's hypot does not."""
    finite = tuple(v for v in _SPECIAL_FLOATS if math.isfinite(v))
    for values in (finite + (float("nan"),), finite + (float("inf"), -float("inf"))):
        column = torch.tensor(values, dtype=dtype)
        yield SampleInput(column.reshape(-1, 1), args=(column,))
    info = torch.finfo(dtype)
    extremes = (info.max / 2, -info.max / 3, info.max**0.5 * 4, info.tiny, -info.tiny * 3, 1.0)
    column = torch.tensor(extremes, dtype=dtype)
    yield SampleInput(column.reshape(-1, 1), args=(column,))
    infinities = torch.tensor([float("inf"), -float("inf")], dtype=dtype)
    yield SampleInput(infinities, args=(torch.tensor(float("nan"), dtype=dtype),))


def _lerp_scalar_weights(dtype: torch.dtype):
    for weight in (0.0, 0.3, -0.4, 0.5, 1.0, 1.7):
        yield SampleInput(tensor((3, 4), dtype), args=(tensor((3, 4), dtype), weight))


# float16: onnxruntime rounds each intermediate of lerp, addcmul and addcdiv (products, the
# difference, the sum) to float16, where torch computes in float32 and rounds once.
FLOAT16_COMPOSITE = {torch.float16: (2e-3, 2e-3)}
# float16 division with rounding: the quotient is rounded to float16 before it is truncated or
# floored, where torch's contiguous kernel truncates its float32 quotient (and its broadcasting
# one does not). Where the float16 quotient rounds up to a whole number the results differ by
# one, relatively 1 / |quotient|; rtol 1e-2 admits that for quotients of 100 and more only.
FLOAT16_ROUNDED_QUOTIENT = {torch.float16: (1e-2, 1e-5)}
# float16 with alpha: onnxruntime rounds alpha * other to float16 before the sum, torch rounds
# the float32 sum once (one float16 ulp apart).
FLOAT16_ALPHA = {torch.float16: (2e-3, 1e-5)}

ROWS = (
    from_opinfo("add", "add.Tensor", tolerance=FLOAT16_ALPHA),
    from_opinfo("sub", "sub.Tensor", tolerance=FLOAT16_ALPHA),
    from_opinfo("mul", "mul.Tensor"),
    from_opinfo("div", "div.Tensor", variant="no_rounding_mode"),
    from_opinfo("div", "div.Tensor_mode", variant="trunc_rounding", tolerance=FLOAT16_ROUNDED_QUOTIENT),
    from_opinfo("div", "div.Tensor_mode", variant="floor_rounding"),
    from_opinfo("floor_divide", "floor_divide"),
    from_opinfo("fmod", "fmod.Tensor"),
    from_opinfo("remainder", "remainder.Tensor"),
    from_opinfo("pow", "pow.Tensor_Tensor"),
    from_opinfo("rsub", "rsub.Tensor"),
    from_opinfo("atan2", "atan2"),
    from_opinfo("hypot", "hypot"),
    from_opinfo("lerp", "lerp.Scalar", "lerp.Tensor", tolerance=FLOAT16_COMPOSITE),
    from_opinfo("addcmul", "addcmul", tolerance=FLOAT16_COMPOSITE),
    from_opinfo("addcdiv", "addcdiv", tolerance=FLOAT16_COMPOSITE),
    from_opinfo("xlogy", "xlogy.Tensor"),
    hand_written("add.Scalar", fn=lambda x, o, **kw: aten.add.Scalar(x, o, **kw), samples=lambda d: _with_numbers(d, (2, -0.5)), dtypes=PARITY_DTYPES),
    hand_written("sub.Scalar", fn=lambda x, o, **kw: aten.sub.Scalar(x, o, **kw), samples=lambda d: with_scalar(d, (2, -0.5)), dtypes=NUMERIC),
    hand_written("mul.Scalar", fn=lambda x, o: aten.mul.Scalar(x, o), samples=_with_numbers, dtypes=PARITY_DTYPES),
    hand_written("div.Scalar", fn=lambda x, o: aten.div.Scalar(x, o), samples=with_scalar, dtypes=PARITY_DTYPES),
    hand_written("rsub.Scalar", fn=lambda x, o, **kw: aten.rsub.Scalar(x, o, **kw), samples=lambda d: with_scalar(d, (2,)), dtypes=NUMERIC),
    # `x + 2.5` in a model records add.Tensor with a Python number as `other`.
    hand_written("add.Tensor", id="add.python_scalar", fn=lambda x, o, **kw: torch.add(x, o, **kw), samples=lambda d: _with_numbers(d, (2,)), dtypes=PARITY_DTYPES),
    hand_written("sub.Tensor", id="sub.python_scalar", fn=lambda x, o, **kw: torch.sub(x, o, **kw), samples=lambda d: with_scalar(d, (2,)), dtypes=NUMERIC),
    hand_written("mul.Tensor", id="mul.python_scalar", fn=lambda x, o: x * o, samples=_with_numbers, dtypes=PARITY_DTYPES),
    hand_written("div.Tensor", id="div.python_scalar", fn=lambda x, o: x / o, samples=with_scalar, dtypes=PARITY_DTYPES),
    # `2 - x` records rsub.Scalar.
    hand_written("rsub.Scalar", id="rsub.python_scalar", fn=lambda x, o: o - x, samples=with_scalar, dtypes=NUMERIC),
    hand_written("div.Scalar_mode", fn=lambda x, o, **kw: aten.div.Scalar_mode(x, o, **kw), samples=_scalar_mode_samples, dtypes=NUMERIC),
    hand_written("floor_divide.Scalar", fn=lambda x, o: aten.floor_divide.Scalar(x, o), samples=_tensor_scalar_samples, dtypes=NUMERIC),
    # `x // 3` records floor_divide with a Python number as `other`.
    hand_written("floor_divide", id="floor_divide.python_scalar", fn=operator.floordiv, samples=_tensor_scalar_samples, dtypes=NUMERIC),
    hand_written("fmod.Scalar", fn=torch.fmod, samples=_tensor_scalar_samples, dtypes=NUMERIC),
    # `x % 3` records remainder.Scalar.
    hand_written("remainder.Scalar", fn=operator.mod, samples=_tensor_scalar_samples, dtypes=NUMERIC),
    hand_written("pow.Tensor_Scalar", fn=operator.pow, samples=_power_scalar_exponents, dtypes=NUMERIC),
    # `2 ** x` records pow.Scalar.
    hand_written("pow.Scalar", fn=lambda x, base: base**x, samples=_power_scalar_bases, dtypes=NUMERIC),
    hand_written("pow.Tensor_Tensor", id="pow.integer_powers", fn=torch.pow, samples=_integer_powers, dtypes=(torch.int64,)),
    hand_written("atan2.out", fn=lambda x, o, out: torch.atan2(x, o, out=out), samples=_atan2_out_samples, dtypes=NUMERIC + (torch.bool,)),
    hand_written("lerp.Scalar", id="lerp.scalar_weights", fn=torch.lerp, samples=_lerp_scalar_weights, dtypes=FLOATS, tolerance=FLOAT16_COMPOSITE),
    # IEEE special values (NaN, ±inf, ±0, division by zero) against torch's conventions.
    hand_written("div.Tensor_mode", id="div.floor_special", fn=lambda x, o: torch.div(x, o, rounding_mode="floor"), samples=lambda d: _special_pairs(d, nonzero_divisor=True), dtypes=NUMERIC),
    hand_written("div.Tensor_mode", id="div.trunc_special", fn=lambda x, o: torch.div(x, o, rounding_mode="trunc"), samples=lambda d: _special_pairs(d, nonzero_divisor=True), dtypes=NUMERIC),
    hand_written("remainder.Tensor", id="remainder.special", fn=torch.remainder, samples=lambda d: _special_pairs(d, nonzero_divisor=True), dtypes=NUMERIC),
    hand_written("fmod.Tensor", id="fmod.special", fn=torch.fmod, samples=lambda d: _special_pairs(d, nonzero_divisor=True), dtypes=NUMERIC),
    hand_written("pow.Tensor_Tensor", id="pow.special", fn=torch.pow, samples=_special_pairs, dtypes=FLOATS),
    hand_written("atan2", id="atan2.special", fn=torch.atan2, samples=_special_pairs, dtypes=FLOATS),
    hand_written("hypot", id="hypot.special", fn=torch.hypot, samples=_hypot_special, dtypes=FLOATS),
    hand_written("xlogy.Tensor", id="xlogy.special", fn=torch.xlogy, samples=_special_pairs, dtypes=FLOATS),
    hand_written("add_.Tensor", fn=lambda x, o, **kw: x.clone().add_(o, **kw), samples=lambda d: binary(d, (2, -0.5))),
    hand_written("add_.Scalar", fn=lambda x, o, **kw: aten.add_.Scalar(x.clone(), o, **kw), samples=lambda d: with_scalar(d, (2,))),
    hand_written("sub_.Tensor", fn=lambda x, o, **kw: x.clone().sub_(o, **kw), samples=lambda d: binary(d, (2,))),
    hand_written("mul_.Tensor", fn=lambda x, o: x.clone().mul_(o), samples=binary),
    hand_written("div_.Tensor", fn=lambda x, o: x.clone().div_(o), samples=binary),
)
