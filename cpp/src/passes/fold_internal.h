// What the files of the constant folder share (fold.cpp: the folder and its shape and data
// movement ops; fold_elementwise.cpp: its elementwise ops): the size limits, small helpers and
// the elementwise ops fold.cpp dispatches to.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "fastonnx/fold.h"
#include "fastonnx/numeric.h"

namespace fastonnx::fold_detail {

// A weight (a tensor of the model) is read eagerly only when at most this many elements: a
// larger one stays where it is, and its transposes and casts are computed while writing.
constexpr size_t kSmall = 4096;
// Constants the export made (converter constants, earlier folds) are read, and new tensors are
// computed, up to this many elements: the causal masks and position tables models build from
// iotas (16384 elements for 128 tokens), while one fold allocates at most a few megabytes.
constexpr size_t kLarge = size_t{1} << 18;

using Shape = std::vector<int64_t>;
using ConstInputs = std::span<const std::optional<ConstView>>;
using Result = std::optional<std::vector<Folded>>;

inline size_t count_of(const Shape& s) {
  size_t n = 1;
  for (int64_t d : s) n *= static_cast<size_t>(d);
  return n;
}

inline std::vector<int64_t> ints_of(const ConstView& v) {
  std::vector<int64_t> out(v.count());
  const size_t es = static_cast<size_t>(element_size(v.dtype));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_int(v.dtype, v.data + i * es);
  return out;
}

// A new tensor whose element i is `value(i)` written through `store`.
template <typename F>
Folded make(ScalarType dtype, Shape shape, F&& fill) {
  Folded f;
  f.dtype = dtype;
  f.shape = std::move(shape);
  f.bytes.resize(count_of(f.shape) * static_cast<size_t>(element_size(dtype)));
  fill(f.bytes.data());
  return f;
}

// Elementwise ops with numpy broadcasting, on small tensors (fold_elementwise.cpp).

// The shape `a` and `b` broadcast to, or nullopt when they do not.
std::optional<Shape> broadcast(const Shape& a, const Shape& b);

// Offsets into a tensor of `shape` for every index of the broadcast `out` shape.
std::vector<size_t> broadcast_offsets(const Shape& shape, const Shape& out);

// Add, Sub, Mul, Div, the comparisons, Max, Min, And and Or; nullopt for any other op.
Result binary(std::string_view op, const ConstView& a, const ConstView& b);

// Neg, Not, and the floating-point functions of one input; nullopt for any other op.
Result unary(std::string_view op, const ConstView& in);

Result where(const ConstView& cond, const ConstView& a, const ConstView& b);

}  // namespace fastonnx::fold_detail
