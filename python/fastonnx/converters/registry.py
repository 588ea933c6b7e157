"""Converters written in Python, for ops fastonnx has no converter for (custom ops from
``torch.library``, or to override a built-in one): the escape hatch, slower than the generated
C++ converters but needing no rebuild.

    def scaled_tanh(g, x, scale):
        return g.op("Mul", g.op("Tanh", x), g.constant(scale, dtype=x.dtype))

    fastonnx.register_converter("mylib::scaled_tanh", scaled_tanh)

``g.op(op_type, *inputs, domain="", outputs=1, **attributes)`` adds a node, in the style of
torch.onnx symbolic functions: ``op_type`` may name its domain (``"mydomain::Foo"``); attributes
may carry torch.onnx's type suffixes (``alpha_f``, ``axes_i``, ``mode_s``, ``value_t``,
``body_g``) or have their type read off the Python value; ``outputs=n`` returns a tuple. Inputs
are the values the converter was given, results of ``g.op``, or Python numbers, lists and tensors
(made constants). Ops of another domain need ``custom_opsets`` in ``fastonnx.export`` for their
version (default 1). ``g.subgraph`` builds an If branch or a Loop body, ``g.onnxscript_op`` calls
an onnxscript function (an ONNX local function of the model).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from ..core.dtypes import dtype_code, onnx_code, torch_onnx_name

_CONVERTERS: dict[str, tuple[Callable, int | None, bool]] = {}


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
    _CONVERTERS[name] = (fn, opset, False)


def register_positional(name: str, fn: Callable, opset: int | None) -> None:
    """Like ``register_converter``, ``fn`` being called as torch.onnx calls a symbolic function:
    every argument of the op's schema positionally, defaults filled in."""
    register_converter(name, fn, opset)
    _CONVERTERS[name] = (fn, opset, True)


def _call_positionally(fn: Callable, schema, g, *args, **kwargs):
    filled = list(args)
    for a in schema.arguments[len(args) :]:
        filled.append(kwargs[a.name] if a.name in kwargs else a.default_value if a.has_default_value() else None)
    return fn(g, *filled)


def unregister_converter(name: str) -> None:
    _CONVERTERS.pop(name, None)


@contextlib.contextmanager
def registrations_kept() -> Iterator[None]:
    """Converters registered inside are gone afterwards, and those they replaced are back."""
    saved = dict(_CONVERTERS)
    try:
        yield
    finally:
        _CONVERTERS.clear()
        _CONVERTERS.update(saved)


def converter_for(target, opset: int) -> Callable | None:
    """The Python converter registered for an FX node's target, if any applies at ``opset``."""
    if not isinstance(target, torch._ops.OpOverload) or not _CONVERTERS:
        return None
    schema = target._schema
    for name in (f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name, schema.name):
        entry = _CONVERTERS.get(name)
        if entry is not None and (entry[1] is None or opset >= entry[1]):
            fn, _, positional = entry
            return functools.partial(_call_positionally, fn, schema) if positional else fn
    return None


def registered_names() -> list[str]:
    """The names Python converters are registered under (``torchvision::nms``), built-in ones
    included."""
    return sorted(_CONVERTERS)


def is_registered(target) -> bool:
    return converter_for(target, 10**6) is not None


@dataclass(frozen=True)
class ValueType:
    """What ``value.type()`` gives a torch.onnx symbolic function: the recorded dtype and sizes."""

    element_type: torch.dtype | None
    shape: tuple | None

    def dtype(self) -> torch.dtype | None:
        return self.element_type

    def scalarType(self) -> str | None:
        return torch_onnx_name(self.element_type)

    def sizes(self) -> list | None:
        return list(self.shape) if self.shape is not None else None

    def dim(self) -> int | None:
        return len(self.shape) if self.shape is not None else None


@dataclass(frozen=True)
class Value:
    """A graph value in a Python converter. ``dtype`` and ``shape`` are known for the converter's
    inputs (torch.export recorded them) and unknown (None) for results of ``g.op``."""

    ref: object
    dtype: torch.dtype | None = None
    shape: tuple | None = None

    def type(self) -> ValueType:
        return ValueType(self.dtype, self.shape)

    def setType(self, _type) -> Value:
        """torch.onnx's ``setType``: the export gives every converter result torch's recorded type
        and shape, so there is nothing to set."""
        return self


