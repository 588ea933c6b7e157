"""What a row of the per-op parity table is, and the sample generators rows share.

Each row names the ATen overloads it covers (as native_functions.yaml spells them) and where its
samples come from: an OpInfo of torch's ``op_db``, or hand-written samples for overloads no
OpInfo reaches. The rows themselves live in ``rows/<family>.py``, one module per op family,
each defining ``ROWS``.

A row runs for each of its ``dtypes``; when it names none, an OpInfo row runs for every dtype of
``PARITY_DTYPES`` the OpInfo supports on CPU and a hand-written row for float32.
``sample_filter`` drops samples outside the row's scope (another overload, or arguments the row
does not cover); ``xfails`` mark samples known to fail, in fastonnx or onnxruntime (strict, so a
fix shows up as XPASS and the entry must go). ``compare`` replaces the element-wise comparison
with torch for ops whose values cannot match (random ops): it gets each output of onnxruntime,
the matching output of torch (same shape and dtype, checked first) and the sample.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from support import OPSET_MATRIX
from torch.testing import make_tensor
from torch.testing._internal.opinfo.core import SampleInput

aten = torch.ops.aten

PARITY_DTYPES = (torch.float32, torch.float16, torch.int64, torch.bool)
# Every sample runs at each opset of support.OPSET_MATRIX; FASTONNX_PARITY_OPSETS=18 (or 13,28)
# narrows the run while working on a family.
PARITY_OPSETS = tuple(
    int(v) for v in (os.environ.get("FASTONNX_PARITY_OPSETS") or ",".join(map(str, OPSET_MATRIX))).split(",")
)
# Samples run per row and dtype, spread over the OpInfo's argument grid: float32 is the reference
# dtype and gets the most; the others check typing rules more than arithmetic.
MAX_SAMPLES = {torch.float32: 12}
MAX_SAMPLES_OTHER_DTYPES = 6


@dataclass(frozen=True)
class SampleRule:
    """The samples ``matches`` selects, for ``dtypes`` (every dtype when None) at the target
    ``opsets`` (every opset when None), and why."""

    reason: str
    matches: Callable[[SampleInput], bool] = lambda sample: True
    dtypes: tuple[torch.dtype, ...] | None = None
    opsets: range | None = None

    def applies(self, sample: SampleInput, dtype: torch.dtype, opset: int | None = None) -> bool:
        return (
            (self.dtypes is None or dtype in self.dtypes)
            and (self.opsets is None or opset is None or opset in self.opsets)
            and bool(self.matches(sample))
        )


@dataclass(frozen=True)
class Row:
    id: str
    overloads: tuple[str, ...]
    opinfo: str | None = None  # name in op_db; None for hand-written rows
    variant: str = ""  # the OpInfo's variant_test_name
    fn: Callable | None = None  # hand-written rows: called as fn(sample.input, *args, **kwargs)
    samples: Callable[[torch.dtype], Iterator[SampleInput]] | None = None
    dtypes: tuple[torch.dtype, ...] | None = None  # None: see the module docstring
    tolerance: dict[torch.dtype, tuple[float, float]] = field(default_factory=dict)  # (rtol, atol)
    sample_filter: SampleRule | None = None
    xfails: tuple[SampleRule, ...] = ()
    max_samples: int | None = None  # None: MAX_SAMPLES for the dtype
    # A check of its own (got, torch's, sample) after shapes and dtypes matched: for random ops,
    # and `shapes_only` for results torch leaves uninitialized (empty, resize_ growing); also of
    # an output onnxruntime gives as None (an empty optional), got None.
    compare: Callable[[torch.Tensor, torch.Tensor, SampleInput], None] | None = None
    family: str = ""  # the rows module that defines it (set when the table is collected)
    # Trace with every dimension dynamic (size queries and arithmetic on sizes stay in the graph).
    dynamic: bool = False
    # Rewrites the traced program in place, for overloads torch.export never emits itself.
    edit: Callable[[torch.export.ExportedProgram], None] | None = None

    def cap(self, dtype: torch.dtype) -> int:
        return self.max_samples or MAX_SAMPLES.get(dtype, MAX_SAMPLES_OTHER_DTYPES)


def shapes_only(got: torch.Tensor, want: torch.Tensor, sample: SampleInput) -> None:
    """For results torch leaves uninitialized: their shape and dtype are all there is to compare."""


def from_opinfo(name: str, *overloads: str, variant: str = "", id: str | None = None, **options) -> Row:
    short = name.removeprefix("nn.functional.")
    row_id = id or (f"{short}.{variant}" if variant else short)
    return Row(id=row_id, overloads=overloads, opinfo=name, variant=variant, **options)


def hand_written(*overloads: str, fn: Callable, samples: Callable, id: str | None = None, **options) -> Row:
    return Row(id=id or overloads[0], overloads=overloads, fn=fn, samples=samples, **options)


def kwarg(name: str, default=None) -> Callable[[SampleInput], object]:
    return lambda sample: sample.kwargs.get(name, default)


def arg(sample: SampleInput, position: int, name: str, default=None):
    """An argument OpInfo may pass by position (counted after the input) or by name."""
    return sample.args[position] if len(sample.args) > position else sample.kwargs.get(name, default)


def tensor(shape, dtype: torch.dtype, **options) -> torch.Tensor:
    return make_tensor(shape, dtype=dtype, device="cpu", **options)


def unary(dtype: torch.dtype, **kwargs) -> Iterator[SampleInput]:
    for shape in [(), (7,), (3, 4), (2, 3, 4, 5)]:
        yield SampleInput(tensor(shape, dtype), kwargs=kwargs)


# Values where elementwise ops differ most easily: NaN, infinities, signed zeros, rounding ties,
# values near 0 (log1p, expm1), at the edges of [-1, 1] and large enough to saturate.
SPECIAL_VALUES = (
    float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-10, -3e-7, 2e-4,
    0.999, -1.0, 1.0, 1.2, -1.7, 40.0, -40.0, 1e4, -1e4,
)


def special_values(dtype: torch.dtype) -> Iterator[SampleInput]:
    yield SampleInput(torch.tensor(SPECIAL_VALUES, dtype=dtype))


def binary(dtype: torch.dtype, alphas: tuple = ()) -> Iterator[SampleInput]:
    for a, b in [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 4), ())]:
        yield SampleInput(tensor(a, dtype), args=(tensor(b, dtype, exclude_zero=True),))
    for alpha in alphas:
        yield SampleInput(tensor((3, 4), dtype), args=(tensor((3, 4), dtype),), kwargs={"alpha": alpha})


def with_scalar(dtype: torch.dtype, alphas: tuple = ()) -> Iterator[SampleInput]:
    for shape, other in [((3, 4), 2.5), ((2, 3, 4), -3), ((), 0.5)]:
        yield SampleInput(tensor(shape, dtype), args=(other,))
    for alpha in alphas:
        yield SampleInput(tensor((3, 4), dtype), args=(1.5,), kwargs={"alpha": alpha})
