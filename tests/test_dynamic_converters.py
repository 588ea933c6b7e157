"""Converters with dynamic sizes: each op is exported with torch.export dynamic shapes, the ONNX
inputs must keep a symbolic dim (dim_param) on every dynamic axis, and the model is run in
onnxruntime at sizes other than the traced ones and compared with eager PyTorch. Sizes ONNX can
compute at run time are computed in the graph; what it cannot express is a ConversionError that
says why."""

from __future__ import annotations

import onnx
import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import fastonnx
from support import Lambda, Lambda2, assert_matches, flat_tensors, run_ort

AUTO = Dim.AUTO


def _symbolic_axes(proto: onnx.ModelProto) -> list[set[int]]:
    """Per graph input, the axes with a symbolic size."""
    return [
        {axis for axis, d in enumerate(i.type.tensor_type.shape.dim) if d.dim_param}
        for i in proto.graph.input
    ]


def export_dynamic(model: torch.nn.Module, args: tuple, dynamic_shapes: tuple, opset: int | None = None,
                   ) -> onnx.ModelProto:
    """Exports with `dynamic_shapes` (a tuple of {axis: Dim} per argument) and checks that each of
    those axes is symbolic in the ONNX graph's inputs."""
    kwargs = {} if opset is None else {"opset_version": opset}
    proto = fastonnx.export(model.eval(), args, dynamic_shapes=dynamic_shapes, **kwargs).model_proto
    symbolic = _symbolic_axes(proto)
    for i, axes in enumerate(dynamic_shapes):
        assert set(axes or {}) <= symbolic[i], f"input {i}: axes {sorted(axes)} dynamic, ONNX has {symbolic[i]}"
    return proto


def run_at(proto: onnx.ModelProto, model: torch.nn.Module, *inputs: tuple, rtol: float = 1e-4, atol: float = 1e-5):
    for args in inputs:
        assert_matches(proto, model.eval(), args, rtol=rtol, atol=atol)


def run_with_nans_at(proto: onnx.ModelProto, model: torch.nn.Module, *inputs: tuple):
    """run_at for outputs that may hold NaN, which must then be NaN in both."""
    for args in inputs:
        with torch.no_grad():
            expected = flat_tensors(model(*args))
        for got, want in zip(run_ort(proto, list(args)), expected):
            torch.testing.assert_close(torch.from_numpy(got), want, rtol=1e-4, atol=1e-5, equal_nan=True)


class Attention(torch.nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **self.kwargs)


# Attention: the default scale 1/sqrt(E) of a dynamic head size, and enable_gqa's head repeat
# with dynamic head counts. Opset 23 has ONNX Attention; before it a MatMul/Softmax composite.


@pytest.mark.parametrize("opset", [18, 23])
def test_attention_scale_of_a_dynamic_head_size(opset):
    e, length, s = Dim("E"), Dim("L"), Dim("S")
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    proto = export_dynamic(Attention(), (q, k, v), ({2: length, 3: e}, {2: s, 3: e}, {2: s, 3: e}), opset)
    run_at(proto, Attention(), (torch.randn(2, 4, 7, 16), torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16)),
           (torch.randn(2, 4, 3, 5), torch.randn(2, 4, 4, 5), torch.randn(2, 4, 4, 5)))


@pytest.mark.parametrize("opset", [18, 23])
def test_attention_gqa_with_dynamic_head_counts(opset):
    model = Attention(enable_gqa=True, is_causal=True)
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    proto = export_dynamic(model, (q, k, v), ({1: AUTO, 2: AUTO}, {1: AUTO, 2: AUTO}, {1: AUTO, 2: AUTO}), opset)
    run_at(proto, model, (torch.randn(2, 6, 7, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 8)),
           (torch.randn(2, 6, 3, 8), torch.randn(2, 2, 3, 8), torch.randn(2, 2, 3, 8)))


# Reshapes of dynamic sizes.