@dataclass(frozen=True)
class Subgraph:
    """An If branch or a Loop/Scan body built with ``g.subgraph``, for a ``*_g`` attribute."""

    graph_id: int


_ATTRIBUTE_SUFFIXES = {"i": "i", "f": "f", "s": "s", "is": "ints", "fs": "floats", "ss": "strings", "t": "t", "g": "g"}


def _attribute(key: str, value) -> tuple[str, str, object]:
    name, _, suffix = key.rpartition("_")
    if name and suffix in _ATTRIBUTE_SUFFIXES:
        kind = _ATTRIBUTE_SUFFIXES[suffix]
        if kind == "ints" and isinstance(value, int):  # torch.onnx writes axes_i=[0] and axis_i=0 alike
            kind = "i"
        if kind == "i" and isinstance(value, (list, tuple)):
            kind = "ints"
        if kind == "g" and not isinstance(value, Subgraph):
            raise TypeError(f"attribute {key}: a graph attribute takes a subgraph made with g.subgraph, got {value!r}")
        if kind == "t" and not isinstance(value, torch.Tensor):
            raise TypeError(f"attribute {key}: a tensor attribute takes a torch.Tensor, got {type(value).__name__}")
        return name, kind, value.graph_id if kind == "g" else value
    if isinstance(value, (bool, int)):
        return key, "i", int(value)
    if isinstance(value, float):
        return key, "f", value
    if isinstance(value, str):
        return key, "s", value
    if isinstance(value, torch.Tensor):
        return key, "t", value
    if isinstance(value, Subgraph):
        return key, "g", value.graph_id
    if isinstance(value, torch.dtype):
        return key, "i", onnx_code(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (int, bool)) for v in value):
        return key, "ints", [int(v) for v in value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (int, float)) for v in value):
        return key, "floats", [float(v) for v in value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return key, "strings", list(value)
    raise TypeError(
        f"attribute {key}={value!r}: give an int, float, str, torch.dtype, tensor, subgraph or a non-empty list of "
        f"numbers (or a torch.onnx-style suffix: {key}_i, {key}_f, {key}_s, {key}_is, {key}_fs, {key}_t, {key}_g)"
    )


def _split_domain(op_type: str, domain: str) -> tuple[str, str]:
    """torch.onnx names an op of another domain ``"domain::Op"`` (``"onnx::Op"``: ONNX's own)."""
    if "::" not in op_type:
        return op_type, domain
    named, _, op = op_type.partition("::")
    if domain and domain != named:
        raise ValueError(f"op {op_type!r} names domain {named!r} but domain={domain!r} was given")
    return op, "" if named == "onnx" else named


def _check_function_opset(proto, opset: int) -> None:
    """A local function's ONNX ops must mean at its opset what they mean at the model's (ONNX
    requires it): each op's definition the same at both."""
    import onnx

    version = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), opset)
    for node in proto.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        ours = onnx.defs.get_schema(node.op_type, opset).since_version
        theirs = onnx.defs.get_schema(node.op_type, version).since_version
        if ours != theirs:
            raise ValueError(
                f"onnxscript function {proto.name} uses {node.op_type} of opset {version}, which opset {opset} "
                f"(the model's) redefines (from {ours}): write the function with onnxscript's opset{opset} or "
                f"export with opset_version={version}"
            )


