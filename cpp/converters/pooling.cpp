// 2-D pooling.
#include <string>

#include "common.h"
#include "fastonnx/helpers.h"

namespace fastonnx::manual {

Value max_pool2d(Builder& b, Value self, std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
                 std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode) {
  if (stride.empty()) stride = kernel_size;  // torch's default stride is the kernel size
  const Attrs attrs = {Attr::ints("kernel_shape", kernel_size), Attr::ints("strides", stride),
                       Attr::ints("pads", helper_twice(b, padding)), Attr::ints("dilations", dilation),
                       Attr::i("ceil_mode", ceil_mode)};
  return with_batch(b, self, 4, [&](Value x) { return b.op("MaxPool", {x}, attrs); });
}

namespace {

// torch's output length of a pooling window sweep; in ceil mode the last window must start
// inside the input or its left padding.
int64_t pooled_length(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
  const int64_t span = in + 2 * p - k;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// Sum pooling divided by `divisor`: zero-pad so that every window torch makes is whole, then an
// average over whole windows times the window size is the sum.
// `spatial` holds the input's height and width.
Value divided_sum_pool(Builder& b, Value x, const std::vector<int64_t>& spatial, const std::vector<int64_t>& kernel,
                       const std::vector<int64_t>& stride, const std::vector<int64_t>& padding, bool ceil_mode,
                       int64_t divisor) {
  const int64_t rank = 4;
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  for (int64_t i = 0; i < 2; ++i) {
    const int64_t in = spatial[i];
    const int64_t out = pooled_length(in, kernel[i], stride[i], padding[i], ceil_mode);
    pads[rank - 2 + i] = padding[i];
    pads[2 * rank - 2 + i] = (out - 1) * stride[i] + kernel[i] - in - padding[i];
  }
  const Value padded = b.op("Pad", {x, b.ints(pads)});
  const Value avg = b.op("AveragePool", {padded}, {Attr::ints("kernel_shape", kernel), Attr::ints("strides", stride)});
  const double factor = static_cast<double>(kernel[0] * kernel[1]) / static_cast<double>(divisor);
  return b.op("Mul", {avg, b.scalar_like(factor, avg)});
}

}  // namespace

Value avg_pool2d(Builder& b, Value self, std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
                 std::vector<int64_t> padding, bool ceil_mode, bool count_include_pad,
                 std::optional<int64_t> divisor_override) {
  if (stride.empty()) stride = kernel_size;
  std::vector<int64_t> spatial;
  if (divisor_override) {
    const auto shape = b.static_shape(self);
    if (!shape || shape->size() < 3) b.fail("avg_pool2d with divisor_override needs a static input shape");
    spatial.assign(shape->end() - 2, shape->end());
  }
  return with_batch(b, self, 4, [&](Value x) {
    if (divisor_override) {
      return divided_sum_pool(b, x, spatial, kernel_size, stride, padding, ceil_mode, *divisor_override);
    }
    return b.op("AveragePool", {x},
                {Attr::ints("kernel_shape", kernel_size), Attr::ints("strides", stride),
                 Attr::ints("pads", helper_twice(b, padding)), Attr::i("ceil_mode", ceil_mode),
                 Attr::i("count_include_pad", count_include_pad)});
  });
}

Value adaptive_avg_pool2d(Builder& b, Value self, SymIntList output_size) {
  const std::vector<int64_t> out = b.static_ints(output_size);
  const auto in = b.static_shape(self);
  if (!in || in->size() < 3) b.fail("adaptive_avg_pool2d needs a static input shape of rank 3 or 4");
  const int64_t h = (*in)[in->size() - 2], w = (*in)[in->size() - 1];
  if (out[0] == 1 && out[1] == 1) {
    return with_batch(b, self, 4, [&](Value x) { return b.op("GlobalAveragePool", {x}); });
  }
  if (h % out[0] == 0 && w % out[1] == 0) {
    const std::vector<int64_t> kernel = {h / out[0], w / out[1]};
    if (kernel[0] == 1 && kernel[1] == 1) return self;
    const Attrs attrs = {Attr::ints("kernel_shape", kernel), Attr::ints("strides", kernel)};
    return with_batch(b, self, 4, [&](Value x) { return b.op("AveragePool", {x}, attrs); });
  }
  // Windows of unequal size: torch averages [floor(i*in/out), ceil((i+1)*in/out)) for output
  // i along each axis; the two axes are separable.
  const auto rank = static_cast<int64_t>(in->size());
  Value x = self;
  for (int64_t axis : {rank - 2, rank - 1}) {
    const int64_t n_in = (*in)[axis], n_out = out[axis - (rank - 2)];
    Inputs parts;
    for (int64_t i = 0; i < n_out; ++i) {
      const int64_t start = (i * n_in) / n_out, end = ((i + 1) * n_in + n_out - 1) / n_out;
      const Value window = b.op("Slice", {x, b.ints(std::vector<int64_t>{start}), b.ints(std::vector<int64_t>{end}),
                                          b.ints(std::vector<int64_t>{axis})});
      parts.push_back(reduce_mean_keepdims(b, window, {axis}));
    }
    x = b.op("Concat", parts, {Attr::i("axis", axis)});
  }
  return x;
}

}  // namespace fastonnx::manual
