"""Activations and softmax."""

import torch.nn.functional as F
from row import aten, from_opinfo, hand_written, tensor, unary
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


ROWS = (
    from_opinfo("nn.functional.relu", "relu"),
    from_opinfo("nn.functional.leaky_relu", "leaky_relu"),
    from_opinfo("nn.functional.hardtanh", "hardtanh"),
    from_opinfo("sigmoid", "sigmoid"),
    from_opinfo("tanh", "tanh"),
    from_opinfo("softmax", "softmax.int"),
    from_opinfo("softmax", "softmax.int", variant="with_dtype"),
    from_opinfo("log_softmax", "log_softmax.int"),
    from_opinfo("log_softmax", "log_softmax.int", variant="with_dtype"),
    hand_written("relu_", fn=lambda x: F.relu(x.clone(), inplace=True), samples=unary),
    hand_written("leaky_relu_", fn=lambda x, **kw: F.leaky_relu(x.clone(), inplace=True, **kw), samples=_leaky_relu_inplace),
    hand_written("hardtanh_", fn=lambda x, **kw: F.hardtanh(x.clone(), inplace=True, **kw), samples=_hardtanh_inplace),
    hand_written("sigmoid_", fn=lambda x: x.clone().sigmoid_(), samples=unary),
    hand_written("tanh_", fn=lambda x: x.clone().tanh_(), samples=unary),
    hand_written("_softmax", fn=lambda x, dim, half: aten._softmax.default(x, dim, half), samples=_softmax_internal),
    hand_written("_log_softmax", fn=lambda x, dim, half: aten._log_softmax.default(x, dim, half), samples=_softmax_internal),
)
