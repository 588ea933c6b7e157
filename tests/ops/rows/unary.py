"""Unary elementwise math, on OpInfo samples and on special values (row.SPECIAL_VALUES)."""

import torch
from row import SPECIAL_VALUES, from_opinfo, hand_written, special_values
from torch.testing._internal.opinfo.core import SampleInput


def _special_row(overload: str, fn, **options):
    return hand_written(overload, id=f"{overload}.special_values", fn=fn, samples=special_values,
                        dtypes=(torch.float32, torch.float16), **options)


def _round_decimals_float16(dtype):
    # float16 values whose scaled value (x * 10^decimals) overflows float16 but not float32.
    for decimals in (2, -2):
        yield SampleInput(torch.tensor([0.125, 0.135, -1234.5678, 65000.0, 60.0, -3.5], dtype=dtype),
                          kwargs={"decimals": decimals})


def _nan_to_num_replacements(dtype):
    yield SampleInput(torch.tensor(SPECIAL_VALUES, dtype=dtype), kwargs={"nan": 1.5, "posinf": 100.0, "neginf": -7.0})
    yield SampleInput(torch.tensor(SPECIAL_VALUES, dtype=dtype), kwargs={"posinf": 1e6})


def _logit_eps(dtype):
    values = torch.tensor([0.0, 1e-4, 0.3, 0.5, 0.9999, 1.0, -0.5, 1.5, float("nan")], dtype=dtype)
    # 0.6: bounds that cross (torch's own OpInfo samples it from 2.14)
    for eps in (0.0, 1e-3, 0.2, -0.1, 0.6):
        yield SampleInput(values, args=(eps,))


ROWS = (
    from_opinfo("abs", "abs"),
    # The magnitude of complex values, which the ONNX graph holds as (real, imaginary) pairs.
    from_opinfo("abs", "abs", id="abs.complex", dtypes=(torch.complex64, torch.complex128)),
    from_opinfo("neg", "neg"),
    from_opinfo("acos", "acos"),
    from_opinfo("acosh", "acosh"),
    from_opinfo("asin", "asin"),
    from_opinfo("asinh", "asinh"),
    from_opinfo("atan", "atan"),
    from_opinfo("atanh", "atanh"),
    from_opinfo("cos", "cos"),
    from_opinfo("cosh", "cosh"),
    from_opinfo("sin", "sin"),
    from_opinfo("sinh", "sinh"),
    from_opinfo("tan", "tan"),
    from_opinfo("erf", "erf"),
    from_opinfo("erfinv", "erfinv"),
    from_opinfo("exp", "exp"),
    from_opinfo("exp2", "exp2"),
    from_opinfo("expm1", "expm1"),
    from_opinfo("log", "log"),
    from_opinfo("log2", "log2"),
    from_opinfo("log10", "log10"),
    from_opinfo("log1p", "log1p"),
    # torch computes a float16 logit in float32; onnxruntime divides x by 1 - x in float16, which
    # moves the result by up to ~1e-3 near logit(0.5) = 0.
    from_opinfo("logit", "logit", tolerance={torch.float16: (1e-3, 2e-3)}),
    from_opinfo("reciprocal", "reciprocal"),
    from_opinfo("sqrt", "sqrt"),
    from_opinfo("rsqrt", "rsqrt"),
    from_opinfo("square", "square"),
    from_opinfo("ceil", "ceil"),
    from_opinfo("floor", "floor"),
    from_opinfo("round", "round"),
    from_opinfo("round", "round.decimals", variant="decimals_0"),
    from_opinfo("round", "round.decimals", variant="decimals_3"),
    from_opinfo("round", "round.decimals", variant="decimals_neg_3"),
    from_opinfo("trunc", "trunc"),
    from_opinfo("frac", "frac"),
    from_opinfo("sign", "sign"),
    from_opinfo("sgn", "sgn"),
    from_opinfo("isnan", "isnan"),
    from_opinfo("isinf", "isinf"),
    from_opinfo("nan_to_num", "nan_to_num"),
    from_opinfo("bitwise_not", "bitwise_not"),
    from_opinfo("logical_not", "logical_not"),
    hand_written("round.decimals", id="round.decimals.float16_range", fn=lambda x, **kw: torch.round(x, **kw),
                 samples=_round_decimals_float16, dtypes=(torch.float16,)),
    hand_written("nan_to_num", id="nan_to_num.replacements", fn=torch.nan_to_num, samples=_nan_to_num_replacements,
                 dtypes=(torch.float32, torch.float16)),
    hand_written("logit", id="logit.eps", fn=torch.logit, samples=_logit_eps),
    hand_written("abs_", fn=lambda x: x.clone().abs_(), samples=special_values),
    _special_row("sign", torch.sign),
    _special_row("ceil", torch.ceil),
    _special_row("floor", torch.floor),
    _special_row("round", torch.round),
    _special_row("trunc", torch.trunc),
    _special_row("frac", torch.frac),
    _special_row("isnan", torch.isnan),
    _special_row("isinf", torch.isinf),
    _special_row("nan_to_num", torch.nan_to_num),
    _special_row("log1p", torch.log1p),
    _special_row("expm1", torch.expm1),
    _special_row("erfinv", torch.erfinv),
    _special_row("logit", torch.logit),
    _special_row("exp2", torch.exp2),
    _special_row("log2", torch.log2),
    _special_row("log10", torch.log10),
    _special_row("rsqrt", torch.rsqrt),
    _special_row("reciprocal", torch.reciprocal),
    _special_row("logical_not", torch.logical_not),
)
