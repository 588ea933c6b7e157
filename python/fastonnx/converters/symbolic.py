"""torch.onnx's spellings of custom converters, so that symbolic functions written for
``torch.onnx.export`` run unchanged: ``register_custom_op_symbolic`` (its name forms and
positional arguments) and ``parse_args``; and ``torch.onnx.ops.symbolic`` (an ONNX node written
in the model's code), converted to the node it names.

A fastonnx converter is handed Python numbers, lists and strings where the op takes them (torch
recorded them), not graph values to unpack, so ``torch.onnx.symbolic_helper.parse_args`` passes
them through as they are; ``fastonnx.parse_args`` does the same and checks each against its
descriptor.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable

from .registry import GraphContext, Value, register_positional

# torch.onnx's own check of a symbolic name: `namespace::op`, the namespace possibly empty.
_NAME = re.compile(r"^[a-zA-Z0-9_-]*::[a-zA-Z_-][a-zA-Z0-9_-]*$")


def register_custom_op_symbolic(symbolic_name: str, symbolic_fn: Callable, opset_version: int) -> None:
    """torch.onnx's ``register_custom_op_symbolic``: convert the op ``symbolic_name``
    (``"custom_ops::foo"``, ``"aten::elu"``, or ``"::elu"`` for ``aten::elu``) with
    ``symbolic_fn(g, *args)``, every argument of the op's schema given positionally, for target
    opsets from ``opset_version``. It replaces fastonnx's own converter of an ATen op."""
    if not isinstance(symbolic_name, str) or not _NAME.match(symbolic_name):
        raise ValueError(
            f"symbolic_name must look like 'namespace::op' ('custom_ops::foo', 'aten::elu' or '::elu'), "
            f"got {symbolic_name!r}"
        )
    if symbolic_name.startswith("::"):
        symbolic_name = "aten" + symbolic_name
    if not isinstance(opset_version, int):
        raise TypeError(f"opset_version must be an int, got {opset_version!r}")
    register_positional(symbolic_name, symbolic_fn, opset_version)


def unregister_custom_op_symbolic(symbolic_name: str, opset_version: int | None = None) -> None:
    from .registry import unregister_converter

    unregister_converter("aten" + symbolic_name if symbolic_name.startswith("::") else symbolic_name)


def _matches(value, descriptor: str) -> bool:
    if descriptor in ("v", "none") or value is None:
        return True
    if isinstance(value, Value):
        return descriptor in ("v", "t")
    kinds: dict[str, type | tuple[type, ...]] = {"i": int, "f": (int, float), "b": (bool, int), "s": str}
    if descriptor in kinds:
        return isinstance(value, kinds[descriptor])
    if descriptor in ("is", "fs"):
        item = int if descriptor == "is" else (int, float)
        return isinstance(value, (list, tuple)) and all(isinstance(v, item) for v in value)
    raise ValueError(f"parse_args: unknown descriptor {descriptor!r} (v, i, is, f, fs, b, s, t, none)")


def parse_args(*descriptors: str) -> Callable[[Callable], Callable]:
    """torch.onnx's ``symbolic_helper.parse_args``: ``@parse_args("v", "i", "fs")`` documents
    what each argument after ``g`` is (``v`` a graph value, ``i``/``f``/``b``/``s`` a number, bool
    or string, ``is``/``fs`` a list of them, ``t`` a tensor, ``none`` unused). The arguments
    already arrive as those types; a mismatch is a TypeError naming the argument."""

    def decorator(fn: Callable) -> Callable:
        names = list(inspect.signature(fn).parameters)[1:]

        @functools.wraps(fn)
        def wrapper(g, *args, **kwargs):
            for i, (value, descriptor) in enumerate(zip(args, descriptors)):
                if not _matches(value, descriptor):
                    name = names[i] if i < len(names) else f"#{i}"
                    raise TypeError(f"{fn.__name__}: argument {name}={value!r} is not of kind {descriptor!r}")
            return fn(g, *args, **kwargs)

        return wrapper

    return decorator


def _onnx_symbolic(g: GraphContext, inputs, op_type: str, onnx_dtype, **kwargs):
    """``torch.onnx.ops.symbolic(_multi_out)``: the ONNX node it names, attributes decoded from
    torch's encoding. The domain's version comes from ``custom_opsets``, as for any custom node."""
    from torch.onnx.ops._symbolic_impl import EncodedAttrs

    keys, types = kwargs["attr_keys"], kwargs["attr_types"]
    encoded = EncodedAttrs(
        keys, types, kwargs["attr_pos"], kwargs["attr_ints"], kwargs["attr_floats"], kwargs["attr_strs"]
    )
    if "ss" in types:
        raise ValueError(f"{op_type}: fastonnx writes no attributes that are lists of strings")
    attributes = {f"{key}_{kind}": value for (key, value), kind in zip(encoded.to_dict().items(), types)}
    outputs = len(onnx_dtype) if isinstance(onnx_dtype, (list, tuple)) else 1
    out = g.op(op_type, *inputs, domain=kwargs.get("domain", ""), outputs=outputs, **attributes)
    return list(out) if isinstance(onnx_dtype, (list, tuple)) else out


CONVERTERS: dict[str, Callable] = {
    "onnx_symbolic::_symbolic": _onnx_symbolic,
    "onnx_symbolic::_symbolic_multi_out": _onnx_symbolic,
}
