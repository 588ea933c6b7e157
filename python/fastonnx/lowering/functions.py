"""export_modules_as_functions: which module call each FX node belongs to.

torch.export records, on every node, the stack of module calls it comes from
(``node.meta["nn_module_stack"]``: the model itself first, then each submodule, as ``key ->
(path, "module.QualifiedClassName")``). Each call of a selected submodule becomes a scope of the
native session, nested in the call of the nearest selected module around it; the session then
outlines every scope into a call of an ONNX local function (cpp/src/passes/outline.cpp).
"""

from __future__ import annotations

import torch

from .. import _C

FUNCTION_DOMAIN = _C.FUNCTION_DOMAIN
# ModelProto.functions exist from IR version 8, which opset 15 brings.
MIN_FUNCTIONS_OPSET = 15


def type_name(module_type) -> str:
    """A module class's qualified name as torch.export records it: ``torch.nn.modules.linear.Linear``."""
    if isinstance(module_type, str):
        return module_type
    return f"{module_type.__module__}.{module_type.__qualname__}"


class ModuleScopes:
    """Registers each call of a selected module with ``session`` as a scope, and tells which
    scope an FX node's ONNX nodes belong to: its innermost selected module call's."""

    def __init__(self, session: _C.Session, selection: bool | frozenset[str]):
        self.session = session
        self.selection = selection
        self.ids: dict[tuple[str, ...], int] = {}  # keys of the stack down to the module -> scope

    def _selected(self, name: str) -> bool:
        return self.selection is True or (isinstance(self.selection, frozenset) and name in self.selection)

    def scope_of(self, node: torch.fx.Node) -> int:
        stack = node.meta.get("nn_module_stack") or {}
        scope = 0
        keys: tuple[str, ...] = ()
        for key, (path, module_type) in stack.items():
            keys += (key,)
            name = type_name(module_type)
            if not path or not self._selected(name):  # the model itself ("") is the graph
                continue
            found = self.ids.get(keys)
            if found is None:
                found = self.ids[keys] = self.session.add_scope(name, path, scope)
            scope = found
        return scope
