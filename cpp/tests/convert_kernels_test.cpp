// The vector conversions of export(dtype=...) (convert_kernels.h) against the scalar functions of
// numeric.h, which define ONNX's Cast: every float16 and bfloat16, and floats across the range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fastonnx/convert_kernels.h"
#include "fastonnx/numeric.h"

namespace fastonnx {
namespace {

float float_of(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// `values` (of `from`, element size `is`) converted by convert_floats at an odd address (the
// kernels read and write unaligned) and a count that leaves a tail for the scalar code.
std::vector<uint8_t> converted(ScalarType from, const std::vector<uint8_t>& values, ScalarType to) {
  const size_t is = static_cast<size_t>(element_size(from)), os = static_cast<size_t>(element_size(to));
  const size_t count = values.size() / is;
  std::vector<uint8_t> in(values.size() + 1), out(count * os + 1);
  std::memcpy(in.data() + 1, values.data(), values.size());
  convert_floats(from, in.data() + 1, to, out.data() + 1, count);
  return {out.begin() + 1, out.end()};
}

std::vector<uint8_t> every_16_bit_value() {
  std::vector<uint8_t> v(2 * 65536 + 2 * 5);  // a tail of 5 past a multiple of 8
  for (size_t i = 0; i < v.size() / 2; ++i) {
    const auto x = static_cast<uint16_t>(i);
    std::memcpy(v.data() + 2 * i, &x, 2);
  }
  return v;
}

uint16_t u16_at(const std::vector<uint8_t>& v, size_t i) { return load_unaligned<uint16_t>(v.data() + 2 * i); }

void expect_same_float(float expected, float got, size_t i) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(got)) << i;
  } else {
    uint32_t a, b;
    std::memcpy(&a, &expected, 4);
    std::memcpy(&b, &got, 4);
    EXPECT_EQ(a, b) << i;
  }
}

TEST(ConvertFloats, Every16BitValueToFloat) {
  const std::vector<uint8_t> values = every_16_bit_value();
  const std::vector<uint8_t> from_half = converted(ScalarType::Half, values, ScalarType::Float);
  const std::vector<uint8_t> from_bf16 = converted(ScalarType::BFloat16, values, ScalarType::Float);
  for (size_t i = 0; i < values.size() / 2; ++i) {
    expect_same_float(half_to_float(u16_at(values, i)), load_unaligned<float>(from_half.data() + 4 * i), i);
    expect_same_float(bfloat16_to_float(u16_at(values, i)), load_unaligned<float>(from_bf16.data() + 4 * i), i);
  }
}

// A NaN stays a NaN of the same sign (its payload is not specified by ONNX's Cast).
void expect_same_16_bit(uint16_t expected, uint16_t got, bool nan, size_t i) {
  if (nan) {
    EXPECT_EQ(got & 0x8000u, expected & 0x8000u) << i;
  } else {
    EXPECT_EQ(expected, got) << i;
  }
}

TEST(ConvertFloats, BFloat16ToHalfAndBack) {
  const std::vector<uint8_t> values = every_16_bit_value();
  const std::vector<uint8_t> halves = converted(ScalarType::BFloat16, values, ScalarType::Half);
  const std::vector<uint8_t> bf16s = converted(ScalarType::Half, values, ScalarType::BFloat16);
  for (size_t i = 0; i < values.size() / 2; ++i) {
    const float b = bfloat16_to_float(u16_at(values, i)), h = half_to_float(u16_at(values, i));
    expect_same_16_bit(float_to_half(b), u16_at(halves, i), std::isnan(b), i);
    EXPECT_TRUE(!std::isnan(b) || std::isnan(half_to_float(u16_at(halves, i)))) << i;
    EXPECT_EQ(float_to_bfloat16(h), u16_at(bf16s, i)) << i;  // float_to_bfloat16 gives one NaN
  }
}

// Floats across all exponents, with mantissas that land on, beside and between the halfway
// points of both rounding steps; subnormal halves, overflow to infinity, NaNs of both signs.
TEST(ConvertFloats, FloatsToHalfAndBFloat16) {
  std::vector<uint8_t> values;
  const auto add = [&](uint32_t bits) {
    values.resize(values.size() + 4);
    std::memcpy(values.data() + values.size() - 4, &bits, 4);
  };
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t exp = 0; exp < 256; ++exp) {
      for (const uint32_t m : {0x0u, 0x1u, 0xFFFu, 0x1000u, 0x1001u, 0x2000u, 0x3000u, 0x7FFFu, 0x8000u, 0x8001u,
                               0x18000u, 0x7FFFFFu, 0x400000u, 0x123456u}) {
        add(sign << 31 | exp << 23 | m);
      }
    }
  }
  for (uint32_t bits = 0; bits < 0xFFFFF000u; bits += 0x10001u) add(bits);
  add(0x3F800000u);  // a tail of 1 element past whatever came before
  const size_t count = values.size() / 4;
  const std::vector<uint8_t> halves = converted(ScalarType::Float, values, ScalarType::Half);
  const std::vector<uint8_t> bf16s = converted(ScalarType::Float, values, ScalarType::BFloat16);
  for (size_t i = 0; i < count; ++i) {
    const float f = float_of(load_unaligned<uint32_t>(values.data() + 4 * i));
    expect_same_16_bit(float_to_half(f), u16_at(halves, i), std::isnan(f), i);
    EXPECT_EQ(float_to_bfloat16(f), u16_at(bf16s, i)) << i;
  }
}

// In place, as a computed weight converts its own range between two 16-bit dtypes.
TEST(ConvertFloats, InPlaceBetweenSameSizes) {
  std::vector<uint8_t> values = every_16_bit_value();
  const std::vector<uint8_t> expected = converted(ScalarType::BFloat16, values, ScalarType::Half);
  convert_floats(ScalarType::BFloat16, values.data(), ScalarType::Half, values.data(), values.size() / 2);
  EXPECT_EQ(values, expected);
}

}  // namespace
}  // namespace fastonnx
