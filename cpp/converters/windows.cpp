#include "windows.h"

#include <string>

#include "fastonnx/onnx_types.h"

namespace fastonnx {
namespace {

// One-hot ConvTranspose kernels (positions, 1, *kernel), kernel k holding tap k; or, with
// `whole_window`, one kernel (1, 1, *kernel) of ones.
Value one_hot_kernels(Builder& b, const std::vector<int64_t>& kernel, int64_t positions, bool whole_window,
                      ScalarType dtype) {
  const int64_t channels = whole_window ? 1 : positions;
  std::vector<Scalar> taps(static_cast<size_t>(channels * positions), Scalar(whole_window ? 1.0 : 0.0));
  if (!whole_window) {
    for (int64_t k = 0; k < positions; ++k) taps[static_cast<size_t>(k * positions + k)] = Scalar(1.0);
  }
  std::vector<int64_t> shape = {channels, 1};
  shape.insert(shape.end(), kernel.begin(), kernel.end());
  return b.tensor(taps, shape, dtype);
}

// How many kernel positions a window has.
int64_t product(const std::vector<int64_t>& kernel) {
  int64_t n = 1;
  for (int64_t k : kernel) n *= k;
  return n;
}

}  // namespace

int64_t Windows::positions() const { return product(kernel); }

std::vector<int64_t> Windows::end_padding() const {
  std::vector<int64_t> pads;
  for (size_t i = 0; i < rank(); ++i) {
    const int64_t last = coordinate(i, out[i] - 1, kernel[i] - 1);
    pads.push_back(std::max<int64_t>(0, last + 1 - in[i]));
  }
  return pads;
}

int64_t pooled_length(int64_t in, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * padding - dilation * (kernel - 1) - 1;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + padding) --out;
  return out;
}

std::optional<std::vector<int64_t>> static_trailing_sizes(Builder& b, Value x, size_t n) {
  if (!b.has_shape(x)) return std::nullopt;
  const std::span<const Dim> shape = b.shape(x);
  if (shape.size() < n) return std::nullopt;
  std::vector<int64_t> sizes;
  for (size_t i = shape.size() - n; i < shape.size(); ++i) {
    if (!shape[i].is_static()) return std::nullopt;
    sizes.push_back(shape[i].value);
  }
  return sizes;
}

std::vector<int64_t> static_spatial_sizes(Builder& b, Value x, size_t n, std::string_view what) {
  auto sizes = static_trailing_sizes(b, x, n);
  if (!sizes) b.fail(std::string(what) + " needs static sizes of the last " + std::to_string(n) + " axes of its input");
  return *sizes;
}

