// Parts of a tensor: slices, splits, selections, flips, rolls, diagonals and strided views.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "common.h"
#include "converters_shape.h"

namespace fastonnx {

namespace {

constexpr int64_t kToTheEnd = std::numeric_limits<int64_t>::max();
constexpr int64_t kBeforeTheStart = std::numeric_limits<int64_t>::min();

Value one(Builder& b, int64_t v) { return b.ints(std::vector<int64_t>{v}); }
Value one(Builder& b, const SymInt& v) { return b.ints(SymIntList{v}); }

Value slice(Builder& b, Value x, int64_t axis, Value start, Value end, int64_t step = 1) {
  Inputs inputs = {x, start, end, one(b, axis)};
  if (step != 1) inputs.push_back(one(b, step));
  return b.op<"Slice">(inputs);
}

template <typename Sizes>
std::vector<Value> split(Builder& b, Value self, int64_t axis, const Sizes& sizes) {
  if (sizes.size() == 1) return {self};
  return b.op_n<"Split">({self, b.ints(sizes)}, {Attr::i("axis", axis)}, static_cast<int>(sizes.size()));
}

// Splits `self` along `axis` into `parts` parts of `k` (a 1-D int64 of one item) elements, the
// last one holding what is left. The number of parts is torch's recorded output count, fixed
// even when the size along the axis is dynamic; the sizes are computed at run time.
std::vector<Value> split_computed(Builder& b, Value self, int64_t axis, Value k, size_t parts) {
  if (parts == 1) return {self};
  const auto n = static_cast<int64_t>(parts);
  const Value rest = b.op<"Sub">({size_along(b, self, axis), b.op<"Mul">({k, one(b, n - 1)})});
  const Value sizes = b.op<"Concat">({b.op<"Expand">({k, one(b, n - 1)}), rest}, {Attr::i("axis", 0)});
  return b.op_n<"Split">({self, sizes}, {Attr::i("axis", axis)}, static_cast<int>(parts));
}

// `x` rolled by `shift` along `axis` of size `size` (symbolic when absent): the last
// (shift mod size) elements move to the front.
Value roll_along(Builder& b, Value x, int64_t axis, const SymInt& shift, std::optional<int64_t> size) {
  if (size && shift.is_static()) {
    if (*size == 0) return x;
    const int64_t kept = *size - ((shift.value % *size) + *size) % *size;
    if (kept == *size) return x;
    const Value tail = slice(b, x, axis, one(b, kept), one(b, kToTheEnd));
    return b.op<"Concat">({tail, slice(b, x, axis, one(b, 0), one(b, kept))}, {Attr::i("axis", axis)});
  }
  // ONNX's integer Mod takes the divisor's sign, as Python's % does.
  const Value n = b.op<"Slice">({b.op<"Shape">({x}), one(b, axis), one(b, axis + 1)});
  const Value kept = b.op<"Sub">({n, b.op<"Mod">({one(b, shift), n})});
  return b.op<"Concat">({slice(b, x, axis, kept, one(b, kToTheEnd)), slice(b, x, axis, one(b, 0), kept)},
                        {Attr::i("axis", axis)});
}

}  // namespace

Value trilu(Builder& b, Value self, const SymInt& diagonal, bool upper) {
  const Value k = b.long_scalar(diagonal);
  if (b.opset() >= 14) return b.op<"Trilu">({self, k}, {Attr::i("upper", upper)});
  // Opset 13 has no Trilu: keep the elements whose (column - row) is on the kept side of the
  // diagonal.
  if (b.rank(self) < 2) b.fail("triu/tril need a tensor of rank 2 or more");
  const auto positions = [&](int64_t axis) {  // 0, 1, ... along axis (counted from the end)
    return iota(b, scalar_size_along(b, self, b.rank(self) + axis));
  };
  const Value rows = b.op<"Unsqueeze">({positions(-2), b.ints(std::vector<int64_t>{1})});
  const Value diff = b.op<"Sub">({positions(-1), rows});
  const Value keep = b.op(upper ? OpType("GreaterOrEqual") : OpType("LessOrEqual"), {diff, k});
  // onnxruntime's Where has no bool kernel; for bool, keeping is And.
  if (b.dtype(self) == ScalarType::Bool) return b.op<"And">({self, keep});
  return b.op<"Where">({keep, self, b.scalar_like(int64_t{0}, self)});
}

namespace {

// The view as_strided makes of self's storage (taken as contiguous): element (i_0, i_1, ...) is
// storage[offset + sum of i_d * stride_d], gathered from the flattened tensor with the positions
// computed in the graph (the sizes, strides or offset are dynamic).
Value strided_gather(Builder& b, Value self, const SymIntList& size, const SymIntList& stride, const SymInt& offset) {
  Value positions = b.long_scalar(offset);
  for (size_t d = 0; d < size.size(); ++d) {
    std::vector<int64_t> along(size.size(), 1);
    along[d] = -1;
    const Value steps = b.op<"Mul">({iota(b, b.long_scalar(size[d])), b.long_scalar(stride[d])});
    positions = b.op<"Add">({positions, b.op<"Reshape">({steps, b.ints(along)})});
  }
  return b.op<"Gather">({b.op<"Reshape">({self, one(b, -1)}), positions});
}

}  // namespace

namespace manual {

Value narrow(Builder& b, Value self, int64_t dim, SymInt start, SymInt length) {
  dim = wrap_dim(b, dim, b.rank(self));
  if (start.is_static() && length.is_static()) {
    // A negative start counts from the end, as in Slice; an end that comes to 0 then means the end.
    const int64_t end = start.value + length.value;
    return slice(b, self, dim, one(b, start.value), one(b, start.value < 0 && end == 0 ? kToTheEnd : end));
  }
  // Symbolic: slice from start (Slice wraps a negative one), then keep `length` elements.
  const Value from_start = slice(b, self, dim, one(b, start), one(b, kToTheEnd));
  return slice(b, from_start, dim, one(b, 0), one(b, length));
}

Value select_int(Builder& b, Value self, int64_t dim, SymInt index) {
  // A 0-d index drops the axis; Gather takes negative indices from the end, as torch does.
  const Value i = b.long_scalar(index);
  return b.op<"Gather">({self, i}, {Attr::i("axis", wrap_dim(b, dim, b.rank(self)))});
}

Value slice_Tensor(Builder& b, Value self, int64_t dim, std::optional<SymInt> start, std::optional<SymInt> end,
                   SymInt step) {
  // Slice wraps negative bounds and clamps them to the size, as torch does.
  dim = wrap_dim(b, dim, b.rank(self));
  const bool unit_step = step.is_static() && step.value == 1;
  if (unit_step && b.out_static_shape() && b.out_static_shape() == b.static_shape(self)) return self;
  Inputs inputs = {self, one(b, start.value_or(SymInt(int64_t{0}))), one(b, end.value_or(SymInt(kToTheEnd))),
                   one(b, dim)};
  if (!unit_step) inputs.push_back(one(b, step));
  return b.op<"Slice">(inputs);
}

std::vector<Value> split_Tensor(Builder& b, Value self, SymInt split_size, int64_t dim) {
  dim = wrap_dim(b, dim, b.rank(self));
  const auto size = known_size(b, self, dim);
  if (!size || !split_size.is_static()) return split_computed(b, self, dim, one(b, split_size), b.out_count());
  const int64_t k = split_size.value;
  // torch makes ceil(size / k) parts (one empty part for an empty dim), the last one shorter.
  const int64_t parts = *size == 0 ? 1 : (*size + k - 1) / k;
  std::vector<int64_t> sizes(static_cast<size_t>(parts), k);
  sizes.back() = *size - k * (parts - 1);
  return split(b, self, dim, sizes);
}

std::vector<Value> split_with_sizes(Builder& b, Value self, SymIntList split_sizes, int64_t dim) {
  return split(b, self, wrap_dim(b, dim, b.rank(self)), split_sizes);
}

std::vector<Value> chunk(Builder& b, Value self, int64_t chunks, int64_t dim) {
  dim = wrap_dim(b, dim, b.rank(self));
  // torch: parts of ceil(size / chunks), so there may be fewer than `chunks`; an empty dim
  // makes `chunks` empty parts.
  const auto size = known_size(b, self, dim);
  if (!size) {
    const Value k = b.op<"Div">({b.op<"Add">({size_along(b, self, dim), one(b, chunks - 1)}), one(b, chunks)});
    return split_computed(b, self, dim, k, b.out_count());
  }
  if (*size == 0) return split(b, self, dim, std::vector<int64_t>(static_cast<size_t>(chunks), 0));
  const int64_t k = (*size + chunks - 1) / chunks;
  const int64_t parts = (*size + k - 1) / k;
  std::vector<int64_t> sizes(static_cast<size_t>(parts), k);
  sizes.back() = *size - k * (parts - 1);
  return split(b, self, dim, sizes);
}

std::vector<Value> unbind_int(Builder& b, Value self, int64_t dim) {
  dim = wrap_dim(b, dim, b.rank(self));
  // One part per element along dim: as many as torch recorded when the size is dynamic (it
  // fixes their number).
  const auto size = known_size(b, self, dim);
  const size_t parts = size ? static_cast<size_t>(*size) : b.out_count();
  if (parts == 0) return {};
  const Value axes = one(b, dim);
  std::vector<Value> out = split(b, self, dim, std::vector<int64_t>(parts, 1));
  for (Value& part : out) part = b.op<"Squeeze">({part, axes});
  return out;
}

Value flip(Builder& b, Value self, std::vector<int64_t> dims) {
  const int64_t rank = b.rank(self);
  if (rank == 0 || dims.empty()) return self;
  for (int64_t& d : dims) d = wrap_dim(b, d, rank);
  // Slice with step -1 from the last element to before the first.
  const size_t n = dims.size();
  return b.op<"Slice">({self, b.ints(std::vector<int64_t>(n, -1)), b.ints(std::vector<int64_t>(n, kBeforeTheStart)),
                        b.ints(dims), b.ints(std::vector<int64_t>(n, -1))});
}

Value roll(Builder& b, Value self, SymIntList shifts, std::vector<int64_t> dims) {
  const int64_t rank = b.rank(self);
  if (dims.empty()) {
    // torch rolls the flattened tensor and restores the shape.
    if (shifts.size() != 1) b.fail("roll without dims takes one shift");
    std::optional<int64_t> numel;
    if (auto shape = b.static_shape(self)) {
      numel = std::accumulate(shape->begin(), shape->end(), int64_t{1}, std::multiplies<>());
      if (*numel == 0 || (shifts[0].is_static() && shifts[0].value % *numel == 0)) return self;
    }
    const Value flat = b.op<"Reshape">({self, one(b, -1)});
    return b.op<"Reshape">({roll_along(b, flat, 0, shifts[0], numel), shape_of(b, self)});
  }
  if (shifts.size() != dims.size()) b.fail("roll takes one shift per dim");
  Value x = self;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t axis = wrap_dim(b, dims[i], rank);
    x = roll_along(b, x, axis, shifts[i], known_size(b, self, axis));
  }
  return x;
}

Value diagonal(Builder& b, Value self, int64_t offset, int64_t dim1, int64_t dim2) {
  const int64_t rank = b.rank(self);
  dim1 = wrap_dim(b, dim1, rank);
  dim2 = wrap_dim(b, dim2, rank);
  if (dim1 == dim2) b.fail("diagonal needs two different dims");
  // Move the two dims last and flatten them: the diagonal is every (cols + 1)-th element from
  // its first one. The other dims keep their sizes (Reshape's 0); the sizes of the two are read
  // at run time where they are dynamic.
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim1 && d != dim2) perm.push_back(d);
  }
  perm.push_back(dim1);
  perm.push_back(dim2);
  const Value moved = permute(b, self, perm);
  const int64_t last = rank - 2;
  const auto rows = known_size(b, self, dim1), cols = known_size(b, self, dim2);
  if (rows && cols && (offset >= 0 ? std::min(*rows, *cols - offset) : std::min(*rows + offset, *cols)) <= 0) {
    // Empty: cut both dims to 0, then merge them (Reshape's 0 copies the 0).
    const Value empty = b.op<"Slice">({moved, b.ints(std::vector<int64_t>{0, 0}), b.ints(std::vector<int64_t>{0, 0}),
                                       b.ints(std::vector<int64_t>{last, last + 1})});
    return b.op<"Reshape">({empty, b.ints(std::vector<int64_t>(static_cast<size_t>(rank - 1), 0))});
  }
  const Value n_rows = size_along(b, self, dim1), n_cols = size_along(b, self, dim2);
  const Value flat_shape =
      b.op<"Concat">({b.ints(std::vector<int64_t>(static_cast<size_t>(last), 0)), b.op<"Mul">({n_rows, n_cols})},
                     {Attr::i("axis", 0)});
  const Value flat = b.op<"Reshape">({moved, flat_shape});
  const Value reach = offset >= 0 ? b.op<"Min">({n_rows, b.op<"Sub">({n_cols, one(b, offset)})})
                                  : b.op<"Min">({b.op<"Add">({n_rows, one(b, offset)}), n_cols});
  const Value length = b.op<"Max">({reach, one(b, 0)});
  const Value first = offset >= 0 ? one(b, offset) : b.op<"Mul">({one(b, -offset), n_cols});
  const Value step = b.op<"Add">({n_cols, one(b, 1)});
  // first + (length - 1) * step + 1. With no diagonal (length 0) that is first - cols, which is
  // not negative (Slice would count it from the end) unless the matrix is empty, and not after
  // the start: the slice is empty.
  const Value end =
      b.op<"Add">({first, b.op<"Add">({b.op<"Mul">({b.op<"Sub">({length, one(b, 1)}), step}), one(b, 1)})});
  return b.op<"Slice">({flat, first, end, one(b, last), step});
}

