// Advanced indexing (x[i, None, mask] and its assignment), gather, nonzero, masked_scatter and
// take_along_dim.
#include "indexing.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "converters_indexing.h"

namespace fastonnx {

Value sizes_of(Builder& b, Value x, const std::vector<int64_t>& dims) {
  if (dims.empty()) return b.ints(dims);
  if (const auto shape = b.static_shape(x)) {
    std::vector<int64_t> sizes;
    for (int64_t d : dims) sizes.push_back((*shape)[d]);
    return b.ints(sizes);
  }
  return b.op<"Gather">({b.op<"Shape">({x}), b.ints(dims)}, {Attr::i("axis", 0)});
}

Value transpose(Builder& b, Value x, const std::vector<int64_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  return b.op<"Transpose">({x}, {Attr::ints("perm", perm)});
}

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[perm[i]] = static_cast<int64_t>(i);
  return out;
}

namespace {

bool is_mask(ScalarType t) { return t == ScalarType::Bool || t == ScalarType::Byte; }

std::vector<int64_t> iota(int64_t from, int64_t to) {
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(to - from, 0)));
  std::iota(out.begin(), out.end(), from);
  return out;
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Where, for every dtype: onnxruntime has no bool Where, and uint8 holds bools exactly.
Value where(Builder& b, Value condition, Value x, Value y) {
  if (b.dtype(x) != ScalarType::Bool) return b.op<"Where">({condition, x, y});
  const Value picked = b.op<"Where">({condition, b.cast(x, ScalarType::Byte), b.cast(y, ScalarType::Byte)});
  return b.cast(picked, ScalarType::Bool);
}

// torch's index tensors resolved for ONNX's GatherND/ScatterND: a boolean mask over k dims is
// replaced by the k coordinate vectors of its true elements (NonZero, in row-major order).
struct AdvancedIndex {
  std::vector<int64_t> dims;                                // the indexed dims of self, ascending
  std::vector<Value> indices;                               // an int64 index tensor per indexed dim
  std::vector<std::optional<std::vector<int64_t>>> shapes;  // their static shapes, when known
  int64_t batch_rank = 0;                                   // rank of the shape the index tensors broadcast to
  // torch puts the broadcast dims where the indexed dims were when those are consecutive, and
  // first otherwise.
  bool adjacent = true;
  std::vector<int64_t> others;  // the dims of self that are not indexed, ascending
};

AdvancedIndex resolve(Builder& b, Value self, const std::vector<std::optional<Value>>& indices) {
  AdvancedIndex ai;
  int64_t dim = 0;
  for (const auto& index : indices) {
    if (!index) {
      ++dim;
      continue;
    }
    const int64_t r = b.rank(*index);
    if (is_mask(b.dtype(*index))) {
      if (r == 0) b.fail("a 0-d boolean index adds a dim (x[True]); it has no converter");
      const Value positions = b.op<"NonZero">({*index});  // [r, number of true elements]
      for (int64_t j = 0; j < r; ++j) {
        ai.dims.push_back(dim++);
        ai.indices.push_back(b.op<"Gather">({positions, b.scalar(j, ScalarType::Long)}, {Attr::i("axis", 0)}));
        ai.shapes.emplace_back();
      }
      ai.batch_rank = std::max<int64_t>(ai.batch_rank, 1);
    } else {
      ai.dims.push_back(dim++);
      ai.indices.push_back(b.cast(*index, ScalarType::Long));
      ai.shapes.push_back(b.static_shape(*index));
      ai.batch_rank = std::max(ai.batch_rank, r);
    }
  }
  const int64_t rank = b.rank(self);
  if (ai.dims.empty()) b.fail("indexing with no index tensor");
  if (dim > rank) b.fail("too many indices for a tensor of rank " + std::to_string(rank));
  for (size_t j = 1; j < ai.dims.size(); ++j) ai.adjacent = ai.adjacent && ai.dims[j] == ai.dims[j - 1] + 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(ai.dims.begin(), ai.dims.end(), d) == ai.dims.end()) ai.others.push_back(d);
  }
  return ai;
}

// The shape the index tensors broadcast to, as a 1-D int64 tensor.
Value batch_shape(Builder& b, const AdvancedIndex& ai) {
  if (std::all_of(ai.shapes.begin(), ai.shapes.end(), [](const auto& s) { return s.has_value(); })) {
    std::vector<int64_t> out(static_cast<size_t>(ai.batch_rank), 1);
    for (const auto& shape : ai.shapes) {
      const size_t lead = out.size() - shape->size();
      for (size_t i = 0; i < shape->size(); ++i) {
        if ((*shape)[i] != 1) out[lead + i] = (*shape)[i];
      }
    }
    return b.ints(out);
  }
  // ONNX broadcasting finds the shape: it is the shape of the indices' sum.
  Value sum = ai.indices[0];
  for (size_t j = 1; j < ai.indices.size(); ++j) sum = b.op<"Add">({sum, ai.indices[j]});
  return b.op<"Shape">({sum});
}

