"""Dynamic dimensions, in the two forms users write them: ``dynamic_shapes=`` as torch.export
takes it (``torch.export.Dim``, ``Dim.AUTO``/``Dim.DYNAMIC``, or a string naming the dimension),
and ``dynamic_axes=`` as torch.onnx takes it (``{"x": {0: "batch"}}`` or ``{"x": [0]}``), keyed
by input name. Both become torch.export's form for tracing, plus the names each dynamic
dimension of each input should carry in the ONNX graph."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

import torch
from torch.export import Dim

from .errors import ArgumentError

# Per flattened tensor input (in torch.export's order: positional arguments, then keyword
# arguments as given): dimension index -> requested name.
DimNames = list[dict[int, str]]


def _param_names(model: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[list[str], list[str]]:
    """The forward parameters the positional arguments bind to, and the keyword names."""
    params = list(inspect.signature(model.forward).parameters.values())
    positional = []
    for i in range(len(args)):
        if i >= len(params) or params[i].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ArgumentError("dynamic shapes by name need forward() to name each positional argument; "
                             "pass dynamic_shapes as a tuple in argument order instead")
        positional.append(params[i].name)
    return positional, list(kwargs)


def _dim_spec(spec, tensor: torch.Tensor, where: str) -> tuple[object, dict[int, str]]:
    """One tensor's spec in torch.export's form, and the names it gives its dimensions."""
    if spec is None:
        return None, {}
    items = spec.items() if isinstance(spec, Mapping) else enumerate(spec) if isinstance(spec, Sequence) else None
    if items is None:
        raise ArgumentError(f"{where}: a tensor's dynamic shape is a dict {{dim: Dim}} or a list with one entry per "
                        f"dimension, got {type(spec).__name__}")
    out, names = {}, {}
    for axis, d in items:
        if not isinstance(axis, int) or not -tensor.dim() <= axis < tensor.dim():
            raise ArgumentError(f"{where}: dimension {axis!r} does not exist in a tensor of rank {tensor.dim()}")
        axis %= max(tensor.dim(), 1)
        if d is None:
            continue
        if isinstance(d, str):  # a name: dynamic, called that
            out[axis], names[axis] = Dim.DYNAMIC, d
        elif isinstance(d, type(Dim.DYNAMIC)):  # Dim.AUTO, Dim.DYNAMIC, Dim.STATIC
            out[axis] = d
        elif isinstance(d, Dim):  # named, possibly derived (2 * batch): ONNX calls it that
            out[axis], names[axis] = d, d.__name__
        else:
            raise ArgumentError(f"{where}: dimension {axis} must be a torch.export.Dim, Dim.AUTO, Dim.DYNAMIC, a name "
                            f"or None, got {d!r}")
    return out, names


def _walk(value, spec, where: str, names: DimNames):
    """torch.export's spec for ``value`` (a tensor or a nested structure of them), appending the
    names of each tensor's dimensions in flattening order."""
    if isinstance(value, torch.Tensor):
        converted, dim_names = _dim_spec(spec, value, where)
        names.append(dim_names)
        return converted
    if isinstance(value, (list, tuple)):
        specs = spec if isinstance(spec, (list, tuple)) else [None] * len(value)
        if len(specs) != len(value):
            raise ArgumentError(f"{where}: the dynamic shape spec has {len(specs)} entries for {len(value)} values")
        return type(value)(_walk(v, s, f"{where}[{i}]", names) for i, (v, s) in enumerate(zip(value, specs)))
    if isinstance(value, dict):
        specs = spec if isinstance(spec, dict) else {}
        return {k: _walk(v, specs.get(k), f"{where}[{k!r}]", names) for k, v in value.items()}
    return None


def resolve(model, args: tuple, kwargs: dict | None, dynamic_shapes, dynamic_axes,
            input_names: list[str] | None) -> tuple[object, DimNames, set[str]]:
    """(the ``dynamic_shapes`` to trace with, the requested dimension names per tensor input, the
    ``dynamic_axes`` keys that name no input: they must name outputs)."""
    kwargs = kwargs or {}
    if dynamic_shapes is not None and dynamic_axes is not None:
        raise ArgumentError("give dynamic_shapes (torch.export's form) or dynamic_axes (torch.onnx's form), not both")
    if dynamic_shapes is None and dynamic_axes is None:
        return None, [], set()
    if not isinstance(model, torch.nn.Module):
        raise ArgumentError("dynamic_shapes/dynamic_axes apply when tracing a module; an ExportedProgram already "
                         "fixed its dynamic dimensions")
    positional, keyword = _param_names(model, args, kwargs)
    output_keys: set[str] = set()
    if dynamic_axes is not None:
        dynamic_shapes, output_keys = _from_dynamic_axes(dynamic_axes, args, kwargs, positional, input_names)
    names: DimNames = []
    if isinstance(dynamic_shapes, Mapping):
        unknown = sorted(set(dynamic_shapes) - set(positional) - set(keyword))
        if unknown:
            raise ArgumentError(f"dynamic_shapes names {unknown}, which are not arguments of this call; "
                             f"the arguments are {positional + keyword}")
        specs = [dynamic_shapes.get(p) for p in positional] + [dynamic_shapes.get(k) for k in keyword]
    elif isinstance(dynamic_shapes, (list, tuple)):
        if len(dynamic_shapes) != len(args) + len(kwargs):
            raise ArgumentError(f"dynamic_shapes has {len(dynamic_shapes)} entries for {len(args) + len(kwargs)} inputs")
        specs = list(dynamic_shapes)
    else:
        raise ArgumentError(f"dynamic_shapes must be a dict keyed by argument name or a tuple in argument order, "
                        f"got {type(dynamic_shapes).__name__}")
    values = list(args) + list(kwargs.values())
    converted = [_walk(v, s, n, names) for v, s, n in zip(values, specs, positional + keyword)]
    return dict(zip(positional + keyword, converted)), names, output_keys


def _from_dynamic_axes(dynamic_axes, args: tuple, kwargs: dict, positional: list[str],
                       input_names: list[str] | None) -> tuple[dict, set[str]]:
    """torch.onnx's ``dynamic_axes``, keyed by input name (``input_names`` when given, else the
    argument's own name), as a ``dynamic_shapes`` dict keyed by argument name, and the keys
    that name no input (outputs, whose dimensions follow from the inputs')."""
    if not isinstance(dynamic_axes, Mapping):
        raise ArgumentError(f"dynamic_axes must be a dict such as {{'x': {{0: 'batch'}}}}, got {type(dynamic_axes).__name__}")
    arg_names = positional + list(kwargs)
    values = list(args) + list(kwargs.values())
    tensors = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor)]
    by_name = {n: n for n in arg_names}
    for given, i in zip(input_names or [], tensors):
        by_name[given] = arg_names[i]
    out, output_keys = {}, set()
    for key, axes in dynamic_axes.items():
        if key not in by_name:
            output_keys.add(key)
            continue
        if isinstance(axes, Mapping):
            spec = {int(a): str(n) for a, n in axes.items()}
        elif isinstance(axes, (list, tuple)):
            spec = {int(a): f"{key}_dynamic_axes_{j + 1}" for j, a in enumerate(axes)}
        else:
            raise ArgumentError(f"dynamic_axes[{key!r}] must be {{axis: name}} or [axes], got {axes!r}")
        out[by_name[key]] = spec
    return out, output_keys
