"""Converters of torchvision's C++ ops, which its detection models call: ``nms`` as ONNX
NonMaxSuppression, ``roi_align`` as ONNX RoiAlign, ``roi_pool`` as ONNX MaxRoiPool. Registered by
name in builtin.py (torchvision need not be importable to export a model without them)."""

from __future__ import annotations

from collections.abc import Callable

import torch

_INT64 = 7  # ONNX TensorProto.INT64


def _nms(g, dets, scores, iou_threshold):
    """Box indices kept, by decreasing score: ONNX's one batch and one class, its third column."""
    boxes = g.op("Unsqueeze", dets, g.constant([0]))
    per_class = g.op("Unsqueeze", scores, g.constant([0, 1]))
    limit = g.op("Shape", dets, start_i=0, end_i=1)  # every box may be kept
    selected = g.op(
        "NonMaxSuppression",
        boxes,
        per_class,
        limit,
        g.constant(torch.tensor([iou_threshold], dtype=torch.float32)),
    )
    column = g.op("Gather", selected, g.constant(torch.tensor([2])), axis_i=1)
    return g.op("Squeeze", column, g.constant([1]))


def _roi_align(g, input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    if aligned and g.opset < 16:
        raise ValueError(
            "roi_align(aligned=True) needs ONNX RoiAlign's coordinate_transformation_mode (opset 16 or later)"
        )
    batch = g.op("Slice", rois, g.constant([0]), g.constant([1]), g.constant([1]))
    batch = g.op("Cast", g.op("Squeeze", batch, g.constant([1])), to_i=_INT64)
    boxes = g.op("Slice", rois, g.constant([1]), g.constant([5]), g.constant([1]))
    attrs = {}
    if g.opset >= 16:
        attrs["coordinate_transformation_mode_s"] = "half_pixel" if aligned else "output_half_pixel"
    return g.op(
        "RoiAlign",
        input,
        boxes,
        batch,
        mode_s="avg",
        output_height_i=int(pooled_height),
        output_width_i=int(pooled_width),
        sampling_ratio_i=max(int(sampling_ratio), 0),  # torchvision's -1 (adaptive) is ONNX's 0
        spatial_scale_f=float(spatial_scale),
        **attrs,
    )


def _roi_pool(g, input, rois, spatial_scale, pooled_height, pooled_width):
    """ONNX MaxRoiPool takes torchvision's rois as they are: (batch index, x1, y1, x2, y2). The
    second output, the argmax positions only a backward pass reads, has no ONNX op: a model that
    reads it is refused."""
    pooled = g.op(
        "MaxRoiPool",
        input,
        rois,
        pooled_shape_i=[int(pooled_height), int(pooled_width)],
        spatial_scale_f=float(spatial_scale),
    )
    return pooled, None


CONVERTERS: dict[str, Callable] = {
    "torchvision::nms": _nms,
    "torchvision::roi_pool": _roi_pool,
    "torchvision::roi_align": _roi_align,
}
