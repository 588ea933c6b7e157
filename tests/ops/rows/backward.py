"""Backward ops, called directly with the saved tensors autograd would give them."""

import torch
from row import aten, from_opinfo, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

# ATen and onnxruntime sum long dot products in different orders; in float16, torch accumulates
# sums in float32 where onnxruntime rounds each partial sum to float16 (up to an ulp of the sum).
TOLERANCE = {torch.float32: (1.3e-6, 1e-4), torch.float16: (2e-3, 1e-2)}
# onnxruntime's float16 ConvTranspose (the input gradient) accumulates in float16: an ulp of the
# partial sums, which reach ~1e3 for values in [-9, 9].
CONV_TOLERANCE = {**TOLERANCE, torch.float16: (1e-3, 1.0)}
FLOATS = (torch.float32, torch.float16)


def _present(outputs):
    """The gradients output_mask asks for (torch returns None for the others)."""
    return tuple(t for t in outputs if t is not None)


def _convolution_backward(dtype):
    # (input, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask)
    cases = [
        ((2, 4, 7), (6, 4, 3), [1], [1], [1], False, [0], 1, [True, True, True]),
        ((1, 4, 8, 8), (6, 2, 3, 3), [2, 1], [1, 2], [1, 1], False, [0, 0], 2, [True, True, True]),
        ((2, 3, 9, 9), (4, 3, 3, 3), [1, 1], [0, 0], [2, 2], False, [0, 0], 1, [True, False, False]),
        # The stride leaves input positions no window reaches: their gradient is zero.
        ((1, 2, 10, 9), (3, 2, 3, 3), [3, 2], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False]),
        ((1, 2, 5, 5, 5), (3, 2, 3, 3, 3), [1, 1, 1], [1, 1, 1], [1, 1, 1], False, [0, 0, 0], 1, [False, True, True]),
        ((1, 4, 5, 5), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], True, [1, 1], 1, [True, True, True]),
        ((2, 4, 6), (4, 2, 3), [2], [0], [2], True, [1], 2, [True, True, True]),
    ]
    for x_shape, w_shape, stride, padding, dilation, transposed, output_padding, groups, mask in cases:
        x, w = tensor(x_shape, dtype), tensor(w_shape, dtype)
        y = aten.convolution(x.float(), w.float(), None, stride, padding, dilation, transposed, output_padding, groups)
        out_channels = y.shape[1]
        args = (x, w, [out_channels], stride, padding, dilation, transposed, output_padding, groups, mask)
        yield SampleInput(tensor(y.shape, dtype), args=args)


def _layer_norm_backward(dtype):
    # (input shape, normalized_shape, affine, output_mask)
    for shape, normalized, affine, mask in [
        ((2, 3, 4), [4], True, [True, True, True]),
        ((2, 3, 4), [3, 4], False, [True, False, False]),
        ((5, 6), [6], True, [False, True, True]),
        ((6,), [6], True, [True, True, True]),
    ]:
        x = tensor(shape, dtype)
        w, b = (tensor(normalized, dtype), tensor(normalized, dtype)) if affine else (None, None)
        _, mean, rstd = aten.native_layer_norm(x, normalized, w, b, 1e-5)
        yield SampleInput(tensor(shape, dtype), args=(x, normalized, mean, rstd, w, b, mask))


def _group_norm_backward(dtype):
    # (input shape, groups, affine, output_mask)
    for shape, groups, affine, mask in [
        ((2, 6, 5), 3, True, [True, True, True]),
        ((2, 4, 3, 3), 2, False, [True, False, False]),
        ((3, 4), 2, True, [True, True, True]),
        ((1, 6, 2, 2, 2), 1, True, [False, True, True]),
    ]:
        x = tensor(shape, dtype)
        n, c = shape[:2]
        hxw = x[0, 0].numel()
        w, b = (tensor((c,), dtype), tensor((c,), dtype)) if affine else (None, None)
        _, mean, rstd = aten.native_group_norm(x, w, b, n, c, hxw, groups, 1e-5)
        yield SampleInput(tensor(shape, dtype), args=(x, mean, rstd, w, n, c, hxw, groups, mask))


def _embedding_backward(dtype):
    # (indices shape, num_weights, padding_idx, scale_grad_by_freq): few weights, so indices repeat.
    for shape, num_weights, padding_idx, scale in [
        ((4, 5), 6, -1, False),
        ((7,), 4, 2, False),
        ((2, 3, 4), 5, -1, True),
        ((3, 6), 5, 0, True),
    ]:
        indices = tensor(shape, torch.int64, low=0, high=num_weights)
        yield SampleInput(tensor((*shape, 3), dtype), args=(indices, num_weights, padding_idx, scale))


ROWS = (
    hand_written(
        "convolution_backward",
        fn=lambda dy, *args: _present(aten.convolution_backward.default(dy, *args)),
        samples=_convolution_backward,
        dtypes=FLOATS,
        tolerance=CONV_TOLERANCE,
        max_samples=8,  # every sample, float16 included
    ),
    hand_written(
        "native_layer_norm_backward",
        fn=lambda dy, *args: _present(aten.native_layer_norm_backward.default(dy, *args)),
        samples=_layer_norm_backward,
        dtypes=FLOATS,
        tolerance=TOLERANCE,
    ),
    hand_written(
        "native_group_norm_backward",
        fn=lambda dy, *args: _present(aten.native_group_norm_backward.default(dy, *args)),
        samples=_group_norm_backward,
        dtypes=FLOATS,
        tolerance=TOLERANCE,
    ),
    hand_written(
        "embedding_dense_backward",
        fn=aten.embedding_dense_backward.default,
        samples=_embedding_backward,
        dtypes=FLOATS,
        tolerance=TOLERANCE,
    ),
    from_opinfo("_softmax_backward_data", "_softmax_backward_data"),
)
