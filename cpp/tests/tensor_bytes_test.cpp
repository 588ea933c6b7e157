// Weights computed while written (tensor_bytes.h), against the same bytes built naively: the
// packed float weights of several MatMuls (columns_bytes) from parts of every kind, filled in the
// ranges the writer asks for and in ranges that start and end inside rows.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "fastonnx/tensor_bytes.h"

namespace fastonnx {
namespace {

std::vector<float> iota(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

std::vector<uint8_t> filled(const TensorBytes& t, size_t chunk) {
  std::vector<uint8_t> out(t.size());
  for (size_t at = 0; at < t.size(); at += chunk) t.fill(at, std::min(t.size(), at + chunk), out.data() + at);
  return out;
}

TEST(ColumnsBytes, SideBySideFromTransposedAndMemoryParts) {
  constexpr size_t kRows = 37;                                                  // K; the parts' widths N differ
  const auto a = std::make_shared<std::vector<float>>(iota(5 * kRows, 0));      // [5, K], transposed: [K, 5]
  const auto b = std::make_shared<std::vector<float>>(iota(kRows * 3, 1000));   // [K, 3] as it is
  const auto c = std::make_shared<std::vector<float>>(iota(17 * kRows, 5000));  // [17, K], transposed: [K, 17]
  const auto packed = columns_bytes(
      {transposed_bytes(a->data(), a, 4, {5, kRows}, {1, 0}), memory_bytes(b->data(), b, b->size() * 4, 4),
       transposed_bytes(c->data(), c, 4, {17, kRows}, {1, 0})},
      kRows);

  std::vector<float> expected;
  for (size_t k = 0; k < kRows; ++k) {
    for (size_t n = 0; n < 5; ++n) expected.push_back((*a)[n * kRows + k]);
    for (size_t n = 0; n < 3; ++n) expected.push_back((*b)[k * 3 + n]);
    for (size_t n = 0; n < 17; ++n) expected.push_back((*c)[n * kRows + k]);
  }
  ASSERT_EQ(packed->size(), expected.size() * 4);
  std::vector<uint8_t> want(expected.size() * 4);
  std::memcpy(want.data(), expected.data(), want.size());

  const size_t writer_chunk = packed->chunk_bytes(256, 1024);
  EXPECT_EQ(writer_chunk % (25 * 4), 0U) << "whole rows";
  EXPECT_EQ(filled(*packed, writer_chunk), want);
  EXPECT_EQ(filled(*packed, 4 * 7), want);  // ranges that start and end inside rows
  EXPECT_EQ(filled(*packed, packed->size()), want);
  EXPECT_EQ(packed->sources().size(), 3U);
}

TEST(ColumnsBytes, SameBytesOnlyFromTheSameParts) {
  const auto a = std::make_shared<std::vector<float>>(iota(8, 0));
  const auto b = std::make_shared<std::vector<float>>(iota(8, 0));
  const auto of = [](const std::shared_ptr<std::vector<float>>& v) {
    return columns_bytes({memory_bytes(v->data(), v, 16, 4), memory_bytes(v->data() + 4, v, 16, 4)}, 2);
  };
  EXPECT_TRUE(of(a)->same_bytes(*of(a)));
  EXPECT_FALSE(of(a)->same_bytes(*of(b)));
}

}  // namespace
}  // namespace fastonnx
