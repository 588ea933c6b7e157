"""The one table of dtypes: each torch dtype with its c10::ScalarType code (the native core's
numbering, and the one TorchScript graphs hold as a ScalarType constant), its ONNX
``TensorProto.DataType`` code and torch.onnx's name for it."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DType:
    dtype: torch.dtype
    scalar_type: int  # c10::ScalarType
    onnx: int | None  # TensorProto.DataType; None where ONNX has none
    torch_onnx_name: str | None = None  # torch.onnx.symbolic_helper's scalar type name
    in_core: bool = True  # the native core takes it (quantized dtypes it does not)


TABLE: tuple[DType, ...] = (
    DType(torch.uint8, 0, 2, "Byte"),
    DType(torch.int8, 1, 3, "Char"),
    DType(torch.int16, 2, 5, "Short"),
    DType(torch.int32, 3, 6, "Int"),
    DType(torch.int64, 4, 7, "Long"),
    DType(torch.float16, 5, 10, "Half"),
    DType(torch.float32, 6, 1, "Float"),
    DType(torch.float64, 7, 11, "Double"),
    DType(torch.complex32, 8, None),
    DType(torch.complex64, 9, 14),
    DType(torch.complex128, 10, 15),
    DType(torch.bool, 11, 9, "Bool"),
    DType(torch.qint8, 12, None, in_core=False),
    DType(torch.quint8, 13, None, in_core=False),
    DType(torch.qint32, 14, None, in_core=False),
    DType(torch.bfloat16, 15, 16, "BFloat16"),
    DType(torch.float8_e5m2, 23, 19),
    DType(torch.float8_e4m3fn, 24, 17),
    DType(torch.float8_e5m2fnuz, 25, 20),
    DType(torch.float8_e4m3fnuz, 26, 18),
    DType(torch.uint16, 27, 4),
    DType(torch.uint32, 28, 12),
    DType(torch.uint64, 29, 13),
)
_BY_DTYPE = {row.dtype: row for row in TABLE}
_BY_SCALAR_TYPE = {row.scalar_type: row for row in TABLE}


def _row(dtype: torch.dtype) -> DType:
    try:
        return _BY_DTYPE[dtype]
    except KeyError:
        raise TypeError(f"dtype {dtype} has no ONNX equivalent") from None


def dtype_code(dtype: torch.dtype) -> int:
    """The c10::ScalarType code the native core takes."""
    row = _row(dtype)
    if not row.in_core:
        raise TypeError(f"dtype {dtype} has no ONNX equivalent")
    return row.scalar_type


def onnx_code(dtype: torch.dtype) -> int:
    """ONNX's TensorProto.DataType code, for dtype attributes written by Python converters."""
    code = _row(dtype).onnx
    if code is None:
        raise TypeError(f"dtype {dtype} has no ONNX equivalent")
    return code


def scalar_type_code(dtype: torch.dtype) -> int:
    """The c10::ScalarType code of any dtype torch has, quantized ones included (a TorchScript
    graph's ``prim::dtype``)."""
    return _row(dtype).scalar_type


def dtype_of_scalar_type(code: int) -> torch.dtype:
    """The dtype of a c10::ScalarType code (a TorchScript graph's ScalarType constant)."""
    return _BY_SCALAR_TYPE[code].dtype


def torch_onnx_name(dtype: torch.dtype | None) -> str | None:
    """torch.onnx's scalar type name (``"Float"``), which symbolic functions read."""
    row = _BY_DTYPE.get(dtype) if dtype is not None else None
    return row.torch_onnx_name if row is not None else None
