// Shared pieces of the hand-written converter bodies.
#pragma once

#include <functional>
#include <vector>

#include "converters.h"

namespace fastonnx {

// A torch dim (possibly negative) as an index in [0, rank).
int64_t wrap_dim(Builder& b, int64_t dim, int64_t rank);

// Reshape to the shape torch.export recorded for the node's output (static), or to `size` when
// that shape is dynamic. Returns `x` itself when the shape does not change.
Value reshape_to_output(Builder& b, Value x, const SymIntList& size);

// ReduceMean over `axes`, keeping them (the axes are an input from opset 18, an attribute before).
Value reduce_mean_keepdims(Builder& b, Value x, const std::vector<int64_t>& axes);

// Runs `op` on `x` with a batch axis added when `x` has `batched_rank - 1` dims (torch accepts
// unbatched inputs; ONNX's spatial ops need the batch), removing it again afterwards.
Value with_batch(Builder& b, Value x, int64_t batched_rank, const std::function<Value(Value)>& op);

}  // namespace fastonnx