// The windows of `size` elements every `step` along `dimension`, each a new last dim: one Gather
// along the dim of the positions i * step + j (window i, element j), computed from the dim's
// size at run time, then the window's axis moved last. A 0-d tensor is its one window.
Value unfold(Builder& b, Value self, int64_t dimension, int64_t size, int64_t step) {
  const int64_t rank = b.rank(self);
  if (rank == 0) return b.op<"Unsqueeze">({self, one(b, 0)});
  const int64_t dim = wrap_dim(b, dimension, rank);
  const Value window = b.scalar(size, ScalarType::Long);
  const Value stride = b.scalar(step, ScalarType::Long);
  const Value span = b.op<"Sub">({scalar_size_along(b, self, dim), window});
  const Value windows = b.op<"Add">({b.op<"Div">({span, stride}), b.scalar(int64_t{1}, ScalarType::Long)});
  const Value starts = b.op<"Unsqueeze">({b.op<"Mul">({iota(b, windows), stride}), one(b, 1)});
  const Value positions = b.op<"Add">({starts, b.op<"Unsqueeze">({iota(b, window), one(b, 0)})});
  const Value gathered = b.op<"Gather">({self, positions}, {Attr::i("axis", dim)});
  if (dim == rank - 1) return gathered;
  std::vector<int64_t> perm(static_cast<size_t>(rank) + 1);
  std::iota(perm.begin(), perm.end(), 0);
  std::rotate(perm.begin() + dim + 1, perm.begin() + dim + 2, perm.end());
  return b.op<"Transpose">({gathered}, {Attr::ints("perm", perm)});
}

