"""The graph's outputs: the name of each value ``forward`` returns, from where it sits in the
returned structure; returned Python numbers as 0-d tensors; and the dynamic axes asked of
outputs, named or listed as static."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

from .. import _C
from ..core.dtypes import dtype_code
from ..dynamic.request import StaticAxis
from ..errors import ConversionError
from .sizes import SizeNames

aten = torch.ops.aten


class OutputsHost(Protocol):
    """What setting the outputs asks of the lowering (lower.py's ``Lowering``), spelled here so
    that this module needs nothing from the one that imports it."""

    ep: ExportedProgram
    session: _C.Session
    input_names: list[str]
    sizes: SizeNames

    @property
    def model_frame(self) -> Any: ...  # the model graph's GraphFrame: its ``env`` and ``prepared``

    def tensor_meta(self, tensor: torch.Tensor) -> tuple[int, list]: ...

    def convert_call(self, fx_name: str, op: Any, kwargs: dict, metas: list) -> list: ...


def output_paths(out_spec, count: int) -> list[str]:
    """Names for the tensors ``forward`` returns, from where each sits in the returned
    structure: ``output`` for a lone tensor; ``output_0``, ``output_1``... for a tuple; a dict's
    or a ModelOutput's keys (``logits``, ``last_hidden_state``); nested parts joined with ``_``
    (``output_1_h``). A name that an input has is prefixed with ``output_`` (``set_outputs``)."""
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


def returned_values(
    lowering: OutputsHost, output_names: Sequence[str] | None, input_names: Sequence[str]
) -> list[tuple[Any, str, str]]:
    """(FX value, path, graph output name) of each value ``forward`` returns, None left out:
    named by ``output_names`` in order, the rest by where they sit in what ``forward`` returns
    (see ``output_paths``), ``output_`` in front of a path that an input (``input_names``) has."""
    sig = lowering.ep.graph_signature
    user_names = list(output_names or [])
    values = [
        v
        for spec, v in zip(sig.output_specs, lowering.model_frame.prepared.results)
        if spec.kind == OutputKind.USER_OUTPUT
    ]
    # (mutations of buffers and inputs, the other outputs, have no place in an ONNX graph)
    paths = output_paths(lowering.ep.call_spec.out_spec, len(values))
    returned = []
    for value, path in zip(values, paths):
        if value is None:
            continue
        # A returned dict's key may be an input's name too (`state`): the output then is
        # `output_state`, and the input keeps its name.
        name = user_names.pop(0) if user_names else (f"output_{path}" if path in input_names else path)
        returned.append((value, path, name))
    return returned


def set_outputs(
    lowering: OutputsHost, output_names: Sequence[str] | None, output_axes: dict[str, dict[int, str]] | None = None
) -> list[str]:
    """Graph outputs, named as ``returned_values`` names them. A returned Python number is a 0-d
    tensor (int64, the default float dtype or bool, as torch.onnx makes it); a returned None is
    dropped, as torch.onnx drops it. ``output_axes`` (dynamic_axes of outputs, by name): an
    axis that is one symbol is named as asked; one that is static goes to ``static_axes``."""
    outputs, vals = [], []
    for value, path, name in returned_values(lowering, output_names, lowering.input_names):
        ref, val = _output_value(lowering, value, path)
        outputs.append((ref, name))
        vals.append(val)
    if not outputs:  # (onnxruntime loads no graph without outputs)
        raise ConversionError(
            "forward returns no tensor or number (only None, or lists and tuples that are empty in the "
            "example): an ONNX graph needs at least one output"
        )
    # Renaming dimensions is for a value that is one output's alone: an input's, a weight's or
    # one returned twice would be renamed there too.
    leaves = {
        v.id
        for n, v in lowering.model_frame.env.items()
        if n.op in ("placeholder", "get_attr") and isinstance(v, _C.ValueRef)
    }
    returned = Counter(ref.id for ref, _ in outputs)
    for (ref, name), val in zip(outputs, vals):
        requested = (output_axes or {}).get(name)
        if requested:
            own = ref.id not in leaves and returned[ref.id] == 1
            _name_output_dims(lowering, ref, val, name, requested, own)
    lowering.session.set_outputs(outputs)
    return [name for _, name in outputs]


def _output_value(lowering: OutputsHost, value, path: str):
    """The graph value of one returned value, and what torch recorded of it."""
    if isinstance(value, torch.fx.Node):
        val, ref = value.meta.get("val"), lowering.model_frame.env[value]
        if isinstance(val, torch.Tensor):
            return ref, val
        if isinstance(val, (int, float, torch.SymInt, torch.SymFloat, torch.SymBool)):
            return _scalar_output(lowering, ref, val, path), val
    elif isinstance(value, (int, float)):
        return _scalar_output(lowering, value, value, path), value
    raise ConversionError(f"output {path} is {value!r}, not a tensor or a number; ONNX outputs are tensors")


def _scalar_output(lowering: OutputsHost, ref, val, path: str):
    """A returned Python number ``val`` as a 0-d tensor of the type torch.onnx gives it:
    int64, bool, or the default float dtype. ``ref`` is its graph value (an int64, float64
    or bool 0-d tensor) or, when torch knows it, the number itlowering."""
    dtype = (
        torch.bool
        if isinstance(val, (bool, torch.SymBool))
        else torch.int64
        if isinstance(val, (int, torch.SymInt))
        else torch.get_default_dtype()
    )
    if isinstance(ref, (int, float)):
        op, kwargs = aten.scalar_tensor.default, {"s": ref, "dtype": dtype}
    elif isinstance(val, torch.SymFloat) and dtype != torch.float64:  # computed in float64
        op, kwargs = aten._to_copy.default, {"self": ref, "dtype": dtype}
    else:
        return ref
    try:
        return lowering.convert_call(f"output_{path}", op, kwargs, [(dtype_code(dtype), [])])[0]
    except _C.ConvertError as e:
        raise ConversionError(f"output {path}: {e}") from None


def _name_output_dims(lowering: OutputsHost, ref, val, name: str, requested: dict[int, str], own: bool) -> None:
    """Checks the requested axes of an output; names the ones that are one symbol as asked
    (when ``own``: the value is this output's alone) and lists the static ones."""
    rank = val.dim() if isinstance(val, torch.Tensor) else 0
    requested = lowering.sizes.output_axes(name, requested, rank)
    shape = list(val.shape)
    dims = lowering.tensor_meta(val)[1]
    renamed = False
    for axis, dim_name in requested.items():
        axis %= rank
        expr = shape[axis].node.expr if isinstance(shape[axis], torch.SymInt) else None
        if expr is None or expr.is_number:
            lowering.sizes.static_axes.append(
                StaticAxis(
                    f"output `{name}`",
                    axis,
                    dim_name,
                    int(shape[axis]),
                    "(its size depends on no dynamic input axis)",
                )
            )
        elif expr.is_Symbol and own and dims[axis] != dim_name:
            dims[axis], renamed = dim_name, True
    if renamed:
        lowering.session.set_meta(ref, dtype_code(val.dtype), dims)
