"""fastonnx as the ONNX step of transformers' exporters (``transformers.exporters``, transformers
5.24 and later).

``FastOnnxExporter`` takes the place of transformers' ``OnnxExporter``: ``export`` and
``export_for_generation`` trace each graph the way transformers' ``DynamoExporter`` does (its
model patches, cache pytrees and ``Dim.AUTO`` shapes for ``OnnxConfig(dynamic=True)``), and
fastonnx converts the traced program instead of ``torch.onnx.export``. What it returns runs on
transformers' ONNX Runtime runner like ``OnnxExporter``'s does::

    from transformers.exporters import OnnxConfig
    from fastonnx.integrations.transformers import FastOnnxExporter

    exported = FastOnnxExporter().export_for_generation(model, inputs, OnnxConfig(dynamic=True))
    exported.save_pretrained("exported")   # prefill.onnx, decode.onnx (+ .data), export.json, configs

Graph inputs are named as transformers' runner binds them: each leaf's path in the forward's
keyword arguments (``input_ids``, ``cache.layers.0.keys``; ``input.`` in front of one the graph
also returns). Outputs are named by their path in what the model returns (``logits``,
``cache.layers.0.keys``, ``output.`` in front of one an input also has). The cache keeps the
model's dtype.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import os
import tempfile
import weakref
from pathlib import Path
from unittest import mock

import torch
import transformers
import transformers.exporters.base as transformers_exporters_base
from transformers.cache_utils import Cache
from transformers.exporters.configs import OnnxConfig
from transformers.exporters.exporter_dynamo import DynamoExporter
from transformers.exporters.exporter_onnx import OnnxExporter
from transformers.exporters.metadata import ExportMetadata, record_output_structure
from transformers.exporters.utils import (
    _capture_forward,
    _merge_decode_calls,
    decompose_for_generation,
    disambiguate_io_names,
    get_leaf_tensors,
    patch_model_outputs,
    quantize_converted_model,
)

from ..core.progress import Progress
from ..core.stack import warn
from ..core.torch_logs import held_torch_logs
from ..errors import ArgumentError, DynamicAxesWarning
from ..frontends.export.fake_kernels import quick_fake_kernels
from ..pipeline.export import export
from ..weights.source import for_module
from .output_directory import on_meta


class FastOnnxExporter(OnnxExporter):
    """transformers' ``OnnxExporter`` with fastonnx converting the traced graphs.

    ``export_kwargs`` go to every ``fastonnx.export`` call (``verbose=False``, ``report=``...);
    with ``weights=`` (and ``dtype=``), a model on the meta device is exported with its weights
    streamed from a checkpoint, as ``python -m fastonnx export-hf --generation`` does.
    From ``OnnxConfig`` it takes ``dynamic``, ``dynamic_shapes``, ``strict``,
    ``prefer_deferred_runtime_asserts_over_guards``, ``opset_version`` and ``quantizer``;
    ``optimize`` needs nothing (fastonnx always folds and cleans). ``ort_fusions`` (onnxscript's
    rewriter for ONNX Runtime's fused ops) is not taken: an error says so.
    """

    # onnxscript brings onnx_ir, the program type transformers' ONNX Runtime runner loads.
    required_packages = ["torch", "onnx", "onnxscript"]
    tested_versions = {"torch": "2.13.0", "onnx": "1.23.2", "onnxscript": "0.7.2"}

    def __init__(self, **export_kwargs):
        reserved = sorted(
            {
                "args",
                "f",
                "kwargs",
                "input_names",
                "output_names",
                "opset_version",
                "dynamic_shapes",
                "dynamic_axes",
                "external_data",
            }
            & set(export_kwargs)
        )
        if reserved:
            raise ArgumentError(
                f"FastOnnxExporter sets {reserved} itself for each graph; set the opset and dynamic "
                "shapes in OnnxConfig"
            )
        self.export_kwargs = export_kwargs
        super().__init__()

    def export_for_generation(
        self, model, sample_inputs, config, *, generation_config=None, multi_token_decode: bool = False
    ):
        """transformers' ``export_for_generation``, with the decode graph traced on a step whose
        cache holds at least two positions (see ``_decompose_for_generation``). A model whose
        weights are on the meta device (``FastOnnxExporter(weights=...)``) generates on meta
        tensors while transformers captures each step's inputs (``_generating_on_meta``)."""
        decompose = functools.partial(_decompose_for_generation, verbose=self.export_kwargs.get("verbose"))
        with mock.patch.object(transformers_exporters_base, "decompose_for_generation", decompose):
            return super().export_for_generation(
                model, sample_inputs, config, generation_config=generation_config, multi_token_decode=multi_token_decode
            )

    # transformers calls it with the OnnxConfig the exporter was made with (ort_fusions is its own).
    def export_program(self, model, sample_inputs, config: OnnxConfig):  # type: ignore[override]
        traced = self.trace(model, sample_inputs, config)
        onnx_model = _converted(
            traced.program, traced.input_names, traced.output_names, config.opset_version, traced.export_kwargs
        )
        if config.dynamic or config.dynamic_shapes is not None:
            _warn_sizes_of_one(onnx_model, sample_inputs)
        onnx_model = quantize_converted_model(onnx_model, sample_inputs, config)
        record_output_structure(traced.metadata, traced.outputs)
        return onnx_model, traced.metadata

    def trace(self, model, sample_inputs, config: OnnxConfig) -> Traced:
        """The ExportedProgram of ``model`` on ``sample_inputs`` as transformers' DynamoExporter
        traces it (its patches, cache pytrees, ``Dim.AUTO`` for ``dynamic=True``), with the
        names transformers gives its graph inputs and outputs, and the keyword arguments that
        convert it (``weights=`` resolved against the model's own names)."""
        if config.ort_fusions is not None:
            raise ArgumentError(
                f"OnnxConfig(ort_fusions={config.ort_fusions!r}) runs onnxscript's fusion rewriter, "
                "which fastonnx does not; leave ort_fusions=None"
            )
        if on_meta(model):
            # The captured steps' token ids, masks and positions are CPU tensors; a meta model's
            # trace needs them on its device (their values do not matter, their shapes do).
            sample_inputs = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in sample_inputs.items()}
        # torch.export runs here, before fastonnx's export (which converts): a spinner of its own.
        with (
            Progress(self.export_kwargs.get("verbose")).phase("tracing"),
            held_torch_logs() as torch_logs,
            patch_model_outputs(model) as (input_names, output_names, traced_outputs),
            quick_fake_kernels(),
        ):
            # DynamoExporter's trace (its patches, cache pytrees, Dim.AUTO for dynamic=True).
            program, metadata = DynamoExporter.export_program(self, model, sample_inputs, config=config)
        # torch's "dimension ... 0/1 specialized" lines: export_program's DynamicAxesWarning lists
        # the axes that stayed static that way, leaving out the decode step's one query token.
        torch_logs.show_warnings(unless=lambda message: "0/1 specialized" in message)
        input_names, output_names = disambiguate_io_names(input_names, output_names)
        export_kwargs = self.export_kwargs
        if export_kwargs.get("weights") is not None:
            # The program alone has no module to resolve tied weights, transformers' names and
            # computed buffers by: the checkpoint's tensors under the model's own names.
            export_kwargs = {**export_kwargs, "weights": for_module(model, export_kwargs["weights"])}
        return Traced(program, input_names, output_names, metadata, traced_outputs[-1], export_kwargs)


