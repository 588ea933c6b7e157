"""The mapping spec as frozen dataclasses.

Every class parses from the text a contributor writes and prints back to it (``parse(str(x)) ==
x``), in the manner of torchgen's ``FunctionSchema.parse``. Expressions are Python expressions
read with ``ast`` (never ``eval``): a capitalised call is an ONNX op, positional arguments are
its inputs, keyword arguments its attributes, bare names are the ATen schema's arguments and a
lowercase call is one of the helpers in ``HELPERS``.
"""

from __future__ import annotations

import ast
import enum
import re
from dataclasses import dataclass, field
from typing import NoReturn

from .helpers import SIGNATURES


class SpecError(Exception):
    """A mapping spec that cannot be accepted; the message carries ``file:line``."""


class Kind(enum.Enum):
    """What a schema argument, or an operand of a helper, is. ``Tensor?[]`` is a list whose items
    may be absent, not an absent list: a kind of its own."""

    TENSOR = "Tensor"
    INT = "int"
    SYMINT = "SymInt"
    FLOAT = "float"
    BOOL = "bool"
    STR = "str"
    SCALAR = "Scalar"
    SCALAR_TYPE = "ScalarType"
    TENSOR_LIST = "Tensor[]"
    OPTIONAL_TENSOR_LIST = "Tensor?[]"
    INT_LIST = "int[]"
    SYMINT_LIST = "SymInt[]"
    FLOAT_LIST = "float[]"
    BOOL_LIST = "bool[]"
    IGNORED = "ignored"  # where or how torch stores a tensor: no meaning in ONNX
    # Helper operands only:
    OP = "op"  # the name of an ONNX op, a string literal checked against onnx.defs
    AXES = "axes"  # torch dims as ONNX axes; absent means every axis

    @property
    def is_list(self) -> bool:
        return self.value.endswith("[]")

    @property
    def is_tensor(self) -> bool:
        return self in (Kind.TENSOR, Kind.TENSOR_LIST, Kind.OPTIONAL_TENSOR_LIST)


@dataclass(frozen=True)
class Type:
    """A kind, possibly absent (``int?``); printed and parsed as the schema writes it."""

    kind: Kind
    optional: bool = False

    @staticmethod
    def parse(text: str) -> Type:
        optional = text.endswith("?") and text != "Tensor?[]"
        kind = text[:-1] if optional else text
        try:
            t = Type(Kind(kind), optional)
        except ValueError:
            raise SpecError(f"`{text}` is not a type; types: {', '.join(k.value for k in Kind)}") from None
        assert str(t) == text, (t, text)
        return t

    def accepts(self, other: Type) -> bool:
        """Whether a value of type ``other`` can be passed where this type is expected."""
        return self.kind is other.kind and (self.optional or not other.optional)

    def __str__(self) -> str:
        return self.kind.value + ("?" if self.optional else "")


class HelperRole(enum.Enum):
    ATTRIBUTE = "attribute"  # gives an attribute's value; C++ `helper_<name>`
    GUARD = "guard"  # reads what the exporter knows, in `when:` only
    TENSOR = "tensor"  # builds nodes; C++ `<name>`


@dataclass(frozen=True)
class Helper:
    """A lowercase call a spec may make, with what it takes and gives, written as a schema:
    ``compare(op op, Tensor self, Tensor|Scalar other) -> Tensor``. A parameter may accept
    several types (the C++ function is overloaded for them). The C++ function of the same name
    (``helper_<name>`` for an attribute helper) is declared in cpp/include/fastonnx/helpers.h."""

    name: str
    params: tuple[tuple[str, tuple[Type, ...]], ...]
    returns: tuple[Type, ...]  # several: a tuple of tensors, selected with `[i]`
    role: HelperRole = HelperRole.TENSOR

    @staticmethod
    def parse(text: str, role: HelperRole = HelperRole.TENSOR) -> Helper:
        m = re.fullmatch(r"(\w+)\((.*)\) -> (.+)", text)
        if m is None:
            raise SpecError(f"a helper is written `name(Type arg, ...) -> Type`, not `{text}`")
        name, params_text, returns_text = m.groups()
        params = []
        for p in filter(None, (x.strip() for x in params_text.split(","))):
            types, _, pname = p.rpartition(" ")
            params.append((pname, tuple(Type.parse(t) for t in types.split("|"))))
        returns = tuple(Type.parse(t.strip()) for t in returns_text.strip("()").split(","))
        h = Helper(name, tuple(params), returns, role)
        assert str(h) == text, (str(h), text)
        return h

    @property
    def guard_only(self) -> bool:
        return self.role is HelperRole.GUARD

    def __str__(self) -> str:
        params = ", ".join(f"{'|'.join(str(t) for t in types)} {n}" for n, types in self.params)
        rets = ", ".join(str(r) for r in self.returns)
        return f"{self.name}({params}) -> {rets if len(self.returns) == 1 else '(' + rets + ')'}"


