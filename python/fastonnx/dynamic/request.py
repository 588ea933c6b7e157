"""Dynamic dimensions, in the two forms users write them.

``dynamic_shapes=`` is torch.export's form (``torch.export.Dim``, ``Dim.AUTO``/``Dim.DYNAMIC``,
or a string naming the dimension) and keeps torch.export's strictness: a named or ``Dim`` axis
that the model fixes is a trace error. torch.export itself rejects a string; fastonnx reads it
as torch.onnx's exporter does, ``Dim.DYNAMIC`` under that name.

``dynamic_axes=`` is torch.onnx's form (``{"x": {0: "batch"}}`` or ``{"x": [0]}``): the axis is
traced with ``Dim.AUTO``, dynamic where the model allows it. An axis the model fixes stays static
in the ONNX graph, and one warning lists every such axis and why. In both forms, an axis whose
example size is 0 or 1 is traced dynamic too (_small_sizes; ``Attempt.make_static`` when it cannot
be). Keys name the flattened tensor
inputs (``input_names``, else torch.export's names: the argument's, nested parts joined with
``_``), a top-level argument that is one tensor, or an output.

An ExportedProgram is traced already: ``dynamic_axes`` then names the axes that its trace made
dynamic (``names_program``), nothing is traced again, and an axis named that the program has
static is an error.
"""

from __future__ import annotations

import inspect
import linecache
import os
import sysconfig
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
import torch.utils._pytree as pytree
from torch.export import Dim, ExportedProgram
from torch.export.graph_signature import InputKind, TensorArgument

from ..core.stack import in_package, warn
from ..errors import ArgumentError, DynamicAxesWarning, TraceError

# Per flattened tensor input (in torch.export's order: positional arguments, then keyword
# arguments as given, each flattened): dimension index -> requested name.
DimNames = list[dict[int, str]]


@dataclass(frozen=True)
class Request:
    """What the user asked for, in the forms tracing and lowering take. Tracing never changes it:
    what an attempt at tracing makes of it is an ``Attempt``."""

    shapes: object = None  # dynamic_shapes for torch.export
    dim_names: DimNames = field(default_factory=list)
    output_axes: dict[str, dict[int, str]] = field(default_factory=dict)  # dynamic_axes of outputs, by name
    sources: list[str] = field(default_factory=list)  # per tensor input: how torch's ShapeEnv names it
    relaxed: bool = False  # dynamic_axes: the model may fix a requested axis (it is then warned about)
    generated: set[str] = field(default_factory=set)  # names made for axes given without one
    # dynamic_axes keys that name no tensor (an argument that holds None or a number in this
    # call, a name of no input or output), with why: torch.onnx ignores them, and so does
    # fastonnx, saying so.
    ignored: dict[str, str] = field(default_factory=dict)
    # Per tensor input: its requested axes, the very dicts ``shapes`` holds (axis -> Dim.AUTO,
    # Dim.DYNAMIC or a Dim), so that an attempt's ``shapes`` can leave out those it made static;
    # and its shape.
    axes: list[dict[int, Any]] = field(default_factory=list)
    shapes_of_inputs: list[tuple[int, ...]] = field(default_factory=list)
    # dynamic_axes of an ExportedProgram: names for the sizes its trace made dynamic. An output's
    # axis names its size wherever the graph has it (an expression over the inputs' sizes too,
    # such as a cache's past plus query length), and an axis named that is static is an error.
    names_program: bool = False

    def ignored_keys(self, input_names: Sequence[str], output_names: Sequence[str]) -> dict[str, str]:
        """The dynamic_axes keys ignored, with why: those that name no tensor of the call, and the
        output keys that name no output (torch.onnx ignores a key that names neither an input nor
        an output), naming what the keys may be."""
        unmatched = {
            key: f"names neither an input ({', '.join(input_names)}) nor an output ({', '.join(output_names)})"
            for key in sorted(set(self.output_axes) - set(output_names))
        }
        return {**self.ignored, **unmatched}


