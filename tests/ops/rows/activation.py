"""Activations and softmax."""

import torch
import torch.nn.functional as F
from row import SPECIAL_VALUES, SampleRule, aten, from_opinfo, hand_written, kwarg, special_values, tensor, unary
from torch.testing._internal.opinfo.core import SampleInput


def _leaky_relu_inplace(dtype):
    yield from unary(dtype)
    yield SampleInput(tensor((3, 4), dtype), kwargs={"negative_slope": 0.2})


def _hardtanh_inplace(dtype):
    yield from unary(dtype)
    yield SampleInput(tensor((3, 4), dtype), kwargs={"min_val": -0.5, "max_val": 2.0})


def _softmax_internal(dtype):
    for shape, dim in [((7,), 0), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), 1)]:
        yield SampleInput(tensor(shape, dtype), args=(dim, False))


def _elu_scales(dtype):
    for alpha, scale, input_scale in [(1.0, 2.0, 1.0), (0.5, 1.0, 3.0), (1.5, 0.5, 0.25)]:
        yield SampleInput(tensor((3, 4), dtype), kwargs={"alpha": alpha, "scale": scale, "input_scale": input_scale})


def _with_alpha(dtype):
    for alpha in (1.0, 0.3, 2.5):
        yield SampleInput(tensor((3, 4), dtype), kwargs={"alpha": alpha})


def _softplus_beta_1(dtype):
    for threshold in (20.0, 0.5):
        yield SampleInput(tensor((3, 4), dtype), kwargs={"beta": 1, "threshold": threshold})


def _prelu_kernel(dtype):
    # torch's prelu calls the kernel with the weight already shaped to broadcast.
    for shape, weight in [((2, 3, 4), (1, 3, 1)), ((5,), (1,)), ((3, 4), (1, 4)), ((), ())]:
        yield SampleInput(tensor(shape, dtype), args=(tensor(weight, dtype),))


def _gelu_special(dtype):
    # torch's gelu of +-inf is NaN (inf * 0 in its formula); onnxruntime's is +-inf or 0.
    finite = [v for v in SPECIAL_VALUES if abs(v) != float("inf")]
    for approximate in ("none", "tanh"):
        yield SampleInput(torch.tensor(finite, dtype=dtype), kwargs={"approximate": approximate})


def _special_row(overload: str, fn, **options):
    return hand_written(overload, id=f"{overload}.special_values", fn=fn, samples=special_values,
                        dtypes=(torch.float32, torch.float16), **options)


ROWS = (
    from_opinfo("nn.functional.relu", "relu"),
    from_opinfo("nn.functional.leaky_relu", "leaky_relu"),
    from_opinfo("nn.functional.hardtanh", "hardtanh"),
    from_opinfo("sigmoid", "sigmoid"),
    from_opinfo("tanh", "tanh"),
    from_opinfo("softmax", "softmax.int"),
    from_opinfo("softmax", "softmax.int", variant="with_dtype"),
    # onnxruntime rounds float16 log-sum-exp intermediates (log of a sum of up to ~25 exps, below
    # 4) to float16 where torch keeps float32: up to about half a float16 ulp of 4 apart.
    from_opinfo("log_softmax", "log_softmax.int", tolerance={torch.float16: (1e-3, 2e-3)}),
    from_opinfo("log_softmax", "log_softmax.int", variant="with_dtype"),
    hand_written("relu_", fn=lambda x: F.relu(x.clone(), inplace=True), samples=unary),
    hand_written("leaky_relu_", fn=lambda x, **kw: F.leaky_relu(x.clone(), inplace=True, **kw), samples=_leaky_relu_inplace),
    hand_written("hardtanh_", fn=lambda x, **kw: F.hardtanh(x.clone(), inplace=True, **kw), samples=_hardtanh_inplace),
    hand_written("sigmoid_", fn=lambda x: x.clone().sigmoid_(), samples=unary),
    hand_written("tanh_", fn=lambda x: x.clone().tanh_(), samples=unary),
    hand_written("_softmax", fn=lambda x, dim, half: aten._softmax.default(x, dim, half), samples=_softmax_internal),
    hand_written("_log_softmax", fn=lambda x, dim, half: aten._log_softmax.default(x, dim, half), samples=_softmax_internal),
    from_opinfo("nn.functional.gelu", "gelu"),
    from_opinfo("nn.functional.silu", "silu"),
    from_opinfo("nn.functional.hardswish", "hardswish"),
    from_opinfo("nn.functional.hardsigmoid", "hardsigmoid"),
    from_opinfo("nn.functional.mish", "mish"),
    from_opinfo("nn.functional.softplus", "softplus"),
    from_opinfo("nn.functional.elu", "elu"),
    from_opinfo("nn.functional.selu", "selu"),
    from_opinfo("nn.functional.celu", "celu"),
    from_opinfo("nn.functional.relu6", "relu6"),
    from_opinfo("nn.functional.hardshrink", "hardshrink"),
    from_opinfo("nn.functional.softshrink", "softshrink"),
    from_opinfo("nn.functional.logsigmoid", "log_sigmoid"),
    from_opinfo("nn.functional.glu", "glu"),
    from_opinfo("nn.functional.prelu", "prelu"),
    from_opinfo("nn.functional.threshold", "threshold"),
    from_opinfo(
        "nn.functional.rrelu", "rrelu",
        sample_filter=SampleRule("rrelu in training mode draws random slopes", kwarg("training", False)),
    ),
    hand_written("log_sigmoid_forward", fn=lambda x: aten.log_sigmoid_forward.default(x), samples=unary),
    hand_written("_prelu_kernel", fn=lambda x, w: aten._prelu_kernel.default(x, w), samples=_prelu_kernel),
    hand_written("elu", id="elu.scales", fn=lambda x, **kw: aten.elu.default(x, **kw), samples=_elu_scales,
                 dtypes=(torch.float32, torch.float16)),
    hand_written("elu", id="elu.alpha", fn=F.elu, samples=_with_alpha, dtypes=(torch.float32, torch.float16)),
    hand_written("celu", id="celu.alpha", fn=F.celu, samples=_with_alpha, dtypes=(torch.float32, torch.float16)),
    hand_written("softplus", id="softplus.beta_1", fn=F.softplus, samples=_softplus_beta_1,
                 dtypes=(torch.float32, torch.float16)),
    hand_written("gelu", id="gelu.special_values", fn=F.gelu, samples=_gelu_special, dtypes=(torch.float32, torch.float16)),
    _special_row("hardshrink", F.hardshrink),
    _special_row("softshrink", F.softshrink),
    _special_row("threshold", lambda x: F.threshold(x, 0.5, -3.0)),
    _special_row("relu6", F.relu6),
    _special_row("log_sigmoid", F.logsigmoid),
    _special_row("softplus", F.softplus),
    _special_row("elu", F.elu),
    _special_row("selu", F.selu),
    _special_row("celu", F.celu),
    _special_row("silu", F.silu),
    _special_row("mish", F.mish),
    _special_row("hardswish", F.hardswish),
    _special_row("hardsigmoid", F.hardsigmoid),
)
