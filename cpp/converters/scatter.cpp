// Scatters: scatter, scatter_add, scatter_reduce, index_add/copy/fill and the *_scatter ops that
// write a slice, a selected row or a diagonal. All but the diagonal are ScatterElements with
// indices shaped like the updates.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "converters_indexing.h"
#include "indexing.h"

namespace fastonnx {

Value scatter(Builder& b, OpType op, Value data, Value indices, Value updates, std::string_view reduction,
              Attrs attrs) {
  if (reduction == "none") return b.op(op, {data, indices, updates}, attrs);
  const ScalarType dtype = b.dtype(data);
  if (dtype == ScalarType::Bool) {
    // ONNX leaves + and * of bools undefined and onnxruntime has no bool max/min. On 0/1 in
    // int64, a sum is nonzero where any update is true (max, or) and a product where all are
    // (min, and).
    const std::string_view as = reduction == "max" ? "add" : reduction == "min" ? "mul" : reduction;
    const Value reduced = scatter(b, op, b.cast(data, ScalarType::Long), indices, b.cast(updates, ScalarType::Long), as,
                                  std::move(attrs));
    return b.cast(reduced, ScalarType::Bool);
  }
  const bool max_or_min = reduction == "max" || reduction == "min";
  const int since = max_or_min ? 18 : 16;
  if (b.opset() < since) {
    b.fail("ONNX " + std::string(op.name()) + " combines updates to one position (reduction '" +
           std::string(reduction) + "') only from opset " + std::to_string(since) + "; the target opset is " +
           std::to_string(b.opset()));
  }
  // onnxruntime's CPU kernels have no float16/bfloat16 add or mul reductions, nor any ScatterND
  // reduction of them; float holds their values exactly.
  if ((dtype == ScalarType::Half || dtype == ScalarType::BFloat16) && (!max_or_min || op == "ScatterND")) {
    const Value reduced = scatter(b, op, b.cast(data, ScalarType::Float), indices, b.cast(updates, ScalarType::Float),
                                  reduction, std::move(attrs));
    return b.cast(reduced, dtype);
  }
  attrs.push_back(Attr::s("reduction", std::string(reduction)));
  return b.op(op, {data, indices, updates}, attrs);
}

namespace {

// ScatterElements along `dim` of `self` of `rank`. torch lets these ops address a 0-d tensor as
// a 1-element vector; ONNX needs rank 1, so a 0-d self is scattered as one.
Value scatter_elements(Builder& b, Value self, int64_t rank, int64_t dim, Value index, Value updates,
                       std::string_view reduction) {
  if (rank > 0) {
    return scatter(b, "ScatterElements", self, index, updates, reduction, {Attr::i("axis", wrap_dim(b, dim, rank))});
  }
  wrap_dim(b, dim, rank);  // checks dim
  const auto flat = [&](Value x) { return b.op<"Reshape">({x, b.ints(std::vector<int64_t>{-1})}); };
  const Value scattered = scatter(b, "ScatterElements", flat(self), flat(index), flat(updates), reduction);
  return b.op<"Reshape">({scattered, b.ints(std::vector<int64_t>{})});
}

// torch reads only the part of src that index covers; ScatterElements wants the two of one shape.
Value fit_to_index(Builder& b, Value src, Value index) {
  const auto src_shape = b.static_shape(src);
  if (src_shape && src_shape == b.static_shape(index)) return src;
  const int64_t rank = b.rank(index);
  if (rank == 0) return src;
  std::vector<int64_t> axes(static_cast<size_t>(rank));
  std::iota(axes.begin(), axes.end(), 0);
  return b.op<"Slice">({src, b.ints(std::vector<int64_t>(axes.size(), 0)), shape_of(b, index), b.ints(axes)});
}

Value filled(Builder& b, const Scalar& value, ScalarType dtype, Value shape) {
  return b.op<"Expand">({b.scalar(value, dtype), shape});
}

std::string_view onnx_reduction(Builder& b, const std::string& reduce) {
  if (reduce == "add" || reduce == "sum" || reduce == "mean") return "add";
  if (reduce == "multiply" || reduce == "prod") return "mul";
  if (reduce == "amax") return "max";
  if (reduce == "amin") return "min";
  b.fail("unknown scatter reduction '" + reduce + "'");
}

// The value a reduction leaves its other operand as: what include_self=False starts from.
Scalar reduction_identity(Builder& b, std::string_view reduction, ScalarType dtype) {
  if (reduction == "add") return Scalar(int64_t{0});
  if (reduction == "mul") return Scalar(int64_t{1});
  const bool lowest = reduction == "max";
  if (is_floating(dtype)) {
    return Scalar(lowest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
  }
  switch (dtype) {
    case ScalarType::Bool:
      return Scalar(!lowest);
    case ScalarType::Byte:
      return Scalar(int64_t{lowest ? 0 : 255});
    case ScalarType::Char:
      return Scalar(int64_t{lowest ? -128 : 127});
    case ScalarType::Short:
      return Scalar(int64_t{lowest ? -32768 : 32767});
    case ScalarType::Int:
      return Scalar(int64_t{lowest ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max()});
    case ScalarType::Long:
      return Scalar(lowest ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
    default:
      b.fail(std::string("scatter_reduce with include_self=False has no converter for ") + dtype_name(dtype));
  }
}

// `index` (1-D, or 0-d for one position) as ScatterElements indices for `dim` of a tensor of
// `rank`: laid along dim and repeated over the other dims of `shape`.
Value along_dim(Builder& b, Value index, int64_t dim, int64_t rank, Value shape) {
  std::vector<int64_t> view(static_cast<size_t>(rank), 1);
  view[dim] = -1;
  return b.op<"Expand">({b.op<"Reshape">({index, b.ints(view)}), shape});
}

}  // namespace

// index_fill: the slices of self at `index` along dim take `value` (a 0-d tensor). Repeated
// indices write the same value, so the scatter is deterministic.
Value index_fill(Builder& b, Value self, int64_t dim, Value index, Value value) {
  const int64_t rank = b.rank(self);
  if (rank == 0) return scatter_elements(b, self, rank, dim, index, value, "none");
  const int64_t d = wrap_dim(b, dim, rank);
  std::vector<int64_t> before(static_cast<size_t>(d)), after(static_cast<size_t>(rank - d - 1));
  std::iota(before.begin(), before.end(), 0);
  std::iota(after.begin(), after.end(), d + 1);
  const Value count = b.op<"Shape">({b.op<"Reshape">({index, b.ints(std::vector<int64_t>{-1})})});
  const Value shape =
      b.op<"Concat">({sizes_of(b, self, before), count, sizes_of(b, self, after)}, {Attr::i("axis", 0)});
  const Value updates = b.op<"Expand">({value, shape});
  return scatter_elements(b, self, rank, d, along_dim(b, index, d, rank, shape), updates, "none");
}

namespace manual {

Value scatter_src(Builder& b, Value self, int64_t dim, Value index, Value src) {
  return scatter_elements(b, self, b.rank(self), dim, index, fit_to_index(b, src, index), "none");
}

Value scatter_value(Builder& b, Value self, int64_t dim, Value index, Scalar value) {
  const Value updates = filled(b, value, b.dtype(self), shape_of(b, index));
  return scatter_elements(b, self, b.rank(self), dim, index, updates, "none");
}

Value scatter_reduce(Builder& b, Value self, int64_t dim, Value index, Value src, std::string reduce) {
  return scatter_elements(b, self, b.rank(self), dim, index, fit_to_index(b, src, index), onnx_reduction(b, reduce));
}

Value scatter_value_reduce(Builder& b, Value self, int64_t dim, Value index, Scalar value, std::string reduce) {
  const Value updates = filled(b, value, b.dtype(self), shape_of(b, index));
  return scatter_elements(b, self, b.rank(self), dim, index, updates, onnx_reduction(b, reduce));
}

Value scatter_add(Builder& b, Value self, int64_t dim, Value index, Value src) {
  return scatter_elements(b, self, b.rank(self), dim, index, fit_to_index(b, src, index), "add");
}

Value scatter_reduce_two(Builder& b, Value self, int64_t dim, Value index, Value src, std::string reduce,
                         bool include_self) {
  const std::string_view reduction = onnx_reduction(b, reduce);
  const ScalarType dtype = b.dtype(self);
  const int64_t rank = b.rank(self);
  const Value updates = fit_to_index(b, src, index);
  Value start = self;
  if (!include_self) {
    // The positions written to start from the reduction's identity instead of self's value.
    const Value identity = filled(b, reduction_identity(b, reduction, dtype), dtype, shape_of(b, index));
    start = scatter_elements(b, self, rank, dim, index, identity, "none");
  }
  const Value reduced = scatter_elements(b, start, rank, dim, index, updates, reduction);
  if (reduce != "mean") return reduced;
  // The mean divides by how many values met at each position (self counting as one), or by 1.
  const Value counted = b.op<"Expand">({b.scalar(include_self ? 1 : 0, dtype), shape_of(b, self)});
  const Value ones = b.op<"Expand">({b.scalar(1, dtype), shape_of(b, index)});
  const Value count = b.op<"Max">({scatter_elements(b, counted, rank, dim, index, ones, "add"), b.scalar(1, dtype)});
  if (is_floating(dtype)) return b.op<"Div">({reduced, count});
  // torch floors the integer mean; a count is positive, so reduced - reduced mod count divides exactly.
  return b.op<"Div">({b.op<"Sub">({reduced, b.op<"Mod">({reduced, count})}), count});
}

Value index_add(Builder& b, Value self, int64_t dim, Value index, Value source, Scalar alpha) {
  const int64_t rank = b.rank(self);
  Value updates = source;
  if (alpha != int64_t{1}) {
    const bool logical = b.dtype(source) == ScalarType::Bool;  // torch's bool alpha scales by and
    updates = b.op(logical ? OpType("And") : OpType("Mul"), {source, b.scalar(alpha, b.dtype(source))});
  }
  if (rank == 0) return scatter_elements(b, self, rank, dim, index, updates, "add");
  const int64_t d = wrap_dim(b, dim, rank);
  return scatter_elements(b, self, rank, d, along_dim(b, index, d, rank, shape_of(b, source)), updates, "add");
}

Value index_copy(Builder& b, Value self, int64_t dim, Value index, Value source) {
  const int64_t rank = b.rank(self);
  if (rank == 0) return scatter_elements(b, self, rank, dim, index, source, "none");
  const int64_t d = wrap_dim(b, dim, rank);
  return scatter_elements(b, self, rank, d, along_dim(b, index, d, rank, shape_of(b, source)), source, "none");
}

Value slice_scatter(Builder& b, Value self, Value src, int64_t dim, std::optional<SymInt> start,
                    std::optional<SymInt> end, SymInt step) {
  // src holds the slice, so its size along dim, with start and step, says where it goes; `end`
  // adds nothing.
  (void)end;
  const int64_t rank = b.rank(self);
  // wrap_dim lets dim 0 through on a 0-d tensor, which has no dimension to slice (torch's meta
  // kernel lets it through too).
  if (rank == 0) b.fail("slice_scatter: a 0-d tensor has no dimension to slice");
  const int64_t d = wrap_dim(b, dim, rank);
  const SymInt count = size_at(b, src, d);
  // torch counts a negative start from the end and clamps it at 0.
  SymInt first = start.value_or(SymInt(int64_t{0}));
  const bool may_be_negative = !first.is_static() || first.value < 0;
  if (may_be_negative) {
    const SymInt size = size_at(b, self, d);
    if (first.is_static() && size.is_static()) {
      first = SymInt(std::max<int64_t>(first.value + size.value, 0));
    } else {
      const Value at = b.long_scalar(first), zero = b.scalar(0, ScalarType::Long);
      const Value from_end = b.op<"Max">({b.op<"Add">({at, b.long_scalar(size)}), zero});
      first = SymInt(b.op<"Where">({b.op<"Less">({at, zero}), from_end, at}));
    }
  }
  Value positions;
  if (first.is_static() && count.is_static() && step.is_static()) {
    std::vector<int64_t> at(static_cast<size_t>(count.value));
    for (size_t i = 0; i < at.size(); ++i) at[i] = first.value + static_cast<int64_t>(i) * step.value;
    positions = b.ints(at);
  } else {
    const Value from = b.long_scalar(first), by = b.long_scalar(step);
    const Value to = b.op<"Add">({from, b.op<"Mul">({b.long_scalar(count), by})});
    positions = b.op<"Range">({from, to, by});
  }
  return scatter_elements(b, self, rank, d, along_dim(b, positions, d, rank, shape_of(b, src)), src, "none");
}

Value select_scatter(Builder& b, Value self, Value src, int64_t dim, SymInt index) {
  const int64_t rank = b.rank(self);
  const int64_t d = wrap_dim(b, dim, rank);
  const Value axis = b.ints(std::vector<int64_t>{d});
  const Value updates = b.op<"Unsqueeze">({src, axis});
  Value shape;
  if (auto src_shape = b.static_shape(src)) {
    src_shape->insert(src_shape->begin() + d, 1);
    shape = b.ints(*src_shape);
  } else {
    shape = b.op<"Shape">({updates});
  }
  const Value positions = b.op<"Expand">({b.ints(SymIntList{index}), shape});
  return scatter_elements(b, self, rank, d, positions, updates, "none");
}

Value diagonal_scatter(Builder& b, Value self, Value src, int64_t offset, int64_t dim1, int64_t dim2) {
  const int64_t rank = b.rank(self);
  const int64_t d1 = wrap_dim(b, dim1, rank), d2 = wrap_dim(b, dim2, rank);
  // With dim1 and dim2 first, ScatterND writes src's rows (its diagonal dim moved first) at the
  // diagonal's (row, column) pairs.
  std::vector<int64_t> perm = {d1, d2};
  for (int64_t d = 0; d < rank; ++d) {
    if (d != d1 && d != d2) perm.push_back(d);
  }
  const Value data = transpose(b, self, perm);
  const int64_t row = std::max<int64_t>(-offset, 0), column = std::max<int64_t>(offset, 0);
  const SymInt length = size_at(b, src, rank - 2);
  Value pairs;
  if (length.is_static()) {
    std::vector<int64_t> flat;
    for (int64_t i = 0; i < length.value; ++i) flat.insert(flat.end(), {row + i, column + i});
    std::vector<uint8_t> bytes(flat.size() * sizeof(int64_t));
    if (!flat.empty()) std::memcpy(bytes.data(), flat.data(), bytes.size());
    const std::vector<int64_t> shape = {length.value, 2};
    pairs = b.constant(ScalarType::Long, shape, std::move(bytes));
  } else {
    const Value steps = iota(b, length.sym);
    const Value column_axis = b.ints(std::vector<int64_t>{1});
    const Value rows = b.op<"Unsqueeze">({b.op<"Add">({steps, b.scalar(row, ScalarType::Long)}), column_axis});
    const Value columns = b.op<"Unsqueeze">({b.op<"Add">({steps, b.scalar(column, ScalarType::Long)}), column_axis});
    pairs = b.op<"Concat">({rows, columns}, {Attr::i("axis", 1)});
  }
  std::vector<int64_t> src_perm = {rank - 2};
  for (int64_t d = 0; d < rank - 2; ++d) src_perm.push_back(d);
  const Value scattered = b.op<"ScatterND">({data, pairs, transpose(b, src, src_perm)});
  return transpose(b, scattered, inverse(perm));
}

}  // namespace manual

}  // namespace fastonnx
