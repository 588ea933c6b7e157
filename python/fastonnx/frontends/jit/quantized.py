"""Eager-mode quantized modules (``torch.ao.nn.quantized``) in the TorchScript front end, as
QuantizeLinear / DequantizeLinear around float ops: the form ONNX runtimes fuse into QLinear
kernels, and the one that converts every quantized op with the float converters fastonnx has.

A quantized tensor of the TorchScript graph is kept as its integer tensor and its parameters
(``QTensor``). A quantized op (``quantized::conv2d``, ``linear``, ``add``, ``cat``...) dequantizes
its inputs, computes in float and quantizes its result with the op's output scale and zero point.
Weights stay integer initializers, dequantized in the graph (per channel where PyTorch quantized
them per channel). Any other op on a quantized tensor (reshape, slicing, pooling, relu) computes on
the dequantized values and quantizes with the input's parameters, as PyTorch's quantized kernels
keep them. The integer nodes are torch's ``quantized_decomposed`` ops (converters/quantized.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.ao.quantization.fx._decomposed  # registers torch.ops.quantized_decomposed
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

from ...core.dtypes import dtype_of_scalar_type
from ...errors import ConversionError
from .translator import Handler, Opaque, Translator

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

_RANGES = {
    torch.quint8: (0, 255, torch.uint8),
    torch.qint8: (-128, 127, torch.int8),
    torch.qint32: (-(2**31), 2**31 - 1, torch.int32),
}


@dataclass(frozen=True)
class QTensor(Opaque):
    """A per-tensor quantized value of the graph: its integer tensor (an FX node) and parameters."""

    ints: torch.fx.Node
    scale: float | torch.fx.Node  # a number, or a 0-d tensor of the graph (a quantized input's)
    zero_point: int | torch.fx.Node
    dtype: torch.dtype  # torch.quint8, qint8, qint32


@dataclass(frozen=True)
class PackedWeights(Opaque):
    """A quantized conv's or linear's packed weights (a TorchScript object)."""

    packed: object


def quantize(t: Translator, x, scale, zero_point, dtype: torch.dtype) -> QTensor:
    """``x`` quantized; ``scale`` and ``zero_point`` are numbers, or 0-d tensors of the graph
    (a quantized graph input's)."""
    lo, hi, int_dtype = _RANGES[dtype]
    if isinstance(scale, torch.fx.Node):
        ints = t.emit(qd.quantize_per_tensor.tensor, (x, scale, zero_point, lo, hi, int_dtype))
        return QTensor(ints, scale, zero_point, dtype)
    ints = t.emit(qd.quantize_per_tensor.default, (x, float(scale), int(zero_point), lo, hi, int_dtype))
    return QTensor(ints, float(scale), int(zero_point), dtype)


def dequantize(t: Translator, q: QTensor):
    lo, hi, int_dtype = _RANGES[q.dtype]
    op = qd.dequantize_per_tensor.tensor if isinstance(q.scale, torch.fx.Node) else qd.dequantize_per_tensor.default
    return t.emit(op, (q.ints, q.scale, q.zero_point, lo, hi, int_dtype))


def quantized_input(t: Translator, tensor: torch.Tensor, name: str, dynamic: dict, specs: list) -> QTensor:
    """A quantized graph input as the TorchScript exporter takes one: three inputs, the
    integers, the scale (float64) and the zero point (int64)."""
    parts = [
        (name, tensor.int_repr(), dynamic),
        (f"{name}_scale", torch.tensor(tensor.q_scale(), dtype=torch.float64), {}),
        (f"{name}_zero_point", torch.tensor(tensor.q_zero_point(), dtype=torch.int64), {}),
    ]
    nodes = []
    for part_name, value, axes in parts:
        node = t.graph.placeholder(part_name)
        node.meta["val"] = t.fake(value, f"L['{part_name}']", axes)
        specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(node.name), None))
        nodes.append(node)
    return QTensor(nodes[0], nodes[1], nodes[2], tensor.dtype)


