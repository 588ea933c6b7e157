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

import copy
import tempfile
import weakref
from pathlib import Path

from transformers.exporters.configs import OnnxConfig
from transformers.exporters.exporter_dynamo import DynamoExporter
from transformers.exporters.exporter_onnx import OnnxExporter
from transformers.exporters.metadata import record_output_structure
from transformers.exporters.utils import disambiguate_io_names, patch_model_outputs, quantize_converted_model

from .._export import export
from ..errors import ArgumentError


class FastOnnxExporter(OnnxExporter):
    """transformers' ``OnnxExporter`` with fastonnx converting the traced graphs.

    ``export_kwargs`` go to every ``fastonnx.export`` call (``verbose=False``, ``report=``...).
    From ``OnnxConfig`` it takes ``dynamic``, ``dynamic_shapes``, ``strict``,
    ``prefer_deferred_runtime_asserts_over_guards``, ``opset_version`` and ``quantizer``;
    ``optimize`` needs nothing (fastonnx always folds and cleans). ``ort_fusions`` (onnxscript's
    rewriter for ONNX Runtime's fused ops) is not taken: an error says so.
    """

    # onnxscript brings onnx_ir, the program type transformers' ONNX Runtime runner loads.
    required_packages = ["torch", "onnx", "onnxscript"]
    tested_versions = {"torch": "2.13.0", "onnx": "1.23.2", "onnxscript": "0.7.2"}

    def __init__(self, **export_kwargs):
        reserved = sorted({"args", "f", "kwargs", "input_names", "output_names", "opset_version",
                           "dynamic_shapes", "dynamic_axes", "external_data"} & set(export_kwargs))
        if reserved:
            raise ArgumentError(f"FastOnnxExporter sets {reserved} itself for each graph; set the opset and dynamic "
                                "shapes in OnnxConfig")
        self.export_kwargs = export_kwargs
        super().__init__()

    def export_program(self, model, sample_inputs, config: OnnxConfig):
        if config.ort_fusions is not None:
            raise ArgumentError(f"OnnxConfig(ort_fusions={config.ort_fusions!r}) runs onnxscript's fusion rewriter, "
                                "which fastonnx does not; leave ort_fusions=None")
        with patch_model_outputs(model) as (input_names, output_names, traced_outputs):
            # DynamoExporter's trace (its patches, cache pytrees, Dim.AUTO for dynamic=True).
            program, metadata = DynamoExporter.export_program(self, model, sample_inputs, config=config)
        input_names, output_names = disambiguate_io_names(input_names, output_names)
        onnx_model = _converted(program, sample_inputs, input_names, output_names, config.opset_version,
                                self.export_kwargs)
        onnx_model = quantize_converted_model(onnx_model, sample_inputs, config)
        record_output_structure(metadata, traced_outputs[-1])
        return onnx_model, metadata


def _converted(program, sample_inputs, input_names, output_names, opset_version, export_kwargs):
    """The ExportedProgram as an ``onnx_ir.Model`` whose weights stay in a file beside the model
    (a temporary directory that lives as long as the model), so a large model is never held in
    memory twice and ONNX Runtime opens it by path (``meta["path"]``, as for a saved model)."""
    import onnx_ir

    directory = tempfile.TemporaryDirectory(prefix="fastonnx-")
    path = Path(directory.name) / "model.onnx"
    export(program, (), path, kwargs=copy.deepcopy(dict(sample_inputs)), input_names=input_names,
           output_names=output_names, opset_version=opset_version, external_data=True, **export_kwargs)
    model = onnx_ir.load(str(path))
    model.meta["path"] = str(path)
    weakref.finalize(model, directory.cleanup)
    return model


__all__ = ["FastOnnxExporter"]
