// Vision ops: grid sampling, im2col/col2im (unfold/fold) and pixel_unshuffle.
#include <numeric>
#include <string>

#include "common.h"
#include "fastonnx/helpers.h"
#include "windows.h"

namespace fastonnx {
namespace {

Value grid_sample(Builder& b, Value input, Value grid, int64_t interpolation_mode, int64_t padding_mode,
                  bool align_corners) {
  if (b.opset() < 16) b.fail("grid sampling needs ONNX GridSample, which opset 16 introduced");
  const int64_t rank = b.rank(input);
  if (rank == 5 && b.opset() < 20) b.fail("grid sampling of a 5-D input needs ONNX GridSample of opset 20 or later");
  if (rank != 4 && rank != 5) b.fail("grid sampling takes a 4-D or 5-D input, got rank " + std::to_string(rank));
  if (interpolation_mode < 0 || interpolation_mode > 2) {
    b.fail("unknown grid sampling interpolation mode " + std::to_string(interpolation_mode));
  }
  if (padding_mode < 0 || padding_mode > 2) b.fail("unknown grid sampling padding mode " + std::to_string(padding_mode));
  // torch's modes by number; opset 20 renamed bilinear/bicubic to linear/cubic.
  static constexpr const char* kModes16[] = {"bilinear", "nearest", "bicubic"};
  static constexpr const char* kModes20[] = {"linear", "nearest", "cubic"};
  static constexpr const char* kPadding[] = {"zeros", "border", "reflection"};
  const char* mode = (b.opset() >= 20 ? kModes20 : kModes16)[interpolation_mode];
  return b.op("GridSample", {input, grid},
              {Attr::s("mode", mode), Attr::s("padding_mode", kPadding[padding_mode]),
               Attr::i("align_corners", align_corners)});
}

// The windows of im2col/col2im over an image of `image` sizes.
Windows unfold_windows(const std::vector<int64_t>& image, const std::vector<int64_t>& kernel,
                       const std::vector<int64_t>& dilation, const std::vector<int64_t>& padding,
                       const std::vector<int64_t>& stride) {
  Windows w{image, kernel, stride, padding, dilation, {}};
  for (size_t i = 0; i < w.rank(); ++i) w.out.push_back(pooled_length(image[i], kernel[i], stride[i], padding[i], dilation[i], false));
  return w;
}

int64_t product(const std::vector<int64_t>& xs) { return std::accumulate(xs.begin(), xs.end(), int64_t{1}, std::multiplies<>()); }

}  // namespace

namespace manual {

Value grid_sampler_2d(Builder& b, Value input, Value grid, int64_t interpolation_mode, int64_t padding_mode,
                      bool align_corners) {
  return grid_sample(b, input, grid, interpolation_mode, padding_mode, align_corners);
}

Value grid_sampler(Builder& b, Value input, Value grid, int64_t interpolation_mode, int64_t padding_mode,
                   bool align_corners) {
  return grid_sample(b, input, grid, interpolation_mode, padding_mode, align_corners);
}

// (N, C, H, W) -> (N, C * kernel positions, windows): one strided slice per kernel offset,
// stacked after the channel axis. Any element type.
Value im2col(Builder& b, Value self, std::vector<int64_t> kernel_size, std::vector<int64_t> dilation,
             std::vector<int64_t> padding, std::vector<int64_t> stride) {
  const Windows w = unfold_windows(static_spatial_sizes(b, self, 2, "im2col"), kernel_size, dilation, padding, stride);
  const int64_t offset_axis = b.rank(self) - 2;  // after the channels
  const Value axes = b.ints(std::vector<int64_t>{offset_axis});
  Inputs offsets;
  for (Value slice : window_slices(b, self, w, Scalar(int64_t{0}))) offsets.push_back(b.op("Unsqueeze", {slice, axes}));
  const Value stacked = b.op("Concat", offsets, {Attr::i("axis", offset_axis)});
  // The channel count when static (a -1 cannot be resolved in an empty batch).
  const Dim channels = b.shape(self)[static_cast<size_t>(offset_axis - 1)];
  std::vector<int64_t> shape = {channels.is_static() ? channels.value * w.positions() : -1, product(w.out)};
  if (b.rank(self) == 4) shape.insert(shape.begin(), 0);  // the batch stays
  return b.op("Reshape", {stacked, b.ints(shape)});
}

// (N, C * kernel positions, windows) -> (N, C, H, W), summing overlaps: ONNX Col2Im from opset
// 18, before it a ConvTranspose with one-hot kernels.
Value col2im(Builder& b, Value self, SymIntList output_size, std::vector<int64_t> kernel_size,
             std::vector<int64_t> dilation, std::vector<int64_t> padding, std::vector<int64_t> stride) {
  const std::vector<int64_t> image = b.static_ints(output_size);
  if (b.opset() >= 18) {
    const Attrs attrs = {Attr::ints("dilations", dilation), Attr::ints("pads", helper_twice(b, padding)),
                         Attr::ints("strides", stride)};
    return with_batch(b, self, 3, [&](Value x) { return b.op("Col2Im", {x, b.ints(image), b.ints(kernel_size)}, attrs); });
  }
  const Windows w = unfold_windows(image, kernel_size, dilation, padding, stride);
  const Dim columns = b.shape(self)[static_cast<size_t>(b.rank(self) - 2)];
  if (!columns.is_static()) b.fail("col2im below opset 18 needs a static channel count");
  const int64_t channels = columns.value / w.positions();
  std::vector<int64_t> per_channel = {-1, w.positions()};
  per_channel.insert(per_channel.end(), w.out.begin(), w.out.end());
  const Value image_sum = scatter_windows(b, b.op("Reshape", {self, b.ints(per_channel)}), w);
  std::vector<int64_t> shape = {channels, image[0], image[1]};
  if (b.rank(self) == 3) shape.insert(shape.begin(), -1);
  return b.op("Reshape", {image_sum, b.ints(shape)});
}

// (*, C, H*r, W*r) -> (*, C*r*r, H, W), channel c*r*r + i*r + j taking offset (i, j) of each
// r x r block. ONNX SpaceToDepth orders the channels offset-major, so a reshape and transpose.
Value pixel_unshuffle(Builder& b, Value self, int64_t downscale_factor) {
  const int64_t r = downscale_factor;
  if (r == 1) return self;
  const std::vector<int64_t> in = static_spatial_sizes(b, self, 3, "pixel_unshuffle");
  const auto lead = static_cast<size_t>(b.rank(self)) - 3;
  const int64_t c = in[0], h = in[1] / r, w = in[2] / r;
  std::vector<int64_t> split(lead, 0);  // 0: the leading sizes stay
  for (int64_t d : {c, h, r, w, r}) split.push_back(d);
  std::vector<int64_t> perm(lead);
  std::iota(perm.begin(), perm.end(), 0);
  const auto at = static_cast<int64_t>(lead);
  for (int64_t d : {0, 2, 4, 1, 3}) perm.push_back(at + d);
  const Value moved = b.op("Transpose", {b.op("Reshape", {self, b.ints(split)})}, {Attr::ints("perm", perm)});
  std::vector<int64_t> shape(lead, 0);
  for (int64_t d : {c * r * r, h, w}) shape.push_back(d);
  return b.op("Reshape", {moved, b.ints(shape)});
}

}  // namespace manual
}  // namespace fastonnx
