"""Converters written in Python, for ops fastonnx has no converter for (custom ops from
``torch.library``, or to override a built-in one): the escape hatch, slower than the generated
C++ converters but needing no rebuild.

    def scaled_tanh(g, x, scale):
        return g.op("Mul", g.op("Tanh", x), g.constant(scale, dtype=x.dtype))

    fastonnx.register_converter("mylib::scaled_tanh", scaled_tanh)

``g.op(op_type, *inputs, domain="", outputs=1, **attributes)`` adds a node, in the style of
torch.onnx symbolic functions: attributes may carry torch.onnx's type suffixes (``alpha_f``,
``axes_i``, ``mode_s``) or have their type read off the Python value; ``outputs=n`` returns a
tuple. Inputs are the values the converter was given, results of ``g.op``, or Python numbers,
lists and tensors (made constants). Ops of another domain need ``custom_opsets`` in
``fastonnx.export`` for their version (default 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ._dtypes import dtype_code

_CONVERTERS: dict[str, tuple[Callable, int | None]] = {}


def register_converter(name: str, fn: Callable, opset: int | None = None) -> None:
    """Convert the op ``name`` (``"mylib::my_op"`` for every overload, ``"mylib::my_op.out"``
    for one) with ``fn(g, *args, **kwargs)``, for target opsets from ``opset`` (every opset when
    None). A registration replaces an earlier one for the same name, built-in converters
    included."""
    if not isinstance(name, str) or "::" not in name:
        raise ValueError(f"the op to convert is named `namespace::op` (e.g. 'mylib::my_op'), got {name!r}")
    if not callable(fn):
        raise TypeError(f"the converter for {name} must be callable, got {type(fn).__name__}")
    if opset is not None and not isinstance(opset, int):
        raise TypeError(f"opset must be an int or None, got {opset!r}")
    _CONVERTERS[name] = (fn, opset)


def unregister_converter(name: str) -> None:
    _CONVERTERS.pop(name, None)


def converter_for(target, opset: int) -> Callable | None:
    """The Python converter registered for an FX node's target, if any applies at ``opset``."""
    if not isinstance(target, torch._ops.OpOverload) or not _CONVERTERS:
        return None
    schema = target._schema
    for name in (f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name, schema.name):
        entry = _CONVERTERS.get(name)
        if entry is not None and (entry[1] is None or opset >= entry[1]):
            return entry[0]
    return None


def is_registered(target) -> bool:
    return converter_for(target, 10**6) is not None


@dataclass(frozen=True)
class Value:
    """A graph value in a Python converter. ``dtype`` and ``shape`` are known for the converter's
    inputs (torch.export recorded them) and unknown (None) for results of ``g.op``."""

    ref: object
    dtype: torch.dtype | None = None
    shape: tuple | None = None


_ATTRIBUTE_SUFFIXES = {"i": "i", "f": "f", "s": "s", "is": "ints", "fs": "floats", "ss": "strings"}


def _attribute(key: str, value) -> tuple[str, str, object]:
    name, _, suffix = key.rpartition("_")
    if name and suffix in _ATTRIBUTE_SUFFIXES:
        kind = _ATTRIBUTE_SUFFIXES[suffix]
        if kind == "ints" and isinstance(value, int):  # torch.onnx writes axes_i=[0] and axis_i=0 alike
            kind = "i"
        if kind == "i" and isinstance(value, (list, tuple)):
            kind = "ints"
        return name, kind, value
    if isinstance(value, (bool, int)):
        return key, "i", int(value)
    if isinstance(value, float):
        return key, "f", value
    if isinstance(value, str):
        return key, "s", value
    if isinstance(value, torch.dtype):
        from ._dtypes import onnx_code

        return key, "i", onnx_code(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (int, bool)) for v in value):
        return key, "ints", [int(v) for v in value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (int, float)) for v in value):
        return key, "floats", [float(v) for v in value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return key, "strings", list(value)
    raise TypeError(
        f"attribute {key}={value!r}: give an int, float, str, torch.dtype or a non-empty list of numbers "
        f"(or a torch.onnx-style suffix: {key}_i, {key}_f, {key}_s, {key}_is, {key}_fs)"
    )


class GraphContext:
    """What a Python converter builds with: ``g.op``, ``g.constant``, ``g.opset``."""

    def __init__(self, session, opset: int, keep_alive: list):
        self._session = session
        self.opset = opset
        self._keep_alive = keep_alive  # constants' tensors, alive as long as the export

    def op(self, op_type: str, *inputs, domain: str = "", outputs: int = 1, **attributes):
        refs = [None if x is None else self._value(x).ref for x in inputs]
        attrs = [_attribute(k, v) for k, v in attributes.items()]
        results = [Value(r) for r in self._session.add_node(domain, op_type, refs, attrs, outputs)]
        return results[0] if outputs == 1 else tuple(results)

    def constant(self, value, dtype: torch.dtype | None = None) -> Value:
        """A constant from a tensor, a Python number or a (nested) list of numbers."""
        t = value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=dtype)
        t = t.detach().to("cpu", dtype or t.dtype).contiguous()
        self._keep_alive.append(t)
        ref = self._session.add_initializer(
            "", dtype_code(t.dtype), list(t.shape), t.data_ptr(), t.numel() * t.element_size(), t
        )
        return Value(ref, t.dtype, tuple(t.shape))

    def _value(self, x) -> Value:
        if isinstance(x, Value):
            return x
        if isinstance(x, (int, float, bool, list, tuple, torch.Tensor)):
            return self.constant(x)
        raise TypeError(
            f"an op input must be a value of the graph, a number, a list or a tensor, got {type(x).__name__}"
        )
