"""Schema types -> C++ spellings. The only module that knows the C++ types of the core
(torchgen keeps the same split in ``api/cpp.py``): everything else asks it.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

from torchgen.model import Argument, BaseTy, BaseType, FunctionSchema, ListType, OptionalType
from torchgen.model import Type as SchemaType

from ..model import Kind, SpecError, Type

# The C++ type of each kind, and the name the unpack functions of cpp/include/fastonnx/unpack.h
# give it: `unpack_<name>`, `unpack_opt_<name>` for an optional one.
CPP_TYPES = {
    Kind.TENSOR: ("Value", "tensor"),
    Kind.INT: ("int64_t", "int"),
    Kind.SYMINT: ("SymInt", "symint"),
    Kind.FLOAT: ("double", "float"),
    Kind.BOOL: ("bool", "bool"),
    Kind.STR: ("std::string", "str"),
    Kind.SCALAR: ("Scalar", "scalar"),
    Kind.SCALAR_TYPE: ("ScalarType", "scalar_type"),
    Kind.TENSOR_LIST: ("std::vector<Value>", "tensor_list"),
    Kind.OPTIONAL_TENSOR_LIST: ("std::vector<std::optional<Value>>", "opt_tensor_list"),
    Kind.INT_LIST: ("std::vector<int64_t>", "int_list"),
    Kind.SYMINT_LIST: ("SymIntList", "symint_list"),
    Kind.FLOAT_LIST: ("std::vector<double>", "float_list"),
    Kind.BOOL_LIST: ("std::vector<bool>", "bool_list"),
    Kind.AXES: ("std::optional<std::vector<int64_t>>", ""),
}
_BASE_KINDS = {
    BaseTy.Tensor: Kind.TENSOR,
    BaseTy.int: Kind.INT,
    BaseTy.SymInt: Kind.SYMINT,
    BaseTy.float: Kind.FLOAT,
    BaseTy.bool: Kind.BOOL,
    BaseTy.str: Kind.STR,
    BaseTy.Scalar: Kind.SCALAR,
    BaseTy.ScalarType: Kind.SCALAR_TYPE,
}
_LIST_KINDS = {
    BaseTy.Tensor: Kind.TENSOR_LIST,
    BaseTy.int: Kind.INT_LIST,
    BaseTy.SymInt: Kind.SYMINT_LIST,
    BaseTy.float: Kind.FLOAT_LIST,
    BaseTy.bool: Kind.BOOL_LIST,
}
# Kinds whose value torch.export may leave to the graph (a symbolic size, `.item()`); every other
# non-tensor argument is a number torch specialized while tracing.
COMPUTABLE_KINDS = (Kind.SCALAR, Kind.SYMINT, Kind.SYMINT_LIST)


def cpp_type(t: Type) -> str:
    spelled = CPP_TYPES[t.kind][0]
    return f"std::optional<{spelled}>" if t.optional else spelled


# Arguments that say where or how torch stores a tensor; ONNX has no such notion, so converters
# never see them.
_IGNORED = {BaseTy.Layout, BaseTy.Device, BaseTy.MemoryFormat, BaseTy.Generator, BaseTy.DeviceIndex}

INT64 = "ScalarType::Long"
UNDEFINED_DTYPE = "ScalarType::Undefined"  # no fixed element type

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
    "tensor(int4)": "ScalarType::Int4",
    "tensor(uint4)": "ScalarType::UInt4",
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
    type: Type
    default: str | None  # C++ expression for the schema default, None when required
    list_size: int  # N of `int[N]`, 0 when unsized

    @property
    def kind(self) -> Kind:
        return self.type.kind

    @property
    def optional(self) -> bool:
        return self.type.optional

    @property
    def ignored(self) -> bool:
        return self.kind is Kind.IGNORED

    @property
    def cpp_type(self) -> str:
        return cpp_type(self.type)

    def unpack(self, arg_expr: str, what: str) -> str:
        size = f", {self.list_size}" if self.list_size else ""
        # Numbers in tensor slots become constants; a Scalar may be a value the graph computes.
        builder = "b, " if self.kind.is_tensor or self.kind is Kind.SCALAR else ""
        name = ("opt_" if self.optional else "") + CPP_TYPES[self.kind][1]
        return f"unpack_{name}({builder}{arg_expr}, {what}{size})"


_CPP_KEYWORDS = {"default", "int", "float", "bool", "char", "template", "class", "union", "auto"}


def cpp_name(name: str) -> str:
    return name + "_" if name in _CPP_KEYWORDS else name


def _type(t: SchemaType) -> Type:
    if isinstance(t, BaseType):
        if t.name in _IGNORED:
            return Type(Kind.IGNORED)
        if t.name in _BASE_KINDS:
            return Type(_BASE_KINDS[t.name])
    elif isinstance(t, OptionalType):
        if isinstance(t.elem, BaseType) and t.elem.name in _IGNORED:
            return Type(Kind.IGNORED)
        if isinstance(t.elem, ListType) and isinstance(t.elem.elem, BaseType) and t.elem.elem.name is BaseTy.Tensor:
            raise SpecError("Tensor[]? is not supported")
        return Type(_type(t.elem).kind, optional=True)
    elif isinstance(t, ListType):
        elem = t.elem
        if isinstance(elem, OptionalType) and isinstance(elem.elem, BaseType) and elem.elem.name is BaseTy.Tensor:
            return Type(Kind.OPTIONAL_TENSOR_LIST)
        if isinstance(elem, BaseType) and elem.name in _LIST_KINDS:
            return Type(_LIST_KINDS[elem.name])
    raise SpecError(f"schema type `{t}` has no C++ spelling in codegen/api/cpp.py")


# ScalarType defaults as native_functions.yaml writes them (`ScalarType? dtype=long`).
_DTYPE_DEFAULTS = {
    "long": "ScalarType::Long",
    "int": "ScalarType::Int",
    "float": "ScalarType::Float",
    "double": "ScalarType::Double",
}
_BOOLS = {"True": "true", "False": "false"}


def _default(arg: Argument, t: Type) -> str | None:
    d = arg.default
    if d is None:
        return None
    k = t.kind
    if k is Kind.IGNORED:
        return ""
    if d == "None":
        return "std::nullopt"
    if k is Kind.INT:
        return {"Mean": "1", "Sum": "2", "None": "0"}.get(d, d)
    if k is Kind.SYMINT:
        return f"SymInt({d})"
    if k is Kind.FLOAT:
        return d if re.search(r"[.e]", d) or d in ("inf", "-inf") else d + ".0"
    if k is Kind.BOOL:
        return _BOOLS[d]
    if k is Kind.STR:
        # The schema quotes like Python ('none' or "none"); C++ takes only double quotes.
        return f"std::string({json.dumps(ast.literal_eval(d))})"
    if k is Kind.SCALAR_TYPE and d in _DTYPE_DEFAULTS:
        return _DTYPE_DEFAULTS[d]
    if k is Kind.SCALAR:
        return f"Scalar({d})" if re.search(r"[.e]", d) else f"Scalar(int64_t{{{d}}})"
    if k in (Kind.INT_LIST, Kind.SYMINT_LIST, Kind.FLOAT_LIST, Kind.BOOL_LIST):
        values = [v for v in d.strip("[]").replace(" ", "").split(",") if v]
        if k is Kind.SYMINT_LIST:
            values = [f"SymInt({v})" for v in values]
        if k is Kind.BOOL_LIST:
            values = [_BOOLS[v] for v in values]
        return CPP_TYPES[k][0] + "{" + ", ".join(values) + "}"
    raise SpecError(f"default `{d}` of `{arg.name}` has no C++ spelling")


def _list_size(t: SchemaType) -> int:
    while isinstance(t, OptionalType):
        t = t.elem
    return t.size or 0 if isinstance(t, ListType) else 0


def cpp_args(schema: FunctionSchema) -> list[CppArg]:
    out = []
    for a in schema.arguments.flat_all:
        t = _type(a.type)
        if t.kind in (Kind.INT_LIST, Kind.SYMINT_LIST) and a.default is not None and a.default.lstrip("-").isdigit():
            size = _list_size(a.type)
            default = _default(Argument(a.name, a.type, "[" + ",".join([a.default] * size) + "]", a.annotation), t)
        else:
            default = _default(a, t)
        out.append(CppArg(cpp_name(a.name), a.name, t, default, _list_size(a.type)))
    return out


# Returns a converter yields as graph values: tensors, and numbers as 0-d tensors (sizes from
# sym_size, `.item()`).
_VALUE_RETURNS = (BaseTy.Tensor, BaseTy.SymInt, BaseTy.int, BaseTy.SymBool, BaseTy.bool, BaseTy.Scalar, BaseTy.float)


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
    """C++ identifier of the converter of an overload: ``add.Tensor`` -> ``add_Tensor``,
    ``fastonnx::padded_rnn`` -> ``fastonnx_padded_rnn``."""
    return overload.replace("::", "_").replace(".", "_")


def scalar_type(onnx_type: str) -> str | None:
    return ONNX_TYPE_TO_SCALAR_TYPE.get(onnx_type)
