// Convolutions: conv1d/2d/3d (1-D and 3-D share the 2-D converters), conv_transpose*, and the
// generic `convolution` overload behind them, for any spatial rank.
//
// ONNX Conv/ConvTranspose exist only for floating-point types and onnxruntime has no float64
// Conv that would hold int64 values exactly, so integer convolutions are computed as one exact
// integer MatMul over the kernel-offset slices of the padded input (im2col).
#include <limits>
#include <string>

#include "common.h"
#include "converters_nn.h"
#include "fastonnx/helpers.h"

namespace fastonnx {
namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

std::vector<int64_t> spatial_axes(size_t n) {
  std::vector<int64_t> axes;
  for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i) + 2);
  return axes;
}

// Pads the spatial dims of a batched (N, C, ...) tensor with zeros; negative pads crop.
Value pad_spatial(Builder& b, Value x, const std::vector<int64_t>& begin, const std::vector<int64_t>& end) {
  const size_t n = begin.size();
  std::vector<int64_t> pads(2 * (n + 2), 0), starts, ends;
  bool pad = false, crop = false;
  for (size_t i = 0; i < n; ++i) {
    pads[i + 2] = std::max<int64_t>(begin[i], 0);
    pads[n + 2 + i + 2] = std::max<int64_t>(end[i], 0);
    starts.push_back(std::max<int64_t>(-begin[i], 0));
    ends.push_back(end[i] < 0 ? end[i] : kEnd);
    pad = pad || begin[i] > 0 || end[i] > 0;
    crop = crop || begin[i] < 0 || end[i] < 0;
  }
  if (pad) x = b.op<"Pad">({x, b.ints(pads)});
  if (crop) x = b.op<"Slice">({x, b.ints(starts), b.ints(ends), b.ints(spatial_axes(n))});
  return x;
}

std::vector<int64_t> weight_shape(Builder& b, Value weight) {
  const auto shape = b.static_shape(weight);
  if (!shape || shape->size() < 3) b.fail("an integer convolution needs a weight of static shape");
  return *shape;
}

// Integer convolution of a batched input with a weight of shape `w`: the kernel-offset slices of
// the padded input, stacked, make the columns of one grouped MatMul with the weight.
Value integer_conv(Builder& b, Value x, Value weight, const std::vector<int64_t>& w, const std::optional<Value>& bias,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& pads,
                   const std::vector<int64_t>& dilation, int64_t groups) {
  const size_t n = w.size() - 2;
  const std::vector<int64_t> begin(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(n));
  const std::vector<int64_t> end(pads.begin() + static_cast<std::ptrdiff_t>(n), pads.end());
  x = pad_spatial(b, x, begin, end);
  int64_t offsets = 1;
  for (size_t i = 0; i < n; ++i) offsets *= w[i + 2];
  // Offset k along a dim reads x[k*d :: s] up to where the last kernel tap still fits, which
  // makes every slice as long as the output.
  const Value axes = b.ints(spatial_axes(n)), steps = b.ints(stride), unsqueeze_at = b.ints(std::vector<int64_t>{2});
  std::vector<Value> columns;
  std::optional<Value> first_slice;
  for (int64_t flat = 0; flat < offsets; ++flat) {
    std::vector<int64_t> starts(n), ends(n);
    int64_t rest = flat;
    for (size_t i = n; i-- > 0;) {
      const int64_t k = rest % w[i + 2], taps_after = w[i + 2] - 1 - k;
      rest /= w[i + 2];
      starts[i] = k * dilation[i];
      ends[i] = taps_after == 0 ? kEnd : -taps_after * dilation[i];
    }
    const Value slice = b.op<"Slice">({x, b.ints(starts), b.ints(ends), axes, steps});
    if (!first_slice) first_slice = slice;
    columns.push_back(b.op<"Unsqueeze">({slice, unsqueeze_at}));
  }
  const int64_t out_channels = w[0], group_depth = w[1] * offsets;
  // (N, C, offsets, *out) -> (N, groups, C/groups * offsets, positions); the weight (O, C/groups,
  // *kernel) -> (groups, O/groups, C/groups * offsets) has its taps in the same order.
  const Value stacked = b.op<"Concat">(spread(columns), {Attr::i("axis", 2)});
  const Value cols = b.op<"Reshape">({stacked, b.ints(std::vector<int64_t>{0, groups, group_depth, -1})});
  const Value kernel =
      b.op<"Reshape">({weight, b.ints(std::vector<int64_t>{groups, out_channels / groups, group_depth})});
  const Value product = b.op<"MatMul">({kernel, cols});
  const Value slice_shape = b.op<"Shape">({*first_slice});
  const auto dims = [&](int64_t from, int64_t to) {
    return b.op<"Slice">({slice_shape, b.ints(std::vector<int64_t>{from}), b.ints(std::vector<int64_t>{to})});
  };
  const Value out_shape =
      b.op<"Concat">({dims(0, 1), b.ints(std::vector<int64_t>{out_channels}), dims(2, kEnd)}, {Attr::i("axis", 0)});
  Value out = b.op<"Reshape">({product, out_shape});
  if (bias) {
    std::vector<int64_t> per_channel(n + 1, 1);
    per_channel[0] = out_channels;
    out = b.op<"Add">({out, b.op<"Reshape">({*bias, b.ints(per_channel)})});
  }
  return out;
}