# The lowercase calls a spec may use, read from their signatures in codegen/helpers.py.
HELPERS = {h.name: h for h in (Helper.parse(text, HelperRole(role)) for role, text in SIGNATURES)}
GUARD_HELPERS = tuple(n for n, h in HELPERS.items() if h.guard_only)


# --------------------------------------------------------------------------------------------
# Expressions


@dataclass(frozen=True)
class Name:
    id: str

    def __str__(self) -> str:
        return self.id


@dataclass(frozen=True)
class Literal:
    value: bool | int | float | str | None | tuple

    def __post_init__(self) -> None:
        if isinstance(self.value, list):
            raise SpecError("list literals must be tuples internally")

    def __str__(self) -> str:
        if isinstance(self.value, tuple):
            return "[" + ", ".join(_spell(v) for v in self.value) + "]"
        return _spell(self.value)


def _spell(value) -> str:
    """A literal as a spec writes it: strings in double quotes, as YAML's single-quoted rules
    hold them (`onnx: 'compare("Equal", self, other)'`)."""
    if isinstance(value, str) and value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return repr(value)


@dataclass(frozen=True)
class Call:
    """An ONNX op (capitalised) or a helper (lowercase)."""

    func: str
    args: tuple[Expr, ...] = ()
    kwargs: tuple[tuple[str, Expr], ...] = ()

    @property
    def is_onnx(self) -> bool:
        return self.func[:1].isupper()

    def __str__(self) -> str:
        parts = [str(a) for a in self.args] + [f"{k}={v}" for k, v in self.kwargs]
        return f"{self.func}({', '.join(parts)})"


@dataclass(frozen=True)
class Item:
    """``Op(...)[i]``: output ``i`` of a multi-output ONNX op or helper."""

    base: Call
    index: int

    def __str__(self) -> str:
        return f"{self.base}[{self.index}]"


@dataclass(frozen=True)
class Tuple:
    """The outputs of an op whose schema returns several tensors."""

    items: tuple[Expr, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(str(i) for i in self.items) + ")"


Expr = Name | Literal | Call | Item | Tuple


# Python spells the special floats as calls (float("inf"), math.inf); a rule spells them as names.
_SPECIAL_FLOATS = {"inf": float("inf"), "nan": float("nan")}


def _literal(node: ast.AST) -> Literal | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float, str, type(None))):
        return Literal(node.value)
    if isinstance(node, ast.Name) and node.id in _SPECIAL_FLOATS:
        return Literal(_SPECIAL_FLOATS[node.id])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal(node.operand)
        if inner is not None and isinstance(inner.value, (int, float)) and not isinstance(inner.value, bool):
            return Literal(-inner.value)
    if isinstance(node, ast.List):
        items = [_literal(e) for e in node.elts]
        if all(i is not None and not isinstance(i.value, tuple) for i in items):
            return Literal(tuple(i.value for i in items))  # type: ignore[union-attr]
    return None


def _expr(node: ast.AST) -> Expr:
    lit = _literal(node)
    if lit is not None:
        return lit
    if isinstance(node, ast.Name):
        return Name(node.id)
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise SpecError("only `Op(...)` and `helper(...)` calls are allowed, not methods")
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise SpecError("*args and **kwargs are not allowed in a spec expression")
        return Call(
            node.func.id,
            tuple(_expr(a) for a in node.args),
            tuple((k.arg, _expr(k.value)) for k in node.keywords),  # type: ignore[misc]
        )
    if isinstance(node, ast.Subscript):
        base = _expr(node.value)
        idx = _literal(node.slice)
        if not (isinstance(base, Call) and idx is not None and type(idx.value) is int):
            raise SpecError("subscripts select an output of an ONNX op or a helper: `TopK(...)[1]`")
        return Item(base, idx.value)
    if isinstance(node, ast.Tuple):
        return Tuple(tuple(_expr(e) for e in node.elts))
    raise SpecError(f"unsupported syntax in a spec expression: {ast.dump(node)[:60]}")


