"""From a spec to a Converter: the overload's schema and signature, each rule compiled (its guard,
and a manual body or the Builder calls of its expression), ``same_as`` aliases, the in-place twins
of functional overloads, and the manual bodies to declare."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import opsets
from ..api import cpp
from ..api import fragments as F
from ..load import OWN_NAMESPACE, NativeFunctions
from ..model import Kind, OpSpec, Rule, SpecError
from .converters import Converter, RuleCode, RuleCompiler, compile_result, fail_spec
from .guards import GuardCompiler, proved_present


def compile_spec(spec: OpSpec, nf: NativeFunctions, converters: dict[str, Converter]) -> Converter:
    schema, args, ret, n_ret = _signature(spec, nf)
    fn = cpp.function_name(spec.overload)
    family = Path(spec.file).stem
    if spec.same_as:
        return _alias(spec, converters, schema, args, ret, n_ret, family)
    rules: list[RuleCode] = []
    static: set[str] = set()
    for rule, (lo, hi) in zip(spec.rules, _rule_ranges(spec.rules)):
        comp = RuleCompiler(spec, rule, args, lo, hi, proved_present(rule))
        code = _compile_rule(comp, spec, rule, fn, n_ret)
        if code.manual and any(r.manual for r in rules):
            fail_spec(spec, "only one rule of an overload can be manual; put the cases in its body", rule)
        rules.append(code)
        static |= comp.static
    if len({r.complex for r in spec.rules}) > 1:
        fail_spec(spec, "every rule of an overload says the same `complex:` (it decides how a node is converted)")
    only_manual = len(rules) == 1 and rules[0].manual and not rules[0].condition
    callee = F.manual_name(rules[0].manual) if only_manual else F.converter_name(fn)
    return Converter(
        spec.overload,
        fn,
        ret,
        n_ret,
        args,
        rules,
        str(schema),
        family,
        callee=callee,
        where=spec.where,
        static_args=tuple(a.schema_name for a in args if a.schema_name in static),
        complex_parts=spec.rules[0].complex == "parts",
    )


def _signature(spec: OpSpec, nf: NativeFunctions) -> tuple[object, list[cpp.CppArg], str, int]:
    """The overload's ATen schema and its C++ parameters and return type; a key that names no
    overload fails with the overloads of that name."""
    if spec.overload not in nf.funcs:
        namespace, qualified, _ = spec.overload.rpartition("::")
        if qualified and namespace != OWN_NAMESPACE:
            fail_spec(
                spec,
                f"the ops mapped here are ATen's, unqualified as {nf.path.name} writes them, and fastonnx's "
                f"own, `{OWN_NAMESPACE}::name` as {nf.own_path.name} declares them; another library's op "
                "is converted in Python (fastonnx.register_converter)",
            )
        existing = nf.overloads_of(spec.overload)
        hint = (
            f"overloads of `{spec.overload.split('.')[0]}`: {', '.join(existing)}"
            if existing
            else ("no overload of that name exists")
        )
        fail_spec(spec, f"not in {nf.file_of(spec.overload)}; {hint}")
    schema = nf.schema(spec.overload)
    try:
        args = cpp.cpp_args(schema)
        ret, n_ret = cpp.returns_type(schema)
    except SpecError as e:
        fail_spec(spec, str(e))
    return schema, args, ret, n_ret


def _alias(
    spec: OpSpec,
    converters: dict[str, Converter],
    schema: object,
    args: list[cpp.CppArg],
    ret: str,
    n_ret: int,
    family: str,
) -> Converter:
    """``same_as:``: the overload calls the converter of another with the same signature."""
    target = converters.get(spec.same_as or "")
    if target is None:
        fail_spec(spec, f"`same_as: {spec.same_as}` names an overload that is not mapped (or is mapped later)")
    if not _same_signature(target, args, ret):
        fail_spec(spec, f"`same_as: {spec.same_as}` needs the same arguments and returns as that schema")
    return Converter(
        spec.overload,
        cpp.function_name(spec.overload),
        ret,
        n_ret,
        args,
        [],
        str(schema),
        family,
        callee=target.callee,
        where=spec.where,
        static_args=target.static_args,
        complex_parts=target.complex_parts,
    )


def _compile_rule(comp: RuleCompiler, spec: OpSpec, rule: Rule, fn: str, n_ret: int) -> RuleCode:
    """One rule: its guard (opset, `when:`), and a manual body's name or the Builder calls of its
    expression."""
    if rule.since is not None and not opsets.MIN_OPSET <= rule.since <= opsets.MAX_OPSET:
        fail_spec(
            spec,
            f"`since: {rule.since}` is outside the supported opsets {opsets.MIN_OPSET}..{opsets.MAX_OPSET}",
            rule,
        )
    for name in rule.static:
        a = comp.arg(name)
        if a.kind not in cpp.COMPUTABLE_KINDS:
            fail_spec(
                spec,
                f"`static:` lists arguments the graph may compute "
                f"({', '.join(k.value for k in cpp.COMPUTABLE_KINDS)}); "
                f"`{name}` is a {a.type}, always known when exporting",
                rule,
            )
        comp.static.add(name)
    conds = []
    if rule.since is not None and rule.since > opsets.MIN_OPSET:
        conds.append(F.opset_at_least(rule.since))
    if rule.when is not None:
        conds.append(GuardCompiler(comp.arg, comp.fail).guard(rule.when.tree))
    code = RuleCode(condition=F.all_of(conds), description=_describe(rule, fn))
    if rule.manual:
        code.manual = rule.body or fn
        return code
    for p in rule.promote:
        a = comp.arg(p)
        if a.kind not in (Kind.TENSOR, Kind.TENSOR_LIST):
            fail_spec(spec, f"`promote:` lists tensors; `{p}` is a {a.type}", rule)
        code.promote.append((a.name, a.kind is Kind.TENSOR_LIST))
    code.result = compile_result(comp, rule.onnx, n_ret)  # type: ignore[arg-type]
    code.steps = comp.steps
    return code


def _describe(rule: Rule, fn: str) -> str:
    """The rule as its spec says it, for a comment in the generated code; a manual rule by the
    body it calls."""
    said = rule.to_yaml()
    if rule.manual:
        said["manual"] = rule.body or fn
    return ", ".join(f"{k}: [{', '.join(v)}]" if isinstance(v, list) else f"{k}: {v}" for k, v in said.items())


def _rule_ranges(rules: tuple[Rule, ...]) -> list[tuple[int, int]]:
    """The opsets each rule can be chosen for: from its ``since`` up to just below the ``since``
    of the first unguarded rule before it that takes over."""
    out = []
    for i, r in enumerate(rules):
        lo = r.since or opsets.MIN_OPSET
        hi = opsets.MAX_OPSET
        for earlier in rules[:i]:
            s = earlier.since or opsets.MIN_OPSET
            if earlier.when is None and s > lo:
                hi = min(hi, s - 1)
        out.append((lo, hi))
    return out


def _same_signature(c: Converter, args: list[cpp.CppArg], ret: str) -> bool:
    return [(a.schema_name, a.type) for a in c.args] == [(a.schema_name, a.type) for a in args] and c.ret == ret


def derive_inplace(overload: str, functional: Converter, nf: NativeFunctions) -> Converter | None:
    """An in-place overload converts as its functional twin (the lowering checks that nothing
    aliases the mutated tensor, and functionalizes the graph when something does), provided the
    two schemas take the same arguments."""
    schema = nf.schema(overload)
    try:
        args = cpp.cpp_args(schema)
        ret, n_ret = cpp.returns_type(schema)
    except SpecError:
        return None
    if not _same_signature(functional, args, ret):
        return None
    where = f"in-place twin of {functional.overload} ({functional.where})"
    return Converter(
        overload,
        cpp.function_name(overload),
        ret,
        n_ret,
        args,
        [],
        str(schema),
        functional.family,
        callee=functional.callee,
        where=where,
        static_args=functional.static_args,
        complex_parts=functional.complex_parts,
    )


@dataclass
class ManualBody:
    """A hand-written body to declare, once per C++ signature, with the schemas of the overloads
    whose rules call it."""

    ret: str
    name: str  # in namespace manual
    params: list[cpp.CppArg]
    schemas: list[str]


def manual_bodies(converters: list[Converter]) -> list[ManualBody]:
    out: dict[tuple, ManualBody] = {}
    for c in converters:
        for r in c.rules:
            if r.manual:
                key = (c.ret, r.manual, tuple(a.cpp_type for a in c.params))
                out.setdefault(key, ManualBody(c.ret, r.manual, c.params, [])).schemas.append(c.schema)
    return list(out.values())