// Integer transposed convolution of a batched input: a stride-1 convolution of the input spread
// out with stride-1 zeros between its elements, padded by dilation*(kernel-1) - padding (plus
// output_padding at the end), with the kernel flipped and its in/out channels swapped per group.
Value integer_conv_transpose(Builder& b, Value x, Value in_spatial, Value weight, const std::optional<Value>& bias,
                             const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                             const std::vector<int64_t>& output_padding, const std::vector<int64_t>& dilation,
                             int64_t groups) {
  const std::vector<int64_t> w = weight_shape(b, weight);
  const size_t n = w.size() - 2;
  // (N, C, S1, S2) -> (N, C, S1, 1, S2, 1) -> zeros after each element -> (N, C, S1*s1, S2*s2),
  // with the spatial sizes `in_spatial` (1-D, read at run time when dynamic); the trailing
  // stride-1 zeros are cropped by the end padding below.
  std::vector<int64_t> new_axes, spread_pads(2 * (2 * n + 2), 0);
  for (size_t i = 0; i < n; ++i) {
    new_axes.push_back(static_cast<int64_t>(2 * i + 3));
    spread_pads[(2 * n + 2) + 2 + 2 * i + 1] = stride[i] - 1;
  }
  const Value split_x = b.op<"Unsqueeze">({x, b.ints(new_axes)});
  const Value merged = b.op<"Concat">({b.ints(std::vector<int64_t>{0, 0}), b.op<"Mul">({in_spatial, b.ints(stride)})},
                                      {Attr::i("axis", 0)});
  const Value spread_x = b.op<"Reshape">({b.op<"Pad">({split_x, b.ints(spread_pads)}), merged});
  std::vector<int64_t> begin, end, kernel_shape = {w[1] * groups, w[0] / groups}, flip_starts, flip_ends, ones;
  int64_t offsets = 1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t reach = dilation[i] * (w[i + 2] - 1);
    begin.push_back(reach - padding[i]);
    end.push_back(reach - padding[i] + output_padding[i] - (stride[i] - 1));
    kernel_shape.push_back(w[i + 2]);
    offsets *= w[i + 2];
    flip_starts.push_back(-1);
    flip_ends.push_back(std::numeric_limits<int64_t>::min());
    ones.push_back(1);
  }
  // (C_in, C_out/groups, *k) -> (groups, C_in/groups, C_out/groups, taps) -> swap the channel
  // dims -> (C_out, C_in/groups, *k), flipped along every spatial dim.
  const Value grouped = b.op<"Reshape">({weight, b.ints(std::vector<int64_t>{groups, w[0] / groups, w[1], offsets})});
  const Value swapped = b.op<"Transpose">({grouped}, {Attr::ints("perm", {0, 2, 1, 3})});
  const Value kernel = b.op<"Slice">({b.op<"Reshape">({swapped, b.ints(kernel_shape)}), b.ints(flip_starts),
                                      b.ints(flip_ends), b.ints(spatial_axes(n)), b.ints(std::vector<int64_t>(n, -1))});
  std::vector<int64_t> pads(begin);
  pads.insert(pads.end(), end.begin(), end.end());
  return integer_conv(b, spread_x, kernel, kernel_shape, bias, ones, pads, dilation, groups);
}

}  // namespace

