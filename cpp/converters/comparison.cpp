// Comparisons, logical and bitwise ops, and selection (where, masked_fill, maximum/minimum,
// clamp). Written by hand for bool, which torch treats like any other dtype here but ONNX does
// not: Greater/Less*, Max/Min and the Bitwise* ops take no bool, and onnxruntime has no bool
// Where; and because a comparison with a Python number promotes with it (`x > 2.5` on int64
// compares in float).
#include <cmath>

#include "common.h"
#include "converters_comparison.h"

namespace fastonnx {
namespace {

// torch's result_type(tensor, number) for a Python number: the tensor's dtype unless the number
// is of a higher category (bool < integer < floating), then the default dtype of that category.
ScalarType result_type_with_number(Builder& b, Value tensor, const Scalar& number) {
  const ScalarType dtype = b.dtype(tensor);
  if (is_floating(dtype)) return dtype;
  if (number.is_floating()) return ScalarType::Float;
  if (dtype == ScalarType::Bool && !number.is_bool()) return ScalarType::Long;
  return dtype;
}

// ONNX `op` (Equal, Greater, ...) on x and y in `dtype`. Only Equal takes bool; uint8 orders
// false and true the same way.
Value compare(Builder& b, OpType op, Value x, Value y, ScalarType dtype) {
  if (dtype == ScalarType::Bool && op != "Equal") dtype = ScalarType::Byte;
  return b.op(op, {b.cast(x, dtype), b.cast(y, dtype)});
}

// The 64 bits of an integer tensor as int64 zeros and ones in a new last axis (bit k at index k).
// Through uint64, which BitShift (since opset 11) and Mod take: the Cast sign-extends a
// narrower signed type, whose low bits are then those of the original.
Value bits_of(Builder& b, Value x) {
  std::vector<Scalar> shifts;
  for (int64_t k = 0; k < 64; ++k) shifts.push_back(Scalar(k));
  const Value wide = b.op<"Unsqueeze">({b.cast(x, ScalarType::UInt64), b.ints(std::vector<int64_t>{-1})});
  const Value shifted = b.op<"BitShift">({wide, b.list(shifts, ScalarType::UInt64)}, {Attr::s("direction", "RIGHT")});
  return b.cast(b.op<"Mod">({shifted, b.scalar(Scalar(int64_t{2}), ScalarType::UInt64)}), ScalarType::Long);
}

// Below opset 18 ONNX has no BitwiseAnd/Or/Xor: the op is done bit by bit on bits_of() (and is
// the product of the bits, or their maximum, xor their absolute difference) and the bits are
// summed back with their two's complement weights, bit 63 weighing -2^63. Each half of 32 bits
// is summed on its own and the halves joined by high * 2^32 + low: onnxruntime's int64 ReduceSum
// is not exact for sums beyond 2^53, and a half's sum stays within 2^32. The Cast to `dtype`
// keeps the low bits, as the result of the narrower op would be.
Value bitwise_by_bits(Builder& b, OpType bitwise_op, Value self, Value other, ScalarType dtype) {
  const Value x = bits_of(b, self), y = bits_of(b, other);
  Value bits;
  if (bitwise_op == "BitwiseAnd") {
    bits = b.op<"Mul">({x, y});
  } else if (bitwise_op == "BitwiseOr") {
    bits = b.op<"Max">({x, y});
  } else {
    bits = b.op<"Abs">({b.op<"Sub">({x, y})});
  }
  const auto half = [&](int64_t begin, bool top) {
    std::vector<Scalar> weights;
    for (int k = 0; k < 32; ++k) weights.push_back(Scalar(int64_t{1} << k));
    if (top) weights.back() = Scalar(-(int64_t{1} << 31));
    const Value slice = b.op<"Slice">({bits, b.ints(std::vector<int64_t>{begin}),
                                       b.ints(std::vector<int64_t>{begin + 32}), b.ints(std::vector<int64_t>{-1})});
    return reduce(b, "ReduceSum", b.op<"Mul">({slice, b.list(weights, ScalarType::Long)}), std::vector<int64_t>{-1},
                  false);
  };
  const Value high = b.op<"Mul">({half(32, true), b.scalar(Scalar(int64_t{1} << 32), ScalarType::Long)});
  return b.cast(b.op<"Add">({high, half(0, false)}), dtype);
}

}  // namespace

Value compare(Builder& b, OpType op, Value self, Value other) {
  return compare(b, op, self, other, b.result_type({self, other}));
}

Value compare(Builder& b, OpType op, Value self, const Scalar& other) {
  const ScalarType dtype = result_type_with_number(b, self, other);
  return compare(b, op, self, b.scalar(other, dtype), dtype);
}

// Logical ops read any dtype as bool (nonzero, NaN included, is true), as ONNX's Cast does.
Value logical(Builder& b, OpType op, Value self, Value other) {
  return b.op(op, {b.cast(self, ScalarType::Bool), b.cast(other, ScalarType::Bool)});
}

// torch's bitwise ops on bool are the logical ones.
Value bitwise(Builder& b, OpType logical_op, OpType bitwise_op, Value self, Value other) {
  const ScalarType dtype = b.compute_dtype(self, other);
  self = b.cast(self, dtype);
  other = b.cast(other, dtype);
  if (dtype == ScalarType::Bool) return b.op(logical_op, {self, other});
  if (b.opset() < 18) return bitwise_by_bits(b, bitwise_op, self, other, dtype);
  return b.op(bitwise_op, {self, other});
}

Value bitwise(Builder& b, OpType logical_op, OpType bitwise_op, Value self, const Scalar& other) {
  return bitwise(b, logical_op, bitwise_op, self, b.scalar(other, b.compute_dtype(self)));
}

// torch's shifts of integers, with its rules for amounts out of range (negative, or not below the
// width): a left shift gives 0, a right shift fills with the sign bit. ONNX's BitShift takes
// unsigned types only, and its result for an amount not below the width is undefined: the values
// are shifted as uint64 (sign- or zero-extended, then truncated back, which is what a shift of
// the narrower type keeps) with the amount held in [0, 63]; a right shift of a negative value is
// that of its complement, complemented (~(~x >> n) is x >> n with the sign bit copied).
Value shift(Builder& b, Value self, Value other, bool left) {
  const ScalarType dtype = b.out_meta().dtype;
  if (!is_integral(dtype)) b.fail(std::string("shifts of ") + dtype_name(dtype) + " values are not supported");
  const Value x = b.cast(b.cast(self, dtype), ScalarType::Long);
  const Value amount = b.cast(other, ScalarType::Long);
  const Value zero = b.scalar(Scalar(int64_t{0}), ScalarType::Long);
  const Value negative_amount = b.op<"Less">({amount, zero});
  const Value held = b.op<"Clip">({amount, zero, b.scalar(Scalar(int64_t{63}), ScalarType::Long)});
  const auto shifted = [&](Value v, Value by) {
    const Attrs direction = {Attr::s("direction", left ? "LEFT" : "RIGHT")};
    const Value bits = b.op<"BitShift">({b.cast(v, ScalarType::UInt64), b.cast(by, ScalarType::UInt64)}, direction);
    return b.cast(bits, ScalarType::Long);
  };
  if (left) {
    const int64_t width = int64_t{8} * element_size(dtype);
    const Value too_far = b.op<"GreaterOrEqual">({amount, b.scalar(Scalar(width), ScalarType::Long)});
    const Value out_of_range = b.op<"Or">({negative_amount, too_far});
    return b.cast(b.op<"Where">({out_of_range, zero, shifted(x, held)}), dtype);
  }
  // A negative amount fills with the sign, as the longest shift does.
  const Value by = b.op<"Where">({negative_amount, b.scalar(Scalar(int64_t{63}), ScalarType::Long), held});
  const Value minus_one = b.scalar(Scalar(int64_t{-1}), ScalarType::Long);
  const Value negative = b.op<"Less">({x, zero});
  const Value magnitude = b.op<"Where">({negative, b.op<"Sub">({minus_one, x}), x});
  const Value down = shifted(magnitude, by);
  return b.cast(b.op<"Where">({negative, b.op<"Sub">({minus_one, down}), down}), dtype);
}

Value shift(Builder& b, Value self, const Scalar& other, bool left) {
  return shift(b, self, b.scalar(other, ScalarType::Long), left);
}

// Where(condition, x, y) in `dtype`; bool goes through uint8, which onnxruntime's Where takes.
Value where_in(Builder& b, Value condition, Value x, Value y, ScalarType dtype) {
  const ScalarType computed = dtype == ScalarType::Bool ? ScalarType::Byte : dtype;
  // torch takes a uint8 condition too (deprecated), nonzero being true, as ONNX's Cast makes it.
  const Value taken = b.cast(condition, ScalarType::Bool);
  return b.cast(b.op<"Where">({taken, b.cast(x, computed), b.cast(y, computed)}), dtype);
}

// The elementwise maximum (`op` Max) or minimum (Min): Max (Min) propagates NaN as torch does;
// on bool it is Or (And).
Value pairwise_extremum(Builder& b, OpType op, Value x, Value y) {
  const ScalarType dtype = b.compute_dtype(x, y);
  x = b.cast(x, dtype);
  y = b.cast(y, dtype);
  if (dtype == ScalarType::Bool) return b.op(op == "Max" ? OpType("Or") : OpType("And"), {x, y});
  return b.op(op, {x, y});
}

// clamp with tensor bounds: min(max(self, lo), hi), NaN anywhere giving NaN.
Value clamp_tensors(Builder& b, Value self, const std::optional<Value>& lo, const std::optional<Value>& hi) {
  const ScalarType dtype = b.compute_dtype(self, lo, hi);
  Value out = b.cast(self, dtype);
  if (lo) out = pairwise_extremum(b, "Max", out, b.cast(*lo, dtype));
  if (hi) out = pairwise_extremum(b, "Min", out, b.cast(*hi, dtype));
  return out;
}

// clamp with number bounds: one Clip, which (like torch) gives `hi` everywhere when lo > hi. A NaN
// bound makes torch's result NaN, which Clip ignores; Max/Min propagate it.
Value clamp_numbers(Builder& b, Value self, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  const ScalarType dtype = b.compute_dtype(self);
  const auto bound = [&](const std::optional<Scalar>& s) -> std::optional<Value> {
    if (!s) return std::nullopt;
    return b.scalar(*s, dtype);
  };
  // A bound the graph computes may be NaN too.
  const auto may_be_nan = [](const std::optional<Scalar>& s) {
    return s && (!s->is_static() || std::isnan(s->to_double()));
  };
  const bool nan_bound = may_be_nan(lo) || may_be_nan(hi);
  if (nan_bound) return clamp_tensors(b, self, bound(lo), bound(hi));
  return b.op<"Clip">({b.cast(self, dtype), bound(lo), bound(hi)});
}

}  // namespace fastonnx
