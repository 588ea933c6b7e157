"""The per-op parity table.

Each row names the ATen overloads it covers (as native_functions.yaml spells them) and where its
samples come from: an OpInfo of torch's ``op_db`` (``TABLE``), or hand-written samples for
overloads no OpInfo reaches (``NOT_IN_OPINFO``). A row runs for each of its ``dtypes``.

``sample_filter`` drops samples outside the row's scope (another overload, or arguments the
milestone does not cover); ``xfails`` mark samples known to fail, in fastonnx or onnxruntime
(strict, so a fix shows up as XPASS and the entry must go).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.testing import make_tensor
from torch.testing._internal.opinfo.core import SampleInput

aten = torch.ops.aten

MAX_SAMPLES_PER_ROW = 12


@dataclass(frozen=True)
class SampleRule:
    """The samples ``matches`` selects, for ``dtypes`` (every dtype when None), and why."""

    reason: str
    matches: Callable[[SampleInput], bool] = lambda sample: True
    dtypes: tuple[torch.dtype, ...] | None = None

    def applies(self, sample: SampleInput, dtype: torch.dtype) -> bool:
        return (self.dtypes is None or dtype in self.dtypes) and bool(self.matches(sample))


@dataclass(frozen=True)
class Row:
    id: str
    overloads: tuple[str, ...]
    opinfo: str | None = None  # name in op_db; None for hand-written rows
    variant: str = ""  # the OpInfo's variant_test_name
    fn: Callable | None = None  # hand-written rows: called as fn(sample.input, *args, **kwargs)
    samples: Callable[[torch.dtype], Iterator[SampleInput]] | None = None
    dtypes: tuple[torch.dtype, ...] = (torch.float32,)
    tolerance: dict[torch.dtype, tuple[float, float]] = field(default_factory=dict)  # (rtol, atol)
    sample_filter: SampleRule | None = None
    xfails: tuple[SampleRule, ...] = ()
    max_samples: int = MAX_SAMPLES_PER_ROW


def from_opinfo(name: str, *overloads: str, variant: str = "", **options) -> Row:
    short = name.removeprefix("nn.functional.")
    row_id = f"{short}.{variant}" if variant else short
    return Row(id=row_id, overloads=overloads, opinfo=name, variant=variant, **options)


def hand_written(*overloads: str, fn: Callable, samples: Callable, id: str | None = None, **options) -> Row:
    return Row(id=id or overloads[0], overloads=overloads, fn=fn, samples=samples, **options)


def _kwarg(name: str, default=None) -> Callable[[SampleInput], object]:
    return lambda sample: sample.kwargs.get(name, default)


def _arg(sample: SampleInput, position: int, name: str, default=None):
    """An argument OpInfo may pass by position (counted after the input) or by name."""
    return sample.args[position] if len(sample.args) > position else sample.kwargs.get(name, default)


# ATen and onnxruntime sum long dot products in different orders.
_CONV_TOLERANCE = {torch.float32: (1.3e-6, 1e-4)}


TABLE: tuple[Row, ...] = (
    from_opinfo("nn.functional.conv1d", "conv1d", "conv1d.padding", tolerance=_CONV_TOLERANCE),
    from_opinfo("nn.functional.conv2d", "conv2d", "conv2d.padding", tolerance=_CONV_TOLERANCE),
    from_opinfo("nn.functional.conv3d", "conv3d", "conv3d.padding", tolerance=_CONV_TOLERANCE),
    from_opinfo("nn.functional.conv_transpose1d", "conv_transpose1d", tolerance=_CONV_TOLERANCE),
    from_opinfo("nn.functional.conv_transpose2d", "conv_transpose2d.input", tolerance=_CONV_TOLERANCE),
    from_opinfo("nn.functional.conv_transpose3d", "conv_transpose3d.input", tolerance=_CONV_TOLERANCE),
    from_opinfo(
        "nn.functional.batch_norm",
        "batch_norm",
        sample_filter=SampleRule("training=True batch norm is out of scope (export is eval-only)", _kwarg("training", False)),
        xfails=(
            SampleRule(
                "a rank-1 input has no channel dimension; fastonnx rejects it (torch accepts only the empty one)",
                lambda s: s.input.dim() < 2,
            ),
        ),
    ),
    from_opinfo("nn.functional.relu", "relu"),
    from_opinfo("nn.functional.leaky_relu", "leaky_relu"),
    from_opinfo("nn.functional.hardtanh", "hardtanh"),
    from_opinfo("sigmoid", "sigmoid"),
    from_opinfo("tanh", "tanh"),
    from_opinfo(
        "nn.functional.max_pool2d",
        "max_pool2d",
        sample_filter=SampleRule("return_indices=True is max_pool2d_with_indices, not in this row", _kwarg("return_indices", False)),
    ),
    from_opinfo(
        "nn.functional.avg_pool2d",
        "avg_pool2d",
    ),
    from_opinfo("nn.functional.adaptive_avg_pool2d", "adaptive_avg_pool2d"),
    from_opinfo("nn.functional.linear", "linear"),
    from_opinfo("addmm", "addmm"),
    from_opinfo("mm", "mm"),
    from_opinfo("bmm", "bmm"),
    from_opinfo("matmul", "matmul"),
    from_opinfo("t", "t"),
    from_opinfo("permute", "permute"),
    from_opinfo("transpose", "transpose.int"),
    from_opinfo("view", "view"),
    from_opinfo("reshape", "reshape"),
    from_opinfo("flatten", "flatten.using_ints"),
    from_opinfo("cat", "cat"),
    from_opinfo("add", "add.Tensor"),
    from_opinfo("sub", "sub.Tensor"),
    from_opinfo("mul", "mul.Tensor"),
    from_opinfo("div", "div.Tensor", variant="no_rounding_mode"),
    from_opinfo(
        "nn.functional.dropout",
        "dropout",
        sample_filter=SampleRule("training=True dropout is random and out of scope", _kwarg("training", True)),
    ),
    from_opinfo("softmax", "softmax.int"),
    from_opinfo("softmax", "softmax.int", variant="with_dtype"),
    from_opinfo("log_softmax", "log_softmax.int"),
    from_opinfo("log_softmax", "log_softmax.int", variant="with_dtype"),
    from_opinfo("mean", "mean", "mean.dim"),
    from_opinfo("sum", "sum", "sum.dim_IntList"),
    from_opinfo("nn.functional.pixel_shuffle", "pixel_shuffle"),
    from_opinfo(
        "nn.functional.embedding",
        "embedding",
        sample_filter=SampleRule("max_norm renormalizes the weight in place (embedding_renorm_)", lambda s: "max_norm" in s.kwargs),
    ),
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
)


def _tensor(shape, dtype: torch.dtype, **options) -> torch.Tensor:
    return make_tensor(shape, dtype=dtype, device="cpu", **options)


def _unary(dtype: torch.dtype, **kwargs) -> Iterator[SampleInput]:
    for shape in [(), (7,), (3, 4), (2, 3, 4, 5)]:
        yield SampleInput(_tensor(shape, dtype), kwargs=kwargs)


def _binary(dtype: torch.dtype, alphas: tuple = ()) -> Iterator[SampleInput]:
    for a, b in [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 4), ())]:
        yield SampleInput(_tensor(a, dtype), args=(_tensor(b, dtype, exclude_zero=True),))
    for alpha in alphas:
        yield SampleInput(_tensor((3, 4), dtype), args=(_tensor((3, 4), dtype),), kwargs={"alpha": alpha})


def _with_scalar(dtype: torch.dtype, alphas: tuple = ()) -> Iterator[SampleInput]:
    for shape, other in [((3, 4), 2.5), ((2, 3, 4), -3), ((), 0.5)]:
        yield SampleInput(_tensor(shape, dtype), args=(other,))
    for alpha in alphas:
        yield SampleInput(_tensor((3, 4), dtype), args=(1.5,), kwargs={"alpha": alpha})


def _leaky_relu_inplace(dtype: torch.dtype) -> Iterator[SampleInput]:
    yield from _unary(dtype)
    yield SampleInput(_tensor((3, 4), dtype), kwargs={"negative_slope": 0.2})


def _hardtanh_inplace(dtype: torch.dtype) -> Iterator[SampleInput]:
    yield from _unary(dtype)
    yield SampleInput(_tensor((3, 4), dtype), kwargs={"min_val": -0.5, "max_val": 2.0})


def _softmax_internal(dtype: torch.dtype) -> Iterator[SampleInput]:
    for shape, dim in [((7,), 0), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), 1)]:
        yield SampleInput(_tensor(shape, dtype), args=(dim, False))


def _convolution(dtype: torch.dtype) -> Iterator[SampleInput]:
    # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    cases = [
        ((2, 4, 7), (6, 4, 3), (6,), [1], [1], [1], False, [0], 1),
        ((1, 4, 8, 8), (6, 2, 3, 3), (6,), [2, 1], [1, 2], [1, 1], False, [0, 0], 2),
        ((2, 3, 9, 9), (4, 3, 3, 3), None, [1, 1], [0, 0], [2, 2], False, [0, 0], 1),
        ((1, 2, 5, 5, 5), (3, 2, 3, 3, 3), (3,), [1, 1, 1], [1, 1, 1], [1, 1, 1], False, [0, 0, 0], 1),
        ((1, 4, 5, 5), (4, 3, 3, 3), (3,), [2, 2], [1, 1], [1, 1], True, [1, 1], 1),
        ((2, 4, 6), (4, 2, 3), None, [2], [0], [1], True, [1], 2),
    ]
    for x, w, b, *rest in cases:
        bias = None if b is None else _tensor(b, dtype)
        yield SampleInput(_tensor(x, dtype), args=(_tensor(w, dtype), bias, *rest))


def _batch_norm_no_training(dtype: torch.dtype) -> Iterator[SampleInput]:
    # (input, weight, bias, running_mean, running_var, momentum, eps)
    for shape, affine, eps in [((4, 3), True, 1e-5), ((2, 3, 4, 5), True, 1e-3), ((2, 3, 6), False, 1e-5)]:
        c = shape[1]
        weight, bias = (_tensor((c,), dtype), _tensor((c,), dtype)) if affine else (None, None)
        mean, var = _tensor((c,), dtype), _tensor((c,), dtype, low=0.1, high=2.0)
        yield SampleInput(_tensor(shape, dtype), args=(weight, bias, mean, var, 0.1, eps))


def _unsafe_view(dtype: torch.dtype) -> Iterator[SampleInput]:
    for shape, size in [((3, 4), [12]), ((2, 3, 4), [6, 4]), ((2, 3, 4), [-1, 3]), ((), [1])]:
        yield SampleInput(_tensor(shape, dtype), args=(size,))


def _avg_pool_divisor(dtype: torch.dtype) -> Iterator[SampleInput]:
    """divisor_override with ceil_mode windows that run past the padding, batched or not."""
    for shape, kernel, stride, padding, ceil_mode, divisor in [
        ((1, 2, 7, 6), 3, 2, 1, True, 5),
        ((2, 7, 7), (3, 2), (2, 3), (1, 0), True, 4),
        ((1, 1, 6, 6), 2, 2, 0, False, 3),
        ((1, 3, 8, 5), (4, 3), 3, (2, 1), True, 7),
    ]:
        yield SampleInput(
            _tensor(shape, dtype),
            args=(kernel, stride, padding, ceil_mode),
            kwargs={"divisor_override": divisor},
        )


def _to_copy(dtype: torch.dtype) -> Iterator[SampleInput]:
    for target in [torch.float64, torch.float16, torch.int64, torch.bool, None]:
        yield SampleInput(_tensor((3, 4), dtype), kwargs={"dtype": target})


def _transposed(dtype: torch.dtype) -> Iterator[SampleInput]:
    yield SampleInput(_tensor((3, 4), dtype))
    yield SampleInput(_tensor((2, 3, 4), dtype))
    yield SampleInput(_tensor((2, 3, 4, 5), dtype), kwargs={"memory_format": torch.channels_last})


NOT_IN_OPINFO: tuple[Row, ...] = (
    hand_written(
        "convolution",
        fn=lambda x, w, b, *rest: aten.convolution.default(x, w, b, *rest),
        samples=_convolution,
        tolerance=_CONV_TOLERANCE,
    ),
    hand_written(
        "_native_batch_norm_legit_no_training",
        # Only the normalized output: the saved mean/invstd are empty in eval and unused.
        fn=lambda x, *rest: aten._native_batch_norm_legit_no_training.default(x, *rest)[0],
        samples=_batch_norm_no_training,
    ),
    hand_written("relu_", fn=lambda x: F.relu(x.clone(), inplace=True), samples=_unary),
    hand_written("leaky_relu_", fn=lambda x, **kw: F.leaky_relu(x.clone(), inplace=True, **kw), samples=_leaky_relu_inplace),
    hand_written("hardtanh_", fn=lambda x, **kw: F.hardtanh(x.clone(), inplace=True, **kw), samples=_hardtanh_inplace),
    hand_written("sigmoid_", fn=lambda x: x.clone().sigmoid_(), samples=_unary),
    hand_written("tanh_", fn=lambda x: x.clone().tanh_(), samples=_unary),
    hand_written("_softmax", fn=lambda x, dim, half: aten._softmax.default(x, dim, half), samples=_softmax_internal),
    hand_written("_log_softmax", fn=lambda x, dim, half: aten._log_softmax.default(x, dim, half), samples=_softmax_internal),
    hand_written("add.Scalar", fn=lambda x, o, **kw: aten.add.Scalar(x, o, **kw), samples=lambda d: _with_scalar(d, (2, -0.5))),
    hand_written("sub.Scalar", fn=lambda x, o, **kw: aten.sub.Scalar(x, o, **kw), samples=lambda d: _with_scalar(d, (2, -0.5))),
    hand_written("mul.Scalar", fn=lambda x, o: aten.mul.Scalar(x, o), samples=_with_scalar),
    hand_written("div.Scalar", fn=lambda x, o: aten.div.Scalar(x, o), samples=_with_scalar),
    # `x + 2.5` in a model records add.Tensor with a Python number as `other`.
    hand_written("add.Tensor", id="add.python_scalar", fn=lambda x, o, **kw: torch.add(x, o, **kw), samples=lambda d: _with_scalar(d, (2,))),
    hand_written("sub.Tensor", id="sub.python_scalar", fn=lambda x, o, **kw: torch.sub(x, o, **kw), samples=lambda d: _with_scalar(d, (2,))),
    hand_written("mul.Tensor", id="mul.python_scalar", fn=lambda x, o: x * o, samples=_with_scalar),
    hand_written("div.Tensor", id="div.python_scalar", fn=lambda x, o: x / o, samples=_with_scalar),
    hand_written("add_.Tensor", fn=lambda x, o, **kw: x.clone().add_(o, **kw), samples=lambda d: _binary(d, (2, -0.5))),
    hand_written("add_.Scalar", fn=lambda x, o, **kw: aten.add_.Scalar(x.clone(), o, **kw), samples=lambda d: _with_scalar(d, (2,))),
    hand_written("sub_.Tensor", fn=lambda x, o, **kw: x.clone().sub_(o, **kw), samples=lambda d: _binary(d, (2,))),
    hand_written("mul_.Tensor", fn=lambda x, o: x.clone().mul_(o), samples=_binary),
    hand_written("div_.Tensor", fn=lambda x, o: x.clone().div_(o), samples=_binary),
    hand_written("_unsafe_view", fn=lambda x, size: aten._unsafe_view.default(x, size), samples=_unsafe_view),
    hand_written("_to_copy", fn=lambda x, **kw: aten._to_copy.default(x, **kw), samples=_to_copy),
    hand_written("avg_pool2d", id="avg_pool2d.divisor_override", fn=F.avg_pool2d, samples=_avg_pool_divisor),
    # OpInfo's contiguous samples are already contiguous, so torch.export records no op for them.
    hand_written(
        "contiguous",
        fn=lambda x, **kw: x.transpose(0, -1).contiguous(**kw),
        samples=_transposed,
    ),
)

ALL_ROWS: tuple[Row, ...] = TABLE + NOT_IN_OPINFO
