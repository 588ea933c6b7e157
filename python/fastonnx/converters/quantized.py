"""Converters of the ``quantized_decomposed`` ops (torch.ao's reference quantization), which the
TorchScript front end emits for eager-mode quantized modules: QuantizeLinear and
DequantizeLinear, the form ONNX runtimes fuse into QLinear kernels."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..core.dtypes import onnx_code


def _onnx_int_type(dtype: torch.dtype) -> torch.dtype:
    return {torch.uint8: torch.uint8, torch.int8: torch.int8, torch.int32: torch.int32}[dtype]


def _qparams(g, scale, zero_point, dtype):
    """Scale (float32) and zero point (of the integer type) as ONNX takes them: constants, or
    graph values cast."""
    if isinstance(scale, int | float):
        s = g.constant(torch.tensor(scale, dtype=torch.float32))
        zp = g.constant(torch.tensor(zero_point, dtype=_onnx_int_type(dtype)))
        return s, zp
    return g.op("Cast", scale, to_i=onnx_code(torch.float32)), g.op("Cast", zero_point, to_i=onnx_code(dtype))


def quantize_linear(g, x, scale, zero_point, quant_min, quant_max, dtype):
    return g.op("QuantizeLinear", x, *_qparams(g, scale, zero_point, dtype))


def dequantize_linear(g, x, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None):
    return g.op("DequantizeLinear", x, *_qparams(g, scale, zero_point, dtype))


def dequantize_channels(g, x, scales, zero_points, axis, quant_min, quant_max, dtype, *, out_dtype=None):
    # ONNX takes the zero points in the integer type of the data.
    zps = g.op("Cast", zero_points, to_i=onnx_code(dtype))
    return g.op("DequantizeLinear", x, scales, zps, axis_i=axis)


CONVERTERS: dict[str, Callable] = {
    "quantized_decomposed::quantize_per_tensor": quantize_linear,
    "quantized_decomposed::dequantize_per_tensor": dequantize_linear,
    "quantized_decomposed::dequantize_per_channel": dequantize_channels,
}
