// Binary arithmetic that one ONNX op per overload does not express: bool arithmetic (ONNX's
// Add/Mul take no bool), division with rounding, Python's remainder, integer powers, atan2 and
// lerp. Each computes in the dtype torch computes in (the node's output dtype).
#include <cmath>
#include <numbers>

#include "common.h"
#include "converters_arithmetic.h"

namespace fastonnx {

// A Python number operand as a tensor in the dtype torch computes `self` op number in.
Value computed_scalar(Builder& b, Value self, const Scalar& value) { return b.scalar(value, b.compute_dtype(self)); }

// self + alpha * other. torch's + on bool is `or` (and alpha, a bool then, is True or False).
Value add(Builder& b, Value self, Value other, const Scalar& alpha) {
  const ScalarType dtype = b.compute_dtype(self, other);
  self = b.cast(self, dtype);
  other = b.cast(other, dtype);
  if (dtype == ScalarType::Bool) {
    if (!alpha.is_static()) return b.op<"Or">({self, b.op<"And">({other, b.scalar(alpha, dtype)})});
    return alpha.to_double() != 0 ? b.op<"Or">({self, other}) : self;
  }
  if (alpha != int64_t{1}) other = b.op<"Mul">({other, b.scalar(alpha, dtype)});
  return b.op<"Add">({self, other});
}

namespace {

// Part 0 (real) or 1 (imaginary) of a complex value, as a real tensor of its shape.
Value complex_part(Builder& b, Value complex, int64_t index) {
  return b.op<"Gather">({b.as_real(complex), b.scalar(index, ScalarType::Long)}, {Attr::i("axis", -1)});
}

// (a + bi)(c + di) = (ac - bd) + (ad + bc)i, on the (real, imaginary) pairs (rotary embeddings
// written with complex numbers, as llama4's, multiply so).
Value complex_mul(Builder& b, Value self, Value other) {
  b.accept_complex_pairs();
  const Value a = complex_part(b, self, 0), bi = complex_part(b, self, 1);
  const Value c = complex_part(b, other, 0), di = complex_part(b, other, 1);
  const Value re = b.op<"Sub">({b.op<"Mul">({a, c}), b.op<"Mul">({bi, di})});
  const Value im = b.op<"Add">({b.op<"Mul">({a, di}), b.op<"Mul">({bi, c})});
  const Value last = b.ints({-1});
  return b.as_complex(
      b.op<"Concat">({b.op<"Unsqueeze">({re, last}), b.op<"Unsqueeze">({im, last})}, {Attr::i("axis", -1)}));
}

}  // namespace

// torch's * on bool is `and`.
Value mul(Builder& b, Value self, Value other) {
  const ScalarType dtype = b.compute_dtype(self, other);
  self = b.cast(self, dtype);
  other = b.cast(other, dtype);
  if (is_complex(dtype)) return complex_mul(b, self, other);
  return b.op(dtype == ScalarType::Bool ? OpType("And") : OpType("Mul"), {self, other});
}

namespace {

// Whether a nonzero remainder and the divisor differ in sign (Sign is exact, so no product can
// underflow to zero).
Value signs_differ(Builder& b, Value remainder, Value divisor) {
  const Value product = b.op<"Mul">({b.op<"Sign">({remainder}), b.op<"Sign">({divisor})});
  return b.op<"Less">({product, b.scalar_like(0, product)});
}

// Python's remainder on floats, as torch computes it: C's fmod, moved into the divisor's sign
// by adding the divisor when the two differ in sign.
Value float_remainder(Builder& b, Value self, Value other) {
  const Value mod = b.op<"Mod">({self, other}, {Attr::i("fmod", 1)});
  return b.op<"Where">({signs_differ(b, mod, other), b.op<"Add">({mod, other}), mod});
}

// Python's floor division on floats, as torch's div_floor_floating computes it: the quotient
// of self - fmod(self, other), a whole number up to rounding (torch floors it and adds one when
// it was just below; Round does both), minus one where fmod and the divisor differ in sign. A plain Floor(self / other)
// is off by one when the rounded quotient lands on a whole number (1 // 0.1 is 9). Division by zero gives self / other.
// (A zero result can have the other sign than torch's; onnxruntime's Where drops the sign of -0 anyway.)
Value float_floor_divide(Builder& b, Value self, Value other) {
  const Value mod = b.op<"Mod">({self, other}, {Attr::i("fmod", 1)});
  const Value whole = b.op<"Round">({b.op<"Div">({b.op<"Sub">({self, mod}), other})});
  const Value one_less = b.op<"Sub">({whole, b.scalar_like(1, whole)});
  const Value floored = b.op<"Where">({signs_differ(b, mod, other), one_less, whole});
  const Value by_zero = b.op<"Equal">({other, b.scalar_like(0, other)});
  return b.op<"Where">({by_zero, b.op<"Div">({self, other}), floored});
}

// Integers: self - Python's remainder is a multiple of other, so ONNX's (truncating) Div of it
// is exact.
Value int_floor_divide(Builder& b, Value self, Value other) {
  const Value remainder = b.op<"Mod">({self, other});
  return b.op<"Div">({b.op<"Sub">({self, remainder}), other});
}

Value truncate(Builder& b, Value x) {
  const Value negative = b.op<"Less">({x, b.scalar_like(0, x)});
  return b.op<"Where">({negative, b.op<"Ceil">({x}), b.op<"Floor">({x})});
}

}  // namespace

Value divide(Builder& b, Value self, Value other, const std::optional<std::string>& rounding_mode) {
  const ScalarType dtype = b.compute_dtype(self, other);
  self = b.cast(self, dtype);
  other = b.cast(other, dtype);
  if (!rounding_mode) return b.op<"Div">({self, other});
  if (*rounding_mode == "trunc") {
    // ONNX's Div of integers truncates already.
    const Value quotient = b.op<"Div">({self, other});
    return is_floating(dtype) ? truncate(b, quotient) : quotient;
  }
  if (*rounding_mode == "floor") {
    return is_floating(dtype) ? float_floor_divide(b, self, other) : int_floor_divide(b, self, other);
  }
  b.fail("div: rounding_mode must be None, 'trunc' or 'floor', not '" + *rounding_mode + "'");
}

Value remainder(Builder& b, Value self, Value other) {
  const ScalarType dtype = b.compute_dtype(self, other);
  self = b.cast(self, dtype);
  other = b.cast(other, dtype);
  // ONNX's Mod with fmod=0 is Python's remainder, but ONNX allows it only for integers.
  return is_floating(dtype) ? float_remainder(b, self, other) : b.op<"Mod">({self, other});
}

// `base_may_be_zero`/`exponent_may_be_negative`: false when a Scalar argument rules it out.
Value power(Builder& b, Value base, Value exponent, bool base_may_be_zero, bool exponent_may_be_negative) {
  const ScalarType dtype = b.compute_dtype(base, exponent);
  base = b.cast(base, dtype);
  exponent = b.cast(exponent, dtype);
  const Value result = b.op<"Pow">({base, exponent});
  if (is_floating(dtype) || !base_may_be_zero || !exponent_may_be_negative) return result;
  // An integer to a negative power is 1 / base**n rounded toward zero in torch and in
  // onnxruntime alike, except 0 ** -n: torch gives 0, onnxruntime casts inf to an integer.
  const Value zero = b.scalar(0, dtype);
  const Value zero_to_negative = b.op<"And">({b.op<"Equal">({base, zero}), b.op<"Less">({exponent, zero})});
  return b.op<"Where">({zero_to_negative, zero, result});
}

namespace {

// Whether the sign bit of x is set, -0 included (atan2 tells +0 from -0): Min(x, 1/x) is
// negative exactly then, since 1/-0 is -inf (and for -inf, whose reciprocal is -0, x itself
// is). False for NaN.
Value sign_bit(Builder& b, Value x) {
  const Value reciprocal = b.op<"Reciprocal">({x});
  return b.op<"Less">({b.op<"Min">({x, reciprocal}), b.scalar_like(0, x)});
}

}  // namespace

// atan2(y, x) from Atan(y / x), with the quadrant from the signs of x and y as IEEE atan2 has
// it: for x with its sign bit set, ±pi (the sign of y) is added. Where |y| == |x| the ratio is
// ±1, or y itself when both are zero, which keeps 0/0 and inf/inf from being NaN.
Value angle_of(Builder& b, Value y, Value x) {
  const ScalarType dtype = b.compute_dtype(y, x);
  y = b.cast(y, dtype);
  x = b.cast(x, dtype);
  const Value zero = b.scalar(0, dtype);
  const Value ratio_of_signs = b.op<"Mul">({b.op<"Sign">({y}), b.op<"Sign">({x})});
  const Value same_magnitude_ratio = b.op<"Where">({b.op<"Equal">({x, zero}), y, ratio_of_signs});
  const Value same_magnitude = b.op<"Equal">({b.op<"Abs">({y}), b.op<"Abs">({x})});
  const Value ratio = b.op<"Where">({same_magnitude, same_magnitude_ratio, b.op<"Div">({y, x})});
  const Value angle = b.op<"Atan">({ratio});
  const Value half_turn =
      b.op<"Where">({sign_bit(b, y), b.scalar(-std::numbers::pi, dtype), b.scalar(std::numbers::pi, dtype)});
  return b.op<"Where">({sign_bit(b, x), b.op<"Add">({angle, half_turn}), angle});
}

namespace {

// torch's lerp: start + weight * (end - start) for |weight| < 0.5, else
// end - (end - start) * (1 - weight), so that weight 0 gives start and weight 1 end exactly.
Value lerp_small_weight(Builder& b, Value start, Value diff, Value weight) {
  return b.op<"Add">({start, b.op<"Mul">({weight, diff})});
}
Value lerp_large_weight(Builder& b, Value end, Value diff, Value weight) {
  return b.op<"Sub">({end, b.op<"Mul">({diff, b.op<"Sub">({b.scalar_like(1, weight), weight})})});
}

}  // namespace

namespace manual {

Value pow_Tensor_Scalar(Builder& b, Value self, Scalar exponent) {
  const bool may_be_negative = !exponent.is_static() || exponent.to_double() < 0;
  return power(b, self, b.scalar(exponent, b.compute_dtype(self)), true, may_be_negative);
}

Value pow_Scalar(Builder& b, Scalar self, Value exponent) {
  const bool may_be_zero = !self.is_static() || self.to_double() == 0;
  return power(b, b.scalar(self, b.compute_dtype(exponent)), exponent, may_be_zero, true);
}

Value lerp_Scalar(Builder& b, Value self, Value end, Scalar weight) {
  const ScalarType dtype = b.compute_dtype(self, end);
  // A weight the graph computes picks its formula at run time, as a weight tensor does.
  if (!weight.is_static()) return lerp_Tensor(b, self, end, b.scalar(weight, dtype));
  self = b.cast(self, dtype);
  end = b.cast(end, dtype);
  const Value diff = b.op<"Sub">({end, self});
  const Value w = b.scalar(weight, dtype);
  return std::abs(weight.to_double()) < 0.5 ? lerp_small_weight(b, self, diff, w) : lerp_large_weight(b, end, diff, w);
}

Value lerp_Tensor(Builder& b, Value self, Value end, Value weight) {
  const ScalarType dtype = b.compute_dtype(self, end, weight);
  self = b.cast(self, dtype);
  end = b.cast(end, dtype);
  weight = b.cast(weight, dtype);
  const Value diff = b.op<"Sub">({end, self});
  const Value small = b.op<"Less">({b.op<"Abs">({weight}), b.scalar(0.5, dtype)});
  return b.op<"Where">({small, lerp_small_weight(b, self, diff, weight), lerp_large_weight(b, end, diff, weight)});
}

}  // namespace manual
}  // namespace fastonnx
