// Converting weights among float32, float16 and bfloat16 while they are written
// (export(dtype=...)): a bfloat16 checkpoint exported as float16 passes every byte through here,
// and one conversion call per element (the scalar functions of numeric.h, with their branches)
// made that export 3.4 times slower than copying the checkpoint.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fastonnx/types.h"

namespace fastonnx {

// Whether convert_floats converts elements of `t`.
bool is_streamed_float(ScalarType t);

// `count` elements of `from` at `in` as `to` at `out` (both of is_streamed_float), exactly as
// ONNX's Cast does: every value of the three is a float, and float16 and bfloat16 round to
// nearest even. Vector kernels where the CPU has them (AVX2, F16C); memory may be unaligned, and
// `out` may be `in` when both dtypes have the same size.
void convert_floats(ScalarType from, const uint8_t* in, ScalarType to, uint8_t* out, size_t count);

}  // namespace fastonnx
