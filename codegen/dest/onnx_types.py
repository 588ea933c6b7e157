"""The type constraints of every standard ONNX op at the supported opsets, from ``onnx.defs``,
as data for the Builder: it refuses to build a node ONNX does not define (a bool Add, an int64
Conv) with an error naming the op and the types it takes, instead of writing a model that fails
to load; and it knows the element type of every output it creates, read off the same
constraints (an output sharing a type parameter with an input, a fixed type, or a `to`/`dtype`
attribute) rather than from a hand-kept table."""

from __future__ import annotations

from dataclasses import dataclass

import onnx
import onnx.defs

from .. import opsets
from ..api import cpp
from ..api import fragments as F

Option = onnx.defs.OpSchema.FormalParameterOption
# The group of a variadic input whose items each have their own type (Loop's and Scan's
# carried values): no shared type to check. Matches kOwnTypes in onnx_types.h.
OWN_TYPES = 255

# Attributes that choose an output's element type (Cast's `to`, RandomNormal's `dtype`, ...).
_DTYPE_ATTRS = ("to", "dtype", "output_datatype")


@dataclass(frozen=True)
class FormalInput:
    group: int  # inputs of one group must share an element type (ONNX type parameter); OWN_TYPES: none
    allowed: tuple[str, ...]  # ScalarType enumerators
    variadic: bool

    @property
    def mask(self) -> str:
        return F.dtype_mask(self.allowed)


@dataclass(frozen=True)
class OutputRule:
    """How an output's element type follows from the node: the type of input ``input`` (-1:
    none), a ``fixed`` type, and/or an attribute ``attr`` that overrides them when given."""

    input: int = -1
    fixed: str = cpp.UNDEFINED_DTYPE
    attr: str = ""


@dataclass(frozen=True)
class OpVersion:
    op: str
    since: int
    inputs: tuple[FormalInput, ...]  # empty: nothing to check
    outputs: tuple[OutputRule, ...]


def _inputs(schema: onnx.defs.OpSchema) -> tuple[FormalInput, ...]:
    constraints = {t.type_param_str: t.allowed_type_strs for t in schema.type_constraints}
    groups: dict[str, int] = {}
    out = []
    for formal in schema.inputs:
        types = constraints.get(formal.type_str, [formal.type_str])
        allowed = tuple(sorted({s for s in map(cpp.scalar_type, types) if s}))
        if not allowed:
            return ()  # sequences, optionals, maps: not checked
        variadic = formal.option == Option.Variadic
        own_types = variadic and not formal.is_homogeneous
        group = OWN_TYPES if own_types else groups.setdefault(formal.type_str, len(groups))
        out.append(FormalInput(group, allowed, variadic))
    return tuple(out)


def _outputs(schema: onnx.defs.OpSchema) -> tuple[OutputRule, ...]:
    constraints = {t.type_param_str: t.allowed_type_strs for t in schema.type_constraints}
    attr = next((a for a in _DTYPE_ATTRS if a in schema.attributes), "")
    out = []
    for formal in schema.outputs:
        shared = next((i for i, f in enumerate(schema.inputs) if f.type_str == formal.type_str), -1)
        types = constraints.get(formal.type_str, [formal.type_str])
        fixed = cpp.scalar_type(types[0]) if len(types) == 1 else None
        if shared >= 0 or fixed:
            out.append(OutputRule(input=shared, fixed=fixed or OutputRule.fixed))
            continue
        if not attr:
            out.append(OutputRule())
            continue
        # The attribute's default when it has one (RandomNormal: float), else the type of the
        # first input (EyeLike, RandomUniformLike: like the input).
        default = schema.attributes[attr].default_value
        if default.HasField("i"):
            name = onnx.TensorProto.DataType.Name(default.i).lower()
            out.append(OutputRule(fixed=cpp.scalar_type(f"tensor({name})") or OutputRule.fixed, attr=attr))
        else:
            out.append(OutputRule(input=0 if schema.inputs else -1, attr=attr))
    return tuple(out)


def op_versions() -> list[OpVersion]:
    by_op: dict[str, list[onnx.defs.OpSchema]] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain == "" and s.since_version <= opsets.MAX_OPSET and not s.deprecated:
            by_op.setdefault(s.name, []).append(s)
    versions: list[OpVersion] = []
    for op, schemas in sorted(by_op.items()):
        schemas.sort(key=lambda s: s.since_version)
        for s, nxt in zip(schemas, schemas[1:] + [None]):
            if nxt is not None and nxt.since_version <= opsets.MIN_OPSET:
                continue  # superseded before the oldest opset fastonnx writes
            v = OpVersion(op, s.since_version, _inputs(s), _outputs(s))
            if (
                versions
                and versions[-1].op == op
                and (versions[-1].inputs, versions[-1].outputs) == (v.inputs, v.outputs)
            ):
                continue  # same constraints as the version before: it stays in force
            versions.append(v)
    return versions


@dataclass(frozen=True)
class OpArity:
    """How many inputs and outputs a node of ``op`` may have at some supported opset: the bounds
    over every version in force from MIN_OPSET to MAX_OPSET (ReduceMax takes its axes as an
    attribute at 13 and as an optional input from 18: 1 to 2 inputs). Variadic counts are
    capped at 65535, more than any node has."""

    op: str
    min_inputs: int
    max_inputs: int
    min_outputs: int
    max_outputs: int


_COUNT_CAP = 0xFFFF


def op_arities() -> list[OpArity]:
    """One row per standard op, sorted by name (the Builder looks names up by binary search at
    compile time)."""
    by_op: dict[str, list[onnx.defs.OpSchema]] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain == "" and s.since_version <= opsets.MAX_OPSET and not s.deprecated:
            by_op.setdefault(s.name, []).append(s)
    rows = []
    for op, schemas in sorted(by_op.items()):
        schemas.sort(key=lambda s: s.since_version)
        in_force = [
            s for s, nxt in zip(schemas, schemas[1:] + [None]) if nxt is None or nxt.since_version > opsets.MIN_OPSET
        ]
        rows.append(
            OpArity(
                op,
                min(s.min_input for s in in_force),
                min(max(s.max_input for s in in_force), _COUNT_CAP),
                min(s.min_output for s in in_force),
                min(max(s.max_output for s in in_force), _COUNT_CAP),
            )
        )
    return rows
