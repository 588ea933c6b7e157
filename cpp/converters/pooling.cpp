// Pooling over 1 to 3 spatial axes: max (with torch's indices), average and adaptive pooling.
#include <array>
#include <limits>
#include <string>

#include "common.h"
#include "fastonnx/helpers.h"
#include "windows.h"

namespace fastonnx {

namespace {

// The padding of a max pool: no element of type `t` is below it.
Scalar lowest(ScalarType t) {
  switch (t) {
    case ScalarType::Long:
      return Scalar(std::numeric_limits<int64_t>::min());
    case ScalarType::Int:
      return Scalar(int64_t{std::numeric_limits<int32_t>::min()});
    case ScalarType::Short:
      return Scalar(int64_t{std::numeric_limits<int16_t>::min()});
    case ScalarType::Char:
      return Scalar(int64_t{std::numeric_limits<int8_t>::min()});
    case ScalarType::Byte:
      return Scalar(int64_t{0});
    case ScalarType::Bool:
      return Scalar(false);
    default:
      return Scalar(-std::numeric_limits<double>::infinity());
  }
}

// ONNX's pooling ops before opset 22 keep a last ceil-mode window that starts in the right
// padding, where torch drops it (so the output is one longer).
bool onnx_keeps_dropped_window(Builder& b, const Windows& w) {
  if (b.opset() >= 22) return false;
  for (size_t i = 0; i < w.rank(); ++i) {
    const int64_t span = w.in[i] + 2 * w.padding[i] - w.dilation[i] * (w.kernel[i] - 1) - 1;
    if ((span + w.stride[i] - 1) / w.stride[i] + 1 != w.out[i]) return true;
  }
  return false;
}

// The windows of a pooling op when the input's spatial sizes are static.
std::optional<Windows> known_windows(Builder& b, Value self, const std::vector<int64_t>& kernel,
                                     const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                                     const std::vector<int64_t>& dilation, bool ceil_mode) {
  if (!static_trailing_sizes(b, self, kernel.size())) return std::nullopt;
  return pooling_windows(b, self, kernel, stride, padding, dilation, ceil_mode);
}

// torch's max-pool indices count positions in each (batch, channel) plane of the input; ONNX
// MaxPool's count over the whole tensor, so the plane's offset is dropped.
Value plane_indices(Builder& b, Value onnx_indices, Value input, size_t spatial_rank) {
  Value plane;
  if (auto sizes = static_trailing_sizes(b, input, spatial_rank)) {
    int64_t size = 1;
    for (int64_t s : *sizes) size *= s;
    plane = b.scalar(Scalar(size), ScalarType::Long);
  } else {
    const Value dims =
        b.op<"Slice">({b.op<"Shape">({input}), b.ints(std::vector<int64_t>{-static_cast<int64_t>(spatial_rank)}),
                       b.ints(std::vector<int64_t>{std::numeric_limits<int64_t>::max()})});
    plane = reduce(b, "ReduceProd", dims, std::vector<int64_t>{0}, false);
  }
  return b.op<"Mod">({onnx_indices, plane});
}

// Max pooling by ONNX MaxPool (floating point and 8-bit inputs).
std::vector<Value> onnx_max_pool(Builder& b, Value self, const std::vector<int64_t>& kernel,
                                 const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                                 const std::vector<int64_t>& dilation, bool ceil_mode, bool with_indices) {
  const size_t nd = kernel.size();
  const Attrs attrs = {Attr::ints("kernel_shape", kernel), Attr::ints("strides", stride.empty() ? kernel : stride),
                       Attr::ints("pads", helper_twice(b, padding)), Attr::ints("dilations", dilation),
                       Attr::i("ceil_mode", ceil_mode)};
  return with_batch_n(b, self, static_cast<int64_t>(nd) + 2, [&](Value x) -> std::vector<Value> {
    if (!with_indices) return {b.op<"MaxPool">({x}, attrs)};
    const std::vector<Value> outs = b.op_n<"MaxPool">({x}, attrs, 2);
    return {outs[0], plane_indices(b, outs[1], x, nd)};
  });
}

// Max pooling over strided slices, one per kernel offset, for what MaxPool cannot do: element
// types it lacks and ceil-mode windows it would keep. Scans like torch: a later offset wins
// only when strictly greater (or NaN), and the index starts at the window's first position
// inside the input.
std::vector<Value> sliced_max_pool(Builder& b, Value self, const Windows& w, bool with_indices) {
  const ScalarType dtype = b.dtype(self);
  const std::vector<std::vector<Scalar>> positions = window_positions(w);
  std::vector<Scalar> first_inside(positions[0].size(), Scalar(int64_t{-1}));
  for (const std::vector<Scalar>& at : positions) {
    for (size_t j = 0; j < at.size(); ++j) {
      if (first_inside[j].to_int() < 0) first_inside[j] = at[j];
    }
  }
  const std::vector<Value> slices = window_slices(b, self, w, lowest(dtype));
  if (!with_indices && !is_floating(dtype)) return {b.op<"Max">(spread(slices))};
  Value best = b.scalar(lowest(dtype), dtype);
  Value index = b.tensor(first_inside, w.out, ScalarType::Long);
  for (size_t k = 0; k < slices.size(); ++k) {
    Value better = b.op<"Greater">({slices[k], best});
    if (is_floating(dtype)) better = b.op<"Or">({better, b.op<"IsNaN">({slices[k]})});
    best = b.op<"Where">({better, slices[k], best});
    if (with_indices) index = b.op<"Where">({better, b.tensor(positions[k], w.out, ScalarType::Long), index});
  }
  if (!with_indices) return {best};
  return {best, index};
}

// sliced_max_pool over windows counted at run time. The index of each kernel offset in every
// window is read by the same slicing from a map of the plane's positions padded with -1.
std::vector<Value> sliced_max_pool(Builder& b, Value self, const RuntimeWindows& w, bool with_indices) {
  const ScalarType dtype = b.dtype(self);
  const int64_t rank = b.rank(self);
  const std::vector<Value> slices = window_slices(b, self, rank, w, lowest(dtype));
  if (!with_indices && !is_floating(dtype)) return {b.op<"Max">(spread(slices))};
  std::vector<Value> positions;
  Value index;
  if (with_indices) {
    const auto spatial = static_cast<int64_t>(w.rank());
    const Value plane = sizes_between(b, self, rank - spatial, rank);
    const Value count = reduce(b, "ReduceProd", plane, std::vector<int64_t>{0}, false);
    const Value all = iota(b, count);
    positions = window_slices(b, b.op<"Reshape">({all, plane}), spatial, w, Scalar(int64_t{-1}));
    // Each window starts at its first position inside the input.
    index = positions.back();
    for (size_t k = positions.size() - 1; k-- > 0;) {
      index = b.op<"Where">(
          {b.op<"GreaterOrEqual">({positions[k], b.scalar(int64_t{0}, ScalarType::Long)}), positions[k], index});
    }
  }
  Value best = b.scalar(lowest(dtype), dtype);
  for (size_t k = 0; k < slices.size(); ++k) {
    Value better = b.op<"Greater">({slices[k], best});
    if (is_floating(dtype)) better = b.op<"Or">({better, b.op<"IsNaN">({slices[k]})});
    best = b.op<"Where">({better, slices[k], best});
    if (with_indices) index = b.op<"Where">({better, positions[k], index});
  }
  if (!with_indices) return {best};
  return {best, index};
}

std::vector<Value> pooled_maxima(Builder& b, Value self, const std::vector<int64_t>& kernel,
                                 const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                                 const std::vector<int64_t>& dilation, bool ceil_mode, bool with_indices) {
  const bool onnx_type = onnx_takes(b, "MaxPool", b.dtype(self));
  if (onnx_type && !ceil_mode) return onnx_max_pool(b, self, kernel, stride, padding, dilation, false, with_indices);
  if (const auto w = known_windows(b, self, kernel, stride, padding, dilation, ceil_mode)) {
    if (onnx_type && !onnx_keeps_dropped_window(b, *w)) {
      return onnx_max_pool(b, self, kernel, stride, padding, dilation, ceil_mode, with_indices);
    }
    return sliced_max_pool(b, self, *w, with_indices);
  }
  // Dynamic spatial sizes: the windows are counted at run time.
  const SymIntList in = spatial_sizes(b, self, kernel.size());
  const RuntimeWindows w = runtime_windows(b, in, kernel, stride, padding, dilation, ceil_mode);
  if (!onnx_type) return sliced_max_pool(b, self, w, with_indices);
  std::vector<Value> outs = onnx_max_pool(b, self, kernel, stride, padding, dilation, ceil_mode, with_indices);
  if (b.opset() < 22) {
    for (Value& out : outs) out = crop_to_windows(b, out, w);
  }
  return outs;
}

}  // namespace

Value max_pool(Builder& b, Value self, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
               const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool ceil_mode) {
  return pooled_maxima(b, self, kernel, stride, padding, dilation, ceil_mode, false)[0];
}

std::array<Value, 2> max_pool_with_indices(Builder& b, Value self, const std::vector<int64_t>& kernel,
                                           const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                                           const std::vector<int64_t>& dilation, bool ceil_mode) {
  const auto outs = pooled_maxima(b, self, kernel, stride, padding, dilation, ceil_mode, true);
  return {outs[0], outs[1]};
}

namespace {

// Average pooling as torch divides: each window's sum over zero padding by avg_divisors.
Value divided_sum_pool(Builder& b, Value x, const Windows& w, bool count_include_pad,
                       std::optional<int64_t> divisor_override) {
  const std::vector<int64_t> divisors = avg_divisors(w, count_include_pad, divisor_override);
  const ScalarType dtype = b.dtype(x);
  if (!onnx_takes(b, "AveragePool", dtype)) {
    // Integers: a sum of strided slices, divided (truncating) like torch's integer division.
    const std::vector<Value> slices = window_slices(b, x, w, Scalar(int64_t{0}));
    Value sum = slices[0];
    for (size_t k = 1; k < slices.size(); ++k) sum = b.op<"Add">({sum, slices[k]});
    return b.op<"Div">({sum, per_window(b, std::vector<Scalar>(divisors.begin(), divisors.end()), w, dtype)});
  }
  // Zero-padded so every window is whole, the average over the whole window times
  // window size / divisor is torch's quotient.
  const size_t rank = w.rank() + 2;  // batched
  std::vector<int64_t> pads(2 * rank, 0);
  const std::vector<int64_t> end = w.end_padding();
  for (size_t i = 0; i < w.rank(); ++i) {
    pads[2 + i] = w.padding[i];
    pads[rank + 2 + i] = end[i];
  }
  const Attrs attrs = {Attr::ints("kernel_shape", w.kernel), Attr::ints("strides", w.stride)};
  const Value avg = with_batch(b, x, static_cast<int64_t>(rank), [&](Value batched) {
    return b.op<"AveragePool">({b.op<"Pad">({batched, b.ints(pads)})}, attrs);
  });
  std::vector<Scalar> factors;
  for (int64_t d : divisors) factors.emplace_back(static_cast<double>(w.positions()) / static_cast<double>(d));
  return b.op<"Mul">({avg, per_window(b, factors, w, dtype)});
}

}  // namespace

Value avg_pool(Builder& b, Value self, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
               const std::vector<int64_t>& padding, bool ceil_mode, bool count_include_pad,
               std::optional<int64_t> divisor_override) {
  const size_t nd = kernel.size();
  const std::vector<int64_t> dilation(nd, 1);
  const auto w = known_windows(b, self, kernel, stride, padding, dilation, ceil_mode);
  const bool direct = onnx_takes(b, "AveragePool", b.dtype(self)) && !divisor_override &&
                      !(ceil_mode && w && onnx_keeps_dropped_window(b, *w));
  const auto batched_rank = static_cast<int64_t>(nd) + 2;
  if (direct) {
    const Attrs attrs = {Attr::ints("kernel_shape", kernel), Attr::ints("strides", stride.empty() ? kernel : stride),
                         Attr::ints("pads", helper_twice(b, padding)), Attr::i("ceil_mode", ceil_mode),
                         Attr::i("count_include_pad", count_include_pad)};
    const Value pooled = with_batch(b, self, batched_rank, [&](Value x) { return b.op<"AveragePool">({x}, attrs); });
    // Dynamic sizes: the window torch drops may be there before opset 22.
    if (!ceil_mode || w || b.opset() >= 22) return pooled;
    const SymIntList in = spatial_sizes(b, self, nd);
    return crop_to_windows(b, pooled, runtime_windows(b, in, kernel, stride, padding, dilation, ceil_mode));
  }
  if (w) return divided_sum_pool(b, self, *w, count_include_pad, divisor_override);
  // Dynamic sizes: each window's sum over zero padding, divided as torch divides (integers
  // truncating), the windows and divisors counted at run time.
  const SymIntList in = spatial_sizes(b, self, nd);
  const RuntimeWindows windows = runtime_windows(b, in, kernel, stride, padding, dilation, ceil_mode);
  const std::vector<Value> slices = window_slices(b, self, b.rank(self), windows, Scalar(int64_t{0}));
  Value sum = slices[0];
  for (size_t k = 1; k < slices.size(); ++k) sum = b.op<"Add">({sum, slices[k]});
  return b.op<"Div">({sum, avg_divisors(b, windows, count_include_pad, divisor_override, b.dtype(self))});
}

namespace {

// Output o of adaptive pooling along `axis` of `x` (out outputs) covers torch's
// [floor(o*in/out), ceil((o+1)*in/out)): 1-D int64 bounds, computed at run time when the size
// `in` is dynamic.
std::pair<Value, Value> adaptive_window(Builder& b, Value x, int64_t axis, int64_t o, int64_t out) {
  const auto one = [&](int64_t v) { return b.ints(std::vector<int64_t>{v}); };
  const Dim d = b.shape(x)[static_cast<size_t>(axis)];
  if (d.is_static()) return {one((o * d.value) / out), one(((o + 1) * d.value + out - 1) / out)};
  const Value in = size_along(b, x, axis);
  return {b.op<"Div">({b.op<"Mul">({in, one(o)}), one(out)}),
          b.op<"Div">({b.op<"Add">({b.op<"Mul">({in, one(o + 1)}), one(out - 1)}), one(out)})};
}

Value slice_axis(Builder& b, Value x, int64_t axis, Value start, Value end) {
  return b.op<"Slice">({x, start, end, b.ints(std::vector<int64_t>{axis})});
}

}  // namespace

Value adaptive_avg_pool(Builder& b, Value self, const std::vector<int64_t>& out) {
  const size_t nd = out.size();
  const auto in = static_trailing_sizes(b, self, nd);
  const auto batched_rank = static_cast<int64_t>(nd) + 2;
  bool ones = true, divisible = in.has_value(), same = in.has_value();
  for (size_t i = 0; i < nd; ++i) {
    ones = ones && out[i] == 1;
    divisible = divisible && (*in)[i] % out[i] == 0;
    same = same && (*in)[i] == out[i];
  }
  if (same) return self;
  if (ones) return with_batch(b, self, batched_rank, [&](Value x) { return b.op<"GlobalAveragePool">({x}); });
  if (divisible) {
    std::vector<int64_t> kernel;
    for (size_t i = 0; i < nd; ++i) kernel.push_back((*in)[i] / out[i]);
    const Attrs attrs = {Attr::ints("kernel_shape", kernel), Attr::ints("strides", kernel)};
    return with_batch(b, self, batched_rank, [&](Value x) { return b.op<"AveragePool">({x}, attrs); });
  }
  // Windows of unequal size (or of sizes known at run time only): the axes are separable, each
  // averaged window by window.
  const int64_t rank = b.rank(self);
  Value x = self;
  for (size_t i = 0; i < nd; ++i) {
    if (in && (*in)[i] == out[i]) continue;
    const int64_t axis = rank - static_cast<int64_t>(nd) + static_cast<int64_t>(i);
    Inputs parts;
    for (int64_t o = 0; o < out[i]; ++o) {
      const auto [start, end] = adaptive_window(b, self, axis, o, out[i]);
      parts.push_back(reduce_mean_keepdims(b, slice_axis(b, x, axis, start, end), {axis}));
    }
    x = b.op<"Concat">(parts, {Attr::i("axis", axis)});
  }
  return x;
}

// Adaptive max pooling with torch's indices. Separable: the last axis is reduced first, each
// window keeping its maximum and where it is; an earlier axis then picks, per window, the first
// row holding the maximum and carries that row's index along. Ties go to the first position in
// torch's scan order.
std::array<Value, 2> adaptive_max_pool(Builder& b, Value self, const std::vector<int64_t>& out) {
  const size_t nd = out.size();
  const auto in = static_trailing_sizes(b, self, nd);
  bool divisible = in.has_value();
  for (size_t i = 0; i < nd; ++i) divisible = divisible && (*in)[i] % out[i] == 0;
  if (divisible && onnx_takes(b, "MaxPool", b.dtype(self))) {
    std::vector<int64_t> kernel;
    for (size_t i = 0; i < nd; ++i) kernel.push_back((*in)[i] / out[i]);
    const std::vector<Value> outs =
        onnx_max_pool(b, self, kernel, kernel, std::vector<int64_t>(nd, 0), std::vector<int64_t>(nd, 1), false, true);
    return {outs[0], outs[1]};
  }
  const int64_t rank = b.rank(self);
  Value values = self;
  std::optional<Value> index;                     // flat position within the axes reduced so far
  Value inner = b.ints(std::vector<int64_t>{1});  // how many positions those axes hold
  for (size_t i = nd; i-- > 0;) {
    const int64_t axis = rank - static_cast<int64_t>(nd) + static_cast<int64_t>(i);
    Inputs value_parts, index_parts;
    for (int64_t o = 0; o < out[i]; ++o) {
      const auto [start, end] = adaptive_window(b, self, axis, o, out[i]);
      const Value window = slice_axis(b, values, axis, start, end);
      value_parts.push_back(reduce(b, "ReduceMax", window, std::vector<int64_t>{axis}, true));
      const Value at = b.op<"ArgMax">({window}, {Attr::i("axis", axis), Attr::i("keepdims", 1)});
      Value position = b.op<"Add">({at, start});
      if (index) {
        const Value carried =
            b.op<"GatherElements">({slice_axis(b, *index, axis, start, end), at}, {Attr::i("axis", axis)});
        position = b.op<"Add">({b.op<"Mul">({position, inner}), carried});
      }
      index_parts.push_back(position);
    }
    values = b.op<"Concat">(value_parts, {Attr::i("axis", axis)});
    index = b.op<"Concat">(index_parts, {Attr::i("axis", axis)});
    inner = b.op<"Mul">({inner, size_along(b, self, axis)});
  }
  return {values, *index};
}

namespace {

// Adaptive average pooling to an output size known at run time only: per axis, an (out, in)
// matrix whose row o averages torch's window [floor(o*in/out), ceil((o+1)*in/out)), applied by a
// MatMul with the axis moved last.
Value adaptive_avg_pool_by_matrices(Builder& b, Value self, const SymIntList& out) {
  const int64_t rank = b.rank(self), nd = static_cast<int64_t>(out.size());
  const ScalarType dtype = b.dtype(self);
  const Value one = b.scalar(int64_t{1}, ScalarType::Long);
  Value x = self;
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t axis = rank - nd + i;
    const Value in = scalar_size_along(b, self, axis);
    const Value n = b.long_scalar(out[i]);
    const Value rows = b.op<"Unsqueeze">({iota(b, n), b.ints(std::vector<int64_t>{1})});
    const Value cols = iota(b, in);
    const Value start = b.op<"Div">({b.op<"Mul">({rows, in}), n});
    const Value end =
        b.op<"Div">({b.op<"Add">({b.op<"Mul">({b.op<"Add">({rows, one}), in}), b.op<"Sub">({n, one})}), n});
    const Value inside = b.op<"And">({b.op<"GreaterOrEqual">({cols, start}), b.op<"Less">({cols, end})});
    const Value weights = b.op<"Div">({b.cast(inside, dtype), b.cast(b.op<"Sub">({end, start}), dtype)});
    std::vector<int64_t> swap(static_cast<size_t>(rank));
    for (int64_t d = 0; d < rank; ++d) swap[d] = d;
    std::swap(swap[axis], swap[rank - 1]);
    const Value moved = axis == rank - 1 ? x : b.op<"Transpose">({x}, {Attr::ints("perm", swap)});
    const Value pooled = b.op<"MatMul">({moved, b.op<"Transpose">({weights}, {Attr::ints("perm", {1, 0})})});
    x = axis == rank - 1 ? pooled : b.op<"Transpose">({pooled}, {Attr::ints("perm", swap)});
  }
  return x;
}

}  // namespace

Value adaptive_avg_pool(Builder& b, Value self, const SymIntList& output_size) {
  for (const SymInt& s : output_size) {
    if (!s.is_static()) return adaptive_avg_pool_by_matrices(b, self, output_size);
  }
  return adaptive_avg_pool(b, self, b.static_ints(output_size));
}

}  // namespace fastonnx
