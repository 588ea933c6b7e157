// Vision ops: grid sampling, im2col/col2im (unfold/fold) and pixel_unshuffle.
#include <algorithm>
#include <numeric>
#include <string>

#include "common.h"
#include "converters_vision.h"
#include "fastonnx/helpers.h"
#include "windows.h"

namespace fastonnx {

Value grid_sample(Builder& b, Value input, Value grid, int64_t interpolation_mode, int64_t padding_mode,
                  bool align_corners) {
  if (b.opset() < 16) b.fail("grid sampling needs ONNX GridSample, which opset 16 introduced");
  const int64_t rank = b.rank(input);
  if (rank == 5 && b.opset() < 20) b.fail("grid sampling of a 5-D input needs ONNX GridSample of opset 20 or later");
  if (rank != 4 && rank != 5) b.fail("grid sampling takes a 4-D or 5-D input, got rank " + std::to_string(rank));
  if (interpolation_mode < 0 || interpolation_mode > 2) {
    b.fail("unknown grid sampling interpolation mode " + std::to_string(interpolation_mode));
  }
  if (padding_mode < 0 || padding_mode > 2)
    b.fail("unknown grid sampling padding mode " + std::to_string(padding_mode));
  // torch's modes by number; opset 20 renamed bilinear/bicubic to linear/cubic.
  static constexpr const char* kModes16[] = {"bilinear", "nearest", "bicubic"};
  static constexpr const char* kModes20[] = {"linear", "nearest", "cubic"};
  static constexpr const char* kPadding[] = {"zeros", "border", "reflection"};
  const char* mode = (b.opset() >= 20 ? kModes20 : kModes16)[interpolation_mode];
  return b.op<"GridSample">({input, grid}, {Attr::s("mode", mode), Attr::s("padding_mode", kPadding[padding_mode]),
                                            Attr::i("align_corners", align_corners)});
}

namespace {

// The windows of im2col/col2im over an image of `image` sizes.
Windows unfold_windows(const std::vector<int64_t>& image, const std::vector<int64_t>& kernel,
                       const std::vector<int64_t>& dilation, const std::vector<int64_t>& padding,
                       const std::vector<int64_t>& stride) {
  Windows w{image, kernel, stride, padding, dilation, {}};
  for (size_t i = 0; i < w.rank(); ++i)
    w.out.push_back(pooled_length(image[i], kernel[i], stride[i], padding[i], dilation[i], false));
  return w;
}

}  // namespace

namespace manual {

// (N, C, H, W) -> (N, C * kernel positions, windows): one strided slice per kernel offset,
// stacked after the channel axis. Any element type.
Value im2col(Builder& b, Value self, std::vector<int64_t> kernel_size, std::vector<int64_t> dilation,
             std::vector<int64_t> padding, std::vector<int64_t> stride) {
  // The windows are counted at run time when the image size is dynamic.
  const int64_t rank = b.rank(self);
  const RuntimeWindows w = runtime_windows(b, spatial_sizes(b, self, 2), kernel_size, stride, padding, dilation, false);
  const int64_t offset_axis = rank - 2;  // after the channels
  const Value axes = b.ints(std::vector<int64_t>{offset_axis});
  Inputs offsets;
  for (Value slice : window_slices(b, self, rank, w, Scalar(int64_t{0})))
    offsets.push_back(b.op<"Unsqueeze">({slice, axes}));
  const Value stacked = b.op<"Concat">(offsets, {Attr::i("axis", offset_axis)});
  const Value columns =
      b.op<"Mul">({size_along(b, self, offset_axis - 1), b.ints(std::vector<int64_t>{w.positions()})});
  const Value windows = b.op<"Mul">({w.out[0], w.out[1]});
  return reshape_to(b, stacked, join_sizes(b, {sizes_between(b, self, 0, offset_axis - 1), columns, windows}));
}

// (N, C * kernel positions, windows) -> (N, C, H, W), summing overlaps: ONNX Col2Im from opset
// 18, before it a ConvTranspose with one-hot kernels.
Value col2im(Builder& b, Value self, SymIntList output_size, std::vector<int64_t> kernel_size,
             std::vector<int64_t> dilation, std::vector<int64_t> padding, std::vector<int64_t> stride) {
  if (b.opset() >= 18) {
    const Attrs attrs = {Attr::ints("dilations", dilation), Attr::ints("pads", helper_twice(b, padding)),
                         Attr::ints("strides", stride)};
    const Value image = b.ints(output_size);
    return with_batch(b, self, 3, [&](Value x) { return b.op<"Col2Im">({x, image, b.ints(kernel_size)}, attrs); });
  }
  // Before: a ConvTranspose with one-hot kernels, the windows counted at run time when the
  // output size is dynamic.
  const int64_t rank = b.rank(self);
  const int64_t positions = kernel_size[0] * kernel_size[1];
  Value image_sum;
  if (std::all_of(output_size.begin(), output_size.end(), [](const SymInt& s) { return s.is_static(); })) {
    const Windows w = unfold_windows(b.static_ints(output_size), kernel_size, dilation, padding, stride);
    std::vector<int64_t> per_channel = {-1, positions};
    per_channel.insert(per_channel.end(), w.out.begin(), w.out.end());
    image_sum = scatter_windows(b, b.op<"Reshape">({self, b.ints(per_channel)}), w);
  } else {
    const RuntimeWindows w = runtime_windows(b, output_size, kernel_size, stride, padding, dilation, false);
    const Value per_channel = join_sizes(b, {b.ints(std::vector<int64_t>{-1, positions}), w.out[0], w.out[1]});
    image_sum = scatter_windows(b, b.op<"Reshape">({self, per_channel}), w);
  }
  // (N * C, 1, H, W) -> (N, C, H, W), the channel count read at run time when it is dynamic.
  const Value channels = b.op<"Div">({size_along(b, self, rank - 2), b.ints(std::vector<int64_t>{positions})});
  return reshape_to(b, image_sum, join_sizes(b, {sizes_between(b, self, 0, rank - 2), channels, b.ints(output_size)}));
}

// (*, C, H*r, W*r) -> (*, C*r*r, H, W), channel c*r*r + i*r + j taking offset (i, j) of each
// r x r block. ONNX SpaceToDepth orders the channels offset-major, so a reshape and transpose.
Value pixel_unshuffle(Builder& b, Value self, int64_t downscale_factor) {
  const int64_t r = downscale_factor;
  if (r == 1) return self;
  const int64_t rank = b.rank(self);
  if (rank < 3) b.fail("pixel_unshuffle needs a tensor of rank 3 or more");
  // An empty input gives an empty output; Reshape cannot make zero-size dims before opset 14.
  if (const auto out = b.out_static_shape(); out && std::find(out->begin(), out->end(), 0) != out->end()) {
    return b.constant(b.dtype(self), *out, {});
  }
  // The sizes that are dynamic are read at run time.
  const int64_t lead = rank - 3;
  const Value lead_sizes = sizes_between(b, self, 0, lead), c = size_along(b, self, lead);
  const Value factor = b.ints(std::vector<int64_t>{r});
  const Value h = b.op<"Div">({size_along(b, self, lead + 1), factor});
  const Value w = b.op<"Div">({size_along(b, self, lead + 2), factor});
  std::vector<int64_t> perm(static_cast<size_t>(lead));
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t d : {0, 2, 4, 1, 3}) perm.push_back(lead + d);
  const Value split = reshape_to(b, self, join_sizes(b, {lead_sizes, c, h, factor, w, factor}));
  const Value moved = b.op<"Transpose">({split}, {Attr::ints("perm", perm)});
  const Value channels = b.op<"Mul">({c, b.ints(std::vector<int64_t>{r * r})});
  return reshape_to(b, moved, join_sizes(b, {lead_sizes, channels, h, w}));
}

}  // namespace manual
}  // namespace fastonnx