def parse_expr(text: str) -> Expr:
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError) as e:  # ValueError: a null byte, before Python 3.11.4
        raise SpecError(f"expression does not parse: {getattr(e, 'msg', e)} in `{text}`") from None
    return _expr(tree.body)


# --------------------------------------------------------------------------------------------
# Guards (`when:`): a boolean Python expression over the schema's non-tensor arguments.

_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


@dataclass(frozen=True)
class Guard:
    """A `when:` guard, kept as source text plus its validated tree. ``str()`` is the
    normalised source (``ast.unparse``), so a parsed guard prints back to text that re-parses to
    the same guard."""

    text: str

    def __post_init__(self) -> None:
        tree = self.tree  # validates
        object.__setattr__(self, "text", ast.unparse(tree))

    @property
    def tree(self) -> ast.expr:
        try:
            tree = ast.parse(self.text, mode="eval").body
        except (SyntaxError, ValueError) as e:  # ValueError: a null byte, before Python 3.11.4
            raise SpecError(f"`when:` does not parse: {getattr(e, 'msg', e)} in `{self.text}`") from None
        for node in ast.walk(tree):
            allowed = (
                ast.BoolOp,
                ast.And,
                ast.Or,
                ast.UnaryOp,
                ast.Not,
                ast.USub,
                ast.Compare,
                ast.Name,
                ast.Constant,
                ast.Load,
                ast.Call,
                ast.List,
                ast.Is,
                ast.IsNot,
                *_COMPARE,
            )
            if not isinstance(node, allowed):
                raise SpecError(f"`when:` may not use {type(node).__name__}: `{self.text}`")
            if isinstance(node, ast.Call) and not (
                isinstance(node.func, ast.Name) and node.func.id in GUARD_HELPERS and len(node.args) == 1
            ):
                raise SpecError(f"`when:` may only call {', '.join(f'{h}(x)' for h in GUARD_HELPERS)}: `{self.text}`")
        return tree

    def names(self) -> set[str]:
        return {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name) and n.id not in GUARD_HELPERS}

    def __str__(self) -> str:
        return self.text


# --------------------------------------------------------------------------------------------
# Rules and op specs


RULE_KEYS = ("since", "when", "onnx", "manual", "promote", "static", "complex")
# What `complex:` accepts: `parts`, an op that moves elements without computing on them, so a
# complex tensor converts as its real and imaginary parts apart (cpp/src/convert/session.cpp).
COMPLEX_MODES = ("parts",)
LINE_KEYS = ("__line__", "__key_lines__")  # what the loader adds to every mapping


def fail(where: str, msg: str) -> NoReturn:
    raise SpecError(f"{where}: {msg}")


def _names(d: dict, key: str, where: str, example: str) -> tuple[str, ...]:
    value = d.get(key, [])
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        fail(where, f"`{key}:` is a list of argument names, e.g. {example}")
    return tuple(value)


