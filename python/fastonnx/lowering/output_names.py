"""Output naming: the name of each tensor ``forward`` returns, from where it sits in the
returned structure."""

from __future__ import annotations

import torch.utils._pytree as pytree


def output_paths(out_spec, count: int) -> list[str]:
    """Names for the tensors ``forward`` returns, from where each sits in the returned
    structure: ``output`` for a lone tensor; ``output_0``, ``output_1``... for a tuple; a dict's
    or a ModelOutput's keys (``logits``, ``last_hidden_state``); nested parts joined with ``_``
    (``output_1_h``). A name that an input has is prefixed with ``output_`` (Lowering.set_outputs)."""
    if out_spec is None or out_spec.num_leaves != count:
        return [f"output_{i}" for i in range(count)]
    # Distinct placeholder leaves (not None: a ModelOutput drops the fields that are None).
    markers = [_Leaf() for _ in range(count)]
    names = []
    structure = pytree.tree_unflatten(markers, out_spec)
    for path, _ in pytree.tree_flatten_with_path(structure, is_leaf=lambda x: isinstance(x, _Leaf))[0]:
        parts = []
        for key in path:
            if isinstance(key, pytree.SequenceKey):
                parts.append(str(key.idx))
            elif isinstance(key, pytree.MappingKey):
                parts.append(str(key.key))
            else:
                parts.append(str(getattr(key, "name", key)))
        if not parts or isinstance(path[0], pytree.SequenceKey):
            parts.insert(0, "output")
        names.append("_".join(parts))
    if len(names) != count:  # a container type whose flattening does not round-trip
        return [f"output_{i}" for i in range(count)]
    return names


class _Leaf:
    """Stands in for an output tensor while its place in the returned structure is read."""
