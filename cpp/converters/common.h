// Shared pieces of the hand-written converter bodies.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "fastonnx/helpers.h"

namespace fastonnx {

// A torch dim (possibly negative) as an index in [0, rank).
int64_t wrap_dim(Builder& b, int64_t dim, int64_t rank);

// The shape of `x` as a 1-D int64 tensor: a constant when it is static, else a Shape node.
Value shape_of(Builder& b, Value x);

// Sizes computed in the graph, so that a converter needs no static size where ONNX can compute
// one at run time. Each is a constant when the sizes it reads are static.
// The sizes of axes [start, end) of `x` (wrapped indices) as a 1-D int64 tensor.
Value sizes_between(Builder& b, Value x, int64_t start, int64_t end);
// The size of `x` along `axis` (a wrapped index) as a 1-D int64 tensor of one item.
inline Value size_along(Builder& b, Value x, int64_t axis) { return sizes_between(b, x, axis, axis + 1); }
// The same as a 0-d int64 tensor.
Value scalar_size_along(Builder& b, Value x, int64_t axis);
// 1-D int64 tensors joined into one (a shape made of pieces).
Value join_sizes(Builder& b, const std::vector<Value>& parts);
// Reshape to a shape that holds every size (no 0 that copies the input's, no -1): allowzero
// (opset 14) so that a size that is 0 at run time stays 0.
Value reshape_to(Builder& b, Value x, Value shape);
// The size of dimension `dim` of `x`: a number when it is static, else a 0-d Gather of its Shape.
SymInt size_at(Builder& b, Value x, int64_t dim);
// The size of `x` along `axis` when it is known and static.
std::optional<int64_t> known_size(Builder& b, Value x, int64_t axis);
// 0, 1, ..., n - 1 as a 1-D int64 tensor, for a count `n` that is a 0-d int64 value.
Value iota(Builder& b, Value n);

// An ONNX Reduce* op (ReduceMean, ReduceMax, ...) over `axes` (every axis when absent). The axes
// are an input from opset 18 (ReduceSum: 13), an attribute before.
Value reduce(Builder& b, OpType op, Value x, const std::optional<std::vector<int64_t>>& axes, bool keepdims);
inline Value reduce_mean_keepdims(Builder& b, Value x, const std::vector<int64_t>& axes) {
  return reduce(b, "ReduceMean", x, axes, true);
}

// Runs `op` on `x` with a batch axis added when `x` has `batched_rank - 1` dims (torch accepts
// unbatched inputs; ONNX's spatial ops need the batch), removing it again afterwards.
Value with_batch(Builder& b, Value x, int64_t batched_rank, const std::function<Value(Value)>& op);

}  // namespace fastonnx
