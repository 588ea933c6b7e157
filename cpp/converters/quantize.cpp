// Fake quantization: the values of x quantized to integers in [quant_min, quant_max] and back,
// as a QuantizeLinear/DequantizeLinear pair in the 8-bit type that holds the range. A range
// narrower than the type's (observers' (0, 127)) clips the integers in between.
#include <optional>
#include <string>

#include "common.h"
#include "converters_quantize.h"

namespace fastonnx {
namespace {

// The 8-bit type ONNX quantizes to for integers in [quant_min, quant_max].
ScalarType int_type(Builder& b, int64_t quant_min, int64_t quant_max) {
  if (quant_min >= 0 && quant_max <= 255) return ScalarType::Byte;
  if (quant_min >= -128 && quant_max <= 127) return ScalarType::Char;
  b.fail("fake quantization to [" + std::to_string(quant_min) + ", " + std::to_string(quant_max) +
         "] has no ONNX form (QuantizeLinear of opset 13 to 18 quantizes to 8 bits)");
}

// `scale` (float32) and `zero_point` (of the integer type) as ONNX takes them; `axis` absent:
// one scale for the tensor (torch's may be a tensor of one element).
Value fake_quantize(Builder& b, Value self, Value scale, Value zero_point, std::optional<int64_t> axis,
                    int64_t quant_min, int64_t quant_max) {
  const ScalarType ints = int_type(b, quant_min, quant_max);
  if (!axis && b.rank(scale) != 0) scale = b.op<"Reshape">({scale, b.ints(std::vector<int64_t>{})});
  if (!axis && b.rank(zero_point) != 0) zero_point = b.op<"Reshape">({zero_point, b.ints(std::vector<int64_t>{})});
  scale = b.cast(scale, ScalarType::Float);
  zero_point = b.cast(zero_point, ints);
  Attrs attrs;
  if (axis) attrs.push_back(Attr::i("axis", wrap_dim(b, *axis, b.rank(self))));
  Value q = b.op<"QuantizeLinear">({b.cast(self, ScalarType::Float), scale, zero_point}, attrs);
  const bool full =
      ints == ScalarType::Byte ? quant_min == 0 && quant_max == 255 : quant_min == -128 && quant_max == 127;
  if (!full) q = b.op<"Clip">({q, b.scalar(quant_min, ints), b.scalar(quant_max, ints)});
  return b.cast(b.op<"DequantizeLinear">({q, scale, zero_point}, attrs), b.dtype(self));
}

}  // namespace

namespace manual {

Value fake_quantize_per_tensor_affine(Builder& b, Value self, double scale, int64_t zero_point, int64_t quant_min,
                                      int64_t quant_max) {
  return fake_quantize(b, self, b.scalar(scale, ScalarType::Float), b.scalar(zero_point, ScalarType::Long),
                       std::nullopt, quant_min, quant_max);
}

Value fake_quantize_per_tensor_affine_tensor_qparams(Builder& b, Value self, Value scale, Value zero_point,
                                                     int64_t quant_min, int64_t quant_max) {
  return fake_quantize(b, self, scale, zero_point, std::nullopt, quant_min, quant_max);
}

Value fake_quantize_per_channel_affine(Builder& b, Value self, Value scale, Value zero_point, int64_t axis,
                                       int64_t quant_min, int64_t quant_max) {
  return fake_quantize(b, self, scale, zero_point, axis, quant_min, quant_max);
}

}  // namespace manual
}  // namespace fastonnx