// The index tensors broadcast to one shape and stacked on a new last axis: GatherND's and
// ScatterND's [batch..., k] indices.
Value stacked_indices(Builder& b, const AdvancedIndex& ai, Value shape) {
  const Value last = b.ints(std::vector<int64_t>{-1});
  const bool same_shapes =
      ai.shapes[0] && std::all_of(ai.shapes.begin(), ai.shapes.end(), [&](const auto& s) { return s == ai.shapes[0]; });
  std::vector<Value> columns;
  for (Value index : ai.indices) {
    if (!same_shapes) index = b.op<"Expand">({index, shape});
    columns.push_back(b.op<"Unsqueeze">({index, last}));
  }
  if (columns.size() == 1) return columns[0];
  return b.op<"Concat">(spread(columns), {Attr::i("axis", -1)});
}

// Moves the broadcast dims of an indexing result, which GatherND and ScatterND keep first,
// behind the first `at` other dims (torch's place for them when the indexed dims are adjacent),
// or back.
std::vector<int64_t> batch_to(int64_t at, int64_t batch_rank, int64_t rank) {
  return concat(concat(iota(batch_rank, batch_rank + at), iota(0, batch_rank)), iota(batch_rank + at, rank));
}

}  // namespace

namespace manual {

Value index_Tensor(Builder& b, Value self, std::vector<std::optional<Value>> indices) {
  const AdvancedIndex ai = resolve(b, self, indices);
  // One index tensor: Gather puts its dims in place of the indexed one, as torch does.
  if (ai.indices.size() == 1) return b.op<"Gather">({self, ai.indices[0]}, {Attr::i("axis", ai.dims[0])});
  const Value data = transpose(b, self, concat(ai.dims, ai.others));
  const Value gathered = b.op<"GatherND">({data, stacked_indices(b, ai, batch_shape(b, ai))});
  const int64_t at = ai.adjacent ? ai.dims[0] : 0;
  const auto rank = static_cast<int64_t>(ai.batch_rank + ai.others.size());
  return transpose(b, gathered, batch_to(at, ai.batch_rank, rank));
}

Value index_put(Builder& b, Value self, std::vector<std::optional<Value>> indices, Value values, bool accumulate) {
  const int64_t rank = b.rank(self);
  const auto values_shape = b.static_shape(values);
  values = b.cast(values, b.dtype(self));
  // x[mask] = value with a mask over all of x: a Where, without NonZero's data-dependent shape.
  const bool one_value = values_shape && static_cast<int64_t>(values_shape->size()) <= rank &&
                         std::all_of(values_shape->begin(), values_shape->end(), [](int64_t d) { return d == 1; });
  if (!accumulate && one_value && indices.size() == 1 && indices[0] && is_mask(b.dtype(*indices[0])) &&
      b.rank(*indices[0]) == rank) {
    return where(b, b.cast(*indices[0], ScalarType::Bool), values, self);
  }
  const AdvancedIndex ai = resolve(b, self, indices);
  const std::vector<int64_t> perm = concat(ai.dims, ai.others);
  const Value data = transpose(b, self, perm);
  const Value batch = batch_shape(b, ai);
  // values broadcast to the shape of self[indices] (torch's layout), then laid out like
  // ScatterND's updates: [batch..., other dims...].
  const int64_t at = ai.adjacent ? ai.dims[0] : 0;
  const std::vector<int64_t> before(ai.others.begin(), ai.others.begin() + at);
  const std::vector<int64_t> after(ai.others.begin() + at, ai.others.end());
  const Value target =
      b.op<"Concat">({sizes_of(b, self, before), batch, sizes_of(b, self, after)}, {Attr::i("axis", 0)});
  const auto updates_rank = static_cast<int64_t>(ai.batch_rank + ai.others.size());
  const Value updates =
      transpose(b, b.op<"Expand">({values, target}), inverse(batch_to(at, ai.batch_rank, updates_rank)));
  const Value scattered =
      scatter(b, "ScatterND", data, stacked_indices(b, ai, batch), updates, accumulate ? "add" : "none");
  return transpose(b, scattered, inverse(perm));
}

Value gather(Builder& b, Value self, int64_t dim, Value index, bool sparse_grad) {
  (void)sparse_grad;  // a gradient layout
  const int64_t rank = b.rank(self);
  const auto index_shape = b.static_shape(index);
  if (index_shape && std::find(index_shape->begin(), index_shape->end(), 0) != index_shape->end()) {
    // torch takes an empty index of any rank and integer dtype (GatherElements: self's rank and
    // int32 or int64); the result is as empty as the index.
    return b.constant(b.dtype(self), *index_shape, {});
  }
  if (rank > 0) return b.op<"GatherElements">({self, index}, {Attr::i("axis", wrap_dim(b, dim, rank))});
  // GatherElements needs rank 1: a 0-d self is read as a 1-element vector.
  wrap_dim(b, dim, rank);  // checks dim
  const Value one = b.ints(std::vector<int64_t>{1});
  const Value taken = b.op<"GatherElements">({b.op<"Reshape">({self, one}), b.op<"Reshape">({index, one})});
  return b.op<"Reshape">({taken, shape_of(b, index)});
}

Value nonzero(Builder& b, Value self) {
  // ONNX's NonZero gives one row per dim, torch one row per element found.
  const std::vector<int64_t> swap = {1, 0};
  if (b.rank(self) > 0) return b.op<"Transpose">({b.op<"NonZero">({self})}, {Attr::ints("perm", swap)});
  // torch finds [n, 0] in a 0-d tensor (n = 1 when it is nonzero). onnxruntime's NonZero of a
  // 0-d input differs from ONNX's spec, so it looks at a 1-element vector and drops the column.
  const Value as_vector = b.op<"Reshape">({self, b.ints(std::vector<int64_t>{1})});
  const Value found = b.op<"Transpose">({b.op<"NonZero">({as_vector})}, {Attr::ints("perm", swap)});
  const Value none = b.ints(std::vector<int64_t>{0});
  return b.op<"Slice">({found, none, none, b.ints(std::vector<int64_t>{1})});
}

std::vector<Value> nonzero_numpy(Builder& b, Value self) {
  const int64_t rank = b.rank(self);
  // torch looks at a 0-d tensor as a 1-element vector here.
  const Value x = rank == 0 ? b.op<"Reshape">({self, b.ints(std::vector<int64_t>{1})}) : self;
  const Value positions = b.op<"NonZero">({x});
  std::vector<Value> out;
  for (int64_t d = 0; d < std::max<int64_t>(rank, 1); ++d) {
    out.push_back(b.op<"Gather">({positions, b.scalar(d, ScalarType::Long)}, {Attr::i("axis", 0)}));
  }
  return out;
}

Value take_along_dim(Builder& b, Value self, Value indices, std::optional<int64_t> dim) {
  const int64_t rank = b.rank(self);
  // No dim: along the flattened self (a 0-d self is one element, whatever the dim).
  if (!dim || rank == 0) {
    const Value minus_one = b.ints(std::vector<int64_t>{-1});
    const Value taken = b.op<"Gather">({b.op<"Reshape">({self, minus_one}), b.op<"Reshape">({indices, minus_one})});
    return dim ? b.op<"Reshape">({taken, shape_of(b, indices)}) : taken;
  }
  const int64_t d = wrap_dim(b, *dim, rank);
  // torch broadcasts self and indices over every dim but `dim`: each is expanded to the other's
  // sizes with a 1 at `dim` (Expand broadcasts both ways), read at run time when dynamic.
  const auto broadcast = [&](Value x, Value other) {
    bool same = b.has_shape(other);
    for (int64_t i = 0; same && i < rank; ++i) {
      const Dim mine = b.shape(x)[static_cast<size_t>(i)], theirs = b.shape(other)[static_cast<size_t>(i)];
      const bool equal = mine.is_static() ? theirs.is_static() && theirs.value == mine.value
                                          : mine.symbol.is_set() && theirs.symbol == mine.symbol;
      same = i == d || equal || (theirs.is_static() && theirs.value == 1);
    }
    if (same) return x;
    const Value one = b.ints(std::vector<int64_t>{1});
    return b.op<"Expand">(
        {x, join_sizes(b, {sizes_between(b, other, 0, d), one, sizes_between(b, other, d + 1, rank)})});
  };
  return b.op<"GatherElements">({broadcast(self, indices), broadcast(indices, self)}, {Attr::i("axis", d)});
}

Value masked_scatter(Builder& b, Value self, Value mask, Value source) {
  // self and mask broadcast to one shape (Expand broadcasts both ways).
  const auto self_shape = b.static_shape(self);
  const bool same_shape = self_shape && self_shape == b.static_shape(mask);
  const Value data = same_shape ? self : b.op<"Expand">({self, b.op<"Shape">({mask})});
  const Value mask_b = b.cast(same_shape ? mask : b.op<"Expand">({mask, b.op<"Shape">({self})}), ScalarType::Bool);
  const auto source_shape = b.static_shape(source);
  if (source_shape && std::find(source_shape->begin(), source_shape->end(), 0) != source_shape->end()) {
    return data;  // torch needs as many source elements as true mask elements: there are none
  }
  // The k-th true element of the mask (row-major) takes source's k-th element: its position in
  // source is the number of true elements before it.
  const Value flat_mask = b.op<"Reshape">({mask_b, b.ints(std::vector<int64_t>{-1})});
  const Value before =
      b.op<"CumSum">({b.cast(flat_mask, ScalarType::Long), b.scalar(0, ScalarType::Long)}, {Attr::i("exclusive", 1)});
  // Under false elements the count can reach past source's end; those positions are not used.
  const Value positions = b.op<"Where">({flat_mask, before, b.scalar(0, ScalarType::Long)});
  const Value taken = b.op<"Gather">({b.op<"Reshape">({source, b.ints(std::vector<int64_t>{-1})}), positions});
  const auto out = b.out_static_shape();
  const Value shape = out ? b.ints(*out) : b.op<"Shape">({data});
  return where(b, mask_b, b.op<"Reshape">({taken, shape}), data);
}

}  // namespace manual

}  // namespace fastonnx