def test_pixel_shuffle_of_integers_with_dynamic_sizes():
    # Integers (and ranks other than 4) take the Reshape/Transpose form, not DepthToSpace.
    model = Lambda(lambda x: F.pixel_shuffle(x, 2))
    x = torch.arange(2 * 8 * 3 * 5).reshape(2, 8, 3, 5)
    proto = export_dynamic(model, (x,), ({0: AUTO, 1: AUTO, 2: AUTO, 3: AUTO},))
    run_at(proto, model, (torch.arange(3 * 12 * 4 * 6).reshape(3, 12, 4, 6),), (torch.arange(4 * 7 * 2).reshape(1, 4, 7, 2),))


def test_pixel_shuffle_of_rank_5_with_dynamic_sizes():
    model = Lambda(lambda x: F.pixel_shuffle(x, 2))
    proto = export_dynamic(model, (torch.randn(2, 3, 8, 3, 5),), ({0: AUTO, 2: AUTO, 3: AUTO, 4: AUTO},))
    run_at(proto, model, (torch.randn(3, 3, 12, 4, 6),), (torch.randn(4, 3, 4, 7, 2),))


def test_pixel_unshuffle_with_dynamic_sizes():
    model = Lambda(lambda x: F.pixel_unshuffle(x, 2))
    proto = export_dynamic(model, (torch.randn(2, 3, 4, 6),), ({0: AUTO, 1: AUTO, 2: AUTO, 3: AUTO},))
    run_at(proto, model, (torch.randn(3, 5, 8, 10),), (torch.randn(1, 2, 2, 14),))


# Splits: torch.export fixes the number of parts; their sizes are computed at run time.


@pytest.mark.parametrize(
    "fn, sizes",
    [
        (lambda x: x.split(3, dim=1), [(3, 8), (4, 9)]),
        (lambda x: x.split(x.shape[0], dim=1), [(3, 11), (4, 14)]),  # a dynamic split_size
        (lambda x: x.chunk(3, dim=1), [(3, 7), (4, 9)]),
        (lambda x: x.unbind(1), [(5, 3, 6), (1, 3, 2)]),
    ],
    ids=["split", "split-symbolic-size", "chunk", "unbind"],
)
def test_splits_of_dynamic_sizes(fn, sizes):
    model = Lambda(fn)
    example = torch.randn(2, 3, 4) if len(sizes[0]) == 3 else torch.randn(2, 8)
    dims = {0: AUTO, 2: AUTO} if example.dim() == 3 else {0: AUTO, 1: AUTO}
    proto = export_dynamic(model, (example,), (dims,))
    run_at(proto, model, *[(torch.randn(*s),) for s in sizes])


@pytest.mark.parametrize("offset, dim1, dim2", [(0, 0, 1), (2, 0, 2), (-1, -1, -2)])
def test_diagonal_of_dynamic_sizes(offset, dim1, dim2):
    model = Lambda(lambda x: x.diagonal(offset, dim1, dim2))
    proto = export_dynamic(model, (torch.randn(3, 2, 5),), ({0: AUTO, 1: AUTO, 2: AUTO},))
    run_at(proto, model, (torch.randn(5, 3, 6),), (torch.randn(2, 4, 9),), (torch.randn(7, 4, 2),), (torch.randn(3, 9, 3),))


def test_take_along_dim_with_a_dynamic_index_length():
    # torch.export specializes self's sizes and the index's other sizes (take_along_dim's checks);
    # the length of the index along dim stays dynamic.
    model = Lambda2(lambda x, i: torch.take_along_dim(x, i, dim=1))
    x, i = torch.randn(3, 5, 4), torch.randint(0, 5, (3, 2, 4))
    proto = export_dynamic(model, (x, i), ({}, {1: AUTO}))
    run_at(proto, model, (x, torch.randint(0, 5, (3, 7, 4))), (x, torch.randint(0, 5, (3, 1, 4))))


