"""TorchScript's ``aten::`` nodes (and any other op's) in the translator: each becomes the overload
its schema names, an ``out=`` variant its functional twin, TorchScript's arithmetic on numbers
the Python operation FX records for it (core/arithmetic.py); a 0-d tensor op on sizes is also
followed as a size, for an ``aten::Int`` of it to read."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch

from ...core import arithmetic
from ...core.dtypes import dtype_of_scalar_type
from ...errors import ConversionError
from .fake_values import known_equal, unbacked
from .nodes import bind, functional_overload, inputs, resolve
from .optionals import refuse_optional
from .packed_sequences import BatchSizes, Packed
from .quantized import QTensor, on_quantized
from .sequences import is_sequence, refuse_sequence, stacked
from .translator import Handler, Opaque, Outputs, Translator

aten = torch.ops.aten

# TorchScript's arithmetic on numbers (``aten::add.int``...), by name: the Python operation.
_ON_NUMBERS = {row.torchscript: row.python for row in arithmetic.TABLE if row.torchscript}
# The 0-d tensor ops the tracer records on sizes (``x.size(0) * 2``, ``x.size(0) == 1``), by name
# and rounding mode: the Python operation, and whether its operands are swapped.
_ON_SIZES = {(s.name, s.rounding_mode): (row.python, s.swapped) for row in arithmetic.TABLE for s in row.on_sizes}
_ON_SIZES_NAMES = frozenset(name for name, _ in _ON_SIZES)


def op(t: Translator, node: torch._C.Node):
    schema_text = node.schema()
    if schema_text == "(no schema)":
        raise ConversionError(f"TorchScript node {node.kind()} has no schema torch can match")
    schema, overload, target = resolve(schema_text)
    namespace, name = schema.name.split("::")
    ins = inputs(node)
    values = [t.env[v] for v in ins]
    refuse_optional(node.kind(), values)
    if node.kind() in ("aten::stack", "aten::cat") and is_sequence(values[0]):
        return stacked(t, values[0], values[1], new_axis=node.kind() == "aten::stack")
    refuse_sequence(node.kind(), values)
    if any(isinstance(v, QTensor) or isinstance(v, list) and any(isinstance(x, QTensor) for x in v) for v in values):
        return on_quantized(t, node, values)
    if any(isinstance(v, Packed | BatchSizes) for v in values):
        raise ConversionError(
            f"{node.kind()} reads a packed sequence; only recurrent layers and pad_packed_sequence take one"
        )
    if namespace == "aten" and schema.returns and all(str(r.type) in ("int", "float", "bool") for r in schema.returns):
        fn = _ON_NUMBERS.get(name)
        if fn is not None:
            return t.arithmetic(fn, values)
    if namespace == "aten" and name in _ON_SIZES_NAMES and node.output().type().kind() == "TensorType":
        _size_arithmetic(t, node, schema, values)
    args, kwargs = bind(schema, values)
    # the `out=` arguments of an out variant
    written = [a.name for a in schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]
    functional = functional_overload(overload, schema) if written else None
    if functional is not None:
        # `op(..., out=t)`: the functional op, whose result is what `t` holds from here on.
        outs = [kwargs.pop(name) for name in written]
        if any(a.name == "dtype" for a in functional._schema.arguments) and isinstance(outs[0], torch.fx.Node):
            kwargs["dtype"] = t.fake_of(outs[0]).dtype  # an out= tensor gives the result's type
        result = t.emit(functional, tuple(args), kwargs)
        for v, value in zip(ins, values):
            if any(value is o for o in outs):
                t.env[v] = result
        return result
    traced = t.traced_types(node) if t.typed_by_trace else None
    if traced is not None:
        result = t.add_node(target, tuple(args), kwargs, traced[0] if len(traced) == 1 else tuple(traced))
    else:
        result = t.emit(target, tuple(args), kwargs)
    n_out = node.outputsSize()
    val = t.fake_of(result)
    if n_out > 1 or isinstance(val, list | tuple):
        count = n_out if n_out > 1 else len(val)
        items = [t.add_node(operator.getitem, (result, i), {}, val[i]) for i in range(count)]
        return Outputs(items) if n_out > 1 else items
    return result


def _size_arithmetic(t: Translator, node, schema: torch.FunctionSchema, values: list) -> None:
    """A 0-d tensor op over sizes the tracer recorded (``x.size(0) * 2``): its size, for an
    ``aten::Int`` of it to read."""
    ins = inputs(node)
    operands = []
    for v, value in zip(ins[:2], values[:2]):
        if v in t.sizes:
            operands.append(t.sizes[v])
        elif isinstance(value, int | float) and not isinstance(value, bool):
            operands.append(value)
        else:
            return
    if t.fake_of(t.env[ins[0]]).dim() if isinstance(t.env[ins[0]], torch.fx.Node) else 0:
        return
    arguments = {a.name: value for a, value in zip(schema.arguments, values)}
    fn, swapped = _ON_SIZES[schema.name.split("::")[1], arguments.get("rounding_mode")]
    a, b = reversed(operands) if swapped else operands
    alpha = arguments.get("alpha", 1)
    if alpha != 1:  # (add's, sub's and rsub's: the operand added or subtracted is scaled)
        b = t.arithmetic(operator.mul, [b, alpha])
    t.sizes[node.output()] = t.arithmetic(fn, [a, b])


def _convolution(t: Translator, node):
    """The traced form of every convolution: ``convolution`` with backend flags after its
    arguments, which say nothing about the result."""
    values: list[Any] = [t.env[v] for v in inputs(node)]
    # (torch's fake convolution picks a memory format by the sizes, a guard on the batch that
    # says nothing of the values: not one that would fix a batch traced at size 1)
    with t.shape_env.suppress_guards():
        return t.emit(aten.convolution.default, tuple(values[:9]), traced=node)


def _copy_(t: Translator, node):
    """``dst.copy_(src)``, which broadcasts ``src`` to ``dst``'s shape. Of sizes without an example's
    value (a branch the example does not take), torch's fake copy_ asks whether one is 1, a guard
    it cannot decide, where expand requires of them what eager does: ``src`` is expanded first."""
    dst, src, *rest = (t.env[v] for v in inputs(node))
    if isinstance(dst, torch.fx.Node) and isinstance(src, torch.fx.Node):
        d, s = t.fake_of(dst), t.fake_of(src)
        if (
            isinstance(d, torch.Tensor)
            and isinstance(s, torch.Tensor)
            and (unbacked(d) or unbacked(s))
            and not (d.dim() == s.dim() and all(known_equal(x, y) for x, y in zip(d.shape, s.shape)))
        ):
            sizes = [t.size_of(dst, i) for i in range(d.dim())]
            expanded = t.emit(aten.expand.default, (src, sizes))
            return t.emit(aten.copy_.default, (dst, expanded, *rest))
    return t.op(node)


def _select(t: Translator, node):
    values = [t.env[v] for v in inputs(node)]
    source = node.inputsAt(0)
    if source in t.shape_tensors and values[1] == 0 and isinstance(values[2], int):
        t.sizes[node.output()] = t.shape_tensors[source][values[2]]
    if not isinstance(values[0], BatchSizes):
        return t.op(node)
    if values[1:] != [0, 0]:
        raise ConversionError("of a packed sequence's batch sizes only the first (batch_sizes[0]) is supported")
    batch = t.size_of(values[0].packed.padded, 1)
    t.sizes[node.output()] = batch
    return t.emit(aten.scalar_tensor.default, (batch,), {"dtype": torch.int64})


def _set_(t: Translator, node):
    """``x.set_(y)``: from here on ``x`` is ``y`` (its storage, so its shape). Run on the fake
    values, it would change the shape of ``x``'s fake value in place, the declared shape of an
    input that is ``x``."""
    ins = inputs(node)
    if len(ins) != 2 or ins[1].type().kind() != "TensorType":  # (a storage, an offset: as the op)
        return t.op(node)
    dst, src = ins
    t.env[dst] = t.env[src]
    return t.env[src]


def _to(t: Translator, node):
    """``x.to(device, dtype)`` (``aten::to.prim_Device``, TorchScript's own overload, which no
    converter knows): the device says nothing of the values (the graph runs where the runtime
    puts it), so a cast to ``dtype``, or ``x`` itself; other overloads as their ops."""
    if resolve(node.schema())[0].overload_name != "prim_Device":
        return t.op(node)
    x, _, dtype, _, copy = (t.env[v] for v in inputs(node))
    if dtype is None:
        return t.emit(aten.clone.default, (x,)) if copy else x
    return t.emit(aten._to_copy.default, (x,), {"dtype": dtype_of_scalar_type(dtype)})


def _indexed(t: Translator, node):
    """``x[mask]`` and ``x[mask] = v`` with a uint8 mask (eager's older spelling of a bool one,
    which torch's fake ``index`` refuses): the mask as bool, the op as its schema names it."""
    values = [t.env[v] for v in inputs(node)]
    indices = values[1] if len(values) > 1 else None
    if not isinstance(indices, list) or not any(_is_uint8(t, i) for i in indices):
        return t.op(node)
    return _with_bool_masks(t, node, [values[0], [_as_bool(t, i) for i in indices], *values[2:]])


def _where(t: Translator, node):
    """``torch.where(cond, a, b)`` with a uint8 ``cond`` (eager takes it as a mask, torch's fake
    ``where`` refuses it): the condition as bool."""
    values = [t.env[v] for v in inputs(node)]
    if not _is_uint8(t, values[0]):
        return t.op(node)
    return _with_bool_masks(t, node, [_as_bool(t, values[0]), *values[1:]])


def _with_bool_masks(t: Translator, node, values: list):
    schema, _, target = resolve(node.schema())
    args, kwargs = bind(schema, values)
    return t.emit(target, tuple(args), kwargs)


def _as_bool(t: Translator, value):
    return t.emit(aten._to_copy.default, (value,), {"dtype": torch.bool}) if _is_uint8(t, value) else value


def _is_uint8(t: Translator, value) -> bool:
    return isinstance(value, torch.fx.Node) and getattr(t.fake_of(value), "dtype", None) == torch.uint8


def _upsampled_to_sizes(t: Translator, node):
    """``interpolate(x, size=...)``: an upsample's ``.vec`` overload given sizes and no scales is
    its sized overload (the ``.vec`` one's fake kernel takes no symbolic sizes, ``size=(int(y.size(0)),
    ...)``)."""
    schema, packet, _ = resolve(node.schema())
    values = [t.env[v] for v in inputs(node)]
    if schema.overload_name != "vec" or values[-1] is not None or values[1] is None:
        return t.op(node)
    return t.emit(packet.default, tuple(values[:-1]))


_UPSAMPLES = (
    "upsample_nearest1d",
    "upsample_nearest2d",
    "upsample_nearest3d",
    "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d",
    "_upsample_nearest_exact3d",
    "upsample_linear1d",
    "upsample_bilinear2d",
    "upsample_trilinear3d",
    "upsample_bicubic2d",
    "_upsample_bilinear2d_aa",
    "_upsample_bicubic2d_aa",
)


@dataclass(frozen=True)
class Rows(Opaque):
    """The list ``tensor.unbind(dim)`` whose only reader is ``len()``: its length is a size of the
    graph, where the list itself would need the example's count of tensors."""

    tensor: torch.fx.Node
    dim: int


def _unbind(t: Translator, node):
    uses = node.output().uses()
    tensor, dim = (t.env[v] for v in inputs(node))
    if uses and all(u.user.kind() == "aten::len" for u in uses) and isinstance(tensor, torch.fx.Node):
        return Rows(tensor, dim % t.fake_of(tensor).dim())
    return t.op(node)


HANDLERS: dict[str, Handler] = {
    "aten::unbind": _unbind,
    "aten::_convolution": _convolution,
    "aten::set_": _set_,
    "aten::copy_": _copy_,
    "aten::select": _select,
    "aten::to": _to,
    "aten::index": _indexed,
    "aten::index_put": _indexed,
    "aten::index_put_": _indexed,
    "aten::where": _where,
    **{f"aten::{name}": _upsampled_to_sizes for name in _UPSAMPLES},
}
