"""Tensor creation: ranges, filled tensors, fills and uninitialized (empty) tensors."""

import torch
from row import PARITY_DTYPES, aten, from_opinfo, hand_written, shapes_only, tensor
from torch.testing._internal.opinfo.core import SampleInput


def _fill_tensor(dtype):
    """The fill value is a 0-d tensor, of self's dtype or another one."""
    for shape, value in [((3, 4), tensor((), dtype)), ((2, 0, 3), tensor((), dtype)), ((), tensor((), torch.float64)),
                         ((5,), torch.tensor(True)), ((2, 3), torch.tensor(-7))]:
        yield SampleInput(tensor(shape, dtype), args=(value,))


def _float_steps(dtype):
    """Fractional steps whose length rounds up, negative steps, and int dtypes from floats."""
    for start, end, step, target in [
        (0.0, 1.0, 0.1, None),
        (-2.5, 3.7, 0.3, None),
        (5.0, -1.0, -0.7, None),
        (1.0, 2.0, 1 / 3, torch.float16),
        (0.5, 7.2, 1.5, torch.int64),
        (-3, 11, 4, torch.int32),
        (0, 100, 7, torch.float64),
    ]:
        yield SampleInput(start, args=(end, step), kwargs={"dtype": target})


ROWS = (
    from_opinfo("arange", "arange", "arange.start", "arange.start_step"),
    hand_written(
        "arange.start_step", id="arange.steps", fn=lambda start, end, step, **kw: torch.arange(start, end, step, **kw),
        samples=_float_steps,
    ),
    from_opinfo("full", "full"),
    from_opinfo("zeros", "zeros"),
    from_opinfo("ones", "ones"),
    from_opinfo("full_like", "full_like"),
    from_opinfo("zeros_like", "zeros_like"),
    from_opinfo("ones_like", "ones_like"),
    from_opinfo("new_zeros", "new_zeros"),
    from_opinfo("new_ones", "new_ones"),
    from_opinfo("new_full", "new_full"),
    from_opinfo("scalar_tensor", "scalar_tensor"),
    from_opinfo("eye", "eye", "eye.m"),
    from_opinfo("fill", "fill.Scalar"),
    hand_written(
        "fill.Tensor", fn=lambda x, value: aten.fill.Tensor(x, value), samples=_fill_tensor, dtypes=PARITY_DTYPES
    ),
    # torch leaves the memory of these uninitialized: only shapes and dtypes are compared.
    from_opinfo("empty", "empty.memory_format", compare=shapes_only),
    from_opinfo("empty_strided", "empty_strided", compare=shapes_only),
    from_opinfo("empty_like", "empty_like", compare=shapes_only),
    from_opinfo("new_empty", "new_empty", compare=shapes_only),
)
