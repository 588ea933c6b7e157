// Tensor creation: ranges, filled tensors and fills. The element type is the one torch.export
// recorded for the result, which settles torch's defaults (a float Scalar makes float32, an int
// one int64) and explicit dtypes alike.
#include "common.h"
#include "converters_creation.h"

namespace fastonnx {

// A tensor of `size` filled with `value`: a scalar constant, expanded.
Value filled(Builder& b, const Scalar& value, const SymIntList& size) {
  const Value scalar = b.scalar(value, b.out_meta().dtype);
  if (size.empty()) return scalar;
  return b.op<"Expand">({scalar, b.ints(size)});
}

// A tensor of the shape of `like` filled with `value`.
Value filled_like(Builder& b, const Scalar& value, Value like) {
  const Value scalar = b.scalar(value, b.out_meta().dtype);
  if (b.rank(like) == 0) return scalar;
  return b.op<"Expand">({scalar, shape_of(b, like)});
}

// torch's arange: ceil((end - start) / step) elements, element i being start + i * step.
Value range(Builder& b, const Scalar& start, const Scalar& end, const Scalar& step) {
  const ScalarType dtype = b.out_meta().dtype;
  const auto shape = b.out_static_shape();
  if (is_integral(dtype)) {
    // torch takes start, end and step in the integer dtype (truncated toward zero, as Cast
    // does), and ONNX's Range on integers counts max(ceil((limit - start) / delta), 0) elements
    // as torch does; a length torch.export recorded as a number gives the limit directly.
    const Value first = b.scalar(start, ScalarType::Long), delta = b.scalar(step, ScalarType::Long);
    const Value limit = shape && start.is_static() && step.is_static()
                            ? b.long_scalar(start.to_int() + (*shape)[0] * step.to_int())
                            : b.scalar(end, ScalarType::Long);
    return b.cast(b.op<"Range">({first, limit, delta}), dtype);
  }
  // torch computes element i as start + i * step in double (float for half types) and rounds
  // once; a floating Range adds the step up instead, so range over indices.
  const Value from = b.scalar(start, ScalarType::Double), by = b.scalar(step, ScalarType::Double);
  Value length;
  if (shape) {
    length = b.scalar((*shape)[0], ScalarType::Long);
  } else {
    const Value span = b.op<"Div">({b.op<"Sub">({b.scalar(end, ScalarType::Double), from}), by});
    length = b.op<"Max">({b.cast(b.op<"Ceil">({span}), ScalarType::Long), b.scalar(int64_t{0}, ScalarType::Long)});
  }
  const Value index = iota(b, length);
  const Value offset = b.op<"Mul">({b.cast(index, ScalarType::Double), by});
  return b.cast(b.op<"Add">({offset, from}), dtype);
}

// The n x m identity in the node's dtype.
Value identity(Builder& b, const SymInt& n, const SymInt& m) {
  const Value rows = b.op<"Unsqueeze">({iota(b, b.long_scalar(n)), b.ints(std::vector<int64_t>{1})});
  return b.cast(b.op<"Equal">({rows, iota(b, b.long_scalar(m))}), b.out_meta().dtype);
}

}  // namespace fastonnx
