// Sliding windows over the trailing spatial axes, as torch's pooling and unfold ops make them;
// shared by the pooling, pooling-gradient and im2col/col2im converters.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "common.h"

namespace fastonnx {

struct Windows {
  std::vector<int64_t> in, kernel, stride, padding, dilation, out;  // one item per spatial axis

  size_t rank() const { return in.size(); }
  int64_t positions() const;  // kernel positions per window
  // Padding after the input that makes every window whole (never negative).
  std::vector<int64_t> end_padding() const;
  // Input coordinate along `axis` of kernel offset `k` in window `o`; outside [0, in) for padding.
  int64_t coordinate(size_t axis, int64_t o, int64_t k) const {
    return o * stride[axis] - padding[axis] + k * dilation[axis];
  }
};

// torch's output length of a window sweep; in ceil mode a last window that would start in the
// right padding is dropped.
int64_t pooled_length(int64_t in, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation, bool ceil_mode);

// The windows of a pooling op over the last `kernel.size()` axes of `x`, whose sizes must be
// static. An empty stride means the kernel size (torch's default).
Windows pooling_windows(Builder& b, Value x, const std::vector<int64_t>& kernel, std::vector<int64_t> stride,
                        const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool ceil_mode);

// The sizes of the last `n` axes of `x` when they are static (the leading ones may not be).
std::optional<std::vector<int64_t>> static_trailing_sizes(Builder& b, Value x, size_t n);
// The same, failing naming `what` when they are not static.
std::vector<int64_t> static_spatial_sizes(Builder& b, Value x, size_t n, std::string_view what);

// One strided slice of `x` per kernel offset, in torch's scan order (row-major over the kernel):
// slice k holds, for every window, the input element at kernel offset k. `x` is padded with
// `fill` first (torch's padding plus what the last windows need).
std::vector<Value> window_slices(Builder& b, Value x, const Windows& w, const Scalar& fill);

// For each kernel offset (in scan order), the flat position in the input's spatial plane of that
// offset in every window (row-major over the windows); -1 where it falls in the padding.
std::vector<std::vector<Scalar>> window_positions(const Windows& w);

// The inverse scatter of window_slices, summing where windows overlap: `cols` (M, K, out...)
// holds a value per kernel offset and window; the result (M, 1, in...) adds each at its input
// position (padding positions are dropped). A ConvTranspose with one-hot kernels. With
// `whole_window`, `cols` is (M, 1, out...) and its value goes to every offset of the window.
Value scatter_windows(Builder& b, Value cols, const Windows& w, bool whole_window = false);

// torch's divisor of each window's sum in average pooling, in window order: `divisor_override`,
// else the window's size clipped to the padded input (count_include_pad) or to the input.
std::vector<int64_t> avg_divisors(const Windows& w, bool count_include_pad, std::optional<int64_t> divisor_override);

// A constant with one value per window (shape `w.out`), or a scalar when all are equal.
Value per_window(Builder& b, const std::vector<Scalar>& values, const Windows& w, ScalarType dtype);

// The same windows when the input's spatial sizes may be dynamic: the sizes are static ints or
// 0-d int64 values, and the output lengths 1-D int64 tensors of one item, computed at run time
// as torch computes them (constants when the input size is static).
struct RuntimeWindows {
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode = false;
  SymIntList in;
  std::vector<Value> out;

  size_t rank() const { return kernel.size(); }
  int64_t positions() const;
};
// The sizes of the last `n` axes of `x`, read at run time where they are dynamic.
SymIntList spatial_sizes(Builder& b, Value x, size_t n);
RuntimeWindows runtime_windows(Builder& b, const SymIntList& in, const std::vector<int64_t>& kernel,
                               std::vector<int64_t> stride, const std::vector<int64_t>& padding,
                               const std::vector<int64_t>& dilation, bool ceil_mode);

// window_slices for RuntimeWindows (`x` of rank `x_rank`): `x` is padded with `fill` by the padding
// and by what the last windows may reach past it (a static bound), and each slice ends at the
// run-time window count.
std::vector<Value> window_slices(Builder& b, Value x, int64_t x_rank, const RuntimeWindows& w, const Scalar& fill);

// `y` with its spatial axes (the last ones) cut to the windows' output lengths: drops the last
// ceil-mode window that ONNX's pooling ops keep before opset 22 and torch drops.
Value crop_to_windows(Builder& b, Value y, const RuntimeWindows& w);

// avg_divisors for RuntimeWindows, as a tensor of `dtype` of shape (out...) or a scalar: torch's
// divisor of each window's sum.
Value avg_divisors(Builder& b, const RuntimeWindows& w, bool count_include_pad, std::optional<int64_t> divisor_override,
                   ScalarType dtype);

// scatter_windows (not whole_window) for RuntimeWindows: `cols` (M, K, out...) -> (M, 1, in...).
Value scatter_windows(Builder& b, Value cols, const RuntimeWindows& w);

// Whether ONNX `op` takes element type `t` as its first input at the target opset.
bool onnx_takes(Builder& b, OpType op, ScalarType t);

// with_batch for ops with several outputs: each output loses the added batch axis again.
std::vector<Value> with_batch_n(Builder& b, Value x, int64_t batched_rank,
                                const std::function<std::vector<Value>(Value)>& op);

}  // namespace fastonnx