@dataclasses.dataclass(frozen=True)
class Traced:
    """One graph as transformers traced it, before conversion."""

    program: torch.export.ExportedProgram
    input_names: list[str]
    output_names: list[str]
    metadata: ExportMetadata
    outputs: object  # what the traced forward returned (its structure is recorded in the metadata)
    export_kwargs: dict


def _decompose_for_generation(
    model, inputs, generation_config=None, multi_token_decode: bool = False, *, verbose: bool | None = None
):
    """transformers' ``decompose_for_generation``, except that a decode step whose cache holds
    one position (an encoder-decoder's first step: the decoder has seen one token) is replaced
    by the next step. torch.export makes a dynamic size whose example is 1 static, so a decode
    graph traced on a one-position cache would run only that first step. A model on the meta
    device generates on meta tensors (``_generating_on_meta``), for the capture only: the graphs
    are traced from its own forward afterwards. ``verbose`` is the export's (a spinner while
    generate runs)."""
    with Progress(verbose).phase("running generate to capture its steps"):
        if not on_meta(model):
            return _captured_steps(model, inputs, generation_config, multi_token_decode)
        with _generatingon_meta(model) as restore:
            components = _captured_steps(model, inputs, generation_config, multi_token_decode)
        # transformers returns shallow copies of the model, made while its forward was patched.
        for submodel, _ in components.values():
            restore(submodel)
    return components


