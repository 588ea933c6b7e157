// Unary math ONNX has no operator for (log1p, expm1, erfinv), and the ops whose ONNX form
// depends on the element type (special values, rounding to decimals).
#include <cmath>
#include <limits>
#include <numbers>

#include "common.h"
#include "converters_unary.h"

namespace fastonnx {

namespace {

// The float type an op computes in: the node's output dtype (an integer input is cast to it).
Value to_compute_dtype(Builder& b, Value self) { return b.cast(self, b.compute_dtype(self)); }

Value where(Builder& b, Value cond, Value x, Value y) { return b.op<"Where">({cond, x, y}); }

// |x| < 0.5: where log(1 + x) and exp(x) - 1 lose digits to cancellation, and where Kahan's
// corrections below are safe from overflow (outside it they are not needed).
Value near_zero(Builder& b, Value x) { return b.op<"Less">({b.op<"Abs">({x}), b.scalar_like(0.5, x)}); }

}  // namespace

// A bool tensor of False shaped like `x`.
Value all_false_like(Builder& b, Value x) {
  return b.op<"Expand">({b.scalar(Scalar(false), ScalarType::Bool), b.op<"Shape">({x})});
}

namespace {

// The largest finite value of a float dtype, nan_to_num's default for infinities.
double largest_finite(Builder& b, ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Half:
      return 65504.0;
    case ScalarType::BFloat16:
      return 3.3895313892515355e38;
    case ScalarType::Float:
      return std::numeric_limits<float>::max();
    case ScalarType::Double:
      return std::numeric_limits<double>::max();
    default:
      b.fail(std::string("nan_to_num has no largest value for dtype ") + dtype_name(dtype));
  }
}

}  // namespace