@dataclass
class Attempt:
    """One attempt at tracing the request: the requested axes it made static and why, and what its
    trace recorded. An attempt that fails leaves its state to the next one to start from
    (``again``); the request itself is never changed."""

    request: Request
    # (tensor input, axis) -> why the attempt made that requested axis static (see make_static).
    why: dict[tuple[int, int], str] = field(default_factory=dict)
    # Those of them made static by a test in scripted code (see in_scripted_code).
    scripted: set[tuple[int, int]] = field(default_factory=set)
    # Those of them made static because a test of the model's code narrowed them, with why (see
    # dynamic.narrowing).
    narrowed: dict[tuple[int, int], str] = field(default_factory=dict)
    # Per graph input, the requested names of its dynamic axes (the TorchScript front end makes a
    # quantized input three graph inputs).
    dim_names: DimNames = field(init=False)
    # Where torch.export's trace replaced each symbolic size (see why_static), for a request that
    # lets the model fix an axis; None for a strict one.
    fixed: dict | None = field(init=False)

    def __post_init__(self) -> None:
        self.dim_names = list(self.request.dim_names)
        self.fixed = {} if self.request.relaxed else None

    def again(self) -> Attempt:
        """A new attempt, starting with the axes this one made static."""
        return Attempt(self.request, dict(self.why), set(self.scripted), dict(self.narrowed))

    @property
    def axes(self) -> list[dict[int, Any]]:
        """Per tensor input, its requested axes still dynamic (axis -> Dim.AUTO, Dim.DYNAMIC or a Dim)."""
        return [
            {axis: d for axis, d in axes.items() if (i, axis) not in self.why}
            for i, axes in enumerate(self.request.axes)
        ]

    @property
    def shapes(self) -> object:
        """torch.export's dynamic_shapes: the request's, without the axes made static."""
        if not self.why:
            return self.request.shapes
        own = {id(axes): i for i, axes in enumerate(self.request.axes)}
        dynamic = self.axes
        return pytree.tree_map(
            lambda spec: dynamic[own[id(spec)]] if id(spec) in own else spec,
            self.request.shapes,
            is_leaf=lambda spec: id(spec) in own,
        )

    def small_axes(self) -> list[tuple[int, int]]:
        """The requested axes still dynamic whose example size is 0 or 1, (tensor input, axis)."""
        return [
            (i, axis)
            for i, (axes, shape) in enumerate(zip(self.axes, self.request.shapes_of_inputs))
            for axis in axes
            if axes[axis] != Dim.STATIC and shape[axis] in (0, 1)
        ]

    def make_static(self, i: int, axis: int, why: str) -> None:
        """Traces the axis static from now on: one given by ``dynamic_axes`` or as ``Dim.AUTO``,
        which torch.export may specialize; for another (a name, ``Dim.DYNAMIC``, a ``Dim``), the
        user asked for a dynamic axis and a ``TraceError`` says why it cannot be."""
        request = self.request
        if request.axes[i][axis] != Dim.AUTO:
            name = request.dim_names[i].get(axis) if i < len(request.dim_names) else None
            raise TraceError(
                f"dynamic_shapes: {request.sources[i] if i < len(request.sources) else f'input {i}'} axis {axis}"
                + (f" ('{name}')" if name else "")
                + f" is fixed to {request.shapes_of_inputs[i][axis]} {why}"
            )
        self.why[(i, axis)] = why


@dataclass(frozen=True)
class _Leaf:
    """One flattened input of the call."""

    argument: str  # the top-level argument it belongs to
    name: str  # torch.export's placeholder name, fastonnx's default input name
    source: str  # torch's ShapeEnv name: L['pair'][0]
    value: object


def forward_signature(model: torch.nn.Module) -> inspect.Signature:
    """The signature of ``model.forward`` without ``self``. A ScriptModule's is its compiled
    schema's: Python's of a ``torch.jit.script_method`` keeps ``self`` as a parameter, which the
    first argument would bind to."""
    if not isinstance(model, torch.jit.ScriptModule):
        return inspect.signature(model.forward)
    schema = model._c._get_method("forward").schema
    return inspect.Signature(
        [
            inspect.Parameter(
                a.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=a.default_value if a.has_default_value() else inspect.Parameter.empty,
            )
            for a in schema.arguments[1:]
        ]
    )


def _combined(model: torch.nn.Module, args: tuple, kwargs: dict) -> dict:
    """The call as torch.export binds it: positional arguments by parameter name, then the
    keyword arguments in the order given (torch.export flattens them in that order)."""
    return {**forward_signature(model).bind_partial(*args).arguments, **kwargs}