@pytest.mark.parametrize("p", [2.0, 1.0])
def test_pdist_of_a_dynamic_number_of_rows(p):
    model = Lambda(lambda x: F.pdist(x, p))
    proto = export_dynamic(model, (torch.randn(4, 5),), ({0: AUTO, 1: AUTO},))
    run_at(proto, model, (torch.randn(3, 7),), (torch.randn(9, 2),), (torch.randn(2, 3),))


@pytest.mark.parametrize(
    "fn, example, dims, sizes",
    [
        (lambda x: torch.as_strided(x, (x.shape[0] - 5, 3), (1, 2), 1), (9,), {0: AUTO}, [(12,), (20,)]),
        (lambda x: torch.as_strided(x, (x.shape[0], x.shape[1] // 2), (x.shape[1], 2)), (3, 8), {0: AUTO, 1: AUTO},
         [(5, 12), (2, 6)]),
    ],
    ids=["overlapping-windows", "strided-columns"],
)
def test_as_strided_of_dynamic_sizes(fn, example, dims, sizes):
    model = Lambda(fn)
    proto = export_dynamic(model, (torch.randn(*example),), (dims,))
    run_at(proto, model, *[(torch.randn(*s),) for s in sizes])


class IntegerConvTranspose(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.randint(-3, 4, (4, 3, 3, 2)))

    def forward(self, x):
        return F.conv_transpose2d(x, self.weight, stride=(2, 3), padding=1, output_padding=(1, 0), groups=2)


def test_integer_transposed_convolution_of_dynamic_sizes():
    model = IntegerConvTranspose()
    proto = export_dynamic(model, (torch.randint(-5, 5, (2, 4, 5, 6)),), ({0: AUTO, 2: AUTO, 3: AUTO},))
    run_at(proto, model, (torch.randint(-5, 5, (3, 4, 7, 3)),), (torch.randint(-5, 5, (1, 4, 2, 9)),))


class EmbeddingBag(torch.nn.Module):
    def forward(self, weight, indices, offsets):
        return torch.ops.aten.embedding_bag.padding_idx(weight, indices, offsets, False, 0, False, None, False, -1)[0]


def test_embedding_bag_with_a_negative_padding_idx_and_dynamic_bags():
    model = EmbeddingBag()
    weight = torch.randn(10, 4)
    proto = export_dynamic(model, (weight, torch.randint(0, 10, (8,)), torch.tensor([0, 3, 5])), ({}, {0: AUTO}, {0: AUTO}))
    run_at(proto, model, (weight, torch.tensor([9, 1, 9, 2, 9, 0]), torch.tensor([0, 2])),
           (weight, torch.tensor([9, 9, 3, 4, 5, 6, 7, 9, 1]), torch.tensor([0, 1, 4, 8])))


# Upsampling by scale factors: torch's output size floor(in * scale) (in double) and its
# coordinates (the given scale, its copy and halving special cases) with dynamic input sizes.


class Interpolate(torch.nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, x):
        return F.interpolate(x, **self.kwargs)


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"scale_factor": 2, "mode": "bilinear"},
        {"scale_factor": 2, "mode": "nearest"},
        {"scale_factor": 1.7, "mode": "bilinear"},
        {"scale_factor": 1.7, "mode": "nearest"},
        {"scale_factor": 1.1, "mode": "bilinear"},  # copies along an axis whose size stays
        {"scale_factor": 2.3, "mode": "nearest"},  # halves the index along an axis whose size doubles
        {"scale_factor": 0.6, "mode": "bicubic"},
        {"scale_factor": 1.8, "mode": "nearest-exact"},
        {"scale_factor": 1.5, "mode": "bilinear", "align_corners": True},
        {"scale_factor": (1.3, 2.7), "mode": "bilinear"},
    ],
    ids=lambda kw: "-".join(str(v) for v in kw.values()),
)
def test_upsampling_by_scale_factors_with_dynamic_sizes(kwargs, opset):
    model = Interpolate(**kwargs)
    proto = export_dynamic(model, (torch.randn(1, 2, 6, 8),), ({2: AUTO, 3: AUTO},), opset)
    run_at(proto, model, (torch.randn(1, 2, 5, 7),), (torch.randn(1, 2, 3, 11),), (torch.randn(1, 2, 10, 4),),
           (torch.randn(1, 2, 2, 2),))


