#include "common.h"

#include <algorithm>
#include <string>

namespace fastonnx {

int64_t wrap_dim(Builder& b, int64_t dim, int64_t rank) {
  const int64_t r = rank == 0 ? 1 : rank;  // torch lets a scalar be indexed with dim 0 or -1
  if (dim < -r || dim >= r) {
    b.fail("dimension " + std::to_string(dim) + " is out of range for a tensor of rank " + std::to_string(rank));
  }
  return dim < 0 ? dim + r : dim;
}

std::optional<int64_t> known_size(Builder& b, Value x, int64_t axis) {
  if (!b.has_shape(x)) return std::nullopt;
  const Dim& d = b.shape(x)[static_cast<size_t>(axis)];
  if (!d.is_static()) return std::nullopt;
  return d.value;
}

Value iota(Builder& b, Value n) {
  return b.op<"Range">({b.scalar(int64_t{0}, ScalarType::Long), n, b.scalar(int64_t{1}, ScalarType::Long)});
}

namespace {

// Reshape to a static shape. ONNX's 0 copies the input's size unless allowzero is set (opset
// 14); before that, an empty result is an empty tensor broadcast to the shape.
Value reshape_static(Builder& b, Value x, const std::vector<int64_t>& shape) {
  const auto zero = std::find(shape.begin(), shape.end(), 0);
  if (zero == shape.end()) return b.op<"Reshape">({x, b.ints(shape)});
  if (b.opset() >= 14) return b.op<"Reshape">({x, b.ints(shape)}, {Attr::i("allowzero", 1)});
  std::vector<int64_t> ones(shape.size(), 1);
  ones[zero - shape.begin()] = -1;
  return b.op<"Expand">({b.op<"Reshape">({x, b.ints(ones)}), b.ints(shape)});
}

}  // namespace

Value reshape_to_output(Builder& b, Value x, const SymIntList& size) {
  if (auto out = b.out_static_shape()) {
    if (b.static_shape(x) == *out) return x;
    return reshape_static(b, x, *out);
  }
  bool has_zero = false, has_minus_one = false;
  for (const SymInt& s : size) {
    has_zero = has_zero || (s.is_static() && s.value == 0);
    has_minus_one = has_minus_one || (s.is_static() && s.value == -1);
  }
  Attrs attrs;
  if (has_zero) {
    if (has_minus_one || b.opset() < 14) b.fail("a dynamic reshape with both 0 and -1 sizes has no ONNX form");
    attrs.push_back(Attr::i("allowzero", 1));
  }
  return b.op<"Reshape">({x, b.ints(size)}, attrs);
}

Value shape_of(Builder& b, Value x) {
  if (auto shape = b.static_shape(x)) return b.ints(*shape);
  return b.op<"Shape">({x});
}

SymInt size_at(Builder& b, Value x, int64_t dim) {
  // wrap_dim lets dim 0 through on a 0-d tensor (as torch does for reductions), but a 0-d
  // tensor has no size to read: torch rejects that too.
  if (dim >= b.rank(x)) {
    b.fail("a tensor of rank " + std::to_string(b.rank(x)) + " has no dimension " + std::to_string(dim));
  }
  if (const auto size = known_size(b, x, dim)) return SymInt(*size);
  return SymInt(scalar_size_along(b, x, dim));
}

Value sizes_between(Builder& b, Value x, int64_t start, int64_t end) {
  std::vector<int64_t> sizes;
  for (int64_t axis = start; axis < end; ++axis) {
    const auto size = known_size(b, x, axis);
    if (!size) {
      return b.op<"Slice">(
          {b.op<"Shape">({x}), b.ints(std::vector<int64_t>{start}), b.ints(std::vector<int64_t>{end})});
    }
    sizes.push_back(*size);
  }
  return b.ints(sizes);
}

Value scalar_size_along(Builder& b, Value x, int64_t axis) {
  if (const auto size = known_size(b, x, axis)) return b.scalar(*size, ScalarType::Long);
  return b.op<"Gather">({b.op<"Shape">({x}), b.scalar(axis, ScalarType::Long)}, {Attr::i("axis", 0)});
}

Value join_sizes(Builder& b, const std::vector<Value>& parts) {
  if (parts.size() == 1) return parts.front();
  return b.op<"Concat">(spread(parts), {Attr::i("axis", 0)});
}

Value reshape_to(Builder& b, Value x, Value shape) {
  if (b.opset() >= 14) return b.op<"Reshape">({x, shape}, {Attr::i("allowzero", 1)});
  return b.op<"Reshape">({x, shape});
}

Value reduce(Builder& b, OpType op, Value x, const std::optional<std::vector<int64_t>>& axes, bool keepdims) {
  const Attr keep = Attr::i("keepdims", keepdims);
  if (!axes) return b.op(op, {x}, {keep});
  if (b.opset() >= 18 || op == "ReduceSum") return b.op(op, {x, b.ints(*axes)}, {keep});
  return b.op(op, {x}, {Attr::ints("axes", *axes), keep});
}

Value with_batch(Builder& b, Value x, int64_t batched_rank, const std::function<Value(Value)>& op) {
  if (b.rank(x) == batched_rank) return op(x);
  if (b.rank(x) != batched_rank - 1) {
    b.fail("expected a tensor of rank " + std::to_string(batched_rank) + " or " + std::to_string(batched_rank - 1) +
           ", got rank " + std::to_string(b.rank(x)));
  }
  const Value axes = b.ints(std::vector<int64_t>{0});
  return b.op<"Squeeze">({op(b.op<"Unsqueeze">({x, axes})), axes});
}

Value cast(Builder& b, Value x, ScalarType dtype) { return b.cast(x, dtype); }

ScalarType dtype_of(Builder& b, Value x) { return b.dtype(x); }

Value scalar(Builder& b, const Scalar& value, ScalarType dtype) { return b.scalar(value, dtype); }

Value as_real(Builder& b, Value x) { return b.as_real(x); }

Value as_complex(Builder& b, Value x) { return b.as_complex(x); }

ScalarType output_dtype(Builder& b, int64_t index) { return b.out_meta(static_cast<size_t>(index)).dtype; }

}  // namespace fastonnx
