"""A torch.compile backend: ``torch.compile(model, backend="fastonnx")``.

Each FX graph TorchDynamo captures is traced with torch.export, converted by fastonnx and run
with onnxruntime. A graph fastonnx cannot convert (an op without a converter, an argument with no
ONNX form) or that dynamo hands over with symbolic sizes runs eagerly instead, with a warning
naming why: the rest of the model still runs in onnxruntime. The backend is registered under the
``torch_dynamo_backends`` entry point (pyproject.toml), so ``import fastonnx`` is not needed.
"""

from __future__ import annotations

import warnings

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import OutputKind, TensorArgument

from ..errors import ExportError


class OnnxRuntimeGraph:
    """Runs one exported graph in an onnxruntime session, taking and returning torch tensors."""

    def __init__(self, result, out_spec):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        self.session = ort.InferenceSession(result.to_bytes(), options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.out_spec = out_spec

    def __call__(self, *inputs):
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        feeds = {name: t.detach().contiguous().cpu().numpy() for name, t in zip(self.input_names, tensors)}
        outputs = [torch.from_numpy(o) for o in self.session.run(None, feeds)]
        return pytree.tree_unflatten(outputs, self.out_spec)


def backend(gm: torch.fx.GraphModule, example_inputs: list):
    """The torch.compile backend entry point."""
    from ..pipeline.export import export

    if any(not isinstance(x, torch.Tensor) for x in example_inputs):
        warnings.warn(
            "fastonnx backend: this graph takes symbolic sizes (dynamic shapes); it runs eagerly", stacklevel=2
        )
        return gm.forward
    if any(x.requires_grad for x in example_inputs) and torch.is_grad_enabled():
        warnings.warn(
            "fastonnx backend: ONNX graphs have no autograd; this graph runs eagerly under grad mode", stacklevel=2
        )
        return gm.forward
    try:
        result = export(gm, tuple(example_inputs), verbose=False)
    except ExportError as e:
        warnings.warn(f"fastonnx backend: this graph runs eagerly: {e}", stacklevel=2)
        return gm.forward
    specs = result.exported_program.graph_signature.output_specs
    if not all(isinstance(s.arg, TensorArgument) for s in specs if s.kind == OutputKind.USER_OUTPUT):
        # The ONNX graph returns numbers as tensors and drops None: not what the caller expects.
        warnings.warn("fastonnx backend: this graph returns values that are not tensors; it runs eagerly", stacklevel=2)
        return gm.forward
    return OnnxRuntimeGraph(result, result.exported_program.call_spec.out_spec)