class GraphContext:
    """What a Python converter builds with: ``g.op``, ``g.constant``, ``g.subgraph``,
    ``g.onnxscript_op``, ``g.opset``. ``name`` names the nodes that own subgraphs (the FX node's)."""

    def __init__(self, session, opset: int, keep_alive: list, name: str = "custom"):
        self._session = session
        self.opset = opset
        self._keep_alive = keep_alive  # constants' tensors, alive as long as the export
        self._name = name
        self._owners = 0

    def op(self, op_type: str, *inputs, domain: str = "", outputs: int = 1, **attributes):
        op_type, domain = _split_domain(op_type, domain)
        attrs = [_attribute(k, v) for k, v in attributes.items()]
        tensors = [a for a in attrs if a[1] == "t"]
        if tensors:
            return self._with_tensor_attribute(op_type, domain, inputs, attrs, tensors)
        refs = [None if x is None else self._value(x).ref for x in inputs]
        if any(kind == "g" for _, kind, _ in attrs):
            if domain:
                raise ValueError(f"{domain}::{op_type}: only ONNX's If, Loop and Scan take subgraphs")
            self._owners += 1
            name = f"{self._name}_{op_type.lower()}_{self._owners}"
            results = self._session.control_flow(op_type, refs, attrs, [None] * outputs, name)
        else:
            results = self._session.add_node(domain, op_type, refs, attrs, outputs)
        values = [Value(r) for r in results]
        return values[0] if outputs == 1 else tuple(values)

    def _with_tensor_attribute(self, op_type: str, domain: str, inputs: tuple, attrs: list, tensors: list):
        """ONNX's ops with a tensor attribute, written without one: Constant is a constant;
        ConstantOfShape is its one-element value expanded to the shape."""
        key, _, tensor = tensors[0]
        if domain == "" and len(attrs) == 1 and key == "value":
            if op_type == "Constant" and not inputs:
                return self.constant(tensor)
            if op_type == "ConstantOfShape" and len(inputs) == 1:
                if tensor.numel() != 1:
                    raise ValueError(f"ConstantOfShape: value_t must hold one element, got shape {tuple(tensor.shape)}")
                return self.op("Expand", self.constant(tensor.reshape(())), inputs[0])
        raise ValueError(
            f"{domain + '::' if domain else ''}{op_type}: fastonnx writes tensor attributes only as "
            f"Constant(value_t=...) and ConstantOfShape(shape, value_t=...); give {key} as a graph input instead"
        )

    def constant(self, value, dtype: torch.dtype | None = None) -> Value:
        """A constant from a tensor, a Python number or a (nested) list of numbers."""
        t = value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=dtype)
        t = t.detach().to("cpu", dtype or t.dtype).contiguous()
        self._keep_alive.append(t)
        ref = self._session.add_initializer(
            "", dtype_code(t.dtype), list(t.shape), t.data_ptr(), t.numel() * t.element_size(), t
        )
        return Value(ref, t.dtype, tuple(t.shape))

    def subgraph(self, build: Callable, *input_types) -> Subgraph:
        """An If branch or a Loop/Scan body: ``build(body_g, *inputs)`` returns the outputs (a value
        or a tuple), ``body_g`` being a nested context and each input a formal input typed by one
        ``(dtype, shape)`` of ``input_types`` (a Loop body's first two: ``(torch.int64, [])`` and
        ``(torch.bool, [])``). Pass the result as a ``*_g`` attribute of the ``g.op`` that owns it."""
        self._session.begin_subgraph()
        self._owners += 1
        prefix = f"{self._name}_body{self._owners}"
        add_input = self._session.add_subgraph_input
        inputs = [
            Value(add_input(f"{prefix}_in{i}", dtype_code(dtype), list(shape)), dtype, tuple(shape))
            for i, (dtype, shape) in enumerate(input_types)
        ]
        nested = GraphContext(self._session, self.opset, self._keep_alive, prefix)
        out = build(nested, *inputs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        return Subgraph(self._session.end_subgraph([nested._value(o).ref for o in outs]))

    def onnxscript_op(self, fn, *inputs, outputs: int = 1, **attributes):
        """A call of the onnxscript function ``fn`` (``@onnxscript.script(opset)``): a node of the
        function's domain, which the model defines once as a local function (its version comes
        from ``custom_opsets``)."""
        proto = fn.to_function_proto()
        _check_function_opset(proto, self.opset)
        self._session.add_function_proto(proto.domain, proto.name, proto.SerializeToString())
        return self.op(proto.name, *inputs, domain=proto.domain, outputs=outputs, **attributes)

    def at(self, operator: str, *args, **kwargs):
        from ..errors import ConversionError

        raise ConversionError(
            f"g.at({operator!r}, ...): fastonnx does not write ATen fallback nodes (torch.onnx's "
            f"OperatorExportTypes.ONNX_ATEN_FALLBACK), which no ONNX runtime runs; build the op from ONNX ops "
            f"with g.op, or leave it unregistered to get PyTorch's decomposition"
        )

    def _value(self, x) -> Value:
        if isinstance(x, Value):
            return x
        if isinstance(x, (int, float, bool, list, tuple, torch.Tensor)):
            return self.constant(x)
        raise TypeError(
            f"an op input must be a value of the graph, a number, a list or a tensor, got {type(x).__name__}"
        )
