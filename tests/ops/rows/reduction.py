"""Reductions and scans."""

import torch
from row import aten, from_opinfo, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput


# torch accumulates float16 p-norms in float32 and rounds once; ONNX's ReduceSum of |x|^p sums in
# float16, which for sums in the hundreds (OpInfo's 125 values up to 9) is an ulp or two (~1e-3).
FLOAT16_NORM_TOLERANCE = {torch.float16: (2e-3, 1e-5)}


def _norm_scalar_opt_dim(dtype):
    # (p, dim, keepdim); p=None is the 2-norm, an empty dim list reduces every dim.
    for shape, p, dim, keepdim in [
        ((3, 4), 2, [1], False),
        ((3, 4), None, [], False),
        ((2, 3, 4), 1, [0, 2], True),
        ((2, 3, 4), 3.5, [-1], False),
        ((2, 3, 4), float("inf"), [1], True),
        ((5,), 0, [0], False),
        ((), 2, [0], False),
    ]:
        yield SampleInput(tensor(shape, dtype), args=(p, dim, keepdim))


def _zero_dim(dtype):
    """0-d tensors, which torch lets every reduction and scan take dim 0 or -1 of."""
    cases = [
        (torch.amax, (0,), {"keepdim": True}),
        (torch.argmax, (), {"dim": -1, "keepdim": True}),
        (torch.argmin, (), {}),
        (torch.max, (0,), {}),
        (torch.min, (-1,), {"keepdim": True}),
        (torch.prod, (0,), {}),
        (torch.var, (), {"dim": 0, "correction": 0}),
        (torch.std_mean, (), {"dim": [-1], "correction": 0, "keepdim": True}),
        (torch.logsumexp, (0,), {}),
        (torch.count_nonzero, (), {"dim": 0}),
        (torch.cumsum, (0,), {}),
        (torch.cumprod, (-1,), {}),
        (torch.cummax, (0,), {}),
        (torch.logcumsumexp, (0,), {}),
    ]
    for op, args, kwargs in cases:
        yield SampleInput(tensor((), dtype), args=(op, *args), kwargs=kwargs)


ROWS = (
    from_opinfo("mean", "mean", "mean.dim"),
    from_opinfo("sum", "sum", "sum.dim_IntList"),
    from_opinfo("amax", "amax"),
    from_opinfo("amin", "amin"),
    from_opinfo("max", "max.dim", variant="reduction_with_dim"),
    from_opinfo("max", "max", variant="reduction_no_dim"),
    from_opinfo("min", "min.dim", variant="reduction_with_dim"),
    from_opinfo("min", "min", variant="reduction_no_dim"),
    from_opinfo("argmax", "argmax"),
    from_opinfo("argmin", "argmin"),
    from_opinfo("any", "any", "any.dim", "any.dims"),
    from_opinfo("all", "all", "all.dim", "all.dims"),
    from_opinfo("prod", "prod", "prod.dim_int"),
    from_opinfo("count_nonzero", "count_nonzero", "count_nonzero.dim_IntList"),
    from_opinfo("logsumexp", "logsumexp"),
    from_opinfo("linalg.vector_norm", "linalg_vector_norm", tolerance=FLOAT16_NORM_TOLERANCE),
    from_opinfo("norm", "linalg_vector_norm", id="norm", tolerance=FLOAT16_NORM_TOLERANCE),
    from_opinfo("norm", "linalg_vector_norm", variant="fro"),
    from_opinfo("norm", "linalg_vector_norm", variant="inf"),
    hand_written(
        "norm.ScalarOpt_dim", fn=lambda x, *args: aten.norm.ScalarOpt_dim(x, *args), samples=_norm_scalar_opt_dim
    ),
    from_opinfo("var", "var.correction", "var.dim"),
    from_opinfo("var", "var", variant="unbiased"),
    from_opinfo("std", "std.correction", "std.dim"),
    from_opinfo("std", "std", variant="unbiased"),
    from_opinfo("var_mean", "var_mean.correction", "var_mean.dim"),
    from_opinfo("var_mean", "var_mean", variant="unbiased"),
    from_opinfo("std_mean", "std_mean.correction", "std_mean.dim"),
    from_opinfo("std_mean", "std_mean", variant="unbiased"),
    from_opinfo("cumsum", "cumsum"),
    from_opinfo("cumprod", "cumprod"),
    from_opinfo("cummax", "cummax"),
    from_opinfo("cummin", "cummin"),
    from_opinfo("logcumsumexp", "logcumsumexp"),
    from_opinfo("histc", "histc", dtypes=(torch.float32, torch.float64)),
    from_opinfo("bincount", "bincount", dtypes=(torch.int64, torch.uint8)),
    hand_written(
        "amax",
        "argmax",
        "argmin",
        "max.dim",
        "min.dim",
        "prod.dim_int",
        "var.correction",
        "std_mean.correction",
        "logsumexp",
        "count_nonzero",
        "cumsum",
        "cumprod",
        "cummax",
        "logcumsumexp",
        id="reductions.zero_dim",
        fn=lambda x, op, *args, **kwargs: op(x, *args, **kwargs),
        samples=_zero_dim,
        max_samples=14,
    ),
)