def _captured_steps(model, inputs, generation_config, multi_token_decode: bool):
    components = decompose_for_generation(
        model, inputs, generation_config=generation_config, multi_token_decode=multi_token_decode
    )
    decode_model, decode_inputs = components["decode"]
    cache = next((v for v in decode_inputs.values() if isinstance(v, Cache)), None)
    if cache is None or cache.get_seq_length() != 1:
        return components
    # transformers' own capture (decompose_prefill_decode), one generated token further.
    steps = 4 if multi_token_decode else 3
    capture = copy.deepcopy(generation_config if generation_config is not None else model.generation_config)
    capture.max_new_tokens = capture.min_new_tokens = steps
    with _capture_forward(model) as calls:
        model.generate(**copy.deepcopy(inputs), generation_config=capture)
    for call in calls:
        call.pop("logits_to_keep", None)
    components["decode"] = (decode_model, _merge_decode_calls(calls[2:4]) if multi_token_decode else calls[2])
    return components


@contextlib.contextmanager
def _generatingon_meta(model):
    """``model.generate`` on a model whose weights are on the meta device: each forward runs on
    meta tensors and returns logits of zeros on the CPU, so that generate's loop goes on and
    transformers' capture records each step's inputs and cache. Tracing needs their shapes and
    structure, not their values; the weights come from the checkpoint when the graphs are
    written."""
    original = model.forward

    def forward(*args, **kwargs):
        args, kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.to("meta"), (args, kwargs))
        out = original(*args, **kwargs)
        out.logits = torch.zeros(out.logits.shape, dtype=out.logits.dtype)
        return out

    own = model.__dict__.get("forward")  # usually none: the class's

    def restore(module) -> None:
        """The forward of ``model`` before the patch, on ``model`` or a copy of it: a graph traced
        from the patched one would compute logits of zeros."""
        if own is None:
            module.__dict__.pop("forward", None)
        else:
            module.forward = own

    model.forward = functools.wraps(original)(forward)
    try:
        yield restore
    finally:
        restore(model)


def _warn_sizes_of_one(onnx_model, sample_inputs) -> None:
    """torch.export makes a dynamic axis whose example size is 1 static: one warning lists each
    input axis that stayed static that way, so that a batch of one traced is not quietly a graph
    for one sequence only."""
    leaves = get_leaf_tensors(sample_inputs)
    caches = {key for key, value in sample_inputs.items() if isinstance(value, Cache)}
    fixed = []
    for value in onnx_model.graph.inputs:
        path = value.name.removeprefix("input.")
        example = leaves.get(path)
        if example is None:
            continue
        for axis, dim in enumerate(value.shape):
            # A decode step's one query token (the last axis of a token input beside a cache)
            # is one by design; multi_token_decode=True makes it dynamic.
            query = bool(caches) and path.split(".")[0] not in caches and axis == example.dim() - 1
            if isinstance(dim, int) and dim == 1 and example.shape[axis] == 1 and not query:
                fixed.append(f"`{value.name}` axis {axis}")
    if fixed:
        warn(
            f"these input axes were traced at size 1 and stay 1 in the ONNX graph (torch.export specializes "
            f"a size of 1): {', '.join(fixed)}; trace with 2 or more (a batch of 2)",
            DynamicAxesWarning,
            through=[os.path.dirname(transformers.__file__)],  # (its exporters call export_program)
        )


def _converted(program, input_names, output_names, opset_version, export_kwargs):
    """The ExportedProgram as an ``onnx_ir.Model`` whose weights stay in a file beside the model
    (a temporary directory that lives as long as the model), so a large model is never held in
    memory twice and ONNX Runtime opens it by path (``meta["path"]``, as for a saved model)."""
    import onnx_ir

    directory = tempfile.TemporaryDirectory(prefix="fastonnx-")
    path = Path(directory.name) / "model.onnx"
    export(
        program,
        (),
        path,
        input_names=input_names,
        output_names=output_names,
        opset_version=opset_version,
        external_data=True,
        **export_kwargs,
    )
    model = onnx_ir.load(str(path))
    model.meta["path"] = str(path)
    weakref.finalize(model, directory.cleanup)
    return model


__all__ = ["FastOnnxExporter"]
