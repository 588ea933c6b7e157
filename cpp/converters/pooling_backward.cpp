// Gradients of pooling (for exported training graphs), expressed with forward ONNX ops.
#include <string>

#include "common.h"
#include "converters_vision.h"
#include "windows.h"

namespace fastonnx {
namespace {

// (leading..., spatial...) -> (leading..., spatial positions), the leading axes kept.
Value flatten_spatial(Builder& b, Value x, int64_t rank, size_t spatial_rank) {
  std::vector<int64_t> shape(static_cast<size_t>(rank) - spatial_rank, 0);
  shape.push_back(-1);
  return b.op<"Reshape">({x, b.ints(shape)});
}

}  // namespace

namespace manual {

// Each input position receives grad / window size from every window that covers it: per axis a
// constant (in, out) matrix, applied as grad_input = M_h @ grad @ M_w^T.
Value _adaptive_avg_pool2d_backward(Builder& b, Value grad_output, Value self) {
  const std::vector<int64_t> in = static_spatial_sizes(b, self, 2, "_adaptive_avg_pool2d_backward");
  const std::vector<int64_t> out = static_spatial_sizes(b, grad_output, 2, "_adaptive_avg_pool2d_backward");
  const ScalarType dtype = b.dtype(grad_output);
  const auto spread = [&](size_t axis, bool transposed) {  // (in, out), or (out, in) when transposed
    std::vector<Scalar> m(static_cast<size_t>(in[axis] * out[axis]), Scalar(0.0));
    for (int64_t o = 0; o < out[axis]; ++o) {
      const int64_t start = (o * in[axis]) / out[axis], end = ((o + 1) * in[axis] + out[axis] - 1) / out[axis];
      for (int64_t j = start; j < end; ++j) {
        m[static_cast<size_t>(transposed ? o * in[axis] + j : j * out[axis] + o)] =
            Scalar(1.0 / static_cast<double>(end - start));
      }
    }
    return transposed ? b.tensor(m, {out[axis], in[axis]}, dtype) : b.tensor(m, {in[axis], out[axis]}, dtype);
  };
  const Value along_w = b.op<"MatMul">({grad_output, spread(1, true)});
  return b.op<"MatMul">({spread(0, false), along_w});
}

// Each window's gradient divided by torch's divisor, spread over the window (a ConvTranspose
// with a kernel of ones), the overlaps summed.
Value avg_pool2d_backward(Builder& b, Value grad_output, Value self, std::vector<int64_t> kernel_size,
                          std::vector<int64_t> stride, std::vector<int64_t> padding, bool ceil_mode,
                          bool count_include_pad, std::optional<int64_t> divisor_override) {
  const Windows w = pooling_windows(b, self, kernel_size, stride, padding, {1, 1}, ceil_mode);
  const std::vector<int64_t> divisors = avg_divisors(w, count_include_pad, divisor_override);
  const Value divisor = per_window(b, std::vector<Scalar>(divisors.begin(), divisors.end()), w, b.dtype(grad_output));
  const Value per_plane =
      b.op<"Reshape">({b.op<"Div">({grad_output, divisor}), b.ints(std::vector<int64_t>{-1, 1, w.out[0], w.out[1]})});
  return b.op<"Reshape">({scatter_windows(b, per_plane, w, true), b.op<"Shape">({self})});
}

// Each window's gradient added at the input position its maximum came from.
Value max_pool2d_with_indices_backward(Builder& b, Value grad_output, Value self, std::vector<int64_t> kernel_size,
                                       std::vector<int64_t> stride, std::vector<int64_t> padding,
                                       std::vector<int64_t> dilation, bool ceil_mode, Value indices) {
  const int64_t rank = b.rank(self);
  const ScalarType dtype = b.dtype(grad_output);
  if (b.opset() >= 16) {
    // A scatter-add into each flattened (batch, channel) plane. onnxruntime has no float16
    // scatter-add; float32 holds every float16 value.
    const bool widen = dtype == ScalarType::Half || dtype == ScalarType::BFloat16;
    const Value grad = b.cast(flatten_spatial(b, grad_output, rank, 2), widen ? ScalarType::Float : dtype);
    const Value planes = b.op<"Shape">({flatten_spatial(b, self, rank, 2)});
    const Value zeros = b.op<"Expand">({b.scalar(Scalar(0.0), b.dtype(grad)), planes});
    const Value summed = b.op<"ScatterElements">({zeros, flatten_spatial(b, indices, rank, 2), grad},
                                                 {Attr::i("axis", -1), Attr::s("reduction", "add")});
    return b.op<"Reshape">({b.cast(summed, dtype), b.op<"Shape">({self})});
  }
  // Before scatter-add (opset 16): per kernel offset, the gradient of the windows whose maximum
  // sits at that offset, put back at the input positions by scatter_windows.
  const Windows w = pooling_windows(b, self, kernel_size, stride, padding, dilation, ceil_mode);
  const Value zero = b.scalar(Scalar(0.0), dtype);
  const Value offset_axis = b.ints(std::vector<int64_t>{rank - 2});
  Inputs per_offset;
  for (const std::vector<Scalar>& positions : window_positions(w)) {
    const Value here = b.op<"Equal">({indices, b.tensor(positions, w.out, ScalarType::Long)});
    per_offset.push_back(b.op<"Unsqueeze">({b.op<"Where">({here, grad_output, zero}), offset_axis}));
  }
  const Value cols = b.op<"Reshape">({b.op<"Concat">(per_offset, {Attr::i("axis", rank - 2)}),
                                      b.ints(std::vector<int64_t>{-1, w.positions(), w.out[0], w.out[1]})});
  return b.op<"Reshape">({scatter_windows(b, cols, w), b.op<"Shape">({self})});
}

}  // namespace manual
}  // namespace fastonnx
