// Vector kernels for transposing weights while they are written. Linear weights are written
// transposed (MatMul reads [in, out]), so on a transformer most of the file passes through here:
// a scalar tiled copy ran at about half the speed of the write itself.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fastonnx {

// Rows and columns of the square tile a strip kernel transposes at a time.
constexpr size_t kTransposeTile = 8;

// Transposes a strip of kTransposeTile rows: dst[j][i] = src[i][j] for i < kTransposeTile and
// j < cols, where cols is a multiple of kTransposeTile. Strides are in elements; memory may be
// unaligned.
using TransposeStrip = void (*)(const uint8_t* src, size_t src_stride, uint8_t* dst, size_t dst_stride, size_t cols);

// The vector kernel for elements of `element_size` bytes on this CPU, or null when there is none
// (the caller then copies element by element).
TransposeStrip transpose_strip_kernel(int element_size);

}  // namespace fastonnx
