"""torch dtypes as c10::ScalarType codes, the numbering the native core uses."""

from __future__ import annotations

import torch

_CODES = {
    torch.uint8: 0,
    torch.int8: 1,
    torch.int16: 2,
    torch.int32: 3,
    torch.int64: 4,
    torch.float16: 5,
    torch.float32: 6,
    torch.float64: 7,
    torch.complex32: 8,
    torch.complex64: 9,
    torch.complex128: 10,
    torch.bool: 11,
    torch.bfloat16: 15,
    torch.float8_e5m2: 23,
    torch.float8_e4m3fn: 24,
    torch.float8_e5m2fnuz: 25,
    torch.float8_e4m3fnuz: 26,
    torch.uint16: 27,
    torch.uint32: 28,
    torch.uint64: 29,
}


def dtype_code(dtype: torch.dtype) -> int:
    try:
        return _CODES[dtype]
    except KeyError:
        raise TypeError(f"dtype {dtype} has no ONNX equivalent") from None


# ONNX's TensorProto.DataType codes, for dtype attributes written by Python converters.
_ONNX_CODES = {
    torch.float32: 1,
    torch.uint8: 2,
    torch.int8: 3,
    torch.uint16: 4,
    torch.int16: 5,
    torch.int32: 6,
    torch.int64: 7,
    torch.bool: 9,
    torch.float16: 10,
    torch.float64: 11,
    torch.uint32: 12,
    torch.uint64: 13,
    torch.complex64: 14,
    torch.complex128: 15,
    torch.bfloat16: 16,
}


def onnx_code(dtype: torch.dtype) -> int:
    try:
        return _ONNX_CODES[dtype]
    except KeyError:
        raise TypeError(f"dtype {dtype} has no ONNX equivalent") from None
