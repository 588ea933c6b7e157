"""Checks each spec against its ATen schema and ONNX's registry, and compiles its rules into
the data the converter templates render: typed parameters, guards and a straight-line list of
Builder calls per rule (evaluated in order, so node order and names are deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NoReturn

import onnx.defs

from .. import opsets
from ..api import cpp
from ..api import fragments as F
from ..model import (
    HELPERS,
    Call,
    Expr,
    Helper,
    HelperRole,
    Item,
    Kind,
    Literal,
    Name,
    OpSpec,
    Rule,
    SpecError,
    Tuple,
    Type,
)

AttrType = onnx.defs.OpSchema.AttrType


def _attr_type_name(t: AttrType) -> str:
    """INTS, FLOAT, ...: onnx's type stubs omit the pybind11 enum's ``name``."""
    return t.name  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Step:
    """One ONNX node a rule adds: ``var`` names its output (or its outputs when n_outputs > 1)."""

    var: str
    op: str
    inputs: list[str]
    attrs: list[str]
    n_outputs: int
    spread: str = ""  # a tensor-list parameter passed as the op's variadic inputs


@dataclass(frozen=True)
class HelperStep:
    """A call of a tensor helper: ``const <cpp_type> <var> = <call>;``."""

    var: str
    cpp_type: str
    call: str


@dataclass
class RuleCode:
    condition: str  # C++ boolean expression; "" means always
    promote: list[tuple[str, bool]] = field(default_factory=list)  # (parameter, is a list)
    steps: list[Step | HelperStep] = field(default_factory=list)
    result: str = ""
    manual: str = ""  # the name of a manual rule's body (in namespace manual)
    description: str = ""


@dataclass
class Converter:
    overload: str
    fn: str
    ret: str
    n_returns: int
    args: list[cpp.CppArg]  # every schema argument, in order
    rules: list[RuleCode]
    schema: str  # the ATen schema, for the declaration's comment
    family: str  # the mapping file's stem: the generated file that holds the converter
    # The function the registry calls: `convert_<fn>`, a manual body when that is all the spec
    # says, or the converter of the overload a `same_as`/in-place twin converts as.
    callee: str = ""
    where: str = ""
    # Arguments that must be numbers known when exporting (Rule.static): the lowering decomposes
    # a node whose such argument the graph computes.
    static_args: tuple[str, ...] = ()
    # Rule.complex == "parts": a node with complex tensors is converted on their real and
    # imaginary parts apart.
    complex_parts: bool = False

    @property
    def params(self) -> list[cpp.CppArg]:
        return [a for a in self.args if not a.ignored]

    @property
    def generated(self) -> bool:
        """Whether codegen writes a `convert_` function for it."""
        return self.callee == F.converter_name(self.fn)

    @property
    def static_mask(self) -> int:
        """``static_args`` as a bit set over the schema's argument positions."""
        return sum(1 << i for i, a in enumerate(self.args) if a.schema_name in self.static_args)


def fail_spec(spec: OpSpec, msg: str, rule: Rule | None = None) -> NoReturn:
    where = f"{spec.file}:{rule.line}" if rule is not None and rule.line else spec.where
    raise SpecError(f"{where}: `{spec.overload}`: {msg}")


def _fits(param: Type, arg: Type) -> bool:
    """Whether an argument of type ``arg`` can be passed for a helper's parameter: as itself, or
    a dim list as axes."""
    return param.accepts(arg) or (param.kind is Kind.AXES and arg.kind is Kind.INT_LIST)


