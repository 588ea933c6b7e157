"""Views, copies and type conversions."""

import torch
from row import SampleRule, aten, from_opinfo, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput


def _unsafe_view(dtype):
    for shape, size in [((3, 4), [12]), ((2, 3, 4), [6, 4]), ((2, 3, 4), [-1, 3]), ((), [1])]:
        yield SampleInput(tensor(shape, dtype), args=(size,))


def _to_copy(dtype):
    for target in [torch.float64, torch.float16, torch.int64, torch.bool, None]:
        yield SampleInput(tensor((3, 4), dtype), kwargs={"dtype": target})


def _transposed(dtype):
    yield SampleInput(tensor((3, 4), dtype))
    yield SampleInput(tensor((2, 3, 4), dtype))
    yield SampleInput(tensor((2, 3, 4, 5), dtype), kwargs={"memory_format": torch.channels_last})


ROWS = (
    from_opinfo("t", "t"),
    from_opinfo("permute", "permute"),
    from_opinfo("transpose", "transpose.int"),
    from_opinfo("view", "view"),
    from_opinfo("reshape", "reshape"),
    from_opinfo("flatten", "flatten.using_ints"),
    from_opinfo("cat", "cat"),
    from_opinfo("clone", "clone"),
    # torch.export records Tensor.to(dtype) as a metadata assert followed by to.dtype.
    from_opinfo(
        "to",
        "to.dtype",
        "_assert_tensor_metadata",
        sample_filter=SampleRule(
            "to(device, ...) and to(other_tensor, ...) are aten.to.device, not in this row",
            lambda s: bool(s.args) and not isinstance(s.args[0], torch.dtype),
        ),
    ),
    hand_written("_unsafe_view", fn=lambda x, size: aten._unsafe_view.default(x, size), samples=_unsafe_view),
    hand_written("_to_copy", fn=lambda x, **kw: aten._to_copy.default(x, **kw), samples=_to_copy),
    # OpInfo's contiguous samples are already contiguous, so torch.export records no op for them.
    hand_written("contiguous", fn=lambda x, **kw: x.transpose(0, -1).contiguous(**kw), samples=_transposed),
)