def tensor_input_names(model: torch.nn.Module, args: tuple, kwargs: dict) -> list[str]:
    """The default name of each tensor input of the call: torch.export's placeholder names."""
    return [leaf.name for leaf in _leaves(_combined(model, args, kwargs)) if isinstance(leaf.value, torch.Tensor)]


def _leaves(combined: dict) -> list[_Leaf]:
    """Every leaf of the call, named as torch.export names its placeholders (the path's keys,
    lowercased, other characters than letters and digits replaced by ``_``)."""
    out = []
    for path, value in pytree.tree_flatten_with_path(combined)[0]:
        parts, source = [], "L"
        for key in path:
            if isinstance(key, pytree.MappingKey):
                parts.append("".join(c if c.isascii() and c.isalnum() else "_" for c in str(key.key)))
                source += f"[{key.key!r}]"
            elif isinstance(key, pytree.SequenceKey):
                parts.append(str(key.idx))
                source += f"[{key.idx}]"
            else:
                parts.append(str(getattr(key, "name", key)))
                source += f".{getattr(key, 'name', key)}"
        argument = cast(pytree.MappingKey, path[0]).key  # `combined` is a dict: its first key
        out.append(_Leaf(str(argument), "_".join(parts).lower(), source, value))
    return out


def _axes(spec, tensor: torch.Tensor, where: str) -> dict[int, Any]:
    """A tensor's {axis: entry} from a dict or a per-dimension list, axes checked and made
    non-negative; entries that are None are dropped."""
    items: Iterable[tuple[Any, Any]]
    if isinstance(spec, Mapping):
        items = spec.items()
    elif isinstance(spec, Sequence) and not isinstance(spec, str):
        items = enumerate(spec)
    else:
        raise ArgumentError(
            f"{where}: a tensor's dynamic shape is a dict {{dim: Dim}} or a list with one entry per "
            f"dimension, got {type(spec).__name__}"
        )
    out = {}
    for axis, d in items:
        if isinstance(axis, bool) or not isinstance(axis, int) or not -tensor.dim() <= axis < tensor.dim():
            raise ArgumentError(f"{where}: dimension {axis!r} does not exist in a tensor of rank {tensor.dim()}")
        if d is not None:
            out[axis % max(tensor.dim(), 1)] = d
    return out


def _dim_spec(spec, tensor: torch.Tensor, where: str) -> tuple[object, dict[int, str]]:
    """One tensor's ``dynamic_shapes`` entry in torch.export's form, and the names it gives its
    dimensions."""
    if spec is None:
        return None, {}
    out, names = {}, {}
    for axis, d in _axes(spec, tensor, where).items():
        if isinstance(d, str):  # a name: dynamic (strictly, as torch.onnx reads it), called that
            out[axis], names[axis] = Dim.DYNAMIC, d
        elif isinstance(d, type(Dim.DYNAMIC)):  # Dim.AUTO, Dim.DYNAMIC, Dim.STATIC
            out[axis] = d
        elif isinstance(d, Dim):  # named, possibly derived (2 * batch): ONNX calls it that
            out[axis], names[axis] = d, d.__name__
        else:
            raise ArgumentError(
                f"{where}: dimension {axis} must be a torch.export.Dim, Dim.AUTO, Dim.DYNAMIC, a name "
                f"or None, got {d!r}"
            )
    return out, names


def _walk(value, spec, where: str, names: DimNames, axes: list[dict[int, Any]]):
    """torch.export's spec for ``value`` (a tensor or a nested structure of them), appending the
    names of each tensor's dimensions and its spec (``{}`` for none) in flattening order."""
    if isinstance(value, torch.Tensor):
        converted, dim_names = _dim_spec(spec, value, where)
        names.append(dim_names)
        axes.append(converted if isinstance(converted, dict) else {})
        return converted
    # torch.export wants the spec of a list, tuple or dict in its structure, also without entries.
    if isinstance(value, (list, tuple)):
        specs = [None] * len(value) if spec is None else spec
        if not isinstance(specs, (list, tuple)) or len(specs) != len(value):
            raise ArgumentError(
                f"{where}: the dynamic shape spec must have one entry per item of the "
                f"{type(value).__name__} ({len(value)}), got {spec!r}"
            )
        items = [_walk(v, s, f"{where}[{i}]", names, axes) for i, (v, s) in enumerate(zip(value, specs))]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        specs = {} if spec is None else spec
        if not isinstance(specs, dict):
            raise ArgumentError(f"{where}: the dynamic shape spec of a dict is a dict, got {spec!r}")
        return {k: _walk(v, specs.get(k), f"{where}[{k!r}]", names, axes) for k, v in value.items()}
    # Another structure torch.export takes whole, with the spec given: its tensors are unnamed.
    tensors = [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]
    names.extend({} for _ in tensors)
    axes.extend({} for _ in tensors)
    return spec