Windows pooling_windows(Builder& b, Value x, const std::vector<int64_t>& kernel, std::vector<int64_t> stride,
                        const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool ceil_mode) {
  if (stride.empty()) stride = kernel;
  Windows w{static_spatial_sizes(b, x, kernel.size(), "the op"), kernel, stride, padding, dilation, {}};
  for (size_t i = 0; i < w.rank(); ++i) {
    w.out.push_back(pooled_length(w.in[i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode));
  }
  return w;
}

std::vector<Value> window_slices(Builder& b, Value x, const Windows& w, const Scalar& fill) {
  const auto rank = static_cast<size_t>(b.rank(x));
  const size_t lead = rank - w.rank();
  std::vector<int64_t> pads(2 * rank, 0);
  const std::vector<int64_t> end = w.end_padding();
  bool padded = false;
  for (size_t i = 0; i < w.rank(); ++i) {
    pads[lead + i] = w.padding[i];
    pads[rank + lead + i] = end[i];
    padded = padded || w.padding[i] > 0 || end[i] > 0;
  }
  if (padded) x = b.op<"Pad">({x, b.ints(pads), b.scalar(fill, b.dtype(x))});
  std::vector<int64_t> axes;
  for (size_t i = 0; i < w.rank(); ++i) axes.push_back(static_cast<int64_t>(lead + i));
  const Value axes_v = b.ints(axes), steps = b.ints(w.stride);
  std::vector<Value> slices;
  std::vector<int64_t> offset(w.rank(), 0);  // kernel offset, advanced like an odometer
  for (int64_t k = 0; k < w.positions(); ++k) {
    std::vector<int64_t> starts, ends;
    for (size_t i = 0; i < w.rank(); ++i) {
      starts.push_back(offset[i] * w.dilation[i]);  // in padded coordinates
      ends.push_back(starts.back() + (w.out[i] - 1) * w.stride[i] + 1);
    }
    slices.push_back(b.op<"Slice">({x, b.ints(starts), b.ints(ends), axes_v, steps}));
    for (size_t i = w.rank(); i-- > 0;) {
      if (++offset[i] < w.kernel[i]) break;
      offset[i] = 0;
    }
  }
  return slices;
}

std::vector<std::vector<Scalar>> window_positions(const Windows& w) {
  int64_t windows = 1;
  for (int64_t o : w.out) windows *= o;
  std::vector<int64_t> plane_stride(w.rank(), 1);
  for (size_t i = w.rank() - 1; i-- > 0;) plane_stride[i] = plane_stride[i + 1] * w.in[i + 1];
  std::vector<std::vector<Scalar>> positions;
  std::vector<int64_t> offset(w.rank(), 0);
  for (int64_t k = 0; k < w.positions(); ++k) {
    std::vector<Scalar>& at = positions.emplace_back();
    std::vector<int64_t> o(w.rank(), 0);
    for (int64_t j = 0; j < windows; ++j) {
      int64_t flat = 0;
      bool inside = true;
      for (size_t i = 0; i < w.rank(); ++i) {
        const int64_t c = w.coordinate(i, o[i], offset[i]);
        inside = inside && c >= 0 && c < w.in[i];
        flat += c * plane_stride[i];
      }
      at.emplace_back(inside ? flat : int64_t{-1});
      for (size_t i = w.rank(); i-- > 0;) {
        if (++o[i] < w.out[i]) break;
        o[i] = 0;
      }
    }
    for (size_t i = w.rank(); i-- > 0;) {
      if (++offset[i] < w.kernel[i]) break;
      offset[i] = 0;
    }
  }
  return positions;
}

Value scatter_windows(Builder& b, Value cols, const Windows& w, bool whole_window) {
  const Value kernels = one_hot_kernels(b, w.kernel, w.positions(), whole_window, b.dtype(cols));
  // Without pads the output covers the padded input (and whatever the last windows reach past
  // it); crop torch's padding at the start and cut or zero-fill the end to the input's size.
  const Value full = b.op<"ConvTranspose">(
      {cols, kernels},
      {Attr::ints("kernel_shape", w.kernel), Attr::ints("strides", w.stride), Attr::ints("dilations", w.dilation)});
  std::vector<int64_t> starts, ends, axes, fill(2 * (w.rank() + 2), 0);
  bool short_end = false;
  for (size_t i = 0; i < w.rank(); ++i) {
    const int64_t covered = (w.out[i] - 1) * w.stride[i] + (w.kernel[i] - 1) * w.dilation[i] + 1;
    starts.push_back(w.padding[i]);
    ends.push_back(std::min(covered, w.padding[i] + w.in[i]));
    axes.push_back(static_cast<int64_t>(i + 2));
    fill[w.rank() + 2 + i + 2] = w.padding[i] + w.in[i] - ends.back();
    short_end = short_end || fill[w.rank() + 2 + i + 2] > 0;
  }
  const Value cropped = b.op<"Slice">({full, b.ints(starts), b.ints(ends), b.ints(axes)});
  return short_end ? b.op<"Pad">({cropped, b.ints(fill)}) : cropped;
}

std::vector<int64_t> avg_divisors(const Windows& w, bool count_include_pad, std::optional<int64_t> divisor_override) {
  std::vector<std::vector<int64_t>> per_axis(w.rank());
  for (size_t i = 0; i < w.rank(); ++i) {
    for (int64_t o = 0; o < w.out[i]; ++o) {
      const int64_t start = w.coordinate(i, o, 0);
      const int64_t end = std::min(start + w.kernel[i], w.in[i] + w.padding[i]);
      per_axis[i].push_back(count_include_pad ? end - start : std::min(end, w.in[i]) - std::max<int64_t>(start, 0));
    }
  }
  std::vector<int64_t> divisors = {1};
  for (const std::vector<int64_t>& axis : per_axis) {
    std::vector<int64_t> next;
    for (int64_t d : divisors) {
      for (int64_t a : axis) next.push_back(divisor_override ? *divisor_override : d * a);
    }
    divisors = std::move(next);
  }
  return divisors;
}

Value per_window(Builder& b, const std::vector<Scalar>& values, const Windows& w, ScalarType dtype) {
  for (const Scalar& v : values) {
    if (v.to_double() != values.front().to_double()) return b.tensor(values, w.out, dtype);
  }
  return b.scalar(values.front(), dtype);
}

int64_t RuntimeWindows::positions() const { return product(kernel); }

namespace {

Value one_int(Builder& b, int64_t v) { return b.ints(std::vector<int64_t>{v}); }

// torch's output length (pooled_length) for an input size `in` (1-D) read at run time.
Value runtime_length(Builder& b, Value in, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation,
                     bool ceil_mode) {
  const int64_t bias = 2 * padding - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  Value out = b.op<"Add">({b.op<"Div">({b.op<"Add">({in, one_int(b, bias)}), one_int(b, stride)}), one_int(b, 1)});
  if (ceil_mode) {  // a last window that would start in the right padding is dropped
    const Value start = b.op<"Mul">({b.op<"Sub">({out, one_int(b, 1)}), one_int(b, stride)});
    const Value in_padding = b.op<"GreaterOrEqual">({start, b.op<"Add">({in, one_int(b, padding)})});
    out = b.op<"Sub">({out, b.cast(in_padding, ScalarType::Long)});
  }
  return out;
}

// The spatial axes of a tensor of rank `rank` with `spatial` of them last.
std::vector<int64_t> spatial_axes(int64_t rank, size_t spatial) {
  std::vector<int64_t> axes;
  for (int64_t a = rank - static_cast<int64_t>(spatial); a < rank; ++a) axes.push_back(a);
  return axes;
}

}  // namespace

SymIntList spatial_sizes(Builder& b, Value x, size_t n) {
  const int64_t rank = b.rank(x);
  SymIntList sizes;
  for (int64_t axis = rank - static_cast<int64_t>(n); axis < rank; ++axis) {
    const Dim d = b.shape(x)[static_cast<size_t>(axis)];
    sizes.push_back(d.is_static() ? SymInt(d.value) : SymInt(scalar_size_along(b, x, axis)));
  }
  return sizes;
}

RuntimeWindows runtime_windows(Builder& b, const SymIntList& in, const std::vector<int64_t>& kernel,
                               std::vector<int64_t> stride, const std::vector<int64_t>& padding,
                               const std::vector<int64_t>& dilation, bool ceil_mode) {
  if (stride.empty()) stride = kernel;
  RuntimeWindows w{kernel, stride, padding, dilation, ceil_mode, in, {}};
  for (size_t i = 0; i < w.rank(); ++i) {
    if (in[i].is_static()) {
      w.out.push_back(one_int(b, pooled_length(in[i].value, kernel[i], stride[i], padding[i], dilation[i], ceil_mode)));
    } else {
      w.out.push_back(
          runtime_length(b, b.ints(SymIntList{in[i]}), kernel[i], stride[i], padding[i], dilation[i], ceil_mode));
    }
  }
  return w;
}

std::vector<Value> window_slices(Builder& b, Value x, int64_t x_rank, const RuntimeWindows& w, const Scalar& fill) {
  const auto rank = static_cast<size_t>(x_rank);
  const size_t lead = rank - w.rank();
  // A last window reaches at most padding (floor mode) or padding + stride - 1 (ceil mode) past
  // the input.
  std::vector<int64_t> pads(2 * rank, 0);
  bool padded = false;
  for (size_t i = 0; i < w.rank(); ++i) {
    pads[lead + i] = w.padding[i];
    pads[rank + lead + i] = w.padding[i] + (w.ceil_mode ? w.stride[i] - 1 : 0);
    padded = padded || pads[rank + lead + i] > 0;
  }
  if (padded) x = b.op<"Pad">({x, b.ints(pads), b.scalar(fill, b.dtype(x))});
  // Slice k covers (out - 1) * stride + 1 elements from its kernel offset.
  std::vector<Value> spans;
  for (size_t i = 0; i < w.rank(); ++i) {
    spans.push_back(
        b.op<"Add">({b.op<"Mul">({b.op<"Sub">({w.out[i], one_int(b, 1)}), one_int(b, w.stride[i])}), one_int(b, 1)}));
  }
  const Value span = join_sizes(b, spans);
  const Value axes = b.ints(spatial_axes(static_cast<int64_t>(rank), w.rank())), steps = b.ints(w.stride);
  std::vector<Value> slices;
  std::vector<int64_t> offset(w.rank(), 0);  // kernel offset, advanced like an odometer
  for (int64_t k = 0; k < w.positions(); ++k) {
    std::vector<int64_t> starts;
    for (size_t i = 0; i < w.rank(); ++i) starts.push_back(offset[i] * w.dilation[i]);  // in padded coordinates
    const Value start = b.ints(starts);
    slices.push_back(b.op<"Slice">({x, start, b.op<"Add">({start, span}), axes, steps}));
    for (size_t i = w.rank(); i-- > 0;) {
      if (++offset[i] < w.kernel[i]) break;
      offset[i] = 0;
    }
  }
  return slices;
}

Value crop_to_windows(Builder& b, Value y, const RuntimeWindows& w) {
  const Value axes = b.ints(spatial_axes(0, w.rank()));  // counted from the end
  return b.op<"Slice">({y, b.ints(std::vector<int64_t>(w.rank(), 0)), join_sizes(b, w.out), axes});
}

Value avg_divisors(Builder& b, const RuntimeWindows& w, bool count_include_pad, std::optional<int64_t> divisor_override,
                   ScalarType dtype) {
  if (divisor_override) return b.scalar(*divisor_override, dtype);
  // Separable: per axis, each window's count of input (or, with count_include_pad, input and
  // padding) positions, the windows clipped to the padded input; their outer product.
  Value divisors;
  for (size_t i = 0; i < w.rank(); ++i) {
    const Value windows = iota(b, b.op<"Squeeze">({w.out[i], one_int(b, 0)}));
    const Value start = b.op<"Sub">({b.op<"Mul">({windows, one_int(b, w.stride[i])}), one_int(b, w.padding[i])});
    const Value in = b.ints(SymIntList{w.in[i]});
    const Value end =
        b.op<"Min">({b.op<"Add">({start, one_int(b, w.kernel[i])}), b.op<"Add">({in, one_int(b, w.padding[i])})});
    const Value count = count_include_pad ? b.op<"Sub">({end, start})
                                          : b.op<"Sub">({b.op<"Min">({end, in}), b.op<"Max">({start, one_int(b, 0)})});
    std::vector<int64_t> shape(w.rank(), 1);
    shape[i] = -1;
    const Value along = b.op<"Reshape">({count, b.ints(shape)});
    divisors = i == 0 ? along : b.op<"Mul">({divisors, along});
  }
  return b.cast(divisors, dtype);
}

Value scatter_windows(Builder& b, Value cols, const RuntimeWindows& w) {
  const Value full = b.op<"ConvTranspose">(
      {cols, one_hot_kernels(b, w.kernel, w.positions(), false, b.dtype(cols))},
      {Attr::ints("kernel_shape", w.kernel), Attr::ints("strides", w.stride), Attr::ints("dilations", w.dilation)});
  // The output covers (out - 1) * stride + (kernel - 1) * dilation + 1 positions of the padded
  // input: zero-filled to padding + in at the end, then cropped to [padding, padding + in).
  std::vector<Value> missing, ends;
  for (size_t i = 0; i < w.rank(); ++i) {
    const int64_t reach = (w.kernel[i] - 1) * w.dilation[i] + 1;
    const Value covered = b.op<"Add">(
        {b.op<"Mul">({b.op<"Sub">({w.out[i], one_int(b, 1)}), one_int(b, w.stride[i])}), one_int(b, reach)});
    ends.push_back(b.op<"Add">({b.ints(SymIntList{w.in[i]}), one_int(b, w.padding[i])}));
    missing.push_back(b.op<"Max">({b.op<"Sub">({ends.back(), covered}), one_int(b, 0)}));
  }
  std::vector<Value> pads = {b.ints(std::vector<int64_t>(w.rank() + 4, 0))};  // nothing before, nor after N and C
  pads.insert(pads.end(), missing.begin(), missing.end());
  const Value filled = b.op<"Pad">({full, join_sizes(b, pads)});
  const Value axes = b.ints(spatial_axes(static_cast<int64_t>(w.rank()) + 2, w.rank()));
  return b.op<"Slice">({filled, b.ints(w.padding), join_sizes(b, ends), axes});
}

bool onnx_takes(Builder& b, OpType op, ScalarType t) {
  const OpTypes* types = onnx_types(op.name(), b.opset());
  if (types == nullptr || types->inputs.empty()) return false;
  return (types->inputs[0].allowed & (uint64_t{1} << static_cast<int>(t))) != 0;
}

std::vector<Value> with_batch_n(Builder& b, Value x, int64_t batched_rank,
                                const std::function<std::vector<Value>(Value)>& op) {
  if (b.rank(x) == batched_rank) return op(x);
  if (b.rank(x) != batched_rank - 1) {
    b.fail("expected a tensor of rank " + std::to_string(batched_rank) + " or " + std::to_string(batched_rank - 1) +
           ", got rank " + std::to_string(b.rank(x)));
  }
  const Value axes = b.ints(std::vector<int64_t>{0});
  std::vector<Value> outs = op(b.op<"Unsqueeze">({x, axes}));
  for (Value& v : outs) v = b.op<"Squeeze">({v, axes});
  return outs;
}

}  // namespace fastonnx
