"""Fourier transforms and complex views. torch.export keeps torch.fft.* as composite ops
(aten.fft_fft, ...); their decompositions call the _fft_* overloads these rows call directly,
with dims as the decompositions pass them (non-negative, the one-sided one last). Complex inputs
and outputs are (real, imaginary) pairs in the ONNX graph."""

import torch
from row import aten, from_opinfo, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

REAL = (torch.float32, torch.float64)
COMPLEX = (torch.complex64, torch.complex128)
# pocketfft and onnxruntime's DFT (or the DFT-matrix MatMul before opset 17) sum n terms of up to
# ~10 in different orders.
TOLERANCE = {torch.float32: (1e-5, 1e-4), torch.complex64: (1e-5, 1e-4)}
# Every sample of the transforms runs (the cap for dtypes other than float32 is lower).


def _r2c(dtype):
    # (shape, dim, normalization, onesided)
    for shape, dim, norm, onesided in [
        ((8,), [0], 0, True),
        ((3, 8), [1], 1, True),
        ((3, 7), [1], 2, False),
        ((4, 6, 5), [1, 2], 0, True),
        ((4, 6, 5), [2, 0], 1, True),
        ((2, 3, 4), [2], 2, False),
    ]:
        yield SampleInput(tensor(shape, dtype), args=(dim, norm, onesided))


def _c2c(dtype):
    # (shape, dim, normalization, forward)
    for shape, dim, norm, forward in [
        ((8,), [0], 0, True),
        ((3, 8), [1], 1, False),
        ((4, 6, 5), [0, 2], 2, True),
        ((4, 6, 5), [1, 2], 0, False),
        ((5,), [0], 2, False),
        ((2, 3, 4), [2], 1, True),
    ]:
        yield SampleInput(tensor(shape, dtype), args=(dim, norm, forward))


def _c2r(dtype):
    # (shape, dim, normalization, last_dim_size): the last of dim holds last_dim_size // 2 + 1
    # points of a one-sided spectrum.
    for shape, dim, norm, length in [
        ((3, 5), [1], 2, 8),
        ((3, 5), [1], 0, 9),
        ((4, 6, 4), [0, 2], 1, 6),
        ((2,), [0], 2, 2),
        ((4, 6), [1, 0], 0, 6),
        ((1,), [0], 1, 1),
        ((3, 8), [1], 1, 8),  # a whole spectrum: only its first half is read
    ]:
        yield SampleInput(tensor(shape, dtype), args=(dim, norm, length))


def _one(shape):
    return lambda dtype: iter([SampleInput(tensor(shape, dtype)), SampleInput(tensor((2, *shape), dtype))])


def _complex_products(dtype):
    yield SampleInput(tensor((3, 4), dtype), args=(tensor((3, 4), dtype),))
    yield SampleInput(tensor((2, 3, 4), dtype), args=(tensor((3, 1), dtype),))
    yield SampleInput(tensor((3, 4), dtype), args=(tensor((4,), torch.float32),))


ROWS = (
    hand_written("_fft_r2c", fn=aten._fft_r2c.default, samples=_r2c, dtypes=REAL, tolerance=TOLERANCE, max_samples=8),
    hand_written("_fft_c2c", fn=aten._fft_c2c.default, samples=_c2c, dtypes=COMPLEX, tolerance=TOLERANCE, max_samples=8),
    hand_written("_fft_c2r", fn=aten._fft_c2r.default, samples=_c2r, dtypes=COMPLEX, tolerance=TOLERANCE, max_samples=8),
    hand_written("view_as_real", fn=torch.view_as_real, samples=_one((3, 4)), dtypes=COMPLEX),
    hand_written("view_as_complex", fn=torch.view_as_complex, samples=_one((3, 2)), dtypes=REAL),
    hand_written("real", fn=torch.real, samples=_one((3, 4)), dtypes=COMPLEX),
    hand_written("imag", fn=torch.imag, samples=_one((3, 4)), dtypes=COMPLEX),
    from_opinfo("polar", "polar", dtypes=REAL),
    # complex products (rotary embeddings written with complex numbers), a complex or real factor
    hand_written("mul.Tensor", id="mul.complex", fn=torch.mul, samples=_complex_products, dtypes=COMPLEX),
    # torch's conjugate is a lazy view, read here through its parts (the ONNX graph negates the
    # imaginary parts eagerly).
    hand_written(
        "_conj", fn=lambda x: torch.stack([aten._conj.default(x).real, aten._conj.default(x).imag]),
        samples=_one((3, 4)), dtypes=COMPLEX,
    ),
)