def quantized_output(t: Translator, q: QTensor) -> tuple:
    """A quantized graph output as the TorchScript exporter gives one: the integers, the scale
    (float32) and the zero point (in the integers' type)."""
    int_dtype = _RANGES[q.dtype][2]
    parts = []
    for value, dtype in ((q.scale, torch.float32), (q.zero_point, int_dtype)):
        if isinstance(value, torch.fx.Node):
            parts.append(t.emit(aten._to_copy.default, (value,), {"dtype": dtype}))
        else:
            parts.append(t.constant_node(torch.tensor(value, dtype=dtype)))
    return (q.ints, *parts)


def float_of(t: Translator, value):
    return dequantize(t, value) if isinstance(value, QTensor) else value


def _quantize_per_tensor(t: Translator, node):
    x, scale, zero_point, dtype = (t.env[v] for v in node.inputs())
    if all(isinstance(v, int | float) for v in (scale, zero_point)):
        return quantize(t, x, scale, zero_point, _qdtype(dtype))
    # A scale or zero point the graph computes (a QuantStub's buffers, which QAT's observers set,
    # read with float() and int()): 0-d tensors, QuantizeLinear's inputs.
    parts = []
    for value, part_dtype in ((scale, torch.float32), (zero_point, torch.int64)):
        if not isinstance(value, torch.fx.Node):
            parts.append(t.constant_node(torch.tensor(value, dtype=part_dtype)))
            continue
        if not isinstance(t.fake_of(value), torch.Tensor):  # a number: the tensor it was read from
            number = value.target is aten._local_scalar_dense.default
            value = value.args[0] if number else t.emit(aten.scalar_tensor.default, (value,), {"dtype": part_dtype})
        value = t.emit(aten._to_copy.default, (value,), {"dtype": part_dtype})
        parts.append(t.emit(aten.reshape.default, (value, [])))
    return quantize(t, x, parts[0], parts[1], _qdtype(dtype))


def _dequantize(t: Translator, node):
    value = t.env[node.input()]
    if isinstance(value, QTensor):
        return dequantize(t, value)
    if isinstance(value, list):
        return [dequantize(t, v) if isinstance(v, QTensor) else v for v in value]
    return t.op(node)


def _q_scale(t: Translator, node):
    return _operand(t, node).scale


def _q_zero_point(t: Translator, node):
    return _operand(t, node).zero_point


def _int_repr(t: Translator, node):
    return _operand(t, node).ints


def _operand(t: Translator, node) -> QTensor:
    value = t.env[next(iter(node.inputs()))]
    if not isinstance(value, QTensor):
        raise ConversionError(f"{node.kind()} of a tensor that is not quantized")
    return value


def _weight(t: Translator, q: torch.Tensor):
    """A quantized weight as an integer constant dequantized in the graph."""
    ints = t.constant_node(q.int_repr())
    lo, hi, int_dtype = _RANGES[q.dtype]
    args: tuple
    if q.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        args = (ints, float(q.q_scale()), int(q.q_zero_point()), lo, hi, int_dtype)
        return t.emit(qd.dequantize_per_tensor.default, args)
    scales = t.constant_node(q.q_per_channel_scales().to(torch.float32))
    zero_points = t.constant_node(q.q_per_channel_zero_points().to(torch.int64))
    args = (ints, scales, zero_points, int(q.q_per_channel_axis()), lo, hi, int_dtype)
    return t.emit(qd.dequantize_per_channel.default, args)


def _packed(t: Translator, node) -> tuple:
    x, packed, scale, zero_point = (t.env[v] for v in node.inputs())
    if not isinstance(x, QTensor) or not isinstance(packed, PackedWeights):
        raise ConversionError(f"{node.kind()} of inputs other than a quantized tensor and packed weights")
    return x, packed.packed, scale, zero_point


