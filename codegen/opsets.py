"""Target opsets and what ONNX's own operator registry (``onnx.defs``) says about them."""

from __future__ import annotations

import functools

import onnx.defs
import onnx.helper

MIN_OPSET = 13
# The newest opset onnxruntime runs that the rules are written and tested against.
MAX_OPSET = 28
DEFAULT_OPSET = 18


@functools.cache
def schema(op: str, opset: int) -> onnx.defs.OpSchema | None:
    """The ONNX schema of ``op`` in force at ``opset``, or None when ONNX has no such op then."""
    try:
        return onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        return None


def first_opset(op: str) -> int | None:
    for v in range(1, MAX_OPSET + 1):
        if schema(op, v) is not None:
            return v
    return None


def ir_versions() -> list[tuple[int, int]]:
    """(opset, minimum IR version) for every supported opset, from onnx's own version table."""
    return [
        (v, onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", v)]))
        for v in range(MIN_OPSET, MAX_OPSET + 1)
    ]