Value conv_nd(Builder& b, Value input, Value weight, const std::optional<Value>& bias, const SymIntList& stride,
              const std::vector<int64_t>& pads, const SymIntList& dilation, const SymInt& groups) {
  const std::vector<int64_t> strides = b.static_ints(stride), dilations = b.static_ints(dilation);
  const int64_t group = b.static_int(groups);
  return with_batch(b, input, b.rank(weight), [&](Value x) {
    if (!is_floating(b.dtype(x)))
      return integer_conv(b, x, weight, weight_shape(b, weight), bias, strides, pads, dilations, group);
    return b.op<"Conv">({x, weight, bias}, {Attr::ints("strides", strides), Attr::ints("pads", pads),
                                            Attr::ints("dilations", dilations), Attr::i("group", group)});
  });
}

namespace {

// onnxruntime takes an output_padding below the stride or the dilation only (PyTorch's quantized
// transposed convolutions take more). The positions it adds lie past every input's reach: zeros,
// padded on at the end of each spatial axis, then the bias added to all.
Value pad_transposed_output(Builder& b, Value y, size_t rank, const std::vector<int64_t>& extra,
                            const std::optional<Value>& bias) {
  std::vector<int64_t> pads(2 * rank, 0);
  for (size_t i = 0; i < extra.size(); ++i) pads[rank + rank - extra.size() + i] = extra[i];
  const Value padded = b.op<"Pad">({y, b.ints(pads)});
  if (!bias) return padded;
  std::vector<int64_t> channels(rank - 1, 1);
  channels[0] = -1;
  return b.op<"Add">({padded, b.op<"Reshape">({*bias, b.ints(channels)})});
}

}  // namespace

Value conv_transpose_nd(Builder& b, Value input, Value weight, const std::optional<Value>& bias,
                        const SymIntList& stride, const SymIntList& padding, const SymIntList& output_padding,
                        const SymIntList& dilation, const SymInt& groups) {
  const std::vector<int64_t> strides = b.static_ints(stride), dilations = b.static_ints(dilation);
  const int64_t group = b.static_int(groups);
  return with_batch(b, input, b.rank(weight), [&](Value x) {
    if (!is_floating(b.dtype(x))) {
      const int64_t rank = b.rank(input);
      const Value spatial = sizes_between(b, input, rank - (b.rank(weight) - 2), rank);
      return integer_conv_transpose(b, x, spatial, weight, bias, strides, b.static_ints(padding),
                                    b.static_ints(output_padding), dilations, group);
    }
    const std::vector<int64_t> extra = helper_transpose_output_padding(b, padding, output_padding);
    Attrs attrs = {Attr::ints("strides", strides),
                   Attr::ints("pads", helper_transpose_pads(b, padding, output_padding)),
                   Attr::ints("dilations", dilations), Attr::i("group", group)};
    bool beyond = false;
    for (size_t i = 0; i < extra.size(); ++i) beyond = beyond || extra[i] >= std::max(strides[i], dilations[i]);
    if (!beyond) {
      attrs.push_back(Attr::ints("output_padding", extra));
      return b.op<"ConvTranspose">({x, weight, bias}, attrs);
    }
    return pad_transposed_output(b, b.op<"ConvTranspose">({x, weight}, attrs), static_cast<size_t>(b.rank(x)), extra,
                                 bias);
  });
}

namespace manual {

Value convolution(Builder& b, Value input, Value weight, std::optional<Value> bias, SymIntList stride,
                  SymIntList padding, SymIntList dilation, bool transposed, SymIntList output_padding, SymInt groups) {
  if (transposed) return conv_transpose_nd(b, input, weight, bias, stride, padding, output_padding, dilation, groups);
  return conv_nd(b, input, weight, bias, stride, helper_twice(b, padding), dilation, groups);
}

// A 1-D convolution with time first: input (time, batch, in), weight (kernel, in, out), output
// (time, batch, out). torch computes it for floating types only, as ONNX's Conv does.
Value conv_tbc(Builder& b, Value self, Value weight, Value bias, int64_t pad) {
  const Value input = b.op<"Transpose">({self}, {Attr::ints("perm", {1, 2, 0})});
  const Value kernel = b.op<"Transpose">({weight}, {Attr::ints("perm", {2, 1, 0})});
  const Value out = b.op<"Conv">({input, kernel, bias}, {Attr::ints("pads", {pad, pad})});
  return b.op<"Transpose">({out}, {Attr::ints("perm", {2, 0, 1})});
}

}  // namespace manual
}  // namespace fastonnx