Value as_strided(Builder& b, Value self, SymIntList size, SymIntList stride, std::optional<SymInt> storage_offset) {
  const auto in = b.static_shape(self);
  const bool all_static = std::all_of(size.begin(), size.end(), [](const SymInt& s) { return s.is_static(); }) &&
                          std::all_of(stride.begin(), stride.end(), [](const SymInt& s) { return s.is_static(); }) &&
                          (!storage_offset || storage_offset->is_static());
  if (!in || !all_static) return strided_gather(b, self, size, stride, storage_offset.value_or(SymInt(int64_t{0})));
  const std::vector<int64_t> sizes = b.static_ints(size), strides = b.static_ints(stride);
  const int64_t offset = storage_offset ? storage_offset->value : 0;
  const auto count = [](const std::vector<int64_t>& s) {
    return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
  };
  const int64_t n = count(sizes);
  // The view reads self's storage, taken as contiguous (an ONNX value has no other layout).
  // A view of every element in some order of dims is a Reshape, then a Transpose.
  if (offset == 0 && n == count(*in) && n > 0) {
    std::vector<int64_t> order(sizes.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return strides[a] > strides[c]; });
    std::vector<int64_t> stored(sizes.size());
    int64_t expected = 1;
    bool dense = true;
    for (size_t i = order.size(); i-- > 0;) {
      const int64_t d = order[i];
      stored[i] = sizes[d];
      dense = dense && (sizes[d] == 1 || strides[d] == expected);
      expected *= sizes[d];
    }
    if (dense) {
      const Value reshaped = *in == stored ? self : b.op<"Reshape">({self, b.ints(stored)});
      std::vector<int64_t> perm(order.size());
      for (size_t i = 0; i < order.size(); ++i) perm[order[i]] = static_cast<int64_t>(i);
      if (std::is_sorted(order.begin(), order.end())) return reshaped;
      return b.op<"Transpose">({reshaped}, {Attr::ints("perm", perm)});
    }
  }
  // Otherwise gather each element of the view from the flattened storage.
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * sizeof(int64_t));
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = offset;
    for (size_t d = 0; d < sizes.size(); ++d) at += index[d] * strides[d];
    std::memcpy(bytes.data() + i * sizeof(int64_t), &at, sizeof(int64_t));
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
  const Value indices = b.constant(ScalarType::Long, sizes, std::move(bytes));
  return b.op<"Gather">({b.op<"Reshape">({self, one(b, -1)}), indices});
}

}  // namespace manual
}  // namespace fastonnx
