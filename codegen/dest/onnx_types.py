"""The input type constraints of every standard ONNX op at the supported opsets, from
``onnx.defs``, as data for the Builder: it refuses to build a node ONNX does not define (a bool
Add, an int64 Conv) with an error naming the op and the types it takes, instead of writing a
model that fails to load."""

from __future__ import annotations

from dataclasses import dataclass

import onnx.defs

from .. import opsets
from ..api import cpp, fragments as F

Option = onnx.defs.OpSchema.FormalParameterOption


@dataclass(frozen=True)
class FormalInput:
    group: int  # inputs of one group must share an element type (ONNX type parameter)
    allowed: tuple[str, ...]  # ScalarType enumerators
    variadic: bool

    @property
    def mask(self) -> str:
        return F.dtype_mask(self.allowed)


@dataclass(frozen=True)
class OpVersion:
    op: str
    since: int
    inputs: tuple[FormalInput, ...]


def _inputs(schema: onnx.defs.OpSchema) -> tuple[FormalInput, ...] | None:
    constraints = {t.type_param_str: t.allowed_type_strs for t in schema.type_constraints}
    groups: dict[str, int] = {}
    out = []
    for formal in schema.inputs:
        types = constraints.get(formal.type_str, [formal.type_str])
        allowed = tuple(sorted({cpp.scalar_type(t) for t in types if cpp.scalar_type(t)}))
        if not allowed:
            return None  # sequences, optionals, maps: not checked
        group = groups.setdefault(formal.type_str, len(groups))
        out.append(FormalInput(group, allowed, formal.option == Option.Variadic))
    return tuple(out)


def op_versions() -> list[OpVersion]:
    by_op: dict[str, list[onnx.defs.OpSchema]] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain == "" and s.since_version <= opsets.MAX_OPSET and not s.deprecated:
            by_op.setdefault(s.name, []).append(s)
    versions = []
    for op, schemas in sorted(by_op.items()):
        schemas.sort(key=lambda s: s.since_version)
        for s, nxt in zip(schemas, schemas[1:] + [None]):
            if nxt is not None and nxt.since_version <= opsets.MIN_OPSET:
                continue  # superseded before the oldest opset fastonnx writes
            inputs = _inputs(s)
            if not inputs:  # None: input kinds not checked; (): nothing to check
                continue
            if versions and versions[-1].op == op and versions[-1].inputs == inputs:
                continue  # same constraints as the version before: it stays in force
            versions.append(OpVersion(op, s.since_version, inputs))
    return versions
