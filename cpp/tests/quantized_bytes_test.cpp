// DequantizeLinear's quantized weights (quantized_columns, column_scales) against MatMulNBits'
// (quantized_blocks, block_scales) of the same weight: the same q and scale for every weight,
// in the [K, N] layout, 4-bit values packed as ONNX packs them (across rows when N is odd),
// whether the memory holds W or its transpose, in any ranges the writer asks for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "fastonnx/quantized_bytes.h"

namespace fastonnx {
namespace {

constexpr int64_t kN = 5, kK = 41;  // N odd (packing crosses rows), K not a multiple of the block, N * K odd

std::vector<uint8_t> filled(const TensorBytes& t, size_t chunk) {
  std::vector<uint8_t> out(t.size(), 0xAB);
  for (size_t at = 0; at < t.size(); at += chunk) t.fill(at, std::min(t.size(), at + chunk), out.data() + at);
  return out;
}

// W [kN, kK] with a zero block, a tie of magnitudes and both signs; `transposed`: the memory holds W^T [kK, kN].
WeightMatrix weight(const std::shared_ptr<std::vector<float>>& memory, bool transposed) {
  WeightMatrix w;
  w.data = reinterpret_cast<const uint8_t*>(memory->data());
  w.owner = memory;
  w.dtype = w.model_dtype = ScalarType::Float;
  w.n = kN;
  w.k = kK;
  w.stride_n = transposed ? 1 : kK;
  w.stride_k = transposed ? kN : 1;
  return w;
}

float w_at(int64_t n, int64_t k) {
  if (n == 2 && k < 32) return 0.0f;                               // an all-zero block
  if (n == 3 && (k == 5 || k == 9)) return k == 5 ? 2.0f : -2.0f;  // the largest magnitude twice: the first's sign
  return std::sin(static_cast<float>(n * 131 + k * 7)) * (n == 4 ? -3.0f : 1.5f);
}

std::shared_ptr<std::vector<float>> memory(bool transposed) {
  auto m = std::make_shared<std::vector<float>>(static_cast<size_t>(kN * kK));
  for (int64_t n = 0; n < kN; ++n) {
    for (int64_t k = 0; k < kK; ++k) (*m)[static_cast<size_t>(transposed ? k * kN + n : n * kK + k)] = w_at(n, k);
  }
  return m;
}

class QuantizedColumnsTest : public ::testing::TestWithParam<int> {};

TEST_P(QuantizedColumnsTest, SameQuantizationAsMatMulNBitsInOnnxLayout) {
  const int bits = GetParam();
  const BlockQuantization q{bits, 32};
  const auto held = memory(false), held_transposed = memory(true);
  const WeightMatrix w = weight(held, false);
  const auto blobs = filled(*quantized_blocks(w, q, ScalarType::Float), 1 << 20);
  const auto nbits_scales = filled(*block_scales(w, q, ScalarType::Float), 1 << 20);
  const int64_t blocks = q.blocks(kK);

  for (const bool transposed : {false, true}) {
    const WeightMatrix src = transposed ? weight(held_transposed, true) : w;
    const auto values = quantized_columns(src, q, ScalarType::Float);
    const auto scales = column_scales(src, q, ScalarType::Float);
    ASSERT_EQ(values->size(), static_cast<size_t>((kK * kN * bits + 7) / 8));
    ASSERT_EQ(scales->size(), static_cast<size_t>(blocks * kN * 4));
    const auto whole = filled(*values, values->size());
    EXPECT_EQ(filled(*values, values->chunk_bytes(1, 1)), whole);
    EXPECT_EQ(filled(*values, 3), whole);  // ranges that cut bands
    EXPECT_EQ(filled(*scales, 4), filled(*scales, scales->size()));
    if (bits == 4) EXPECT_EQ(whole.back() >> 4, 0) << "the unused high half of the last byte";

    const auto column_scale_bytes = filled(*scales, scales->size());
    for (int64_t n = 0; n < kN; ++n) {
      for (int64_t b = 0; b < blocks; ++b) {
        float a = 0, c = 0;
        std::memcpy(&a, nbits_scales.data() + (n * blocks + b) * 4, 4);
        std::memcpy(&c, column_scale_bytes.data() + (b * kN + n) * 4, 4);
        EXPECT_EQ(a, c) << "scale of n=" << n << " block " << b;
      }
      for (int64_t k = 0; k < kK; ++k) {
        const int64_t in_block = k % 32, b = k / 32;
        const uint8_t* blob = blobs.data() + (n * blocks + b) * q.blob_bytes();  // MatMulNBits: q + 2^(bits-1)
        const int code = bits == 8 ? blob[in_block] : (blob[in_block / 2] >> (4 * (in_block % 2))) & 15;
        const int64_t i = k * kN + n;  // DequantizeLinear: q at flat index k * N + n
        int value = bits == 8 ? static_cast<int8_t>(whole[static_cast<size_t>(i)])
                              : (whole[static_cast<size_t>(i / 2)] >> (4 * (i % 2))) & 15;
        if (bits == 4 && value >= 8) value -= 16;
        EXPECT_EQ(value, code - (1 << (bits - 1))) << "n=" << n << " k=" << k << (transposed ? " (transposed)" : "");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bits, QuantizedColumnsTest, ::testing::Values(4, 8));

TEST(QuantizedColumns, SameBytesOnlyFromTheSameWeightAndForm) {
  const auto held = memory(false);
  const WeightMatrix w = weight(held, false);
  const BlockQuantization q{4, 32};
  EXPECT_TRUE(quantized_columns(w, q, ScalarType::Float)->same_bytes(*quantized_columns(w, q, ScalarType::Float)));
  EXPECT_FALSE(quantized_columns(w, q, ScalarType::Float)->same_bytes(*quantized_blocks(w, q, ScalarType::Float)));
  EXPECT_FALSE(quantized_columns(w, q, ScalarType::Float)->same_bytes(*quantized_columns(w, q, ScalarType::Half)));
  EXPECT_FALSE(column_scales(w, q, ScalarType::Float)->same_bytes(*block_scales(w, q, ScalarType::Float)));
}

}  // namespace
}  // namespace fastonnx