class ScaleOnOneAxis(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.upsample_nearest2d(x, [x.shape[2] * 2, x.shape[3] * 3], 2.0, None)


def test_upsampling_with_a_scale_on_one_dynamic_axis_only_says_why():
    # Resize takes scales or sizes, not both: the axis without a scale would need one that
    # reproduces both torch's size and its in/out coordinates at every size.
    with pytest.raises(fastonnx.ConversionError, match="Resize takes scales or sizes, not both"):
        fastonnx.export(ScaleOnOneAxis(), (torch.randn(1, 2, 4, 5),), dynamic_shapes=({2: AUTO, 3: AUTO},))


@pytest.mark.parametrize("mode, example", [("linear", (1, 2, 6)), ("nearest", (1, 2, 6)), ("trilinear", (1, 2, 6, 4, 5)),
                                           ("nearest", (1, 2, 6, 4, 5))])
def test_upsampling_1d_and_3d_by_a_scale_with_dynamic_sizes(mode, example):
    # 1.8 is no float32: Resize's float32 size floor(in * scale) must still be torch's.
    model = Interpolate(scale_factor=1.8, mode=mode)
    rank = len(example)
    proto = export_dynamic(model, (torch.randn(*example),), ({axis: AUTO for axis in range(2, rank)},))
    sizes = [(1, 2, *[n + k for k in range(rank - 2)]) for n in range(2, 12)]
    run_at(proto, model, *[(torch.randn(*s),) for s in sizes])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": (12, 9), "mode": "bilinear"},
        {"size": (12, 9), "mode": "bicubic"},
        {"size": (12, 9), "mode": "bilinear", "align_corners": True},
        {"scale_factor": 0.4, "mode": "bilinear"},
        {"scale_factor": 0.4, "mode": "bicubic"},
        {"scale_factor": 1.7, "mode": "bilinear"},
    ],
    ids=lambda kw: "-".join(str(v) for v in kw.values()),
)
def test_antialiased_resizing_of_dynamic_sizes(kwargs):
    # The filter weights are computed at run time (constants when the sizes are static); an axis
    # whose size stays is copied, as torch does.
    model = Interpolate(antialias=True, **kwargs)
    proto = export_dynamic(model, (torch.randn(1, 2, 30, 20),), ({2: AUTO, 3: AUTO},))
    run_at(proto, model, (torch.randn(1, 2, 37, 23),), (torch.randn(1, 2, 10, 50),), (torch.randn(1, 2, 12, 9),),
           (torch.randn(1, 2, 5, 5),))


# Pooling with dynamic spatial sizes.

POOLING = {
    "max-ceil": (lambda x: F.max_pool2d(x, 2, 2, ceil_mode=True), torch.float32),
    "max-ceil-indices": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True), torch.float32),
    "max-ceil-stride-over-kernel": (lambda x: F.max_pool2d(x, 1, 3, ceil_mode=True, return_indices=True), torch.float32),
    "max-int64": (lambda x: F.max_pool2d(x, 3, 2, 1), torch.int64),
    "max-int64-indices": (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), torch.int64),
    "max-int32-ceil-dilated-indices": (
        lambda x: F.max_pool2d(x, 2, 2, 1, dilation=2, ceil_mode=True, return_indices=True), torch.int32),
    "avg-ceil": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), torch.float32),
    "avg-ceil-no-pad-count": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), torch.float32),
    "avg-divisor-override": (lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5), torch.float32),
    "avg-divisor-override-ceil": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=5), torch.float32),
    "avg-int64": (lambda x: F.avg_pool2d(x, 3, 2, 1), torch.int64),
    "avg-int64-ceil-no-pad-count": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), torch.int64),
    "adaptive-avg-1x1": (lambda x: F.adaptive_avg_pool2d(x, (1, 1)), torch.float32),
    "adaptive-avg-3x2": (lambda x: F.adaptive_avg_pool2d(x, (3, 2)), torch.float32),
    "adaptive-avg-1d": (lambda x: F.adaptive_avg_pool1d(x.flatten(2), 4), torch.float32),
    "adaptive-max-3x2": (lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True), torch.float32),
    "adaptive-max-1x1": (lambda x: F.adaptive_max_pool2d(x, 1, return_indices=True), torch.float32),
}


