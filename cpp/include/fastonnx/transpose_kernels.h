// Vector kernels for transposing weights while they are written. Linear weights are written
// transposed (MatMul reads [in, out]), so on a transformer most of the file passes through here:
// a scalar tiled copy ran at about half the speed of the write itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace fastonnx {

// Rows and columns of the square tile a strip kernel transposes at a time.
constexpr size_t kTransposeTile = 8;

// Transposes a strip of rows: dst[j][i] = src[i][j] for i below the kernel's row count and
// j < cols, where cols is a multiple of kTransposeTile. Strides are in elements; memory may be
// unaligned.
using TransposeStrip = void (*)(const uint8_t* src, size_t src_stride, uint8_t* dst, size_t dst_stride, size_t cols);

// The bytes of an output row a band kernel writes at once: a cache line.
constexpr size_t kTransposeLine = 64;

// The kernels for elements of one size on this CPU; a null kernel means there is none (the
// caller then copies element by element).
struct TransposeKernels {
  // kTransposeTile rows: a tile's worth of each output row.
  TransposeStrip strip = nullptr;
  // band_rows rows (kTransposeLine bytes of elements): each output row's line written whole, with
  // streaming stores when the output is aligned to kTransposeAlignment (rows included), so that
  // no line is read before it is written. Writing half lines from 8-row strips made the
  // transposes of an 8B LLaMA's matrices half as fast, and slower still beside the writer's copy.
  TransposeStrip band = nullptr;
  size_t band_rows = 0;
};

TransposeKernels transpose_kernels(int element_size);

// The alignment of output the band kernels stream to.
constexpr size_t kTransposeAlignment = 32;

// A byte buffer the band kernels can stream to (transposed chunks computed ahead of the writer).
class AlignedBytes {
 public:
  uint8_t* data() { return data_.get(); }
  size_t size() const { return size_; }
  // At least `n` bytes; the contents are not kept.
  void reserve(size_t n) {
    if (n <= size_) return;
    data_.reset(static_cast<uint8_t*>(::operator new[](n, std::align_val_t{kTransposeAlignment})));
    size_ = n;
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t{kTransposeAlignment}); }
  };
  std::unique_ptr<uint8_t[], Free> data_;
  size_t size_ = 0;
};

}  // namespace fastonnx
