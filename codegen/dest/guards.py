"""Compiles a rule's `when:` guard, a boolean Python expression over the schema's arguments, to
a C++ condition over the converter's parameters."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import NoReturn

from ..api import cpp
from ..api import fragments as F
from ..model import _COMPARE, Kind, Rule, Type


class GuardCompiler:
    """``arg`` looks an argument up by its schema name (failing on unknown ones) and ``fail``
    reports an error at the rule."""

    def __init__(self, arg: Callable[[str], cpp.CppArg], fail: Callable[[str], NoReturn]):
        self.arg = arg
        self.fail = fail

    def guard(self, node: ast.expr) -> str:
        if isinstance(node, ast.BoolOp):
            parts = [self.guard(v) for v in node.values]
            return F.group(F.all_of(parts) if isinstance(node.op, ast.And) else F.any_of(parts))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return F.negation(self.guard(node.operand))
        if isinstance(node, ast.Compare):
            parts, left = [], node.left
            for op, right in zip(node.ops, node.comparators):
                if isinstance(op, (ast.Is, ast.IsNot)):
                    if not (isinstance(right, ast.Constant) and right.value is None and isinstance(left, ast.Name)):
                        self.fail("`is` only compares an argument with None: `bias is None`")
                    a = self.arg(left.id)
                    if not a.optional:
                        self.fail(f"`{left.id}` is not optional; it is never None")
                    parts.append(F.is_none(a.name, negate=isinstance(op, ast.IsNot)))
                elif self.is_dtype_call(left) or self.is_dtype_call(right):
                    parts.append(self.dtype_compare(left, op, right))
                else:
                    parts.append(F.comparison(self.guard_value(left), _COMPARE[type(op)], self.guard_value(right)))
                left = right
            return F.group(F.all_of(parts))
        if isinstance(node, ast.Call) and node.func.id == "is_floating":  # type: ignore[attr-defined]
            return F.is_floating(self.tensor_of(node, "is_floating"))
        if isinstance(node, ast.Name):
            a = self.arg(node.id)
            if a.type != Type(Kind.BOOL):
                self.fail(f"`{node.id}` is a {a.type}; compare it explicitly in `when:`")
            return a.name
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return F.literal_value(node.value)
        self.fail(f"`{ast.unparse(node)}` is not a condition")

    def tensor_of(self, call: ast.Call, helper: str) -> str:
        """The C++ name of the tensor argument of a dtype predicate in a guard."""
        target = call.args[0]
        if not isinstance(target, ast.Name):
            self.fail(f"{helper}() takes an argument name")
        a = self.arg(target.id)
        if a.type != Type(Kind.TENSOR):
            self.fail(f"{helper}() takes a tensor argument; `{target.id}` is a {a.type}")
        return a.name

    @staticmethod
    def is_dtype_call(node: ast.expr) -> bool:
        return isinstance(node, ast.Call) and node.func.id == "dtype"  # type: ignore[attr-defined]

    def dtype_compare(self, left: ast.expr, op: ast.cmpop, right: ast.expr) -> str:
        """``dtype(x) == "float16"``: a tensor's dtype against a torch dtype name."""
        call, name = (left, right) if self.is_dtype_call(left) else (right, left)
        if not isinstance(op, (ast.Eq, ast.NotEq)) or self.is_dtype_call(name):
            self.fail('dtype(x) is compared with == or != to a dtype name: `dtype(self) == "bool"`')
        if not (isinstance(name, ast.Constant) and name.value in cpp.TORCH_DTYPE_TO_SCALAR_TYPE):
            self.fail(f"`{ast.unparse(name)}` is not a dtype name; names: {', '.join(cpp.TORCH_DTYPE_TO_SCALAR_TYPE)}")
        enumerator = cpp.TORCH_DTYPE_TO_SCALAR_TYPE[name.value]
        return F.comparison(F.dtype_of(self.tensor_of(call, "dtype")), _COMPARE[type(op)], enumerator)  # type: ignore[arg-type]

    def guard_value(self, node: ast.expr) -> str:
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str):
                return F.cpp_string(v)
            if isinstance(v, (bool, int, float)):
                return F.literal_value(v)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return F.minus(self.guard_value(node.operand))
        if isinstance(node, ast.List):
            return F.int_vector([self.guard_value(e) for e in node.elts])
        if isinstance(node, ast.Call):
            if node.func.id in ("is_floating", "dtype"):  # type: ignore[attr-defined]
                self.fail(f"{node.func.id}() is a condition of its own or compared to a dtype name, not a number")  # type: ignore[attr-defined]
            target = node.args[0]
            if not isinstance(target, ast.Name):
                self.fail("rank() and len() take an argument name")
            a = self.arg(target.id)
            if node.func.id == "rank":  # type: ignore[attr-defined]
                if a.type != Type(Kind.TENSOR):
                    self.fail(f"rank() takes a tensor argument; `{target.id}` is a {a.type}")
                return F.rank(a.name)
            if not a.kind.is_list or a.optional:
                self.fail(f"len() takes a list argument; `{target.id}` is a {a.type}")
            return F.length(a.name)
        if isinstance(node, ast.Name):
            a = self.arg(node.id)
            if a.optional or a.kind.is_tensor:
                self.fail(f"`{node.id}` ({a.type}) cannot be compared in `when:`")
            # A number the graph computes compares unequal to every constant (types.h), so a guard
            # on it picks the rule for the general case: no need to know it when exporting.
            return a.name
        self.fail(f"`{ast.unparse(node)}` cannot be used in `when:`")


def proved_present(rule: Rule) -> set[str]:
    """Arguments a guard requires to be present: the `x is not None` terms of its top-level
    `and`."""
    if rule.when is None:
        return set()
    tree = rule.when.tree
    terms = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    return {
        t.left.id
        for t in terms
        if isinstance(t, ast.Compare)
        and len(t.ops) == 1
        and isinstance(t.ops[0], ast.IsNot)
        and isinstance(t.left, ast.Name)
        and isinstance(t.comparators[0], ast.Constant)
        and t.comparators[0].value is None
    }