def _conv(t: Translator, node, relu: bool):
    x, packed, scale, zero_point = _packed(t, node)
    w, bias = packed.unpack()
    stride, padding, dilation, output_padding = (
        list(packed.stride()),
        list(packed.padding()),
        list(packed.dilation()),
        list(packed.output_padding()),
    )
    if w.dim() == t.fake_of(x.ints).dim() + 1:
        # PyTorch packs a 1-d conv as a 2-d one over a height of 1: weights (out, in, 1, k),
        # stride (1, s)...
        w = w.squeeze(2)
        stride, padding, dilation, output_padding = (v[1:] for v in (stride, padding, dilation, output_padding))
    # A quantized transposed convolution takes an output_padding that reaches the stride and
    # the dilation; aten.convolution does not (its eager kernels refuse it, its fake kernel too
    # from torch 2.15). The positions that padding adds lie past every input's reach: zeros
    # padded on after the convolution, the bias added after them.
    past = [p if p >= max(s, d) else 0 for p, s, d in zip(output_padding, stride, dilation)]
    output_padding = [p - q for p, q in zip(output_padding, past)]
    added_bias = bias is not None and any(past)
    args = (
        dequantize(t, x),
        _weight(t, w),
        None if bias is None or added_bias else t.constant_node(bias.detach()),
        stride,
        padding,
        dilation,
        bool(packed.transpose()),
        output_padding,
        int(packed.groups()),
    )
    y = t.emit(aten.convolution.default, args)
    if any(past):
        y = t.emit(aten.constant_pad_nd.default, (y, [p for q in reversed(past) for p in (0, q)], 0.0))
    if added_bias:
        per_channel = t.constant_node(bias.detach().reshape(-1, *[1] * len(past)))
        y = t.emit(aten.add.Tensor, (y, per_channel))
    return quantize(t, t.emit(aten.relu.default, (y,)) if relu else y, scale, zero_point, x.dtype)


def _linear(t: Translator, node, relu: bool):
    x, packed, scale, zero_point = _packed(t, node)
    w, bias = torch.ops.quantized.linear_unpack(packed)
    b = None if bias is None else t.constant_node(bias.detach())
    y = t.emit(aten.linear.default, (dequantize(t, x), _weight(t, w), b))
    return quantize(t, t.emit(aten.relu.default, (y,)) if relu else y, scale, zero_point, x.dtype)


def _binary(t: Translator, node, fn, relu: bool):
    a, b, scale, zero_point = (t.env[v] for v in node.inputs())
    dtype = a.dtype if isinstance(a, QTensor) else b.dtype
    y = t.emit(fn, (float_of(t, a), float_of(t, b)))
    return quantize(t, t.emit(aten.relu.default, (y,)) if relu else y, scale, zero_point, dtype)


def _cat(t: Translator, node):
    tensors, dim, scale, zero_point = (t.env[v] for v in node.inputs())
    dtype = next(x.dtype for x in tensors if isinstance(x, QTensor))
    y = t.emit(aten.cat.default, ([float_of(t, x) for x in tensors], dim))
    return quantize(t, y, scale, zero_point, dtype)


def quantized_like_float(t: Translator, node):
    """A ``quantized::`` op without a handler of its own whose last two arguments are its
    output's scale and zero point (``quantized::layer_norm``, ``hardswish``, ``leaky_relu``...):
    the ATen op of the same name on the dequantized inputs, its result quantized."""
    schema = torch._C.parse_schema(node.schema())
    name = schema.name.split("::")[1]
    arguments, values = list(schema.arguments), [t.env[v] for v in node.inputs()]
    float_op = getattr(getattr(aten, name, None), "default", None)
    if float_op is None or len(arguments) < 3 or "scale" not in arguments[-2].name:
        raise ConversionError(f"quantized::{name} has no ONNX form in fastonnx")
    first = next((v for v in values if isinstance(v, QTensor)), None)
    if first is None:
        raise ConversionError(f"quantized::{name} of a tensor that is not quantized")
    scale, zero_point = values[-2:]
    accepted = {a.name: a for a in float_op._schema.arguments}
    kwargs = dict(_FLOAT_DEFAULTS.get(name, {}))
    for a, value in zip(arguments[:-2], values[:-2]):
        key = "self" if a.name in ("qx", "X", "x", "input") and "self" in accepted else a.name
        if key in accepted:
            kwargs[key] = float_of(t, value)
    y = t.emit(float_op, (), kwargs)
    return quantize(t, y, scale, zero_point, first.dtype)


