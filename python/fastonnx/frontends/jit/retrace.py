"""A translated graph traced again (to rewrite it without in-place ops), its control flow kept as
it was translated (see ``Retrace``)."""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from .fake_values import assume_preconditions

# The results of the control-flow nodes a graph traced again holds (see Retrace), by key.
_KEPT: dict[int, list] = {}
_CONTROL_FLOW = (torch.ops.higher_order.cond, torch.ops.higher_order.while_loop)


@torch.library.custom_op("fastonnx::kept_control_flow", mutates_args=())
def _kept_control_flow(key: int, tensors: list[torch.Tensor], sizes: list[int]) -> list[torch.Tensor]:
    """Stands for a translated cond or while_loop while a graph is traced again (see Retrace);
    never run."""
    raise AssertionError("fastonnx::kept_control_flow only stands for control flow while a graph is traced again")


@_kept_control_flow.register_fake
def _(key, tensors, sizes):
    return [torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device) for v in _KEPT[key]]


class Retrace(torch.fx.Interpreter):
    """Runs the translated graph again (functionalizing it), with the preconditions the translation
    assumed. Each cond and while_loop node stays as it was translated: its functions are final
    (rewritten without in-place ops where needed when made), and torch would trace them again on
    the node's operands, without what the translation assumed in a branch the example does not
    take (see control_flow.sub): such a branch's sizes would be decided as the example's
    (``x + z`` broadcasting x's size 1 there would make x's size z's, outside the branch too). It
    is traced as one opaque op of its recorded results (``fastonnx::kept_control_flow``), which
    ``restore`` makes the node again."""

    def __init__(self, module: torch.fx.GraphModule):
        super().__init__(module)
        self.kept: dict[int, tuple] = {}  # key -> the node's target, its arguments' structure and leaves

    def run_node(self, n: torch.fx.Node):
        if n.op != "call_function" or n.target not in _CONTROL_FLOW:
            return super().run_node(n)
        leaves, spec = pytree.tree_flatten(self.map_nodes_to_values(n.args, n))
        key = max(_KEPT, default=0) + 1
        _KEPT[key] = list(n.meta["val"])
        self.kept[key] = (n.target, spec, leaves, n.meta["val"])
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        sizes = [x for x in leaves if isinstance(x, torch.SymInt)]
        return torch.ops.fastonnx.kept_control_flow(key, tensors, sizes)

    def get_attr(self, target, args, kwargs):
        value = super().get_attr(target, args, kwargs)
        if not isinstance(value, torch.Tensor):
            return value
        # A constant of the graph as a tensor of the functionalization (which wraps only the
        # inputs): a tensor made from it and written into through a view (``b = c.clone();
        # b[:] = x``) would otherwise be traced with its in-place ops as they are, and the write lost.
        return torch._C._functorch._wrap_functional_tensor(value, torch._C._functorch.current_level())

    def call_function(self, target, args, kwargs):
        assume_preconditions(target, args, kwargs)
        return super().call_function(target, args, kwargs)

    def restore(self, module: torch.fx.GraphModule) -> None:
        """The control-flow nodes of the graph traced again (``module``'s) as they were (see
        run_node): their functions, their operands as traced again."""
        graph = module.graph
        for n in list(graph.nodes):
            if n.target is not torch.ops.fastonnx.kept_control_flow.default:
                continue
            key, tensors, sizes = n.args
            target, spec, leaves, vals = self.kept.pop(key)
            _KEPT.pop(key, None)
            tensor_args, size_args = iter(tensors), iter(sizes)
            args = []
            with graph.inserting_before(n):
                for leaf in leaves:
                    if isinstance(leaf, torch.fx.GraphModule):
                        name = f"{target.__name__}_function_{len(list(module.named_children()))}"
                        module.add_submodule(name, leaf)
                        args.append(graph.get_attr(name))
                    elif isinstance(leaf, torch.Tensor):
                        args.append(next(tensor_args))
                    elif isinstance(leaf, torch.SymInt):
                        args.append(next(size_args))
                    else:
                        args.append(leaf)
                node = graph.call_function(target, pytree.tree_unflatten(args, spec), {})
            node.meta = {**n.meta, "val": vals}
            n.replace_all_uses_with(node)
            graph.erase_node(n)
        module.recompile()
        self.forget()

    def forget(self) -> None:
        """Drops what the traces kept of the control-flow nodes (one that failed left some)."""
        for key in self.kept:
            _KEPT.pop(key, None)
        self.kept.clear()