@pytest.mark.parametrize("opset", [17, 22])
@pytest.mark.parametrize("name", list(POOLING))
def test_pooling_with_dynamic_spatial_sizes(name, opset):
    fn, dtype = POOLING[name]
    model = Lambda(fn)

    def sample(*shape):  # integers with ties, so torch's choice among equal maxima is checked
        return (torch.randn(*shape) * 50).to(dtype)

    proto = export_dynamic(model, (sample(2, 3, 8, 8),), ({0: AUTO, 2: AUTO, 3: AUTO},), opset)
    run_at(proto, model, (sample(1, 3, 7, 9),), (sample(2, 3, 5, 5),), (sample(1, 3, 12, 6),))


def test_adaptive_average_pooling_to_a_dynamic_output_size():
    # One averaging matrix per axis, built at run time (no slice per output element).
    model = Lambda(lambda x: F.adaptive_avg_pool2d(x, (x.shape[2] // 2, x.shape[3] // 3)))
    proto = export_dynamic(model, (torch.randn(2, 3, 10, 12),), ({0: AUTO, 2: AUTO, 3: AUTO},))
    run_at(proto, model, (torch.randn(1, 3, 7, 13),), (torch.randn(3, 3, 20, 9),))


def test_unfold_with_dynamic_sizes():
    model = Lambda(lambda x: F.unfold(x, (2, 3), padding=1, stride=(2, 1), dilation=(1, 2)))
    proto = export_dynamic(model, (torch.randn(2, 3, 8, 9),), ({0: AUTO, 1: AUTO, 2: AUTO, 3: AUTO},))
    run_at(proto, model, (torch.randn(3, 4, 7, 11),), (torch.randn(1, 2, 5, 6),))


@pytest.mark.parametrize("opset", [17, 18])
def test_fold_with_a_dynamic_channel_count(opset):
    # Below opset 18 a ConvTranspose with one-hot kernels; the channel count is read at run time.
    model = Lambda(lambda x: F.fold(x, (8, 6), (2, 2), stride=2))
    proto = export_dynamic(model, (torch.randn(2, 12, 12),), ({0: AUTO, 1: Dim("C4", min=1) * 4},), opset)
    run_at(proto, model, (torch.randn(3, 8, 12),), (torch.randn(1, 20, 12),))


class Col2Im(torch.nn.Module):
    """col2im to the size of a second input (a dynamic output_size)."""

    def forward(self, x, like):
        return torch.ops.aten.col2im(x, [like.shape[0], like.shape[1]], [2, 2], [1, 1], [0, 0], [2, 2])


@pytest.mark.parametrize("opset", [17, 18])
def test_col2im_to_a_dynamic_output_size(opset):
    # Opset 18's Col2Im takes the size at run time; below, the one-hot ConvTranspose's windows are
    # counted, and its output cropped, at run time.
    model = Col2Im()
    proto = export_dynamic(model, (torch.randn(2, 12, 12), torch.randn(8, 6)), ({0: AUTO, 2: AUTO}, {0: AUTO, 1: AUTO}), opset)
    run_at(proto, model, (torch.randn(3, 12, 15), torch.randn(10, 6)), (torch.randn(1, 12, 4), torch.randn(4, 4)))


@pytest.mark.parametrize("opset", [13, 14])
def test_dynamic_unflatten_into_a_size_of_zero(opset):
    # Below opset 14 Reshape reads a 0 as "copy the input's size": the empty result is broadcast.
    model = Lambda(lambda x: x.unflatten(1, (0, 5)))
    proto = export_dynamic(model, (torch.randn(3, 0),), ({0: AUTO},), opset)
    run_at(proto, model, (torch.randn(4, 0),), (torch.randn(7, 0),))


# Scans whose log-depth steps run in a Loop when the length is dynamic.


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.cumprod(x, 1),
        lambda x: torch.cummax(x, 1),
        lambda x: torch.cummin(x, 0),
        lambda x: torch.logcumsumexp(x, 1),
    ],
    ids=["cumprod", "cummax", "cummin", "logcumsumexp"],
)
def test_scans_along_a_dynamic_length(fn, opset):
    model = Lambda(fn)
    proto = export_dynamic(model, (torch.randn(2, 5),), ({0: AUTO, 1: AUTO},), opset)
    nan = float("nan")
    # Lengths around powers of two (1: no step at all), ties, and NaN (which wins and stays).
    run_with_nans_at(proto, model, *[(torch.randn(n, n + 1),) for n in (1, 2, 3, 7, 8, 16, 33)],
                     (torch.round(torch.randn(6, 20)),), (torch.tensor([[1.0, nan, 3.0, 0.0, nan, 5.0, 5.0]] * 2),))


# Fourier transforms: ONNX DFT (opset 17) takes any length; torch's normalization is computed.


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.view_as_real(torch.fft.rfft(x, norm="ortho")),
        lambda x: torch.view_as_real(torch.fft.fft(torch.view_as_complex(torch.stack([x, x * 0.5], -1)), dim=0,
                                                   norm="forward")),
        lambda x: torch.view_as_real(torch.fft.ifft(torch.view_as_complex(torch.stack([x, x * 0.5], -1)))),
        lambda x: torch.fft.irfft(torch.fft.rfft(x)),
        lambda x: torch.view_as_real(torch.fft.rfft2(x)),
    ],
    ids=["rfft", "fft", "ifft", "irfft", "rfft2"],
)
def test_fourier_transforms_of_dynamic_lengths(fn, opset):
    model = Lambda(fn)
    proto = export_dynamic(model, (torch.randn(3, 40),), ({1: AUTO},), opset)
    run_at(proto, model, (torch.randn(3, 33),), (torch.randn(3, 64),), rtol=1e-4, atol=1e-4)