def on_quantized(t: Translator, node, values: list):
    """An ATen op reading quantized tensors: on their float values, the result quantized with
    the first one's parameters (PyTorch's quantized kernels keep the input's), or with the
    fixed ones of the ops whose output range is fixed (sigmoid, tanh...)."""
    first = next(x for v in values for x in (v if isinstance(v, list) else [v]) if isinstance(x, QTensor))
    fixed = _FIXED_QPARAMS.get((node.kind(), first.dtype))
    if fixed is not None:
        first = QTensor(first.ints, fixed[0], fixed[1], first.dtype)
    ins = list(node.inputs())
    for v, value in zip(ins, values):
        if isinstance(value, QTensor):
            t.env[v] = dequantize(t, value)
        elif isinstance(value, list) and any(isinstance(x, QTensor) for x in value):
            t.env[v] = [float_of(t, x) for x in value]
    try:
        result = t.op(node)
    finally:
        for v, value in zip(ins, values):
            t.env[v] = value
    results = result if isinstance(result, list) else [result]
    requantized = [
        quantize(t, r, first.scale, first.zero_point, first.dtype)
        if isinstance(r, torch.fx.Node) and t.fake_of(r).is_floating_point()
        else r
        for r in results
    ]
    return type(result)(requantized) if isinstance(result, list) else requantized[0]


_CONVOLUTIONS = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
HANDLERS: dict[str, Handler] = {
    "aten::quantize_per_tensor": _quantize_per_tensor,
    "aten::dequantize": _dequantize,
    "aten::q_scale": _q_scale,
    "aten::q_zero_point": _q_zero_point,
    "aten::int_repr": _int_repr,
    **{f"quantized::{name}": functools.partial(_conv, relu=False) for name in _CONVOLUTIONS},
    **{f"quantized::{name}_relu": functools.partial(_conv, relu=True) for name in ("conv1d", "conv2d", "conv3d")},
    "quantized::linear": functools.partial(_linear, relu=False),
    "quantized::linear_relu": functools.partial(_linear, relu=True),
    "quantized::add": functools.partial(_binary, fn=aten.add.Tensor, relu=False),
    "quantized::add_relu": functools.partial(_binary, fn=aten.add.Tensor, relu=True),
    "quantized::mul": functools.partial(_binary, fn=aten.mul.Tensor, relu=False),
    "quantized::cat": _cat,
}


# PyTorch's quantized kernels of these ops give their result fixed parameters, by input type
# (aten/src/ATen/native/quantized: the output range of the function is known).
_FIXED_QPARAMS = {
    ("aten::sigmoid", torch.quint8): (1.0 / 256, 0),
    ("aten::sigmoid", torch.qint8): (1.0 / 256, -128),
    ("aten::hardsigmoid", torch.quint8): (1.0 / 256, 0),
    ("aten::hardsigmoid", torch.qint8): (1.0 / 256, -128),
    ("aten::tanh", torch.quint8): (2.0 / 256, 128),
    ("aten::tanh", torch.qint8): (2.0 / 256, 0),
    ("aten::softmax", torch.quint8): (1.0 / 256, 0),
    ("aten::softmax", torch.qint8): (1.0 / 256, -128),
}


# Arguments of the float ops that their quantized:: twins do not take.
_FLOAT_DEFAULTS = {
    "instance_norm": {
        "running_mean": None,
        "running_var": None,
        "use_input_stats": True,
        "momentum": 0.1,
        "cudnn_enabled": False,
    },
}


def _qdtype(value) -> torch.dtype:
    if isinstance(value, torch.dtype):
        return value
    return dtype_of_scalar_type(value)
