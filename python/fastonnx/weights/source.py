"""Weights for a model traced on the meta device (``export(..., weights=SOURCE)``).

The trace needs only shapes; the bytes come from the checkpoint when the file is written. Each
weight of the traced program is matched to a checkpoint tensor by name, and the program's
state dict then holds views of the memory-mapped checkpoint: the writer streams them to the
ONNX file (or, with ``weights_mode="reference"``, the model points into the checkpoint).
Everything is checked before anything is written: one ``ArgumentError`` lists every weight
that is missing or whose shape or dtype disagrees.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from .. import _C
from ..errors import ArgumentError
from .safetensors import Entry, SafetensorsFile

WEIGHTS_MODES = ("copy", "reference")
STREAM_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# Attribute of a checkpoint tensor converted while written: the dtype the graph wants.
STREAM_DTYPE = "_fastonnx_stream_dtype"
_WEIGHT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
# A submodule rebuilt on the CPU to compute its missing buffers holds at most this many bytes of
# parameters (a rotary embedding holds none).
_MAX_REBUILT_BYTES = 64 << 20


@dataclass
class Checkpoint:
    """A weight source opened: its tensors by name, lazily (safetensors entries, or the
    mapping's values), and the safetensors files it maps."""

    tensors: Mapping[str, object]  # name -> Entry or a tensor
    files: list[SafetensorsFile] = field(default_factory=list)

    def meta(self, name: str) -> tuple[torch.dtype, tuple[int, ...]]:
        t = self.tensors[name]
        if isinstance(t, Entry):
            return t.dtype, t.shape
        assert isinstance(t, torch.Tensor)
        return t.dtype, tuple(t.shape)

    def tensor(self, name: str) -> torch.Tensor:
        t = self.tensors[name]
        return t.tensor() if isinstance(t, Entry) else t  # type: ignore[return-value]


def open_source(source: object) -> Checkpoint:
    """``weights=``: a ``.safetensors`` file, a directory holding ``model.safetensors`` or a
    sharded ``model.safetensors.index.json``, or a mapping from names to tensors (or a
    Checkpoint made by ``for_module``)."""
    if isinstance(source, Checkpoint):
        return source
    if isinstance(source, Mapping):
        wrong = [k for k in source if not isinstance(k, str)]
        if wrong:
            raise ArgumentError(f"weights: a mapping's keys are the weights' names (str), got {wrong[0]!r}")
        return Checkpoint(source)
    if not isinstance(source, (str, os.PathLike)):
        raise ArgumentError(
            "weights must be a .safetensors file, a directory holding model.safetensors or "
            f"model.safetensors.index.json, or a mapping from names to tensors; got {type(source).__name__}"
        )
    path = os.fspath(source)
    if os.path.isdir(path):
        return _open_directory(path)
    if not os.path.isfile(path):
        raise ArgumentError(f"weights: {path} does not exist")
    file = SafetensorsFile(path)
    return Checkpoint(file.entries, [file])


def _open_directory(path: str) -> Checkpoint:
    index = os.path.join(path, "model.safetensors.index.json")
    single = os.path.join(path, "model.safetensors")
    if os.path.isfile(single):
        file = SafetensorsFile(single)
        return Checkpoint(file.entries, [file])
    if not os.path.isfile(index):
        raise ArgumentError(
            f"weights: directory {path} holds neither model.safetensors nor model.safetensors.index.json"
        )
    with open(index) as f:
        weight_map = json.load(f).get("weight_map")
    if not isinstance(weight_map, dict):
        raise ArgumentError(f"weights: {index} has no weight_map")
    files = {shard: SafetensorsFile(os.path.join(path, shard)) for shard in sorted(set(weight_map.values()))}
    tensors: dict[str, object] = {}
    for name, shard in weight_map.items():
        if name not in files[shard].entries:
            raise ArgumentError(f"weights: {index} puts `{name}` in {shard}, which does not hold it")
        tensors[name] = files[shard].entries[name]
    return Checkpoint(tensors, list(files.values()))


def for_module(module: torch.nn.Module, source: object) -> Checkpoint:
    """``source``'s tensors under ``module``'s own state-dict names, with the buffers the
    checkpoint lacks computed: the weights of programs traced from ``module`` and exported
    without it (``FastOnnxExporter``'s prefill and decode graphs), which have no module to resolve
    tied weights, transformers' names and computed buffers by. A name not found is left out (the
    export lists it); the checkpoint's files stay mapped, for ``weights_mode="reference"``."""
    checkpoint = open_source(source)
    names = _Names(module, checkpoint)
    tensors: dict[str, object] = {}
    missing: list[str] = []
    named = [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]
    for name, _ in named:
        found = names.find(name)
        if found is None:
            missing.append(name)
        else:
            tensors[name] = checkpoint.tensors[found]
    meta = dict(named)
    computed, _ = _computed_buffers(module, missing, meta.__getitem__)
    tensors.update(computed)
    return Checkpoint(tensors, checkpoint.files)


def read_while_tracing(model: object, checkpoint: Checkpoint) -> _C.ReadWhileTracing | None:
    """Starts reading ``model``'s weights from the checkpoint's files into the page cache on a
    native thread, in the order of its state dict (the order the writer most likely takes them),
    while the model is traced and converted: the disk is idle until the writer starts, and on an
    8B model tracing takes seconds. Stop it (``stop()``) before the writer starts. None when no
    weight comes from a safetensors file."""
    if not isinstance(model, torch.nn.Module):
        return None
    names = _Names(model, checkpoint)
    order: list[tuple[int, int]] = []
    seen: set[str] = set()
    for name in model.state_dict(keep_vars=True):
        found = names.find(name)
        entry = checkpoint.tensors.get(found) if found is not None and found not in seen else None
        if isinstance(entry, Entry) and entry.nbytes:
            seen.add(found)  # type: ignore[arg-type]  # found is a str here
            order.append((entry.tensor().data_ptr(), entry.nbytes))
    return _C.ReadWhileTracing(order) if order else None


# A read export() did not start: reading_ahead's, for the exports in its block.
_reading_ahead: contextvars.ContextVar[_C.ReadWhileTracing | None] = contextvars.ContextVar(
    "fastonnx_reading_ahead", default=None
)


@contextlib.contextmanager
def reading_ahead(model: torch.nn.Module, source: object):
    """``model``'s weights read from ``source`` (see ``read_while_tracing``) from here on, for an
    export whose trace happens before ``export()`` is called: transformers' exporter traces the
    program that ``export()`` then converts and writes. An ``export()`` copying weights within the
    block stops this read before its writer starts, instead of starting one of its own; the read
    stops at the end of the block in any case."""
    reading = read_while_tracing(model, open_source(source))
    token = _reading_ahead.set(reading)
    try:
        yield
    finally:
        _reading_ahead.reset(token)
        if reading is not None:
            reading.stop()


def started_reading(model: object, checkpoint: Checkpoint) -> _C.ReadWhileTracing | None:
    """The read of ``model``'s weights for an export that copies them: ``reading_ahead``'s when
    the export is within one, else one started here."""
    return _reading_ahead.get() or read_while_tracing(model, checkpoint)


def check_weights_mode(weights: object, weights_mode: object, dtype: object) -> None:
    if weights_mode not in WEIGHTS_MODES:
        raise ArgumentError(f"weights_mode must be one of {', '.join(map(repr, WEIGHTS_MODES))}, got {weights_mode!r}")
    if dtype is not None and dtype not in STREAM_DTYPES:
        raise ArgumentError(f"dtype must be None or one of {', '.join(map(str, STREAM_DTYPES))}, got {dtype!r}")
    if weights is None and (weights_mode != "copy" or dtype is not None):
        raise ArgumentError("weights_mode and dtype apply to weights streamed from weights=...; give weights")


def prepare(
    model: torch.nn.Module | ExportedProgram, args: tuple, kwargs: dict | None, dtype: torch.dtype | None
) -> tuple[torch.nn.Module | ExportedProgram, tuple, dict | None]:
    """The module and example inputs to trace. On the meta device, the inputs go there too: an
    op mixing a CPU input and a meta weight (a Linear) fails to trace, and only their shapes
    and dtypes matter. With ``dtype``, a copy of the module whose floating weights have that
    dtype (a meta module's copy costs nothing; the caller's module is left as it was)."""
    if not isinstance(model, torch.nn.Module):
        return model, args, kwargs
    on_meta = all(t.is_meta for t in _tensors(model))
    if dtype is not None and not on_meta:
        raise ArgumentError(
            "dtype= converts weights streamed from a checkpoint: the model's weights must be on the meta device"
        )
    if not on_meta:
        return model, args, kwargs
    to_meta = functools.partial(torch.utils._pytree.tree_map_only, torch.Tensor, lambda t: t.to("meta"))
    return (_with_dtype(model, dtype) if dtype is not None else model), to_meta(args), to_meta(kwargs)


def _with_dtype(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """``model`` in ``dtype`` as ``Module.to`` makes it (a copy), unless its floating parameters
    have that dtype already: a model built in its dtype (transformers' ``from_config(config,
    dtype=...)``) keeps the buffers it computes in their own (rotary ``inv_freq`` in float32)."""
    floating = [p for p in model.parameters() if p.is_floating_point()]
    if floating and all(p.dtype == dtype for p in floating):
        return model
    return copy.deepcopy(model).to(dtype)


def _tensors(model: torch.nn.Module) -> Iterable[torch.Tensor]:
    yield from model.parameters()
    yield from model.buffers()


def bind(ep: ExportedProgram, model: object, checkpoint: Checkpoint, dtype: torch.dtype | None) -> None:
    """Puts the checkpoint's tensors in ``ep``'s state dict (and constants) in place of its
    meta tensors; raises one ``ArgumentError`` listing every weight that cannot be bound."""
    module = model if isinstance(model, torch.nn.Module) else None
    names = _Names(module, checkpoint)
    problems: list[str] = []
    missing: list[str] = []
    lost: list[str] = []  # constants the forward made on the meta device
    bound: dict[str, torch.Tensor] = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind not in _WEIGHT_KINDS or spec.target is None:
            continue
        target = spec.target
        traced = ep.state_dict[target] if target in ep.state_dict else ep.constants.get(target)
        if not isinstance(traced, torch.Tensor) or not traced.is_meta:
            continue
        if traced.numel() == 0:  # no bytes to take (a KV cache's empty tensors before its first update)
            bound[target] = torch.empty(traced.shape, dtype=traced.dtype)
            continue
        found = names.find(target)
        if found is None and spec.kind == InputKind.CONSTANT_TENSOR:
            # torch.export lifts a tensor the forward makes from Python data (a list used as an
            # index, torch.tensor(...)); made on the meta device, its value is lost.
            lost.append(target)
            problems.append(
                f"`{target}`: a tensor the model's forward creates from Python values (a list used as an index, "
                "torch.tensor(...)), which has no value when the model is on the meta device; export the model "
                "with its weights loaded (from_pretrained) instead of streaming them"
            )
            continue
        if found is None:
            missing.append(target)
            continue
        problem = _mismatch(target, found, traced, checkpoint.meta(found), dtype)
        if problem:
            problems.append(problem)
            continue
        tensor = checkpoint.tensor(found)
        if tensor.dtype != traced.dtype:
            setattr(tensor, STREAM_DTYPE, traced.dtype)
        bound[target] = tensor
    if missing:
        computed, still_missing = _computed_buffers(module, missing, functools.partial(_traced, ep))
        bound.update(computed)
        problems[:0] = still_missing
    if problems:
        error = ArgumentError(
            f"weights: {len(problems)} weight(s) of the model cannot be taken from the checkpoint:\n  "
            + "\n  ".join(problems)
        )
        # (export-hf loads such a model with its weights and exports it again)
        error.constants_without_values = lost  # type: ignore[attr-defined]
        raise error
    for target, tensor in bound.items():
        if target in ep.state_dict:
            ep.state_dict[target] = tensor
        else:
            ep.constants[target] = tensor


def _mismatch(
    target: str,
    found: str,
    traced: torch.Tensor,
    stored: tuple[torch.dtype, tuple[int, ...]],
    dtype: torch.dtype | None,
) -> str:
    stored_dtype, stored_shape = stored
    where = f"`{target}`" + (f" (checkpoint `{found}`)" if found != target else "")
    if tuple(traced.shape) != stored_shape:
        return f"{where}: shape {list(stored_shape)} in the checkpoint, {list(traced.shape)} in the model"
    convertible = dtype is not None and stored_dtype in STREAM_DTYPES and traced.dtype in STREAM_DTYPES
    if stored_dtype != traced.dtype and not convertible:
        return (
            f"{where}: dtype {stored_dtype} in the checkpoint, {traced.dtype} in the model "
            "(dtype= converts floating weights while streaming)"
        )
    return ""


class _Names:
    """Finds a model weight's name in the checkpoint: the same name, else one spelled by
    transformers' conventions (the base model's prefix, ``model.``, added or dropped), else the
    name of a weight tied to it (the same tensor under several names, e.g. lm_head and the
    embedding)."""

    def __init__(self, module: torch.nn.Module | None, checkpoint: Checkpoint):
        self.stored = checkpoint.tensors
        prefixes = {"model"}
        base = getattr(module, "base_model_prefix", None)
        if isinstance(base, str):
            prefixes.add(base)
        self.prefixes = sorted(p for p in prefixes if p)
        self.renamed = _renamed_by_transformers(module, self.stored)
        self.aliases: dict[str, list[str]] = {}
        if module is not None:
            by_tensor: dict[int, list[str]] = {}
            named = [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]
            for name, t in named:
                by_tensor.setdefault(id(t), []).append(name)
            for group in by_tensor.values():
                for name in group:
                    self.aliases[name] = group

    def find(self, name: str) -> str | None:
        for alias in [name, *(a for a in self.aliases.get(name, ()) if a != name)]:
            for spelling in self._spellings(alias):
                if spelling in self.stored:
                    return spelling
                if spelling in self.renamed:
                    return self.renamed[spelling]
        return None

    def _spellings(self, name: str) -> Iterable[str]:
        yield name
        for p in self.prefixes:
            if name.startswith(p + "."):
                yield name[len(p) + 1 :]
            else:
                yield f"{p}.{name}"


def _renamed_by_transformers(module: torch.nn.Module | None, stored: Iterable[str]) -> dict[str, str]:
    """The checkpoint's names as transformers renames them when it loads the model (its
    ``WeightRenaming``s: gpt_neox's ``embed_out`` is the model's ``lm_head``), by the model's name.
    transformers' own tables, since they change with its versions; its ``WeightConverter``s
    (weights merged or split while loading) are no renames and stay unmatched."""
    if module is None or "transformers" not in sys.modules:  # a model of transformers' has imported it
        return {}
    try:
        from transformers import PreTrainedModel
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightRenaming, apply_renamings
    except ImportError:  # transformers before 5 renamed nothing
        return {}
    if not isinstance(module, PreTrainedModel):
        return {}
    renamings = [t for t in get_model_conversion_mapping(module) if isinstance(t, WeightRenaming)]
    if not renamings:
        return {}
    renamed = {}
    for key in stored:
        name = apply_renamings(key, renamings)
        if name != key:
            renamed[name] = key
    return renamed


def _traced(ep: ExportedProgram, name: str) -> torch.Tensor:
    return ep.state_dict[name] if name in ep.state_dict else ep.constants[name]


def _computed_buffers(
    module: torch.nn.Module | None, missing: list[str], traced_weight: Callable[[str], torch.Tensor]
) -> tuple[dict[str, torch.Tensor], list[str]]:
    """The missing weights that are buffers a module computes (rotary ``inv_freq``, masks,
    position ids), computed on the CPU in the shape and dtype ``traced_weight(name)`` has; and a
    line for each weight still missing."""
    computed: dict[str, torch.Tensor] = {}
    lines: list[str] = []
    buffers = dict(module.named_buffers(remove_duplicate=False)) if module is not None else {}
    rebuilt: dict[str, torch.nn.Module | str] = {}
    for name in missing:
        if name not in buffers or module is None:
            lines.append(f"`{name}`: not in the checkpoint")
            continue
        owner_name, _, attr = name.rpartition(".")
        if owner_name not in rebuilt:
            rebuilt[owner_name] = _rebuild(module, owner_name)
        owner = rebuilt[owner_name]
        if isinstance(owner, str):
            lines.append(f"`{name}`: not in the checkpoint, and a buffer fastonnx cannot compute ({owner})")
            continue
        value = getattr(owner, attr, None)
        traced = traced_weight(name)
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(traced.shape):
            lines.append(f"`{name}`: not in the checkpoint, and rebuilding its module on the CPU gave another shape")
            continue
        computed[name] = value.to(traced.dtype).contiguous()
    return computed, lines


def _rebuild(root: torch.nn.Module, path: str) -> torch.nn.Module | str:
    """The submodule at ``path`` built again on the CPU, so that its buffers hold what its
    ``__init__`` computes: with the arguments of its constructor that it keeps as attributes
    of the same names (``config``, ``dim``, ``base``...), else, in a transformers model, by
    the model's own ``_init_weights`` as ``from_pretrained`` does for buffers a checkpoint lacks.
    A string says why neither worked."""
    meta = root.get_submodule(path) if path else root
    # A module with large parameters (gemma's scaled embedding: its weight, and the scale it
    # computes as a buffer) keeps them on the meta device: only its own buffers are made.
    large = sum(p.numel() * p.element_size() for p in meta.parameters()) > _MAX_REBUILT_BYTES
    why = f"its module `{path or type(root).__name__}` holds large parameters" if large else _by_constructor(meta)
    if isinstance(why, torch.nn.Module):
        return why
    init_weights = getattr(root, "_init_weights", None)
    if callable(init_weights):
        cpu = copy.deepcopy(meta)
        if large:
            for name, b in list(cpu._buffers.items()):
                if b is not None:
                    cpu._buffers[name] = torch.empty(b.shape, dtype=b.dtype)
        else:
            cpu = cpu.to_empty(device="cpu")
        for b in cpu.buffers(recurse=False):
            if b.is_floating_point():
                b.fill_(float("nan"))  # a buffer _init_weights leaves alone stays detectably unset
        try:
            with torch.no_grad():
                init_weights(cpu)
        except Exception as e:  # noqa: BLE001 - any failure means "cannot compute", said in the error
            return f"{why}; transformers' _init_weights failed: {e}"
        if all(not b.is_floating_point() or not b.isnan().any() for b in cpu.buffers(recurse=False)):
            return cpu
        why += "; transformers' _init_weights left it unset"
    return why


def _by_constructor(meta: torch.nn.Module) -> torch.nn.Module | str:
    cls = type(meta)
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return f"{cls.__name__}'s constructor has no readable signature"
    kwargs = {}
    for p in list(params.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if hasattr(meta, p.name):
            kwargs[p.name] = getattr(meta, p.name)
        elif p.name == "device":
            kwargs[p.name] = "cpu"
        elif p.default is p.empty:
            return f"{cls.__name__}'s constructor argument `{p.name}` is not an attribute of the module"
    try:
        with torch.device("cpu"):
            return cls(**kwargs)
    except Exception as e:  # noqa: BLE001 - any failure means "cannot compute", said in the error
        return f"{cls.__name__}({', '.join(kwargs)}) failed on the CPU: {e}"


@dataclass(frozen=True)
class Streamed:
    """How an export's weights come from a checkpoint: what ``ExportResult.save`` needs."""

    checkpoint: Checkpoint
    mode: str  # "copy" or "reference"
    dtype: torch.dtype | None

    def check_referable(self, model_path: str | os.PathLike) -> str:
        """The directory of a model saved at ``model_path``, when it can point into the checkpoint's
        files: ONNX external data is found relative to the model's directory, and onnx's checker
        and runtimes refuse a location that leaves it, so a checkpoint elsewhere is an error, not
        a ``..`` path. Asked before an export's work, and by references()."""
        directory = os.path.dirname(os.path.realpath(os.fspath(model_path)))
        for f in self.checkpoint.files:
            location = os.path.relpath(f.path, directory)
            if location.startswith(os.pardir + os.sep) or location == os.pardir:
                raise ArgumentError(
                    f'weights_mode="reference": the model must be saved in the checkpoint\'s directory (or a parent '
                    f"of it), since ONNX finds external data relative to the model; {f.path} is not under {directory}"
                )
        return directory

    def references(self, model_path: str | os.PathLike) -> list[tuple[int, int, str]]:
        """(address, size, location) of each mapped checkpoint file, for the writer."""
        directory = self.check_referable(model_path)
        return [(f.address, f.size, os.path.relpath(f.path, directory)) for f in self.checkpoint.files if f.address]