def test_fourier_transform_of_a_dynamic_length_below_opset_17_says_why():
    model = Lambda(lambda x: torch.view_as_real(torch.fft.rfft(x)))
    with pytest.raises(fastonnx.ConversionError, match="DFT, from opset 17, takes any length"):
        fastonnx.export(model, (torch.randn(3, 40),), dynamic_shapes=({1: AUTO},), opset_version=16)


# Models: a classifier and segmentation-style heads on images of any height and width.


class Block(torch.nn.Module):
    """A residual block, downsampling by a strided convolution."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.skip = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False), torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.skip(x))


class Classifier(torch.nn.Module):
    """ResNet-like: a stem with max pooling, residual stages, an adaptive average pool to 1x1."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 7, 2, 3, bias=False), torch.nn.BatchNorm2d(16),
                                        torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, 1))
        self.stages = torch.nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.fc = torch.nn.Linear(64, classes)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.stages(self.stem(x)), (1, 1))
        return self.fc(torch.flatten(x, 1))


def _trained_like(model: torch.nn.Module) -> torch.nn.Module:
    """Batch-norm statistics other than the defaults, so that they matter."""
    torch.manual_seed(0)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return model.eval()


def test_classifier_with_dynamic_height_and_width():
    model = _trained_like(Classifier())
    proto = export_dynamic(model, (torch.randn(2, 3, 64, 64),), ({0: AUTO, 2: AUTO, 3: AUTO},))
    run_at(proto, model, (torch.randn(1, 3, 96, 80),), (torch.randn(3, 3, 45, 71),), (torch.randn(2, 3, 128, 37),),
           rtol=1e-3, atol=1e-4)


