// embedding_bag: the sum, mean or maximum of the embedding rows of each bag of indices, bag b
// holding positions [offsets[b], offsets[b + 1]). Segment reductions are scatters with a
// reduction (add from opset 16, max from 18); before those, a dense (bags x positions)
// membership matrix. And embedding_renorm, the table whose rows an embedding reads rescaled.
#include <array>
#include <limits>
#include <string>
#include <utility>

#include "common.h"
#include "converters_nn.h"
#include "converters_vision.h"
#include "reduction.h"

namespace fastonnx {

namespace {

constexpr int64_t kSum = 0, kMean = 1, kMax = 2;

Value unsqueeze(Builder& b, Value x, int64_t axis) {
  return b.op<"Unsqueeze">({x, b.ints(std::vector<int64_t>{axis})});
}

Value squeeze0(Builder& b, Value x) { return b.op<"Squeeze">({x, b.ints(std::vector<int64_t>{0})}); }

// 0, 1, ..., length - 1 for a 1-element int64 `length`.
Value range(Builder& b, Value length) { return iota(b, squeeze0(b, length)); }

// onnxruntime has no float16 scatter with a reduction; float32 holds every float16 value.
ScalarType scatter_type(ScalarType t) {
  return t == ScalarType::Half || t == ScalarType::BFloat16 ? ScalarType::Float : t;
}

// ScatterND of `updates` (positions, D) into rows `bag_of` of `init` (bags, D) with `reduction`.
Value scatter_rows(Builder& b, Value init, Value bag_of, Value updates, const char* reduction) {
  const ScalarType t = b.dtype(updates), wide = scatter_type(t);
  const Value out = b.op<"ScatterND">({b.cast(init, wide), unsqueeze(b, bag_of, 1), b.cast(updates, wide)},
                                      {Attr::s("reduction", reduction)});
  return b.cast(out, t);
}

// The values the reductions share.
struct Bags {
  Value index;      // the indices, int64
  Value positions;  // 0, 1, ..., positions - 1
  Value positions_shape, bags_shape;
  Value rows_shape;              // (bags, D)
  std::optional<Value> valid;    // the positions that count; all when absent
  Value bag_of;                  // the bag of each position
  std::optional<Value> members;  // (bags, positions) membership, where no scatter reduction exists
};

// The positions that count: not padding_idx, and before the last offset when it is given.
std::optional<Value> counted_positions(Builder& b, const Bags& bags, Value bounds, bool include_last_offset,
                                       const std::optional<Value>& padding_idx) {
  std::optional<Value> valid;
  if (padding_idx) valid = b.op<"Not">({b.op<"Equal">({bags.index, *padding_idx})});
  if (include_last_offset) {
    const Value end = b.op<"Slice">(
        {bounds, b.ints(std::vector<int64_t>{-1}), b.ints(std::vector<int64_t>{std::numeric_limits<int64_t>::max()})});
    const Value before_end = b.op<"Less">({bags.positions, end});
    valid = valid ? b.op<"And">({*valid, before_end}) : before_end;
  }
  return valid;
}

// The bag of each position: how many bags start at or before it, minus one.
Value bag_of_positions(Builder& b, const Bags& bags, Value starts) {
  if (b.opset() >= 16) {
    const Value slots = b.op<"Add">({bags.positions_shape, b.ints(std::vector<int64_t>{1})});  // a start may be the end
    const Value marks = b.op<"ScatterElements">(
        {b.op<"Expand">({b.long_scalar(0), slots}), starts, b.op<"Expand">({b.long_scalar(1), bags.bags_shape})},
        {Attr::i("axis", 0), Attr::s("reduction", "add")});
    const Value started = b.op<"CumSum">({marks, b.long_scalar(0)});
    return b.op<"Sub">({b.op<"Slice">({started, b.ints(std::vector<int64_t>{0}), b.ints(std::vector<int64_t>{-1})}),
                        b.long_scalar(1)});
  }
  const Value started = b.op<"LessOrEqual">({unsqueeze(b, starts, 0), unsqueeze(b, bags.positions, 1)});
  return b.op<"Sub">(
      {reduce(b, "ReduceSum", b.cast(started, ScalarType::Long), std::vector<int64_t>{1}, false), b.long_scalar(1)});
}

// (bags, positions): position p counts in bag b. Only built where no scatter reduction exists.
std::optional<Value> membership(Builder& b, const Bags& bags, int64_t mode) {
  const bool dense_sum = b.opset() < 16, dense_max = b.opset() < 18;
  if (!((mode == kMax && dense_max) || (mode != kMax && dense_sum))) return std::nullopt;
  Value m = b.op<"Equal">({unsqueeze(b, range(b, bags.bags_shape), 1), unsqueeze(b, bags.bag_of, 0)});
  return bags.valid ? b.op<"And">({m, unsqueeze(b, *bags.valid, 0)}) : m;
}

// Positions counted per bag.
Value bag_counts(Builder& b, const Bags& bags) {
  if (bags.members) {
    return reduce(b, "ReduceSum", b.cast(*bags.members, ScalarType::Long), std::vector<int64_t>{1}, false);
  }
  const Value ones =
      bags.valid ? b.cast(*bags.valid, ScalarType::Long) : b.op<"Expand">({b.long_scalar(1), bags.positions_shape});
  return b.op<"ScatterElements">({b.op<"Expand">({b.long_scalar(0), bags.bags_shape}), bags.bag_of, ones},
                                 {Attr::i("axis", 0), Attr::s("reduction", "add")});
}

// The sum of the counted rows of each bag.
Value sum_bags(Builder& b, const Bags& bags, Value rows, Value zero, ScalarType dtype) {
  if (bags.members) return b.op<"MatMul">({b.cast(*bags.members, dtype), rows});
  const Value counted = bags.valid ? b.op<"Where">({unsqueeze(b, *bags.valid, 1), rows, zero}) : rows;
  return scatter_rows(b, b.op<"Expand">({zero, bags.rows_shape}), bags.bag_of, counted, "add");
}

// The maximum of the counted rows of each bag and the index it is at. Empty bags are 0 with
// index 0; ties go to the first position, as torch scans.
std::pair<Value, Value> max_bags(Builder& b, const Bags& bags, Value rows, Value nonempty, Value zero,
                                 ScalarType dtype) {
  const Value lowest = b.scalar(Scalar(-std::numeric_limits<double>::infinity()), dtype);
  Value result, first;
  if (bags.members) {
    const Value masked = b.op<"Where">({unsqueeze(b, *bags.members, 2), unsqueeze(b, rows, 0), lowest});
    result = reduce(b, "ReduceMax", masked, std::vector<int64_t>{1}, false);
    first = b.op<"ArgMax">({masked}, {Attr::i("axis", 1), Attr::i("keepdims", 0)});
  } else {
    const Value counted = bags.valid ? b.op<"Where">({unsqueeze(b, *bags.valid, 1), rows, lowest}) : rows;
    result = scatter_rows(b, b.op<"Expand">({lowest, bags.rows_shape}), bags.bag_of, counted, "max");
    Value at_max = b.op<"Equal">({counted, b.op<"Gather">({result, bags.bag_of})});
    if (bags.valid) at_max = b.op<"And">({at_max, unsqueeze(b, *bags.valid, 1)});
    const Value past_end = squeeze0(b, bags.positions_shape);
    const Value candidate = b.op<"Where">({at_max, unsqueeze(b, bags.positions, 1), past_end});
    first = b.op<"ScatterND">({b.op<"Expand">({past_end, bags.rows_shape}), unsqueeze(b, bags.bag_of, 1), candidate},
                              {Attr::s("reduction", "min")});
  }
  result = b.op<"Where">({nonempty, result, zero});
  // An empty bag's first position is one past the end: a 0 appended there.
  const Value chosen =
      b.op<"Gather">({b.op<"Concat">({bags.index, b.ints(std::vector<int64_t>{0})}, {Attr::i("axis", 0)}), first});
  return {result, b.op<"Where">({nonempty, chosen, b.long_scalar(0)})};
}

// The result and what torch returns besides it (used by its backward): offset2bag (empty when it
// needs none), bag_size (filled for mean and max only) and max_indices (for max; mean
// repeats bag_size).
// Where torch leaves them unfilled, their sizes vary with its code path: the recorded ones are
// kept. Each is a node of its own, so the sizes torch records for it (with include_last_offset
// they can disagree with its eager results) stay off the values the result is computed from.
std::array<Value, 4> with_torch_outputs(Builder& b, Value result, int64_t mode, const Bags& bags, Value counts,
                                        const std::optional<Value>& max_indices) {
  const auto as_meta = [&](Value v, size_t i) {
    const ScalarType t = b.out_meta(i).dtype;
    return t == b.dtype(v) ? b.op<"Identity">({v}) : b.cast(v, t);
  };
  const auto unfilled = [&](size_t i) {
    const auto recorded = b.out_static_shape(i);
    return b.op<"Expand">({b.long_scalar(0), recorded ? b.ints(*recorded) : bags.bags_shape});
  };
  const auto recorded_offset2bag = b.out_static_shape(1);
  const bool no_offset2bag = recorded_offset2bag && recorded_offset2bag->size() == 1 && (*recorded_offset2bag)[0] == 0;
  const Value offset2bag = no_offset2bag ? unfilled(1) : bags.bag_of;
  const Value bag_size = mode == kSum ? unfilled(2) : counts;
  const Value max_or_size = mode == kSum ? unfilled(3) : max_indices.value_or(counts);
  return {result, as_meta(offset2bag, 1), as_meta(bag_size, 2), as_meta(max_or_size, 3)};
}

}  // namespace

std::array<Value, 4> reduce_bags(Builder& b, Value weight, Value indices, Value offsets, int64_t mode,
                                 const std::optional<Value>& per_sample_weights, bool include_last_offset,
                                 const std::optional<Value>& padding_idx) {
  if (b.rank(indices) != 1) {
    b.fail("embedding_bag takes 1-D indices with offsets (torch.nn.functional.embedding_bag flattens 2-D ones)");
  }
  if (mode != kSum && mode != kMean && mode != kMax) b.fail("unknown embedding_bag mode " + std::to_string(mode));
  const ScalarType dtype = b.dtype(weight);
  Bags bags;
  bags.index = b.cast(indices, ScalarType::Long);
  const Value bounds = b.cast(offsets, ScalarType::Long);
  const Value starts = include_last_offset
                           ? b.op<"Slice">({bounds, b.ints(std::vector<int64_t>{0}), b.ints(std::vector<int64_t>{-1})})
                           : bounds;
  bags.positions_shape = b.op<"Shape">({bags.index});
  bags.bags_shape = b.op<"Shape">({starts});
  bags.positions = range(b, bags.positions_shape);
  const Value width =
      b.op<"Slice">({b.op<"Shape">({weight}), b.ints(std::vector<int64_t>{1}), b.ints(std::vector<int64_t>{2})});
  bags.rows_shape = b.op<"Concat">({bags.bags_shape, width}, {Attr::i("axis", 0)});
  const Value zero = b.scalar(Scalar(0.0), dtype);
  bags.valid = counted_positions(b, bags, bounds, include_last_offset, padding_idx);
  bags.bag_of = bag_of_positions(b, bags, starts);
  bags.members = membership(b, bags, mode);
  const Value counts = bag_counts(b, bags);
  const Value nonempty = unsqueeze(b, b.op<"Greater">({counts, b.long_scalar(0)}), 1);

  Value rows = b.op<"Gather">({weight, bags.index});
  if (per_sample_weights) {
    if (mode != kSum) b.fail("embedding_bag takes per_sample_weights only in sum mode");
    rows = b.op<"Mul">({rows, unsqueeze(b, *per_sample_weights, 1)});
  }
  if (mode == kMax) {
    const auto [result, max_indices] = max_bags(b, bags, rows, nonempty, zero, dtype);
    return with_torch_outputs(b, result, mode, bags, counts, max_indices);
  }
  Value result = sum_bags(b, bags, rows, zero, dtype);
  if (mode == kMean) {
    const Value divisor = b.cast(b.op<"Max">({counts, b.long_scalar(1)}), dtype);  // empty bags stay 0
    result = b.op<"Div">({result, unsqueeze(b, divisor, 1)});
  }
  return with_torch_outputs(b, result, mode, bags, counts, std::nullopt);
}

namespace manual {

// The rows of `self` that `indices` reads, scaled to a `norm_type`-norm of at most `max_norm` (by
// max_norm / (norm + 1e-7), as torch scales them); the other rows as they are: each row's scale
// (1 when not read) is scattered to the rows read.
Value embedding_renorm(Builder& b, Value self, Value indices, double max_norm, double norm_type) {
  const Value rows = b.op<"Reshape">({indices, b.ints({-1})});
  const Value norms = vector_norm(b, self, norm_type, std::vector<int64_t>{1}, false);
  const Value limit = b.scalar_like(max_norm, norms);
  const Value one = b.scalar_like(1.0, norms);
  const Value shrink = b.op<"Div">({limit, b.op<"Add">({norms, b.scalar_like(1e-7, norms)})});
  const Value scale = b.op<"Where">({b.op<"Greater">({norms, limit}), shrink, one});
  const Value ones = b.op<"Expand">({one, b.op<"Shape">({norms})});
  const Value read = b.op<"ScatterElements">({ones, rows, b.op<"Gather">({scale, rows})}, {Attr::i("axis", 0)});
  return b.op<"Mul">({self, b.op<"Unsqueeze">({read, b.ints({1})})});
}

// A negative padding_idx counts from the end of the embedding table here (whose length is read
// at run time when it is dynamic).
std::array<Value, 4> embedding_bag_padding_idx(Builder& b, Value weight, Value indices, Value offsets, bool,
                                               int64_t mode, bool, std::optional<Value> per_sample_weights,
                                               bool include_last_offset, std::optional<int64_t> padding_idx) {
  std::optional<Value> padding;
  if (padding_idx) {
    padding = b.long_scalar(*padding_idx);
    if (*padding_idx < 0) padding = b.op<"Add">({scalar_size_along(b, weight, 0), *padding});
  }
  return reduce_bags(b, weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding);
}

// A negative padding_idx means none here.
std::array<Value, 4> _embedding_bag(Builder& b, Value weight, Value indices, Value offsets, bool, int64_t mode, bool,
                                    std::optional<Value> per_sample_weights, bool include_last_offset,
                                    int64_t padding_idx) {
  std::optional<Value> padding;
  if (padding_idx >= 0) padding = b.long_scalar(padding_idx);
  return reduce_bags(b, weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding);
}

}  // namespace manual
}  // namespace fastonnx
