"""Upsampling."""

import torch
from row import aten, from_opinfo, hand_written, tensor
from rows.pooling import ADAPTIVE_AVG_TOLERANCE
from torch.testing._internal.opinfo.core import SampleInput


# onnxruntime interpolates float16 in float16 arithmetic, torch in float32 rounding once.
FLOAT16_TOLERANCE = {torch.float16: (1e-3, 5e-3)}
# onnxruntime and ATen compute the cubic weights in different orders.
CUBIC_TOLERANCE = {torch.float32: (1.3e-6, 3e-5), **FLOAT16_TOLERANCE}


def _sized(rank, align_corners=None):
    """The overloads with an output size and optional per-axis scales: scales consistent with the
    size (torch then transforms coordinates by the scale), absent, and an output size equal to
    the input's along some axes."""
    cases = [
        ((2, 3, 4, 5, 3), (7, 9, 5), (1.75, 1.8, 1.7)),
        ((1, 2, 6, 4, 5), (3, 4, 2), (0.6, 1.1, 0.5)),
        ((1, 2, 5, 3, 4), (8, 7, 9), None),
        ((1, 1, 6, 5, 4), (6, 10, 3), None),
    ]

    def samples(dtype):
        for shape, size, scales in cases:
            args = (list(size[:rank]),) + (() if align_corners is None else (align_corners,))
            kwargs = {} if scales is None else dict(zip(("scales_d", "scales_h", "scales_w")[3 - rank :], scales[:rank]))
            if rank == 1 and scales is not None:
                kwargs = {"scales": scales[0]}
            yield SampleInput(tensor(shape[: rank + 2], dtype), args=args, kwargs=kwargs)

    return samples


def _sized_both_corners(rank):
    def samples(dtype):
        for align_corners in (False, True):
            yield from _sized(rank, align_corners)(dtype)

    return samples


def _antialiased(dtype):
    """F.interpolate(antialias=True): down- and upscaling, given scales, corners aligned or not."""
    for shape, size, scale, align_corners in [
        ((2, 3, 10, 12), (4, 5), None, False),
        ((1, 2, 9, 7), (3, 11), None, True),
        ((1, 3, 8, 9), None, (0.45, 0.7), False),
        ((1, 1, 5, 6), None, (1.5, 0.5), True),
        ((1, 2, 6, 6), None, (1.2, 1.2), False),
        ((1, 2, 5, 8), None, (1.1, 0.5), False),
    ]:
        kwargs = {"size": size, "scale_factor": scale, "align_corners": align_corners, "antialias": True}
        yield SampleInput(tensor(shape, dtype), kwargs=kwargs)


def _antialiased_sized(dtype):
    for shape, size, scales_h, scales_w in [((2, 3, 10, 12), [4, 5], None, None), ((1, 2, 9, 7), [4, 3], 0.45, 0.5)]:
        for align_corners in (False, True):
            yield SampleInput(tensor(shape, dtype), args=(size, align_corners, scales_h, scales_w))


ROWS = (
    from_opinfo(
        "nn.functional.interpolate",
        "upsample_nearest1d.vec",
        "upsample_nearest2d.vec",
        "upsample_nearest3d.vec",
        variant="nearest",
    ),
    from_opinfo(
        "nn.functional.interpolate",
        "_upsample_nearest_exact1d.vec",
        "_upsample_nearest_exact2d.vec",
        "_upsample_nearest_exact3d.vec",
        variant="nearest-exact",
    ),
    from_opinfo("nn.functional.interpolate", "upsample_linear1d.vec", variant="linear", tolerance=FLOAT16_TOLERANCE),
    from_opinfo("nn.functional.interpolate", "upsample_bilinear2d.vec", variant="bilinear", tolerance=FLOAT16_TOLERANCE),
    from_opinfo("nn.functional.interpolate", "upsample_bicubic2d.vec", variant="bicubic", tolerance=CUBIC_TOLERANCE),
    from_opinfo("nn.functional.interpolate", "upsample_trilinear3d.vec", variant="trilinear", tolerance=FLOAT16_TOLERANCE),
    from_opinfo(
        "nn.functional.interpolate",
        "adaptive_avg_pool1d",
        "adaptive_avg_pool2d",
        "adaptive_avg_pool3d",
        variant="area",
        tolerance=ADAPTIVE_AVG_TOLERANCE,
    ),
    from_opinfo("nn.functional.upsample_bilinear", "upsample_bilinear2d.vec"),
    from_opinfo("nn.functional.upsample_nearest", "upsample_nearest1d.vec", "upsample_nearest2d.vec", "upsample_nearest3d.vec"),
    from_opinfo("_upsample_bilinear2d_aa", "_upsample_bilinear2d_aa.vec", "_upsample_bilinear2d_aa"),
    hand_written(
        "_upsample_bicubic2d_aa.vec",
        id="interpolate.bicubic_antialias",
        fn=lambda x, **kwargs: torch.nn.functional.interpolate(x, mode="bicubic", **kwargs),
        samples=_antialiased,
    ),
    hand_written(
        "_upsample_bilinear2d_aa.vec",
        id="interpolate.bilinear_antialias",
        fn=lambda x, **kwargs: torch.nn.functional.interpolate(x, mode="bilinear", **kwargs),
        samples=_antialiased,
    ),
    hand_written("_upsample_bicubic2d_aa", fn=aten._upsample_bicubic2d_aa, samples=_antialiased_sized),
    hand_written("upsample_nearest1d", fn=aten.upsample_nearest1d, samples=_sized(1)),
    hand_written("upsample_nearest2d", fn=aten.upsample_nearest2d, samples=_sized(2)),
    hand_written("upsample_nearest3d", fn=aten.upsample_nearest3d, samples=_sized(3)),
    hand_written("upsample_linear1d", fn=aten.upsample_linear1d, samples=_sized_both_corners(1)),
    hand_written("upsample_bilinear2d", fn=aten.upsample_bilinear2d, samples=_sized_both_corners(2)),
    hand_written("upsample_trilinear3d", fn=aten.upsample_trilinear3d, samples=_sized_both_corners(3)),
    hand_written("upsample_bicubic2d", fn=aten.upsample_bicubic2d, samples=_sized_both_corners(2), tolerance=CUBIC_TOLERANCE),
)
