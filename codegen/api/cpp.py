"""Schema types -> C++ spellings. The only module that knows the C++ types of the core
(torchgen keeps the same split in ``api/cpp.py``): everything else asks it.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

from torchgen.model import Argument, BaseTy, BaseType, FunctionSchema, ListType, OptionalType, Type

from ..model import SpecError

# What an argument is to a converter. The unpack function of the kind is `unpack_<kind>` in
# cpp/include/fastonnx/unpack.h; optional kinds unpack with `unpack_opt_<kind>`.
_BASE_KINDS = {
    BaseTy.Tensor: ("tensor", "Value"),
    BaseTy.int: ("int", "int64_t"),
    BaseTy.SymInt: ("symint", "SymInt"),
    BaseTy.float: ("float", "double"),
    BaseTy.bool: ("bool", "bool"),
    BaseTy.str: ("str", "std::string"),
    BaseTy.Scalar: ("scalar", "Scalar"),
    BaseTy.ScalarType: ("scalar_type", "ScalarType"),
}
_LIST_KINDS = {
    BaseTy.Tensor: ("tensor_list", "std::vector<Value>"),
    BaseTy.int: ("int_list", "std::vector<int64_t>"),
    BaseTy.SymInt: ("symint_list", "SymIntList"),
    BaseTy.float: ("float_list", "std::vector<double>"),
    BaseTy.bool: ("bool_list", "std::vector<bool>"),
}
# Kinds whose value torch.export may leave to the graph (a symbolic size, `.item()`); every other
# non-tensor argument is a number torch specialized while tracing.
COMPUTABLE_KINDS = ("scalar", "symint", "symint_list")
# Arguments that say where or how torch stores a tensor; ONNX has no such notion, so converters
# never see them.
_IGNORED = {BaseTy.Layout, BaseTy.Device, BaseTy.MemoryFormat, BaseTy.Generator, BaseTy.DeviceIndex}

# ONNX tensor type strings -> the core's ScalarType enumerators.
ONNX_TYPE_TO_SCALAR_TYPE = {
    "tensor(uint8)": "ScalarType::Byte",
    "tensor(int8)": "ScalarType::Char",
    "tensor(int16)": "ScalarType::Short",
    "tensor(int32)": "ScalarType::Int",
    "tensor(int64)": "ScalarType::Long",
    "tensor(float16)": "ScalarType::Half",
    "tensor(float)": "ScalarType::Float",
    "tensor(double)": "ScalarType::Double",
    "tensor(bool)": "ScalarType::Bool",
    "tensor(bfloat16)": "ScalarType::BFloat16",
    "tensor(uint16)": "ScalarType::UInt16",
    "tensor(uint32)": "ScalarType::UInt32",
    "tensor(uint64)": "ScalarType::UInt64",
    "tensor(complex64)": "ScalarType::ComplexFloat",
    "tensor(complex128)": "ScalarType::ComplexDouble",
    "tensor(float8e4m3fn)": "ScalarType::Float8_e4m3fn",
    "tensor(float8e4m3fnuz)": "ScalarType::Float8_e4m3fnuz",
    "tensor(float8e5m2)": "ScalarType::Float8_e5m2",
    "tensor(float8e5m2fnuz)": "ScalarType::Float8_e5m2fnuz",
}

# torch dtype names (as `torch.float16` prints without its module) -> ScalarType enumerators, for
# `dtype(x) == "float16"` in guards.
TORCH_DTYPE_TO_SCALAR_TYPE = {
    "bool": "ScalarType::Bool",
    "uint8": "ScalarType::Byte",
    "int8": "ScalarType::Char",
    "int16": "ScalarType::Short",
    "int32": "ScalarType::Int",
    "int64": "ScalarType::Long",
    "float16": "ScalarType::Half",
    "bfloat16": "ScalarType::BFloat16",
    "float32": "ScalarType::Float",
    "float64": "ScalarType::Double",
    "complex64": "ScalarType::ComplexFloat",
    "complex128": "ScalarType::ComplexDouble",
}


@dataclass(frozen=True)
class CppArg:
    name: str  # C++ identifier (schema name, escaped if it is a C++ keyword)
    schema_name: str
    kind: str  # e.g. "tensor", "opt_tensor", "int_list", "ignored"
    cpp_type: str
    default: str | None  # C++ expression for the schema default, None when required
    list_size: int  # N of `int[N]`, 0 when unsized

    @property
    def ignored(self) -> bool:
        return self.kind == "ignored"

    @property
    def base_kind(self) -> str:
        return self.kind.removeprefix("opt_")

    @property
    def optional(self) -> bool:
        return self.kind.startswith("opt_")

    @property
    def is_tensor(self) -> bool:
        return self.base_kind in ("tensor", "tensor_list", "opt_tensor_list")

    def unpack(self, arg_expr: str, what: str) -> str:
        size = f", {self.list_size}" if self.list_size else ""
        # Numbers in tensor slots become constants; a Scalar may be a value the graph computes.
        builder = "b, " if self.is_tensor or self.base_kind == "scalar" else ""
        return f"unpack_{self.kind}({builder}{arg_expr}, {what}{size})"


_CPP_KEYWORDS = {"default", "int", "float", "bool", "char", "template", "class", "union", "auto"}


def cpp_name(name: str) -> str:
    return name + "_" if name in _CPP_KEYWORDS else name


def _kind(t: Type) -> tuple[str, str]:
    if isinstance(t, BaseType):
        if t.name in _IGNORED:
            return "ignored", ""
        if t.name in _BASE_KINDS:
            return _BASE_KINDS[t.name]
    elif isinstance(t, OptionalType):
        if isinstance(t.elem, BaseType) and t.elem.name in _IGNORED:
            return "ignored", ""
        if isinstance(t.elem, ListType) and isinstance(t.elem.elem, BaseType) and t.elem.elem.name is BaseTy.Tensor:
            raise SpecError("Tensor[]? is not supported")
        kind, cpp = _kind(t.elem)
        return "opt_" + kind, f"std::optional<{cpp}>"
    elif isinstance(t, ListType):
        elem = t.elem
        if isinstance(elem, OptionalType) and isinstance(elem.elem, BaseType) and elem.elem.name is BaseTy.Tensor:
            return "opt_tensor_list", "std::vector<std::optional<Value>>"
        if isinstance(elem, BaseType) and elem.name in _LIST_KINDS:
            return _LIST_KINDS[elem.name]
    raise SpecError(f"schema type `{t}` has no C++ spelling in codegen/api/cpp.py")


# ScalarType defaults as native_functions.yaml writes them (`ScalarType? dtype=long`).
_DTYPE_DEFAULTS = {"long": "ScalarType::Long", "int": "ScalarType::Int", "float": "ScalarType::Float", "double": "ScalarType::Double"}


def _default(arg: Argument, kind: str) -> str | None:
    d = arg.default
    if d is None:
        return None
    if kind == "ignored":
        return ""
    base = kind.removeprefix("opt_")
    if d == "None":
        return "std::nullopt"
    if base in ("int", "symint"):
        return {"Mean": "1", "Sum": "2", "None": "0"}.get(d, d) if base == "int" else f"SymInt({d})"
    if base == "float":
        return d if re.search(r"[.e]", d) or d in ("inf", "-inf") else d + ".0"
    if base == "bool":
        return {"True": "true", "False": "false"}[d]
    if base == "str":
        # The schema quotes like Python ('none' or "none"); C++ takes only double quotes.
        return f"std::string({json.dumps(ast.literal_eval(d))})"
    if base == "scalar_type" and d in _DTYPE_DEFAULTS:
        return _DTYPE_DEFAULTS[d]
    if base == "scalar":
        return f"Scalar({d})" if re.search(r"[.e]", d) else f"Scalar(int64_t{{{d}}})"
    if base in ("int_list", "symint_list", "float_list", "bool_list"):
        items = d.strip("[]").replace(" ", "")
        values = [v for v in items.split(",") if v]
        if base == "symint_list":
            return "SymIntList{" + ", ".join(f"SymInt({v})" for v in values) + "}"
        if base == "bool_list":
            values = [{"True": "true", "False": "false"}[v] for v in values]
        cpp = _LIST_KINDS[{"int_list": BaseTy.int, "float_list": BaseTy.float, "bool_list": BaseTy.bool}[base]][1]
        return cpp + "{" + ", ".join(values) + "}"
    raise SpecError(f"default `{d}` of `{arg.name}` has no C++ spelling")


def _list_size(t: Type) -> int:
    while isinstance(t, OptionalType):
        t = t.elem
    return t.size or 0 if isinstance(t, ListType) else 0


def cpp_args(schema: FunctionSchema) -> list[CppArg]:
    out = []
    for a in schema.arguments.flat_all:
        kind, cpp = _kind(a.type)
        if kind in ("int_list", "symint_list") and a.default is not None and a.default.lstrip("-").isdigit():
            size = _list_size(a.type)
            default = _default(Argument(a.name, a.type, "[" + ",".join([a.default] * size) + "]", a.annotation), kind)
        else:
            default = _default(a, kind)
        out.append(CppArg(cpp_name(a.name), a.name, kind, cpp, default, _list_size(a.type)))
    return out


# Returns a converter yields as graph values: tensors, and numbers as 0-d tensors (sizes from
# sym_size, `.item()`).
_VALUE_RETURNS = (BaseTy.Tensor, BaseTy.SymInt, BaseTy.int, BaseTy.SymBool, BaseTy.bool, BaseTy.Scalar,
                  BaseTy.float)


def returns_type(schema: FunctionSchema) -> tuple[str, int]:
    """The C++ return type of a converter and how many values it yields (-1: a list)."""
    rets = schema.returns
    if not rets:
        return "void", 0
    for r in rets:
        if not (isinstance(r.type, BaseType) and r.type.name in _VALUE_RETURNS):
            if isinstance(r.type, ListType) and len(rets) == 1:
                return "std::vector<Value>", -1
            raise SpecError(f"return type `{r.type}` has no C++ spelling")
    if len(rets) == 1:
        return "Value", 1
    return f"std::array<Value, {len(rets)}>", len(rets)


def function_name(overload: str) -> str:
    """C++ identifier of the converter of an overload: ``add.Tensor`` -> ``add_Tensor``."""
    return overload.replace(".", "_")


def scalar_type(onnx_type: str) -> str | None:
    return ONNX_TYPE_TO_SCALAR_TYPE.get(onnx_type)