class Segmenter(torch.nn.Module):
    """An encoder that halves the resolution twice, a decoder that upsamples by scale factors
    back to it (bilinear, then nearest), and a pooled image-level context (adaptive average pool
    to 1x1, interpolated to the feature map's size) added in, as in DeepLab's ASPP."""

    def __init__(self, classes: int = 5):
        super().__init__()
        self.down1 = torch.nn.Conv2d(3, 8, 3, 2, 1)
        self.down2 = torch.nn.Conv2d(8, 16, 3, 2, 1)
        self.context = torch.nn.Conv2d(16, 16, 1)
        self.up1 = torch.nn.Conv2d(16, 8, 3, 1, 1)
        self.head = torch.nn.Conv2d(8, classes, 1)

    def forward(self, x):
        f = F.relu(self.down2(F.relu(self.down1(x))))
        pooled = self.context(F.adaptive_avg_pool2d(f, (1, 1)))
        f = f + F.interpolate(pooled, size=f.shape[-2:], mode="bilinear", align_corners=False)
        f = F.relu(self.up1(F.interpolate(f, scale_factor=2, mode="bilinear", align_corners=False)))
        return self.head(F.interpolate(f, scale_factor=2, mode="nearest"))


def test_segmentation_model_with_dynamic_height_and_width():
    torch.manual_seed(0)
    model = Segmenter().eval()
    # Heights and widths that are multiples of 4, so the output has the input's size.
    proto = export_dynamic(model, (torch.randn(2, 3, 32, 48),), ({0: AUTO, 2: AUTO, 3: AUTO},))
    run_at(proto, model, (torch.randn(2, 3, 64, 40),), (torch.randn(1, 3, 24, 100),), (torch.randn(3, 3, 16, 16),),
           rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_pooled_context_interpolated_to_a_dynamic_size(mode):
    # The classic pattern alone: adaptive_avg_pool2d(x, (1, 1)), then interpolate to x's (h, w).
    def fn(x):
        pooled = F.adaptive_avg_pool2d(x, (1, 1))
        kwargs = {"align_corners": False} if mode == "bilinear" else {}
        return x + F.interpolate(pooled, size=(x.shape[2], x.shape[3]), mode=mode, **kwargs)

    model = Lambda(fn)
    proto = export_dynamic(model, (torch.randn(2, 4, 6, 8),), ({0: AUTO, 2: AUTO, 3: AUTO},))
    run_at(proto, model, (torch.randn(1, 4, 9, 5),), (torch.randn(3, 4, 16, 17),), (torch.randn(2, 4, 3, 30),))


@pytest.mark.parametrize(
    "fn, example, dims, sizes",
    [
        # The dims after the merged ones move (Falcon's attention: (B, S, G, H, D) -> (B, S, G*H, D)).
        (lambda x: x.flatten(2, 3), (2, 5, 2, 4, 8), {0: AUTO, 1: AUTO}, [(3, 7, 2, 4, 8), (1, 2, 2, 4, 8)]),
        (lambda x: x.flatten(1, 2), (3, 4, 5, 6), {0: AUTO, 2: AUTO, 3: AUTO}, [(2, 4, 7, 9)]),
        (lambda x: x.flatten(0, 1), (4, 3, 0), {0: AUTO}, [(5, 3, 0)]),  # a trailing size of 0 stays 0
    ],
)
def test_flatten_of_dynamic_sizes(fn, example, dims, sizes):
    model = Lambda(fn)
    proto = export_dynamic(model, (torch.randn(*example),), (dims,))
    run_at(proto, model, *[(torch.randn(*s),) for s in sizes])