@dataclass(frozen=True)
class Rule:
    """One way to convert an overload. Rules are tried in order; the first whose ``since`` is
    at most the target opset and whose guard holds is used."""

    since: int | None = None
    when: Guard | None = None
    onnx: Expr | None = None
    manual: bool = False
    # The hand-written body a manual rule calls: manual::<body>, shared by every overload whose
    # entry names it; None: the overload's own name.
    body: str | None = None
    promote: tuple[str, ...] = ()
    # Arguments a manual body needs as numbers known when exporting (it reads them with
    # Scalar::to_double or Builder::static_int). A node whose such argument the graph computes is
    # decomposed instead of converted. An `onnx:` rule's are derived: those it uses as attributes.
    static: tuple[str, ...] = ()
    # `parts`: the op moves elements without computing on them (a view, a copy, a gather), so a
    # node with complex tensors converts twice, on the real parts and on the imaginary parts,
    # whatever the body does with axes and shapes. Every rule of an overload says the same.
    complex: str | None = None
    line: int = field(default=0, compare=False)  # where the rule is written, for errors

    def __post_init__(self) -> None:
        if (self.onnx is None) == (not self.manual):
            raise SpecError("a rule has exactly one of `onnx:` and `manual:`")
        if self.body is not None and not (self.manual and self.body.isidentifier()):
            raise SpecError(f"`manual: {self.body}` names a C++ function: an identifier")
        if self.manual and self.promote:
            raise SpecError("`promote:` is for `onnx:` rules; a manual body casts what it needs")
        if self.static and not self.manual:
            raise SpecError("`static:` is for manual rules; an `onnx:` rule's are derived from where it uses them")
        if self.complex is not None and self.complex not in COMPLEX_MODES:
            raise SpecError(f"`complex:` is one of {list(COMPLEX_MODES)}, got {self.complex!r}")

    def to_yaml(self) -> dict:
        out: dict = {}
        if self.since is not None:
            out["since"] = self.since
        if self.when is not None:
            out["when"] = str(self.when)
        if self.promote:
            out["promote"] = list(self.promote)
        if self.manual:
            out["manual"] = self.body or True
            if self.static:
                out["static"] = list(self.static)
        else:
            out["onnx"] = str(self.onnx)
        if self.complex is not None:
            out["complex"] = self.complex
        return out

    @staticmethod
    def from_yaml(d: dict, where: str = "<rule>") -> Rule:
        """Pops the keys a rule accepts, fails on leftovers with the keys it accepts, and checks
        that the rule prints back to what it parsed from (as torchgen's FunctionSchema.parse)."""
        rule = Rule._build(d, where)
        assert Rule._build(rule.to_yaml(), where) == rule, f"{where}: the rule does not round-trip"
        return rule

    @staticmethod
    def _build(d: dict, where: str) -> Rule:
        unknown = sorted(str(k) for k in d if k not in RULE_KEYS and k not in LINE_KEYS)
        if unknown:
            hint = ""
            if any(c in k for k in unknown for c in "()="):
                hint = ' (an expression with commas inside `{...}` must be quoted: onnx: "Op(a, b)")'
            fail(where, f"unknown key(s) {unknown}; a rule accepts {list(RULE_KEYS)}{hint}")
        since = d.get("since")
        if since is not None and type(since) is not int:
            fail(where, f"`since:` must be an opset number, got {since!r}")
        manual = d.get("manual", False)
        if not (type(manual) is bool or isinstance(manual, str)):
            fail(where, f"`manual:` is true or the name of a shared body, got {manual!r}")
        promote = _names(d, "promote", where, "[self, other]")
        static = _names(d, "static", where, "[p]")
        complex_mode = d.get("complex")
        if complex_mode is not None and not isinstance(complex_mode, str):
            fail(where, f"`complex:` is one of {list(COMPLEX_MODES)}, got {complex_mode!r}")
        try:
            return Rule(
                since=since,
                when=Guard(str(d["when"])) if "when" in d else None,
                onnx=parse_expr(str(d["onnx"])) if "onnx" in d else None,
                manual=bool(manual),
                body=manual if isinstance(manual, str) else None,
                promote=promote,
                static=static,
                complex=complex_mode,
                line=d.get("__line__", 0),
            )
        except SpecError as e:
            fail(where, str(e))


@dataclass(frozen=True)
class OpSpec:
    """The spec of one ATen overload: its rules, or ``same_as`` another mapped overload whose
    schema it shares (in-place variants such as ``relu_``). Overloads listed together in one
    entry (``eq.Tensor, eq.Scalar: ...``) each get a spec with the same rules."""

    overload: str
    rules: tuple[Rule, ...] = ()
    same_as: str | None = None
    file: str = ""
    line: int = 0

    def __post_init__(self) -> None:
        if bool(self.rules) == bool(self.same_as):
            fail(self.where, f"`{self.overload}` needs rules or `same_as:`, not both")

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def to_yaml(self):
        if self.same_as:
            return {"same_as": self.same_as}
        rules = [r.to_yaml() for r in self.rules]
        return rules[0] if len(rules) == 1 else rules