def resolve(
    model, args: tuple, kwargs: dict | None, dynamic_shapes, dynamic_axes, input_names: Sequence[str] | None
) -> Request:
    """The request of ``dynamic_shapes`` or ``dynamic_axes`` (one at most) for this call."""
    kwargs = kwargs or {}
    if dynamic_shapes is not None and dynamic_axes is not None:
        raise ArgumentError("give dynamic_shapes (torch.export's form) or dynamic_axes (torch.onnx's form), not both")
    if dynamic_shapes is None and dynamic_axes is None:
        return Request()
    if isinstance(model, ExportedProgram):
        if dynamic_shapes is not None:
            raise ArgumentError(
                "dynamic_shapes applies when tracing a module; an ExportedProgram already fixed which "
                "dimensions are dynamic (give them names with dynamic_axes)"
            )
        return _from_program_axes(model, dynamic_axes, input_names)
    if not isinstance(model, torch.nn.Module):
        raise ArgumentError("dynamic_shapes/dynamic_axes apply when tracing a module")
    try:
        combined = _combined(model, args, kwargs)
    except TypeError as e:
        raise ArgumentError(f"args/kwargs do not fit {type(model).__name__}.forward: {e}") from None
    if dynamic_axes is not None:
        parameters = set(forward_signature(model).parameters)
        return _from_dynamic_axes(dynamic_axes, combined, input_names, parameters)
    return _from_dynamic_shapes(dynamic_shapes, model, args, kwargs, combined)


def _from_dynamic_shapes(dynamic_shapes, model, args: tuple, kwargs: dict, combined: dict) -> Request:
    positional, keyword = _param_names(model, args), list(kwargs)
    if isinstance(dynamic_shapes, Mapping):
        unknown = sorted(set(dynamic_shapes) - set(positional) - set(keyword))
        if unknown:
            raise ArgumentError(
                f"dynamic_shapes names {unknown}, which are not arguments of this call; "
                f"the arguments are {positional + keyword}"
            )
        specs = [dynamic_shapes.get(p) for p in positional] + [dynamic_shapes.get(k) for k in keyword]
    elif isinstance(dynamic_shapes, (list, tuple)):
        if len(dynamic_shapes) != len(args) + len(kwargs):
            raise ArgumentError(
                f"dynamic_shapes has {len(dynamic_shapes)} entries for {len(args) + len(kwargs)} inputs"
            )
        specs = list(dynamic_shapes)
    else:
        raise ArgumentError(
            f"dynamic_shapes must be a dict keyed by argument name or a tuple in argument order, "
            f"got {type(dynamic_shapes).__name__}"
        )
    names: DimNames = []
    axes: list[dict[int, Any]] = []
    values = list(args) + list(kwargs.values())
    converted = [_walk(v, s, n, names, axes) for v, s, n in zip(values, specs, positional + keyword)]
    tensors = [leaf for leaf in _leaves(combined) if isinstance(leaf.value, torch.Tensor)]
    return Request(
        dict(zip(positional + keyword, converted)),
        names,
        sources=[leaf.source for leaf in tensors],
        axes=axes,
        shapes_of_inputs=[tuple(cast(torch.Tensor, leaf.value).shape) for leaf in tensors],
    )


def _param_names(model: torch.nn.Module, args: tuple) -> list[str]:
    """The forward parameters the positional arguments bind to."""
    params = list(forward_signature(model).parameters.values())
    positional = []
    for i in range(len(args)):
        if i >= len(params) or params[i].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ArgumentError(
                "dynamic shapes by name need forward() to name each positional argument; "
                "pass dynamic_shapes as a tuple in argument order instead"
            )
        positional.append(params[i].name)
    return positional


