"""fastonnx's own ops for scripted lists whose length the graph computes (python/fastonnx/op_schemas.txt),
as the TorchScript front end records them: ONNX sequences, from opset 11. Eager runs each op on a
stand-in tensor (an item, the one last appended), so each row reads its sequence back as a tensor
whose eager value is the true one (a single item stacked, the last item at a position), or checks
the true value itself (a length)."""

import torch
from row import SampleRule, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

import fastonnx.frontends.jit.sequences  # noqa: F401  # declares torch.ops.fastonnx.sequence_*

XFAILS = (SampleRule("ONNX sequences exist from opset 11; fastonnx fails clearly below", opsets=range(11)),)
DTYPES = (torch.float32, torch.int64, torch.bool)
seq = torch.ops.fastonnx


def _of(*items: torch.Tensor) -> torch.Tensor:
    out = seq.sequence_empty(items[0].dtype)
    for item in items:
        out = seq.sequence_append(out, item)
    return out


def _stacks(dtype):
    for shape in [(3,), (2, 3)]:
        for dim in (0, -1):
            for new_axis in (True, False):
                yield SampleInput(tensor(shape, dtype), args=(dim, new_axis))


def _stack_of_one(x, dim, new_axis):
    """One item stacked (a new axis) or concatenated: what torch.stack and torch.cat give."""
    return seq.sequence_stack(_of(x), dim, new_axis)


def _positions(dtype):
    for shape in [(), (2, 3)]:
        for position in (1, -1):
            yield SampleInput(tensor(shape, dtype), args=(torch.tensor(position),))


def _last_of_two(x, position):
    """The second of (zeros, x): ``x`` (eager's stand-in is the item last appended)."""
    return seq.sequence_at(_of(torch.zeros_like(x), x), position)


def _tensors(dtype):
    for shape in [(), (2, 3)]:
        yield SampleInput(tensor(shape, dtype))


def _length_of_three(x):
    return seq.sequence_length(_of(x, x, x))


def _three(got, want: torch.Tensor, sample: SampleInput) -> None:
    assert got.item() == 3, f"a sequence of three items, onnxruntime gives length {got.item()}"


ROWS = (
    hand_written(
        "fastonnx::sequence_stack",
        "fastonnx::sequence_empty",
        "fastonnx::sequence_append",
        fn=_stack_of_one,
        samples=_stacks,
        dtypes=DTYPES,
        xfails=XFAILS,
    ),
    hand_written("fastonnx::sequence_at", fn=_last_of_two, samples=_positions, dtypes=DTYPES, xfails=XFAILS),
    hand_written(
        "fastonnx::sequence_length", fn=_length_of_three, samples=_tensors, dtypes=DTYPES, xfails=XFAILS, compare=_three
    ),
)
