"""C++ spellings of the expression pieces a rule compiles to: Builder calls, attributes,
constants and guard operators. The templates arrange them into statements and functions; this
module only spells them, next to the type spellings in ``cpp.py``.
"""

from __future__ import annotations

import json


def cpp_string(s: str) -> str:
    return json.dumps(s)  # a JSON string literal is a valid C++ narrow string literal for ASCII


def item(var: str, index: int) -> str:
    return f"{var}[{index}]"


def literal_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"int64_t{{{value}}}"
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else _special_float(value)
    raise TypeError(value)


def _special_float(value: float) -> str:
    if value != value:
        return "std::numeric_limits<double>::quiet_NaN()"
    return ("-" if value < 0 else "") + "std::numeric_limits<double>::infinity()"


# Constants for an ONNX input. ``like`` is the C++ expression of a Value whose element type the
# constant takes; ``dtype`` a ScalarType enumerator.
def scalar_like(value_expr: str, like: str) -> str:
    return f"b.scalar_like(Scalar({value_expr}), {like})"


def scalar_of(value_expr: str, dtype: str) -> str:
    return f"b.scalar(Scalar({value_expr}), {dtype})"


def list_like(items: list[str], like: str) -> str:
    return f"b.list_like({{{', '.join(f'Scalar({i})' for i in items)}}}, {like})"


def list_of(items: list[str], dtype: str) -> str:
    return f"b.list({{{', '.join(f'Scalar({i})' for i in items)}}}, {dtype})"


def ints_input(list_expr: str) -> str:
    """An int list argument (static or symbolic items) as a 1-D int64 tensor input."""
    return f"b.ints({list_expr})"


def attr(kind: str, name: str, value_expr: str) -> str:
    return f"Attr::{kind}({cpp_string(name)}, {value_expr})"


def attr_dtype(name: str, dtype_expr: str) -> str:
    return f"Attr::i({cpp_string(name)}, onnx_dtype({dtype_expr}))"


def deref(expr: str) -> str:
    return f"(*{expr})"


def static_ints(expr: str) -> str:
    return f"b.static_ints({expr})"


def static_int(expr: str) -> str:
    return f"b.static_int({expr})"


def attribute_helper(name: str, args: list[str]) -> str:
    return f"helper_{name}({', '.join(['b', *args])})"


def helper(name: str, args: list[str]) -> str:
    """A tensor helper's call; the C++ function has the helper's name."""
    return f"{name}({', '.join(['b', *args])})"


def converter_name(fn: str) -> str:
    return f"convert_{fn}"


def manual_name(body: str) -> str:
    return f"manual::{body}"


def tensor_array(n: int) -> str:
    return f"std::array<Value, {n}>"


def scalar_value(value_expr: str) -> str:
    return f"Scalar({value_expr})"


NULLOPT = "std::nullopt"


def braced(items: list[str]) -> str:
    return "{" + ", ".join(items) + "}"


def int_vector(items: list[str]) -> str:
    return "std::vector<int64_t>{" + ", ".join(items) + "}"


def symint_list(items: list[str]) -> str:
    return "SymIntList{" + ", ".join(f"SymInt({i})" for i in items) + "}"


def float_vector(items: list[str]) -> str:
    return "std::vector<double>{" + ", ".join(items) + "}"


def string_value(s: str) -> str:
    return f"std::string({cpp_string(s)})"


def opset_at_least(v: int) -> str:
    return f"b.opset() >= {v}"


def is_none(expr: str, negate: bool) -> str:
    return f"{expr}.has_value()" if negate else f"!{expr}.has_value()"


def rank(expr: str) -> str:
    return f"b.rank({expr})"


def is_floating(expr: str) -> str:
    return f"is_floating(b.dtype({expr}))"


def dtype_of(expr: str) -> str:
    return f"b.dtype({expr})"


def length(expr: str) -> str:
    return f"static_cast<int64_t>({expr}.size())"


def all_of(conditions: list[str]) -> str:
    return " && ".join(conditions)


def any_of(conditions: list[str]) -> str:
    return " || ".join(conditions)


def group(expr: str) -> str:
    return f"({expr})"


def negation(condition: str) -> str:
    return f"!({condition})"


def comparison(left: str, op: str, right: str) -> str:
    """``op`` as Python spells it: ==, !=, <, <=, >, >= (which C++ spells alike)."""
    return f"({left} {op} {right})"


def minus(number: str) -> str:
    return f"(-{number})"


def dtype_mask(enumerators) -> str:
    """A bit set of ScalarTypes (``bit`` is defined in the generated onnx_types.cpp)."""
    return " | ".join(f"bit({e})" for e in enumerators)