def _from_dynamic_axes(
    dynamic_axes, combined: dict, input_names: Sequence[str] | None, parameters: set[str]
) -> Request:
    """torch.onnx's ``dynamic_axes`` as ``Dim.AUTO`` per requested input axis (in the structure
    of the call), the names per flattened tensor input, and the entries of outputs. A key of a
    forward parameter that holds no tensor in this call (left out, None, a number) is ignored,
    as torch.onnx ignores it."""
    if not isinstance(dynamic_axes, Mapping):
        raise ArgumentError(
            f"dynamic_axes must be a dict such as {{'x': {{0: 'batch'}}}}, got {type(dynamic_axes).__name__}"
        )
    leaves = _leaves(combined)
    tensors = [i for i, leaf in enumerate(leaves) if isinstance(leaf.value, torch.Tensor)]
    names: DimNames = [{} for _ in tensors]
    keyed_by: dict[int, str] = {}  # tensor input -> the key that named it
    output_axes: dict[str, dict[int, str]] = {}
    ignored: dict[str, str] = {}
    for key, axes in dynamic_axes.items():
        if key in parameters and not any(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(combined.get(key))):
            held = "is not passed" if key not in combined else f"is {combined[key]!r}"
            ignored[key] = f"the argument `{key}` {held}, not a tensor"
            continue
        t = _tensor_input(key, combined, leaves, tensors, input_names)
        if t is None:
            output_axes[key] = _axis_names(key, axes)
            continue
        if t in keyed_by:
            raise ArgumentError(
                f"dynamic_axes names input {leaves[tensors[t]].name!r} twice, as {keyed_by[t]!r} and "
                f"{key!r}; give its axes once"
            )
        keyed_by[t] = key
        tensor = cast(torch.Tensor, leaves[tensors[t]].value)  # `tensors` indexes the tensor leaves
        names[t] = _axes(_axis_names(key, axes), tensor, f"dynamic_axes[{key!r}]")
    specs: list[dict | None] = [None] * len(leaves)
    per_tensor: list[dict[int, Any]] = []
    for t, requested in enumerate(names):
        per_tensor.append(dict.fromkeys(requested, Dim.AUTO))
        if requested:
            specs[tensors[t]] = per_tensor[-1]
    # torch.export wants a spec of a dict, list or tuple in its structure; another structure
    # (a registered class) gets one only when it holds a requested axis.
    shapes = {}
    for arg, value in combined.items():
        own = [s for leaf, s in zip(leaves, specs) if leaf.argument == arg]
        whole = any(own) or isinstance(value, (dict, list, tuple))
        shapes[arg] = pytree.tree_unflatten(own, pytree.tree_structure(value)) if whole else None
    return Request(
        shapes,
        names,
        output_axes,
        [leaves[i].source for i in tensors],
        True,
        _generated_names(dynamic_axes),
        ignored,
        per_tensor,
        [tuple(cast(torch.Tensor, leaves[i].value).shape) for i in tensors],
    )


