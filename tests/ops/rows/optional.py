"""fastonnx's own ops for values a scripted model may leave None (python/fastonnx/op_schemas.txt), as
the TorchScript front end records them: an ONNX optional holding a tensor, or an empty one (which
onnxruntime gives as None), from opset 15."""

import torch
from row import SampleRule, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

import fastonnx.frontends.jit.optionals  # noqa: F401  # declares torch.ops.fastonnx.optional, optional_none

XFAILS = (
    SampleRule("ONNX optionals exist from opset 15; fastonnx fails clearly below", opsets=range(15)),
    SampleRule("onnxruntime 1.32 has no kernel for Optional at opset 28", opsets=range(28, 1000)),
)
DTYPES = (torch.float32, torch.int64, torch.bool)


def _tensors(dtype):
    for shape in [(), (3,), (2, 3)]:
        yield SampleInput(tensor(shape, dtype))


def _held(x):
    return torch.ops.fastonnx.optional(x)


def _none(x):
    """An empty optional of ``x``'s type (``x`` is an input the graph does not read)."""
    return torch.ops.fastonnx.optional_none(x.dtype, list(x.shape))


def _empty(got, want: torch.Tensor, sample: SampleInput) -> None:
    assert got is None, f"an empty optional, onnxruntime gives {type(got).__name__}"


ROWS = (
    hand_written("fastonnx::optional", fn=_held, samples=_tensors, dtypes=DTYPES, xfails=XFAILS),
    hand_written("fastonnx::optional_none", fn=_none, samples=_tensors, dtypes=DTYPES, xfails=XFAILS, compare=_empty),
)
