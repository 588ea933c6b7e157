"""The mapping spec as frozen dataclasses.

Every class parses from the text a contributor writes and prints back to it (``parse(str(x)) ==
x``), in the manner of torchgen's ``FunctionSchema.parse``. Expressions are Python expressions
read with ``ast`` (never ``eval``): a capitalised call is an ONNX op, positional arguments are
its inputs, keyword arguments its attributes, bare names are the ATen schema's arguments and a
lowercase call is one of the helpers in ``HELPERS``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Union


class SpecError(Exception):
    """A mapping spec that cannot be accepted; the message carries ``file:line``."""


# Lowercase calls a spec may use, with their arity. Each has a C++ implementation named
# ``helper_<name>`` in cpp/include/fastonnx/helpers.h; what they return is spelled in codegen/api.
HELPERS = {
    "twice": 1,  # ONNX pads from torch's symmetric per-dimension padding: [a, b] -> [a, b, a, b]
    "conv_pads": 3,  # conv_pads(padding, weight, dilation): pads for padding="same"/"valid"
    # ConvTranspose pads and output_padding with torch's output_padding folded into the end pads
    # where it fits (onnxruntime rejects output_padding >= stride, torch does not).
    "transpose_pads": 2,  # transpose_pads(padding, output_padding)
    "transpose_output_padding": 2,  # transpose_output_padding(padding, output_padding)
    "rank": 1,  # static rank of a tensor (guards only)
    "len": 1,  # length of a list argument (guards only)
    "is_floating": 1,  # whether a tensor's dtype is a floating type (guards only)
    "dtype": 1,  # a tensor's dtype, compared with a torch dtype name: dtype(self) == "bool" (guards only)
}
# Helpers that only `when:` guards may call.
GUARD_HELPERS = ("rank", "len", "is_floating", "dtype")


# --------------------------------------------------------------------------------------------
# Expressions


@dataclass(frozen=True)
class Name:
    id: str

    def __str__(self) -> str:
        return self.id


@dataclass(frozen=True)
class Literal:
    value: Union[bool, int, float, str, None, tuple]

    def __post_init__(self) -> None:
        if isinstance(self.value, list):
            raise SpecError("list literals must be tuples internally")

    def __str__(self) -> str:
        if isinstance(self.value, tuple):
            return "[" + ", ".join(repr(v) for v in self.value) + "]"
        return repr(self.value)


@dataclass(frozen=True)
class Call:
    """An ONNX op (capitalised) or a helper (lowercase)."""

    func: str
    args: tuple["Expr", ...] = ()
    kwargs: tuple[tuple[str, "Expr"], ...] = ()

    @property
    def is_onnx(self) -> bool:
        return self.func[:1].isupper()

    def __str__(self) -> str:
        parts = [str(a) for a in self.args] + [f"{k}={v}" for k, v in self.kwargs]
        return f"{self.func}({', '.join(parts)})"


@dataclass(frozen=True)
class Item:
    """``Op(...)[i]``: output ``i`` of a multi-output ONNX op."""

    base: Call
    index: int

    def __str__(self) -> str:
        return f"{self.base}[{self.index}]"


@dataclass(frozen=True)
class Tuple:
    """The outputs of an op whose schema returns several tensors."""

    items: tuple["Expr", ...]

    def __str__(self) -> str:
        return "(" + ", ".join(str(i) for i in self.items) + ")"


Expr = Union[Name, Literal, Call, Item, Tuple]


def _literal(node: ast.AST) -> Literal | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float, str, type(None))):
        return Literal(node.value)
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
        if not (isinstance(base, Call) and base.is_onnx and idx is not None and type(idx.value) is int):
            raise SpecError("subscripts select an output of an ONNX op: `TopK(...)[1]`")
        return Item(base, idx.value)  # type: ignore[arg-type]
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
                ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.Compare, ast.Name,
                ast.Constant, ast.Load, ast.Call, ast.List, ast.Is, ast.IsNot, *_COMPARE,
            )
            if not isinstance(node, allowed):
                raise SpecError(f"`when:` may not use {type(node).__name__}: `{self.text}`")
            if isinstance(node, ast.Call) and not (
                isinstance(node.func, ast.Name) and node.func.id in GUARD_HELPERS and len(node.args) == 1
            ):
                raise SpecError(f"`when:` may only call {', '.join(f'{h}(x)' for h in GUARD_HELPERS)}: `{self.text}`")
        return tree

    def names(self) -> set[str]:
        return {
            n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name) and n.id not in GUARD_HELPERS
        }

    def __str__(self) -> str:
        return self.text


# --------------------------------------------------------------------------------------------
# Rules and op specs


@dataclass(frozen=True)
class Rule:
    """One way to convert an overload. Rules are tried in order; the first whose ``since`` is
    at most the target opset and whose guard holds is used."""

    since: int | None = None
    when: Guard | None = None
    onnx: Expr | None = None
    manual: bool = False
    promote: tuple[str, ...] = ()
    # Arguments a manual body needs as numbers known when exporting (it reads them with
    # Scalar::to_double or Builder::static_int). A node whose such argument the graph computes is
    # decomposed instead of converted. An `onnx:` rule's are derived: those it uses as attributes.
    static: tuple[str, ...] = ()
    line: int = field(default=0, compare=False)  # where the rule is written, for errors

    def __post_init__(self) -> None:
        if (self.onnx is None) == (not self.manual):
            raise SpecError("a rule has exactly one of `onnx:` and `manual: true`")
        if self.manual and self.promote:
            raise SpecError("`promote:` is for `onnx:` rules; a manual body casts what it needs")
        if self.static and not self.manual:
            raise SpecError("`static:` is for manual rules; an `onnx:` rule's are derived from where it uses them")

    def to_yaml(self) -> dict:
        out: dict = {}
        if self.since is not None:
            out["since"] = self.since
        if self.when is not None:
            out["when"] = str(self.when)
        if self.promote:
            out["promote"] = list(self.promote)
        if self.manual:
            out["manual"] = True
            if self.static:
                out["static"] = list(self.static)
        else:
            out["onnx"] = str(self.onnx)
        return out

    @staticmethod
    def from_yaml(d: dict) -> "Rule":
        return Rule(
            since=d.get("since"),
            when=Guard(d["when"]) if "when" in d else None,
            onnx=parse_expr(d["onnx"]) if "onnx" in d else None,
            manual=bool(d.get("manual", False)),
            promote=tuple(d.get("promote", ())),
            static=tuple(d.get("static", ())),
        )


@dataclass(frozen=True)
class OpSpec:
    """The spec of one ATen overload: its rules, or ``same_as`` another mapped overload whose
    schema it shares (in-place variants such as ``relu_``)."""

    overload: str
    rules: tuple[Rule, ...] = ()
    same_as: str | None = None
    file: str = ""
    line: int = 0

    def __post_init__(self) -> None:
        if bool(self.rules) == bool(self.same_as):
            raise SpecError(f"{self.where}: `{self.overload}` needs rules or `same_as:`, not both")

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def to_yaml(self):
        if self.same_as:
            return {"same_as": self.same_as}
        rules = [r.to_yaml() for r in self.rules]
        return rules[0] if len(rules) == 1 else rules