def _from_program_axes(program: ExportedProgram, dynamic_axes, input_names: Sequence[str] | None) -> Request:
    """``dynamic_axes`` naming the dynamic axes of a traced program: keys are the names of its
    tensor inputs (``input_names``, else its placeholders') or of its outputs."""
    if not isinstance(dynamic_axes, Mapping):
        raise ArgumentError(
            f"dynamic_axes must be a dict such as {{'x': {{0: 'batch'}}}}, got {type(dynamic_axes).__name__}"
        )
    values = {n.name: n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"}
    tensors = [
        (spec.arg.name, values[spec.arg.name])
        for spec in program.graph_signature.input_specs
        if spec.kind == InputKind.USER_INPUT and isinstance(spec.arg, TensorArgument)
    ]
    given = list(input_names or [])[: len(tensors)]
    names = given + [name for name, _ in tensors[len(given) :]]
    dim_names: DimNames = [{} for _ in tensors]
    output_axes: dict[str, dict[int, str]] = {}
    for key, axes in dynamic_axes.items():
        if key not in names:
            output_axes[key] = _axis_names(key, axes)
            continue
        i = names.index(key)
        dim_names[i] = _axes(_axis_names(key, axes), tensors[i][1], f"dynamic_axes[{key!r}]")
    return Request(
        dim_names=dim_names, output_axes=output_axes, generated=_generated_names(dynamic_axes), names_program=True
    )


def _generated_names(dynamic_axes: Mapping) -> set[str]:
    """The names made for axes given without one (``{"x": [0]}``)."""
    return {
        n
        for key, axes in dynamic_axes.items()
        if not isinstance(axes, Mapping)
        for n in _axis_names(key, axes).values()
    }


def _tensor_input(
    key: str, combined: dict, leaves: list[_Leaf], tensors: list[int], input_names: Sequence[str] | None
) -> int | None:
    """The tensor input (its index among the tensor inputs) a dynamic_axes key names: an entry
    of ``input_names``, a default input name, or a top-level argument that is one tensor. None
    when it names no input (an output)."""
    if input_names and key in input_names[: len(tensors)]:
        return input_names.index(key)
    for t, i in enumerate(tensors):
        if leaves[i].name == key:
            return t
    own = [i for i, leaf in enumerate(leaves) if leaf.argument == key]
    if not own:
        return None
    if len(own) == 1 and isinstance(leaves[own[0]].value, torch.Tensor) and leaves[own[0]].name == key.lower():
        return tensors.index(own[0])
    held = [leaves[i].name for i in own if isinstance(leaves[i].value, torch.Tensor)]
    raise ArgumentError(
        f"dynamic_axes[{key!r}]: the argument `{key}` is a {type(combined[key]).__name__} of "
        f"{len(held)} tensor(s); key each tensor by its input name, {held}, or name them with "
        f"input_names"
    )


def _axis_names(key: str, axes) -> dict[int, str]:
    if isinstance(axes, Mapping):
        return {a: str(n) for a, n in axes.items()}
    if isinstance(axes, (list, tuple)):
        # torch.onnx's names for axes given without one.
        return {a: f"{key}_dynamic_axes_{j + 1}" for j, a in enumerate(axes)}
    raise ArgumentError(f"dynamic_axes[{key!r}] must be {{axis: name}} or [axes], got {axes!r}")


@dataclass(frozen=True)
class StaticAxis:
    """A requested dynamic axis the traced model fixed."""

    what: str  # input `x`, output `y`
    axis: int
    name: str  # the requested dimension name
    size: int
    why: str = ""


def warn_static(
    static: list[StaticAxis],
    shared: list[tuple[str, str, str]],
    ignored_keys: dict[str, str],
    ignored_axes: list[str],
    request: Request,
) -> None:
    """One warning for every requested axis that stayed static, for the names given to axes
    that torch found to be one size (``shared``: (kept name, dropped name, where); a name
    fastonnx made up is dropped silently), and for the keys and output axes it ignored
    (``ignored_keys``: key -> why, see Request.ignored_keys; ``ignored_axes``: a line each)."""
    shared = [s for s in shared if s[1] not in request.generated]
    if not static and not shared and not ignored_keys and not ignored_axes:
        return
    lines = [f"dynamic_axes[{key!r}] is ignored: {why}" for key, why in ignored_keys.items()] + ignored_axes
    if static:
        lines.append(
            f"dynamic_axes: {len(static)} axis/axes asked to be dynamic are static in the traced model, "
            f"so the ONNX graph takes only the traced size there:"
        )
        lines += [
            f"  - {s.what} axis {s.axis} ('{s.name}'): fixed to {s.size}" + (f" {s.why}" if s.why else "")
            for s in static
        ]
    if shared:
        lines.append("dynamic_axes: axes torch found to be equal share one dimension name:")
        lines += [f"  - '{dropped}' ({where}) is '{kept}'" for kept, dropped, where in shared]
    warn(DynamicAxesWarning("\n".join(lines)))


def warn_constrained(axes: list[tuple[str, int, str]]) -> None:
    """The warning for the input axes whose size is an expression of a size no input has
    (``2*s``: lowering.sizes.SizeNames.constrained_axes): torch.export's program checks at each
    call that a size has that form, an ONNX graph cannot."""
    if not axes:
        return
    lines = [
        f"{len(axes)} input axis/axes hold only for sizes of a form the ONNX graph cannot declare (a "
        "torch.export.Dim given as a multiple, 2 * Dim(...), or an ExportedProgram traced so): torch.export's "
        "program checks the form at each call, onnxruntime does not, and at other sizes it computes what the "
        "traced code computes for that form, which may differ from eager:"
    ]
    lines += [f"  - {what} axis {axis}: {form}" for what, axis, form in axes]
    lines.append("Feed only sizes of that form, or give the axis a plain torch.export.Dim (with min= and max=).")
    warn(DynamicAxesWarning("\n".join(lines)))


def refuse_static_in_program(static: list[StaticAxis]) -> None:
    """The error for the axes an ExportedProgram's dynamic_axes names that its trace made static:
    naming cannot make them dynamic, only tracing again can."""
    lines = [f"  - {s.what} axis {s.axis} ('{s.name}'): traced as {s.size}" for s in static]
    raise ArgumentError(
        "dynamic_axes names axes that the ExportedProgram has static (torch.export fixed them when it traced "
        "the program, so the graph takes only that size):\n" + "\n".join(lines) + "\ntrace the program again "
        "with a torch.export.Dim for each (torch.export.export(..., dynamic_shapes=...)), or leave them out of "
        "dynamic_axes"
    )


def why_static(shape_env, source: str, axis: int, size: int, fixed: dict) -> str:
    """Why the input axis torch's ShapeEnv knows as ``<source>.size()[axis]`` is static: the
    traced size when torch specialized it (0 and 1: an axis fastonnx did not trace dynamic, whose
    reason ``Attempt.why`` has otherwise), else the user source line where the trace fixed it,
    from ``fixed`` (symbol -> (what it was replaced by, frame), see trace())."""
    if size in (0, 1):
        return f"(traced at size {size}, which torch.export specializes)"
    frame = fixing_frame(shape_env, source, axis, fixed)
    if frame is None or frame.lineno is None:
        return ""
    line = linecache.getline(frame.filename, frame.lineno).strip()
    return f"at {frame.filename}:{frame.lineno}" + (f": {line}" if line else "")


def fixing_frame(shape_env, source: str, axis: int, fixed: dict) -> traceback.FrameSummary | None:
    """The model's frame where the trace replaced the symbol of ``<source>.size()[axis]`` (see
    why_static), or None."""
    if shape_env is None:
        return None
    wanted = f"{source}.size()[{axis}]"
    symbol = next(
        (s for s, sources in shape_env.var_to_sources.items() if any(x.name == wanted for x in sources)), None
    )
    frame = None
    seen = set()
    while symbol in fixed and symbol not in seen:
        seen.add(symbol)
        target, frame = fixed[symbol]
        symbol = target
    return frame


_TORCH = os.path.join(os.path.dirname(torch.__file__), "")
_STDLIB = tuple(os.path.join(sysconfig.get_paths()[k], "") for k in ("stdlib", "platstdlib"))
_SITE = tuple(os.path.join(sysconfig.get_paths()[k], "") for k in ("purelib", "platlib"))


def is_library(filename: str) -> bool:
    """Whether ``filename`` is torch's, fastonnx's or the standard library's: not the model's code."""
    return (
        in_package(filename)
        or filename.startswith(_TORCH)
        or filename.startswith("<")
        or (filename.startswith(_STDLIB) and not filename.startswith(_SITE))
    )


def in_installed_package(filename: str) -> bool:
    """Whether ``filename`` is in an installed package (site-packages: transformers, timm), not in
    the user's own files."""
    return filename.startswith(_SITE)


def in_scripted_code(frame: traceback.FrameSummary | None) -> bool:
    """Whether ``frame`` runs Python code ``torch.jit.script`` compiled (a scripted function, or one
    it calls): torch.export runs that code as Python, so a test it makes of a size is a guard
    there, where the TorchScript graph keeps it as a ``prim::If`` or ``prim::Loop``."""
    if frame is None or frame.lineno is None:
        return False
    compiled = getattr(torch.jit._state, "_jit_caching_layer", None)  # Python function -> its name
    for fn in list(compiled.keys()) if compiled is not None else []:
        code = getattr(fn, "__code__", None)
        if code is None or code.co_filename != frame.filename or code.co_name != frame.name:
            continue
        lines = [line for _, _, line in code.co_lines() if line is not None]
        if lines and min(lines) <= frame.lineno <= max(lines):
            return True
    return False


def user_frame(frames: Sequence[traceback.FrameSummary]) -> traceback.FrameSummary | None:
    """The innermost frame outside torch, fastonnx and the standard library: the model's code."""
    return next((f for f in reversed(frames) if not is_library(f.filename)), None)
