// Reductions (max/min and their indices, any/all, products, counts, norms, variance) and scans
// along one dim (cumulative sums, products, maxima and log-sum-exp).
//
// torch's conventions, shared by all of them: an absent or empty dim list reduces every dim; a
// 0-d tensor accepts dim 0 or -1 and reduces to itself; bool inputs, which onnxruntime's Reduce*,
// ArgMax, Max and Min kernels do not take, are computed on uint8 0/1 values (exact).
#include <limits>
#include <numeric>

#include "converters_reduction.h"
#include "reduction.h"

namespace fastonnx {

// The ONNX axes of a torch dim list: every axis (nullopt) when the list is absent or empty, or
// when `x` is 0-d.
Axes axes_of(Builder& b, Value x, const Axes& dims) {
  const int64_t rank = b.rank(x);
  std::vector<int64_t> axes;
  for (int64_t d : dims.value_or(std::vector<int64_t>{})) axes.push_back(wrap_dim(b, d, rank));
  if (rank == 0 || axes.empty()) return std::nullopt;
  return axes;
}

Axes axis_of(Builder& b, Value x, int64_t dim) { return axes_of(b, x, std::vector<int64_t>{dim}); }

namespace {

// The axes spelled out: every axis of `x` for nullopt.
std::vector<int64_t> explicit_axes(Builder& b, Value x, const Axes& axes) {
  if (axes) return *axes;
  std::vector<int64_t> all(static_cast<size_t>(b.rank(x)));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

// Removes the reduced axes of a value reduced from `x` with keepdims=1.
Value drop_axes(Builder& b, Value kept, Value x, const Axes& axes) {
  if (b.rank(x) == 0) return kept;
  return b.op<"Squeeze">({kept, b.ints(explicit_axes(b, x, axes))});
}

// Truth values as uint8 0/1, which every Reduce*, ArgMax, Max and Min kernel takes.
Value as_bits(Builder& b, Value x) { return b.cast(b.cast(x, ScalarType::Bool), ScalarType::Byte); }

// `x` in a dtype the order-based kernels take: bool as uint8 bits.
Value orderable(Builder& b, Value x) { return b.dtype(x) == ScalarType::Bool ? as_bits(b, x) : x; }

}  // namespace

// ReduceMax or ReduceMin of `x` in torch's dtype.
Value reduce_extremum(Builder& b, OpType op, Value x, const Axes& axes, bool keepdim) {
  return b.cast(reduce(b, op, orderable(b, x), axes, keepdim), b.dtype(x));
}

Value any_of(Builder& b, Value x, const Axes& axes, bool keepdim) {
  // Over no elements ReduceMax gives uint8's minimum, 0: false, as torch's any.
  return b.cast(reduce(b, "ReduceMax", as_bits(b, x), axes, keepdim), ScalarType::Bool);
}

Value all_of(Builder& b, Value x, const Axes& axes, bool keepdim) {
  // Over no elements ReduceMin gives uint8's maximum: true, as torch's all.
  return b.cast(reduce(b, "ReduceMin", as_bits(b, x), axes, keepdim), ScalarType::Bool);
}

// max.dim/min.dim: the extreme values (`reduce_op`) and the first index at which they occur
// (`arg_op`).
std::array<Value, 2> extremum_with_index(Builder& b, OpType reduce_op, OpType arg_op, Value self, int64_t dim,
                                         bool keepdim) {
  const int64_t rank = b.rank(self);
  const int64_t axis = wrap_dim(b, dim, rank);
  if (rank == 0) return {self, b.scalar(int64_t{0}, ScalarType::Long)};
  const Value x = orderable(b, self);
  const Value values = reduce(b, reduce_op, x, std::vector<int64_t>{axis}, keepdim);
  const Value indices =
      b.op(arg_op, {x}, {Attr::i("axis", axis), Attr::i("keepdims", keepdim), Attr::i("select_last_index", 0)});
  return {b.cast(values, b.dtype(self)), indices};
}

// argmax/argmin (`op`): the first index of the extremum along `dim`, or in the flattened tensor.
Value arg_extremum(Builder& b, OpType op, Value self, std::optional<int64_t> dim, bool keepdim) {
  const int64_t rank = b.rank(self);
  const Value x = orderable(b, self);
  if (!dim) {
    const Value flat = b.op<"Reshape">({x, b.ints(std::vector<int64_t>{-1})});
    const Value index = b.op(op, {flat}, {Attr::i("axis", 0), Attr::i("keepdims", 0)});
    if (!keepdim || rank == 0) return index;
    return b.op<"Reshape">({index, b.ints(std::vector<int64_t>(static_cast<size_t>(rank), 1))});
  }
  const int64_t axis = wrap_dim(b, *dim, rank);
  if (rank == 0) return b.scalar(int64_t{0}, ScalarType::Long);
  return b.op(op, {x}, {Attr::i("axis", axis), Attr::i("keepdims", keepdim), Attr::i("select_last_index", 0)});
}

Value product(Builder& b, Value self, const Axes& axes, bool keepdim) {
  // The output dtype says what torch multiplies in: `dtype=` when given, int64 for bool and ints.
  const ScalarType out = b.out_meta(0).dtype;
  if (out == ScalarType::Bool) return all_of(b, self, axes, keepdim);  // a product of truth values
  return reduce(b, "ReduceProd", b.cast(self, out), axes, keepdim);
}

Value count_nonzero_over(Builder& b, Value self, const Axes& axes) {
  // Cast to bool is `!= 0` (NaN counts, as in torch).
  const Value nonzero = b.cast(b.cast(self, ScalarType::Bool), ScalarType::Long);
  return reduce(b, "ReduceSum", nonzero, axes, false);
}

// log(sum(exp(x))) with the maximum taken out first so that exp cannot overflow; an infinite
// maximum is left in the sum instead (torch does the same), so that inf - inf makes no NaN.
Value log_sum_exp(Builder& b, Value self, const Axes& axes, bool keepdim) {
  const Value x = b.cast(self, b.out_meta(0).dtype);  // ints and bool compute in float
  const Value max = reduce(b, "ReduceMax", x, axes, true);
  const Value inf = b.scalar_like(std::numeric_limits<double>::infinity(), max);
  const Value infinite = b.op<"Equal">({b.op<"Abs">({max}), inf});
  const Value shift = b.op<"Where">({infinite, b.scalar_like(0.0, max), max});
  const Value sum = reduce(b, "ReduceSum", b.op<"Exp">({b.op<"Sub">({x, shift})}), axes, keepdim);
  return b.op<"Add">({b.op<"Log">({sum}), keepdim ? shift : drop_axes(b, shift, self, axes)});
}

namespace {

// The number of elements each reduced value covers, as a scalar of `x`'s dtype.
Value reduced_count(Builder& b, Value x, const Axes& axes) {
  const std::vector<int64_t> reduced = explicit_axes(b, x, axes);
  if (auto shape = b.static_shape(x)) {
    int64_t n = 1;
    for (int64_t a : reduced) n *= (*shape)[a];
    return b.scalar_like(static_cast<double>(n), x);
  }
  const Value sizes = b.op<"Gather">({b.op<"Shape">({x}), b.ints(reduced)});
  return b.cast(reduce(b, "ReduceProd", sizes, std::nullopt, false), b.dtype(x));
}

struct Moments {
  Value var, mean;
};

// Variance with torch's correction: the sum of squared deviations over max(N - correction, 0).
Moments moments(Builder& b, Value x, const Axes& dims, const std::optional<Scalar>& correction, bool keepdim) {
  const Axes axes = axes_of(b, x, dims);
  // A sum over the count rather than ReduceMean, which gives 0 over no elements where torch
  // gives NaN (0/0).
  const Value count = reduced_count(b, x, axes);
  const Value mean = b.op<"Div">({reduce(b, "ReduceSum", x, axes, true), count});
  const Value deviation = b.op<"Sub">({x, mean});
  const Value squares = reduce(b, "ReduceSum", b.op<"Mul">({deviation, deviation}), axes, keepdim);
  const Value corrected = b.op<"Sub">({count, b.scalar_like(correction ? *correction : Scalar(1.0), x)});
  const Value divisor = b.op<"Max">({corrected, b.scalar_like(0.0, x)});
  return {b.op<"Div">({squares, divisor}), keepdim ? mean : drop_axes(b, mean, x, axes)};
}

}  // namespace

// ReduceMean where each reduced value is known to cover elements; over a size that may be 0 (a
// dynamic one), a sum over the count, since ReduceMean gives 0 over no elements where torch gives
// NaN (0/0).
Value mean_of(Builder& b, Value self, const Axes& axes, bool keepdim) {
  const std::span<const Dim> shape = b.shape(self);
  const std::vector<int64_t> reduced = explicit_axes(b, self, axes);
  if (std::ranges::all_of(reduced, [&](int64_t a) { return shape[a].is_static() && shape[a].value > 0; })) {
    return reduce(b, "ReduceMean", self, axes, keepdim);
  }
  return b.op<"Div">({reduce(b, "ReduceSum", self, axes, keepdim), reduced_count(b, self, axes)});
}

Value variance(Builder& b, Value self, const Axes& dims, const std::optional<Scalar>& correction, bool keepdim) {
  return moments(b, self, dims, correction, keepdim).var;
}

std::array<Value, 2> variance_and_mean(Builder& b, Value self, const Axes& dims,
                                       const std::optional<Scalar>& correction, bool keepdim) {
  const Moments m = moments(b, self, dims, correction, keepdim);
  return {m.var, m.mean};
}

std::array<Value, 2> std_and_mean(Builder& b, Value self, const Axes& dims, const std::optional<Scalar>& correction,
                                  bool keepdim) {
  const Moments m = moments(b, self, dims, correction, keepdim);
  return {b.op<"Sqrt">({m.var}), m.mean};
}

Scalar unbiased_correction(Builder&, bool unbiased) { return Scalar(int64_t{unbiased ? 1 : 0}); }

namespace {

// `y` shifted `s` (a 1-D int64 of one item, below the length) places forward along `axis`: the
// first `s` places filled with `fill` (or with the first element when `fill` is absent).
Value shifted(Builder& b, Value y, int64_t rank, int64_t axis, Value s, std::optional<Value> fill) {
  const Value kept =
      b.op<"Slice">({y, b.ints(std::vector<int64_t>{0}), b.op<"Neg">({s}), b.ints(std::vector<int64_t>{axis})});
  const Value pads = b.op<"Concat">({b.ints(std::vector<int64_t>(static_cast<size_t>(axis), 0)), s,
                                     b.ints(std::vector<int64_t>(static_cast<size_t>(2 * rank - axis - 1), 0))},
                                    {Attr::i("axis", 0)});
  if (fill) return b.op<"Pad">({kept, pads, *fill});
  return b.op<"Pad">({kept, pads}, {Attr::s("mode", "edge")});
}

// An inclusive scan of an associative `combine(earlier, later)` along `axis` in log2(n) steps
// (Hillis-Steele): after the step of shift s, each place holds the combination of the 2s places
// ending at it. `fill` is the identity of `combine`, or absent when combining with an earlier
// element of the prefix is harmless (max, min). `x` has the shape of `like`. The steps are
// unrolled when the length is static; when it is dynamic, a Loop runs them while the shift is
// below it.
Value scan(Builder& b, Value x, Value like, int64_t axis, std::optional<Value> fill,
           const std::function<Value(Value, Value)>& combine) {
  const int64_t rank = b.rank(like);
  const auto step = [&](Value y, Value shift) { return combine(shifted(b, y, rank, axis, shift, fill), y); };
  const Dim length = b.shape(like)[static_cast<size_t>(axis)];
  if (length.is_static()) {
    Value y = x;
    for (int64_t s = 1; s < length.value; s *= 2) y = step(y, b.ints(std::vector<int64_t>{s}));
    return y;
  }
  const Value n = size_along(b, like, axis), two = b.ints(std::vector<int64_t>{2});
  const auto below_length = [&](Value shift) {
    return b.op<"Squeeze">({b.op<"Less">({shift, n}), b.ints(std::vector<int64_t>{0})});
  };
  b.begin_subgraph();
  const Value iteration = b.subgraph_input("scan_step", ScalarType::Long, {});
  b.subgraph_input("scan_condition", ScalarType::Bool, {});
  const Value y = b.subgraph_input("scan_state", b.dtype(x), b.shape(like));
  const Value shift = b.op<"Pow">({two, iteration});  // 2^iteration, as a 1-D int64 of one item
  const Value next = step(y, shift);
  const GraphId body = b.end_subgraph({below_length(b.op<"Mul">({shift, two})), next});
  const Value first = below_length(b.ints(std::vector<int64_t>{1}));
  return b.op<"Loop">({std::optional<Value>(), first, x}, {Attr::graph("body", body)});
}

}  // namespace

// cummax/cummin: the running extremum (a NaN wins and stays, as in torch), then the last index
// at which it occurs (torch's ties): the running maximum of the positions where x reaches its
// running extremum (or is NaN), -1 elsewhere. `keep_later` (GreaterOrEqual for the maximum,
// LessOrEqual for the minimum) says when a later element replaces the extremum so far.
std::array<Value, 2> cumulative_extremum(Builder& b, OpType keep_later, Value self, int64_t dim) {
  const int64_t rank = b.rank(self);
  const int64_t axis = wrap_dim(b, dim, rank);
  if (rank == 0) return {self, b.scalar(int64_t{0}, ScalarType::Long)};
  const Value x = orderable(b, self);
  const bool floating = is_floating(b.dtype(x));
  const Value value = scan(b, x, self, axis, std::nullopt, [&](Value earlier, Value later) {
    Value take_later = b.op(keep_later, {later, earlier});
    if (floating) {
      const Value earlier_is_number = b.op<"Not">({b.op<"IsNaN">({earlier})});
      take_later = b.op<"Or">({b.op<"IsNaN">({later}), b.op<"And">({take_later, earlier_is_number})});
    }
    return b.op<"Where">({take_later, later, earlier});
  });
  std::vector<int64_t> along_axis(static_cast<size_t>(rank), 1);
  along_axis[axis] = -1;
  const Value positions = b.op<"Reshape">({iota(b, scalar_size_along(b, self, axis)), b.ints(along_axis)});
  Value reached = b.op<"Equal">({x, value});
  if (floating) reached = b.op<"Or">({reached, b.op<"IsNaN">({x})});
  const Value marked = b.op<"Where">({reached, positions, b.scalar(int64_t{-1}, ScalarType::Long)});
  const Value index = scan(b, marked, self, axis, std::nullopt,
                           [&](Value earlier, Value later) { return b.op<"Max">({earlier, later}); });
  return {b.cast(value, b.dtype(self)), index};
}

Value vector_norm(Builder& b, Value x, double p, const Axes& axes, bool keepdim) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (p == 2) return reduce(b, "ReduceL2", x, axes, keepdim);
  if (p == 1) return reduce(b, "ReduceL1", x, axes, keepdim);
  if (p == inf) return reduce(b, "ReduceMax", b.op<"Abs">({x}), axes, keepdim);
  if (p == -inf) return reduce(b, "ReduceMin", b.op<"Abs">({x}), axes, keepdim);
  if (p == 0) return reduce(b, "ReduceSum", b.cast(b.cast(x, ScalarType::Bool), b.dtype(x)), axes, keepdim);
  const Value powered = b.op<"Pow">({b.op<"Abs">({x}), b.scalar_like(p, x)});
  return b.op<"Pow">({reduce(b, "ReduceSum", powered, axes, keepdim), b.scalar_like(1.0 / p, x)});
}

namespace manual {

Value linalg_vector_norm(Builder& b, Value self, Scalar ord, std::optional<std::vector<int64_t>> dim, bool keepdim,
                         std::optional<ScalarType>) {
  // `dtype=` (the output's dtype) is what torch computes in.
  return vector_norm(b, b.cast(self, b.out_meta(0).dtype), ord.to_double(), axes_of(b, self, dim), keepdim);
}
Value norm_ScalarOpt_dim(Builder& b, Value self, std::optional<Scalar> p, std::vector<int64_t> dim, bool keepdim) {
  return vector_norm(b, self, p ? p->to_double() : 2.0, axes_of(b, self, dim), keepdim);
}

Value cumsum(Builder& b, Value self, int64_t dim, std::optional<ScalarType>) {
  const ScalarType out = b.out_meta(0).dtype;  // `dtype=`, or int64 for bool and ints
  const int64_t axis = wrap_dim(b, dim, b.rank(self));
  if (b.rank(self) == 0) return b.cast(self, out);
  // CumSum takes float16 from opset 14; before, sum in float32, which holds every float16.
  const bool widen = out == ScalarType::Half && b.opset() < 14;
  const Value x = b.cast(self, widen ? ScalarType::Float : out);
  return b.cast(b.op<"CumSum">({x, b.scalar(axis, ScalarType::Long)}), out);
}

Value cumprod(Builder& b, Value self, int64_t dim, std::optional<ScalarType>) {
  const int64_t rank = b.rank(self);
  const int64_t axis = wrap_dim(b, dim, rank);
  const Value x = b.cast(self, b.out_meta(0).dtype);
  if (rank == 0) return x;
  return scan(b, x, self, axis, b.scalar_like(int64_t{1}, x),
              [&](Value earlier, Value later) { return b.op<"Mul">({earlier, later}); });
}

Value logcumsumexp(Builder& b, Value self, int64_t dim) {
  const int64_t rank = b.rank(self);
  const int64_t axis = wrap_dim(b, dim, rank);
  if (rank == 0) return self;
  // log(e^a + e^b) = max + log(1 + e^(min - max)) = max + Softplus(min - max); -inf is its identity.
  const Value minus_inf = b.scalar_like(-std::numeric_limits<double>::infinity(), self);
  return scan(b, self, self, axis, minus_inf, [&](Value earlier, Value later) {
    const Value hi = b.op<"Max">({earlier, later}), lo = b.op<"Min">({earlier, later});
    return b.op<"Add">({hi, b.op<"Softplus">({b.op<"Sub">({lo, hi})})});
  });
}

}  // namespace manual
}  // namespace fastonnx