namespace manual {

// log1p(x) = x * log(u) / (u - 1) with u = 1 + x (Kahan): the rounding error of u cancels
// between log(u) and u - 1, and u == 1 means log1p(x) == x to working precision.
Value log1p(Builder& b, Value self) {
  const Value x = to_compute_dtype(b, self);
  const Value one = b.scalar_like(1.0, x);
  const Value u = b.op<"Add">({x, one});
  const Value log_u = b.op<"Log">({u});
  const Value corrected = b.op<"Div">({b.op<"Mul">({x, log_u}), b.op<"Sub">({u, one})});
  const Value small = where(b, b.op<"Equal">({u, one}), x, corrected);
  return where(b, near_zero(b, x), small, log_u);
}

// expm1(x) = (u - 1) * x / log(u) with u = exp(x) (Kahan), exact where u == 1.
Value expm1(Builder& b, Value self) {
  const Value x = to_compute_dtype(b, self);
  const Value one = b.scalar_like(1.0, x);
  const Value u = b.op<"Exp">({x});
  const Value u_minus_1 = b.op<"Sub">({u, one});
  const Value corrected = b.op<"Div">({b.op<"Mul">({u_minus_1, x}), b.op<"Log">({u})});
  const Value small = where(b, b.op<"Equal">({u, one}), x, corrected);
  return where(b, near_zero(b, x), small, u_minus_1);
}

// torch's calc_erfinv: a rational approximation (central range |y| <= 0.7, and the tails), two
// Newton steps on erf, and +-inf at +-1. |y| > 1 gives NaN through the log of a negative number.
Value erfinv(Builder& b, Value self) {
  const Value y = to_compute_dtype(b, self);
  const auto c = [&](double v) { return b.scalar_like(v, y); };
  const auto add = [&](Value p, Value q) { return b.op<"Add">({p, q}); };
  const auto mul = [&](Value p, Value q) { return b.op<"Mul">({p, q}); };
  const auto div = [&](Value p, Value q) { return b.op<"Div">({p, q}); };
  // Horner's rule from the highest coefficient down.
  const auto poly = [&](Value z, std::initializer_list<double> coefficients) {
    auto it = coefficients.begin();
    Value acc = c(*it);
    for (++it; it != coefficients.end(); ++it) acc = add(mul(acc, z), c(*it));
    return acc;
  };
  const Value y_abs = b.op<"Abs">({y});

  const Value z_central = mul(y, y);
  const Value central = div(mul(y, poly(z_central, {-0.140543331, 0.914624893, -1.645349621, 0.886226899})),
                            poly(z_central, {0.012229801, -0.329097515, 1.442710462, -2.118377725, 1.0}));
  const Value z_tail = b.op<"Sqrt">({b.op<"Neg">({b.op<"Log">({div(b.op<"Sub">({c(1.0), y_abs}), c(2.0))})})});
  const Value tail = div(mul(b.op<"Sign">({y}), poly(z_tail, {1.641345311, 3.429567803, -1.624906493, -1.970840454})),
                         poly(z_tail, {1.637067800, 3.543889200, 1.0}));
  Value x = where(b, b.op<"LessOrEqual">({y_abs, c(0.7)}), central, tail);

  const Value two_over_sqrt_pi = c(2.0 / std::sqrt(std::numbers::pi));
  for (int step = 0; step < 2; ++step) {
    const Value slope = mul(two_over_sqrt_pi, b.op<"Exp">({b.op<"Neg">({mul(x, x)})}));
    x = b.op<"Sub">({x, div(b.op<"Sub">({b.op<"Erf">({x}), y}), slope)});
  }
  const Value signed_inf = mul(b.op<"Sign">({y}), c(std::numeric_limits<double>::infinity()));
  return where(b, b.op<"Equal">({y_abs, c(1.0)}), signed_inf, x);
}

Value logit(Builder& b, Value self, std::optional<double> eps) {
  Value x = to_compute_dtype(b, self);
  if (eps && *eps >= 0) {
    const Value lo = b.scalar_like(*eps, x);
    // 1 - eps in the tensor's dtype, as torch computes it.
    const Value hi = b.op<"Sub">({b.scalar_like(1.0, x), lo});
    if (*eps <= 0.5) {
      x = b.op<"Clip">({x, lo, hi});
    } else {
      // The bounds cross: torch's kernel takes x < lo ? lo : (x > hi ? hi : x), where Clip would
      // give hi everywhere (eps 0.6: logit 0.405 below 0.6, -0.405 from it; NaN stays NaN).
      const Value above = b.op<"Where">({b.op<"Greater">({x, hi}), hi, x});
      x = b.op<"Where">({b.op<"Less">({x, lo}), lo, above});
    }
  }
  return b.op<"Log">({b.op<"Div">({x, b.op<"Sub">({b.scalar_like(1.0, x), x})})});
}

// torch scales by 10^|decimals| in its compute type, which is float32 for float16 and bfloat16:
// x * 10^decimals overflows 16-bit floats long before the rounded result does, so those are
// scaled in float32 and cast back.
Value round_decimals(Builder& b, Value self, int64_t decimals) {
  const ScalarType dtype = b.dtype(self);
  if (!is_floating(dtype)) b.fail(std::string("round with decimals has no ") + dtype_name(dtype) + " version in torch");
  const bool half_width = element_size(dtype) == 2;
  const Value x = half_width ? b.cast(self, ScalarType::Float) : self;
  const Value scale = b.scalar_like(std::pow(10.0, static_cast<double>(std::abs(decimals))), x);
  const Value rounded = decimals > 0 ? b.op<"Div">({b.op<"Round">({b.op<"Mul">({x, scale})}), scale})
                                     : b.op<"Mul">({b.op<"Round">({b.op<"Div">({x, scale})}), scale});
  return b.cast(rounded, dtype);
}

Value nan_to_num(Builder& b, Value self, std::optional<double> nan, std::optional<double> posinf,
                 std::optional<double> neginf) {
  const ScalarType dtype = b.dtype(self);
  if (!is_floating(dtype)) return self;  // integers hold no NaN or infinity
  const double largest = largest_finite(b, dtype);
  const Value inf = b.scalar_like(std::numeric_limits<double>::infinity(), self);
  const Value minus_inf = b.scalar_like(-std::numeric_limits<double>::infinity(), self);
  Value out = where(b, b.op<"IsNaN">({self}), b.scalar_like(nan.value_or(0.0), self), self);
  out = where(b, b.op<"Equal">({self, inf}), b.scalar_like(posinf.value_or(largest), self), out);
  return where(b, b.op<"Equal">({self, minus_inf}), b.scalar_like(neginf.value_or(-largest), self), out);
}

}  // namespace manual
}  // namespace fastonnx
