"""Convolution, normalization, dropout and lookups."""

import torch
from row import SampleRule, aten, from_opinfo, hand_written, kwarg, tensor
from torch.testing._internal.opinfo.core import SampleInput

# ATen and onnxruntime sum long dot products in different orders.
CONV_TOLERANCE = {torch.float32: (1.3e-6, 1e-4)}
# onnxruntime's float16 ConvTranspose accumulates in float16 where torch accumulates in float32:
# the error is an ulp of the partial sums, which reach ~1e3 for OpInfo's values in [-9, 9].
CONV_TRANSPOSE_TOLERANCE = {**CONV_TOLERANCE, torch.float16: (1e-3, 1.0)}


def _convolution(dtype):
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
        bias = None if b is None else tensor(b, dtype)
        yield SampleInput(tensor(x, dtype), args=(tensor(w, dtype), bias, *rest))


def _batch_norm_no_training(dtype):
    # (input, weight, bias, running_mean, running_var, momentum, eps)
    for shape, affine, eps in [((4, 3), True, 1e-5), ((2, 3, 4, 5), True, 1e-3), ((2, 3, 6), False, 1e-5)]:
        c = shape[1]
        weight, bias = (tensor((c,), dtype), tensor((c,), dtype)) if affine else (None, None)
        mean, var = tensor((c,), dtype), tensor((c,), dtype, low=0.1, high=2.0)
        yield SampleInput(tensor(shape, dtype), args=(weight, bias, mean, var, 0.1, eps))


def _conv_tbc(dtype):
    # (input (time, batch, in), weight (kernel, in, out), bias, pad)
    for x, w, pad in [((7, 2, 3), (3, 3, 5), 0), ((6, 1, 4), (2, 4, 2), 1), ((5, 3, 2), (1, 2, 4), 2)]:
        yield SampleInput(tensor(x, dtype), args=(tensor(w, dtype), tensor((w[2],), dtype), pad))


def _convolution_flags(dtype):
    """_convolution: convolution's arguments, then the kernel choices (benchmark, deterministic,
    cudnn_enabled, allow_tf32), which do not change the result."""
    for sample in _convolution(dtype):
        for flags in [(False, False, True, True), (True, True, False, False)]:
            yield SampleInput(sample.input, args=(*sample.args, *flags))


def _renorm(dtype):
    # (table, indices, max_norm, norm_type): rows read twice, rows not read (kept), norms below
    # the limit (kept)
    for rows, indices, max_norm, norm_type in [(7, [2, 1], 0.2, 2.0), (7, [[4, 3], [4, 2]], 0.5, 1.0), (5, [0], 100.0, 2.0)]:
        yield SampleInput(tensor((rows, 4), dtype), args=(torch.tensor(indices), max_norm, norm_type))


ROWS = (
    from_opinfo("nn.functional.conv1d", "conv1d", "conv1d.padding", tolerance=CONV_TOLERANCE),
    from_opinfo("nn.functional.conv2d", "conv2d", "conv2d.padding", tolerance=CONV_TOLERANCE),
    from_opinfo("nn.functional.conv3d", "conv3d", "conv3d.padding", tolerance=CONV_TOLERANCE),
    from_opinfo("nn.functional.conv_transpose1d", "conv_transpose1d", tolerance=CONV_TRANSPOSE_TOLERANCE),
    from_opinfo("nn.functional.conv_transpose2d", "conv_transpose2d.input", tolerance=CONV_TRANSPOSE_TOLERANCE),
    from_opinfo("nn.functional.conv_transpose3d", "conv_transpose3d.input", tolerance=CONV_TRANSPOSE_TOLERANCE),
    from_opinfo(
        "nn.functional.batch_norm",
        "batch_norm",
        sample_filter=SampleRule("training=True: the row below", kwarg("training", False)),
        xfails=(
            SampleRule(
                "a rank-1 input has no channel dimension; fastonnx rejects it (torch accepts only the empty one)",
                lambda s: s.input.dim() < 2,
            ),
        ),
    ),
    # Normalized with the batch's statistics; the update of the running ones is dropped. float16
    # results differ by an ulp: torch folds the statistics into a per-channel scale and shift.
    from_opinfo(
        "nn.functional.batch_norm",
        "batch_norm",
        id="batch_norm.training",
        tolerance={torch.float16: (1e-3, 2e-3)},
        sample_filter=SampleRule("eval mode: the row above", lambda s: not s.kwargs.get("training", False)),
        xfails=(
            SampleRule(
                "a rank-1 input has no channel dimension; fastonnx rejects it (torch accepts only the empty one)",
                lambda s: s.input.dim() < 2,
            ),
        ),
    ),
    from_opinfo(
        "nn.functional.dropout",
        "dropout",
        sample_filter=SampleRule("training=True dropout is random and out of scope", kwarg("training", True)),
    ),
    from_opinfo("nn.functional.embedding", "embedding"),
    from_opinfo("nn.functional.pixel_shuffle", "pixel_shuffle"),
    hand_written(
        "convolution",
        fn=lambda x, w, b, *rest: aten.convolution.default(x, w, b, *rest),
        samples=_convolution,
        dtypes=(torch.float32, torch.float16, torch.int64),
        tolerance=CONV_TRANSPOSE_TOLERANCE,
    ),
    hand_written(
        "_native_batch_norm_legit_no_training",
        # Only the normalized output: the saved mean/invstd are empty in eval and unused.
        fn=lambda x, *rest: aten._native_batch_norm_legit_no_training.default(x, *rest)[0],
        samples=_batch_norm_no_training,
    ),
    hand_written("conv_tbc", fn=torch.conv_tbc, samples=_conv_tbc, tolerance=CONV_TOLERANCE),
    hand_written(
        "_convolution",
        fn=lambda x, *args: aten._convolution.default(x, *args),
        samples=_convolution_flags,
        dtypes=(torch.float32, torch.int64),
        tolerance=CONV_TRANSPOSE_TOLERANCE,
    ),
    hand_written(
        "embedding_renorm",
        fn=lambda table, *args: aten.embedding_renorm.default(table, *args),
        samples=_renorm,
        dtypes=(torch.float32, torch.float16),
    ),
)