class RuleCompiler:
    """Compiles one rule's expression. ``since``/``until`` bound the opsets the rule can be
    chosen for, and every ONNX op it uses is checked against ONNX's registry at both ends."""

    def __init__(self, spec: OpSpec, rule: Rule, args: list[cpp.CppArg], since: int, until: int, nonnull: set[str]):
        self.spec = spec
        self.rule = rule
        self.nonnull = nonnull  # optional arguments the rule's guard proved present
        self.args = {a.schema_name: a for a in args}
        self.since, self.until = since, until
        self.steps: list[Step | HelperStep] = []
        self.counter = 0
        self.static: set[str] = set()  # arguments used as numbers known when exporting

    def needs_static(self, a: cpp.CppArg) -> None:
        """``a`` is used where only a number known when exporting fits (an attribute); a number
        the graph computes cannot go there."""
        if a.kind in cpp.COMPUTABLE_KINDS:
            self.static.add(a.schema_name)

    def fail(self, msg: str) -> NoReturn:
        fail_spec(self.spec, msg, self.rule)

    def arg(self, name: str) -> cpp.CppArg:
        if name not in self.args:
            accepted = ", ".join(a for a, v in self.args.items() if not v.ignored)
            self.fail(f"`{name}` is not an argument of the schema; it has: {accepted}")
        a = self.args[name]
        if a.ignored:
            self.fail(f"`{name}` has no meaning in ONNX and cannot be used in a rule")
        return a

    def onnx_schemas(self, op: str) -> list[onnx.defs.OpSchema]:
        """The schemas of ``op`` at both ends of the rule's opset range; the call must fit both
        (an optional attribute added in between does no harm, a removed one does)."""
        out = []
        for v in (self.since, self.until):
            s = opsets.schema(op, v)
            if s is None:
                exists = opsets.first_opset(op)
                hint = (
                    f"it exists from opset {exists}: add `since: {exists}`"
                    if exists
                    else ("it is not an ONNX operator; ops are capitalised ONNX names such as Relu, Conv, MatMul")
                )
                self.fail(f"ONNX op `{op}` is unknown at opset {v}; {hint}")
            out.append(s)
        return out

    # -- values --------------------------------------------------------------------------------

    def value(self, e: Expr, like_hint: str | None = None) -> str:
        """Compile an expression that yields one ONNX value; returns its C++ expression."""
        if isinstance(e, Name):
            a = self.arg(e.id)
            if a.kind is not Kind.TENSOR:
                self.fail(f"`{e.id}` is a {a.type}, not a tensor; only a tensor can be an op's result")
            return a.name
        if isinstance(e, Item):
            if not e.base.is_onnx:
                return F.item(self.helper_call(e.base, n_tensors=e.index + 1), e.index)
            return F.item(self.op_call(e.base, min_outputs=e.index + 1, like_hint=like_hint), e.index)
        if isinstance(e, Call):
            if not e.is_onnx:
                n = len(self.helper(e, HelperRole.TENSOR).returns)
                if n > 1:
                    self.fail(f"`{e.func}` gives {n} tensors; select one with `[i]`")
                return self.helper_call(e, n_tensors=1)
            return self.op_call(e, min_outputs=1, like_hint=like_hint)
        self.fail(f"`{e}` does not produce a tensor")

    # -- helpers -------------------------------------------------------------------------------

    def helper(self, call: Call, role: HelperRole) -> Helper:
        h = HELPERS.get(call.func)
        if h is None or h.role is not role:
            names = ", ".join(n for n, x in HELPERS.items() if x.role is role)
            self.fail(f"`{call.func}` is not a {role.value} helper; they are: {names}")
        if call.kwargs or len(call.args) != len(h.params):
            self.fail(f"`{call.func}` takes {len(h.params)} positional argument(s): `{h}`")
        return h

    def helper_call(self, call: Call, n_tensors: int) -> str:
        """A tensor helper's call as a step; returns the variable holding its result.
        ``n_tensors``: how many tensors the caller takes from it (0: a result that is not a
        tensor, passed on to another helper)."""
        h = self.helper(call, HelperRole.TENSOR)
        tensors = all(r.kind is Kind.TENSOR for r in h.returns)
        if n_tensors and not tensors:
            self.fail(f"`{call.func}` gives {', '.join(str(r) for r in h.returns)}, not a tensor")
        if n_tensors > len(h.returns):
            self.fail(f"`{call.func}` gives {len(h.returns)} tensor(s); index {n_tensors - 1} is out of range")
        args = [self.helper_arg(call, name, types, a) for (name, types), a in zip(h.params, call.args)]
        var = self.new_var()
        ret = cpp.cpp_type(h.returns[0]) if len(h.returns) == 1 else F.tensor_array(len(h.returns))
        self.steps.append(HelperStep(var, ret, F.helper(h.name, args)))
        return var

    def helper_arg(self, call: Call, param: str, types: tuple[Type, ...], e: Expr) -> str:
        """The C++ expression of argument ``param`` of a helper call, checked against the
        types the helper takes there."""
        expected = " or ".join(str(t) for t in types)
        where = f"argument `{param}` of `{call.func}` takes {expected}"
        kinds = {t.kind for t in types}
        if isinstance(e, Literal):
            v = e.value
            if v is None and any(t.optional or t.kind is Kind.AXES for t in types):
                return F.NULLOPT
            if isinstance(v, str) and Kind.OP in kinds:
                # The helper picks the op's version (or another op) by the opset it targets.
                if opsets.first_opset(v) is None:
                    self.fail(f"{where}; `{v}` is not an ONNX operator")
                return F.cpp_string(v)
            if isinstance(v, str) and Kind.STR in kinds:
                return F.string_value(v)
            if type(v) is bool and Kind.BOOL in kinds:
                return F.literal_value(v)
            if type(v) is int and kinds & {Kind.INT, Kind.SYMINT}:
                return F.literal_value(v)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and Kind.FLOAT in kinds:
                return F.literal_value(float(v))
            if type(v) in (int, float) and Kind.SCALAR in kinds:
                return F.scalar_value(F.literal_value(v))
            if isinstance(v, tuple) and all(type(x) is int for x in v) and Kind.INT_LIST in kinds:
                return F.int_vector([F.literal_value(x) for x in v])
            if isinstance(v, tuple) and all(type(x) is int for x in v) and Kind.SYMINT_LIST in kinds:
                return F.symint_list([F.literal_value(x) for x in v])
            self.fail(f"{where}; `{e}` does not fit")
        if isinstance(e, Name):
            a = self.arg(e.id)
            if any(_fits(t, a.type) for t in types):
                return a.name
            if a.optional and any(_fits(t, Type(a.kind)) for t in types):
                return self.present(a)  # the rule's guard must prove it present
            self.fail(f"{where}; `{e.id}` is a {a.type}")
        if isinstance(e, Call) and not e.is_onnx and e.func in HELPERS:
            h = HELPERS[e.func]
            if h.role is HelperRole.ATTRIBUTE and Kind.INT_LIST in kinds:
                return self.attribute_helper(e)
            if h.role is HelperRole.TENSOR and len(h.returns) == 1 and h.returns[0].kind is not Kind.TENSOR:
                if not any(_fits(t, h.returns[0]) for t in types):
                    self.fail(f"{where}; `{e.func}` gives {h.returns[0]}")
                return self.helper_call(e, n_tensors=0)
        if Kind.TENSOR not in kinds:
            self.fail(f"{where}; `{e}` is not one")
        return self.value(e)

    def attribute_helper(self, e: Call) -> str:
        h = self.helper(e, HelperRole.ATTRIBUTE)
        return F.attribute_helper(h.name, [self.helper_arg(e, n, types, a) for (n, types), a in zip(h.params, e.args)])

    def new_var(self) -> str:
        var = f"v{self.counter}"
        self.counter += 1
        return var

    def op_call(self, call: Call, min_outputs: int, like_hint: str | None = None) -> str:
        """``like_hint``: a tensor of the enclosing call that constants of this call may take
        their element type from when the call has no tensor input of its own
        (``Add(self, Mul(other, alpha))`` with Scalar ``other`` and ``alpha``)."""
        schemas = self.onnx_schemas(call.func)
        schema = schemas[0]
        formals = schema.inputs
        for sch in schemas:
            if not sch.min_input <= len(call.args) <= sch.max_input:
                self.fail(
                    f"ONNX `{call.func}` (opset {sch.since_version}) takes {sch.min_input}..{sch.max_input} inputs "
                    f"({', '.join(i.name for i in sch.inputs)}), got {len(call.args)}"
                    + ("; split the rule with `since:`" if sch is not schema else "")
                )
        inputs: list[str | None] = []
        tensors: dict[int, str] = {}  # input position -> C++ expression of a tensor value
        pending: list[tuple[int, Expr]] = []  # literals/scalars typed after their siblings
        spread = ""
        for i, a in enumerate(call.args):
            formal = formals[min(i, len(formals) - 1)]
            if isinstance(a, (Call, Item)) or (isinstance(a, Name) and self.arg(a.id).kind.is_tensor):
                if isinstance(a, Name) and self.arg(a.id).kind in (Kind.TENSOR_LIST, Kind.OPTIONAL_TENSOR_LIST):
                    if len(call.args) != 1 or formal.option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
                        self.fail(f"a tensor list (`{a.id}`) can only be the sole, variadic input of an op")
                    spread = self.arg(a.id).name
                    continue
                tensor = self.value(a, next(iter(tensors.values()), like_hint))
                inputs.append(tensor)
                tensors[i] = tensor
            else:
                inputs.append(None)
                pending.append((i, a))
        for i, a in pending:
            inputs[i] = self.constant_input(call, formals, tensors, i, a, like_hint)
        attrs = [self.attribute(call.func, schemas, k, v) for k, v in call.kwargs]
        n_out = max(min_outputs, 1)
        if (
            n_out > len(schema.outputs)
            and schema.outputs[-1].option != onnx.defs.OpSchema.FormalParameterOption.Variadic
        ):
            self.fail(f"ONNX `{call.func}` has {len(schema.outputs)} outputs; index {n_out - 1} is out of range")
        var = self.new_var()
        self.steps.append(Step(var, call.func, [i for i in inputs if i is not None], attrs, n_out, spread))
        return var

    def constant_input(
        self, call: Call, formals, tensors: dict[int, str], i: int, a: Expr, like_hint: str | None
    ) -> str:
        """A literal or non-tensor argument at an ONNX input becomes a constant whose element
        type follows ONNX's type constraints: a fixed type (``tensor(int64)``) as written, a type
        parameter shared with a tensor sibling like that sibling."""
        formal = formals[min(i, len(formals) - 1)]
        fixed = cpp.scalar_type(formal.type_str)
        like = None
        if fixed is None:
            shared = [t for j, t in tensors.items() if formals[min(j, len(formals) - 1)].type_str == formal.type_str]
            like = shared[0] if shared else next(iter(tensors.values()), like_hint)
        if fixed is None and like is None:
            self.fail(
                f"cannot tell the element type of constant input {i} (`{a}`) of `{call.func}`: "
                f"give it a tensor sibling or use Cast"
            )
        if isinstance(a, Literal):
            v = a.value
            if isinstance(v, tuple):
                items = [F.literal_value(x) for x in v]
                return F.list_of(items, fixed) if fixed else F.list_like(items, like)  # type: ignore[arg-type]
            if isinstance(v, (bool, int, float)):
                return F.scalar_of(F.literal_value(v), fixed) if fixed else F.scalar_like(F.literal_value(v), like)  # type: ignore[arg-type]
            self.fail(f"literal `{a}` cannot be an input of `{call.func}`")
        if isinstance(a, Name):
            arg = self.arg(a.id)
            if arg.kind in (Kind.INT_LIST, Kind.SYMINT_LIST):
                if fixed not in (None, cpp.INT64):
                    self.fail(f"`{a.id}` is an int list but input {i} of `{call.func}` is {formal.type_str}")
                return F.ints_input(arg.name)
            if arg.kind in (Kind.SCALAR, Kind.INT, Kind.FLOAT, Kind.BOOL):
                v = self.present(arg)
                return F.scalar_of(v, fixed) if fixed else F.scalar_like(v, like)  # type: ignore[arg-type]
            self.fail(f"`{a.id}` ({arg.type}) cannot be an input of `{call.func}`")
        self.fail(f"`{a}` cannot be an input of `{call.func}`")

    def present(self, a: cpp.CppArg) -> str:
        """The C++ expression of a non-tensor argument's value; an optional one must be proved
        present by the rule's guard."""
        if not a.optional:
            return a.name
        if a.schema_name not in self.nonnull:
            self.fail(f"`{a.schema_name}` is optional; guard the rule with `when: {a.schema_name} is not None`")
        return F.deref(a.name)

    # -- attributes ----------------------------------------------------------------------------

    def attribute(self, op: str, schemas: list[onnx.defs.OpSchema], name: str, e: Expr) -> str:
        for schema in schemas:
            if name not in schema.attributes:
                split = "; split the rule with `since:`" if schema is not schemas[0] else ""
                self.fail(
                    f"ONNX `{op}` (opset {schema.since_version}) has no attribute `{name}`; "
                    f"it has: {', '.join(sorted(schema.attributes)) or 'none'}{split}"
                )
        t = schemas[0].attributes[name].type
        where = f"attribute `{name}` of `{op}`"
        if isinstance(e, Literal):
            v = e.value
            if t == AttrType.INT and isinstance(v, int):
                return F.attr("i", name, F.literal_value(int(v)))
            if t == AttrType.FLOAT and isinstance(v, (int, float)) and not isinstance(v, bool):
                return F.attr("f", name, F.literal_value(float(v)))
            if t == AttrType.STRING and isinstance(v, str):
                return F.attr("s", name, F.string_value(v))
            if t == AttrType.INTS and isinstance(v, tuple) and all(type(x) is int for x in v):
                return F.attr("ints", name, F.int_vector([F.literal_value(x) for x in v]))
            if t == AttrType.FLOATS and isinstance(v, tuple):
                return F.attr("floats", name, F.float_vector([F.literal_value(float(x)) for x in v]))
            self.fail(f"{where} is {_attr_type_name(t)}; `{e}` does not fit")
        if isinstance(e, Call) and not e.is_onnx:
            helper = self.attribute_helper(e)  # every attribute helper gives an int list
            if t != AttrType.INTS:
                self.fail(f"{where} is {_attr_type_name(t)}; `{e.func}` gives {_attr_type_name(AttrType.INTS)}")
            return F.attr("ints", name, helper)
        if isinstance(e, Name):
            a = self.arg(e.id)
            k = a.kind
            v = self.present(a)
            self.needs_static(a)
            if t == AttrType.INT and k is Kind.SCALAR_TYPE:
                return F.attr_dtype(name, v)
            if t == AttrType.INT and k in (Kind.INT, Kind.BOOL):
                return F.attr("i", name, v)
            if t == AttrType.INT and k is Kind.SYMINT:
                return F.attr("i", name, F.static_int(v))
            if t == AttrType.FLOAT and k in (Kind.FLOAT, Kind.SCALAR, Kind.INT):
                return F.attr("f", name, v)
            if t == AttrType.STRING and k is Kind.STR:
                return F.attr("s", name, v)
            if t == AttrType.INTS and k is Kind.INT_LIST:
                return F.attr("ints", name, v)
            if t == AttrType.INTS and k is Kind.SYMINT_LIST:
                return F.attr("ints", name, F.static_ints(v))
            if t == AttrType.FLOATS and k is Kind.FLOAT_LIST:
                return F.attr("floats", name, v)
            self.fail(f"{where} is {_attr_type_name(t)}; `{e.id}` is a {a.type}")
        self.fail(f"{where}: `{e}` is neither a literal, an argument nor a helper")


def compile_result(comp: RuleCompiler, e: Expr, n_ret: int) -> str:
    if n_ret == 0:
        if not (isinstance(e, Tuple) and not e.items):
            comp.fail("the schema returns nothing; write the rule as `onnx: ()` (the node is dropped)")
        return ""
    if isinstance(e, Call) and not e.is_onnx and n_ret > 1:
        n = len(comp.helper(e, HelperRole.TENSOR).returns)
        if n != n_ret:
            comp.fail(f"the schema returns {n_ret} tensors; `{e.func}` gives {n}")
        return comp.helper_call(e, n_tensors=n)
    if isinstance(e, Tuple):
        if len(e.items) != n_ret:
            comp.fail(f"the schema returns {n_ret} tensors; the rule gives {len(e.items)}")
        return F.braced([comp.value(i) for i in e.items])
    if n_ret != 1:
        comp.fail(f"the schema returns {n_ret} values; write the rule's result as a tuple `(a, b)`")
    return comp.value(e)
