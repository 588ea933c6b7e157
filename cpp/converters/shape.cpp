// Reshapes and permutations.
#include <algorithm>
#include <numeric>

#include "common.h"
#include "converters_nn.h"
#include "converters_shape.h"

namespace fastonnx::manual {

Value flatten_using_ints(Builder& b, Value self, int64_t start_dim, int64_t end_dim) {
  const int64_t rank = b.rank(self);
  start_dim = wrap_dim(b, start_dim, rank);
  end_dim = wrap_dim(b, end_dim, rank);
  if (b.out_static_shape()) return reshape_to_output(b, self, {});
  // Dynamic: the sizes kept and the product of the merged ones, read at run time where dynamic
  // (every size given: neither Reshape's 0, which copies the size at the same index, nor -1).
  std::vector<Value> parts;
  if (start_dim > 0) parts.push_back(sizes_between(b, self, 0, start_dim));
  const Value merged = sizes_between(b, self, start_dim, end_dim + 1);
  parts.push_back(reduce(b, "ReduceProd", merged, std::vector<int64_t>{0}, true));
  if (end_dim + 1 < rank) parts.push_back(sizes_between(b, self, end_dim + 1, rank));
  return reshape_to(b, self, join_sizes(b, parts));
}

namespace {

// Transpose by `perm`; a complex tensor's (real, imaginary) pairs stay last (see
// Builder::accept_complex_pairs).
Value transposed_by(Builder& b, Value self, std::vector<int64_t> perm) {
  if (!is_complex(b.dtype(self))) return b.op<"Transpose">({self}, {Attr::ints("perm", perm)});
  b.accept_complex_pairs();
  perm.push_back(static_cast<int64_t>(perm.size()));
  return b.as_complex(b.op<"Transpose">({b.as_real(self)}, {Attr::ints("perm", perm)}));
}

}  // namespace

Value permute(Builder& b, Value self, std::vector<int64_t> dims) {
  const int64_t rank = b.rank(self);
  bool identity = true;
  for (size_t i = 0; i < dims.size(); ++i) {
    dims[i] = wrap_dim(b, dims[i], rank);
    identity = identity && dims[i] == static_cast<int64_t>(i);
  }
  if (identity) return self;
  return transposed_by(b, self, dims);
}

Value transpose_int(Builder& b, Value self, int64_t dim0, int64_t dim1) {
  const int64_t rank = b.rank(self);
  dim0 = wrap_dim(b, dim0, rank);
  dim1 = wrap_dim(b, dim1, rank);
  if (dim0 == dim1 || rank < 2) return self;
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[dim0], perm[dim1]);
  return transposed_by(b, self, perm);
}

Value pixel_shuffle(Builder& b, Value self, int64_t upscale_factor) {
  const int64_t r = upscale_factor;
  // onnxruntime implements DepthToSpace for floating types only (no int64 or bool kernels).
  if (b.rank(self) == 4 && is_floating(b.dtype(self))) {
    return b.op<"DepthToSpace">({self}, {Attr::i("blocksize", r), Attr::s("mode", "CRD")});
  }
  // Otherwise: (*, C*r*r, H, W) -> (*, C, r, r, H, W) -> (*, C, H, r, W, r) -> (*, C, H*r, W*r), with
  // the sizes that are dynamic read at run time.
  const int64_t rank = b.rank(self);
  if (rank < 3) b.fail("pixel_shuffle needs a tensor of rank 3 or more");
  // An empty input shuffles to an empty output; Reshape cannot make zero-size dims before opset 14.
  if (const auto out = b.out_static_shape(); out && std::find(out->begin(), out->end(), 0) != out->end()) {
    return b.constant(b.dtype(self), *out, {});
  }
  const int64_t lead = rank - 3;
  const Value lead_sizes = sizes_between(b, self, 0, lead);
  const Value c = b.op<"Div">({size_along(b, self, lead), b.ints(std::vector<int64_t>{r * r})});
  const Value h = size_along(b, self, lead + 1), w = size_along(b, self, lead + 2);
  const Value split = join_sizes(b, {lead_sizes, c, b.ints(std::vector<int64_t>{r, r}), h, w});
  std::vector<int64_t> perm(static_cast<size_t>(lead));
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t d : {0, 3, 1, 4, 2}) perm.push_back(lead + d);
  const Value moved = b.op<"Transpose">({reshape_to(b, self, split)}, {Attr::ints("perm", perm)});
  const Value factor = b.ints(std::vector<int64_t>{r});
  return reshape_to(b, moved, join_sizes(b, {lead_sizes, c, b.op<"Mul">({h, factor}), b.op<"Mul">({w, factor})}));
}

}  // namespace fastonnx::manual

namespace fastonnx::manual {

Value cat(Builder& b, std::vector<Value> tensors, int64_t dim) {
  // torch skips 1-D empty tensors whatever the rank of the others (a legacy rule).
  std::vector<Value> kept;
  for (Value t : tensors) {
    const auto shape = b.static_shape(t);
    if (!(shape && shape->size() == 1 && (*shape)[0] == 0)) kept.push_back(t);
  }
  if (kept.empty()) kept.push_back(tensors.front());
  b.cast_all(kept, b.compute_dtype(kept));
  if (kept.size() == 1) return kept.front();
  return b.op<"Concat">(spread(kept), {Attr::i("axis", dim)});
}

}  // namespace fastonnx::manual

// Copies, broadcasts, and the ops that add, remove or reorder dimensions.
namespace fastonnx {

namespace {

int64_t numel(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

std::vector<int64_t> iota_vector(int64_t begin, int64_t end) {
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(end - begin, 0)));
  std::iota(out.begin(), out.end(), begin);
  return out;
}

// The size of `x` along `axis` as a 1-D int64 tensor of one item.
Value dim_size(Builder& b, Value x, int64_t axis) {
  if (auto shape = b.static_shape(x)) return b.ints(std::vector<int64_t>{(*shape)[axis]});
  const Value shape = b.op<"Shape">({x});
  return b.op<"Slice">({shape, b.ints(std::vector<int64_t>{axis}), b.ints(std::vector<int64_t>{axis + 1})});
}

// The shape of `x` with the size at `axis` replaced by the 1-D int64 `sizes`, built in the graph.
Value shape_replacing(Builder& b, Value x, int64_t axis, Value sizes) {
  const Value shape = b.op<"Shape">({x});
  const Value rank = b.ints(std::vector<int64_t>{b.rank(x)});
  return b.op<"Concat">({b.op<"Slice">({shape, b.ints(std::vector<int64_t>{0}), b.ints(std::vector<int64_t>{axis})}),
                         sizes, b.op<"Slice">({shape, b.ints(std::vector<int64_t>{axis + 1}), rank})},
                        {Attr::i("axis", 0)});
}

// Squeeze's axes when whether some of them go is only known at run time: a dim of size 1 is
// appended and always squeezed, so the axes are never empty (onnxruntime reads empty axes as
// "every dim of size 1"), and each of `candidates` joins it when its size is 1.
Value squeeze_at_run_time(Builder& b, Value self, const std::vector<int64_t>& always,
                          const std::vector<int64_t>& candidates) {
  const int64_t rank = b.rank(self);
  const Value padded = b.op<"Unsqueeze">({self, b.ints(std::vector<int64_t>{rank})});
  const Value sizes = b.op<"Gather">({b.op<"Shape">({self}), b.ints(candidates)}, {Attr::i("axis", 0)});
  std::vector<int64_t> axes(candidates);
  axes.insert(axes.end(), always.begin(), always.end());
  axes.push_back(rank);
  const Value kept = b.list(std::vector<Scalar>(always.size() + 1, Scalar(true)), ScalarType::Bool);
  const Value chosen =
      b.op<"Concat">({b.op<"Equal">({sizes, b.ints(std::vector<int64_t>{1})}), kept}, {Attr::i("axis", 0)});
  b.mark_rank_dynamic();
  return b.op<"Squeeze">({padded, b.op<"Compress">({b.ints(axes), chosen}, {Attr::i("axis", 0)})});
}

}  // namespace

// Squeezes the dims of `dims` that have size 1; torch leaves the others alone. A dynamic size is
// never 1 unless torch.export's ranges allow it (Builder::may_be_one); then the graph decides.
Value squeeze_size_one(Builder& b, Value self, const std::vector<int64_t>& dims) {
  const int64_t rank = b.rank(self);
  if (rank == 0) return self;  // torch lets a scalar be squeezed at dim 0 or -1
  const auto shape = b.shape(self);
  std::vector<bool> asked(static_cast<size_t>(rank), false);
  for (int64_t d : dims) asked[wrap_dim(b, d, rank)] = true;
  std::vector<int64_t> axes, candidates;
  for (int64_t d = 0; d < rank; ++d) {
    if (!asked[d] || !b.may_be_one(shape[d])) continue;
    (shape[d].is_static() ? axes : candidates).push_back(d);
  }
  if (!candidates.empty()) return squeeze_at_run_time(b, self, axes, candidates);
  if (axes.empty()) return self;
  return b.op<"Squeeze">({self, b.ints(axes)});
}

Value squeeze_size_one(Builder& b, Value self, int64_t dim) {
  return squeeze_size_one(b, self, std::vector<int64_t>{dim});
}

namespace {

// Gathers `indices` along `dim`, or from the flattened tensor when dim is absent.
Value gather_repeated(Builder& b, Value self, std::optional<int64_t> dim, Value indices) {
  if (!dim || b.rank(self) == 0) {
    return b.op<"Gather">({b.op<"Reshape">({self, b.ints(std::vector<int64_t>{-1})}), indices});
  }
  return b.op<"Gather">({self, indices}, {Attr::i("axis", wrap_dim(b, *dim, b.rank(self)))});
}

}  // namespace

// The indices i of `counts` each repeated counts[i] times, `total` of them: output position j
// holds how many running totals of `counts` are at most j.
Value repeated_indices(Builder& b, Value counts, const std::optional<SymInt>& total) {
  counts = b.cast(counts, ScalarType::Long);
  const Value ends = b.op<"CumSum">({counts, b.scalar(int64_t{0}, ScalarType::Long)});
  Value length;
  if (!total) {
    length = reduce(b, "ReduceSum", counts, std::nullopt, false);
  } else {
    length = b.long_scalar(*total);
  }
  const Value positions =
      b.op<"Range">({b.scalar(int64_t{0}, ScalarType::Long), length, b.scalar(int64_t{1}, ScalarType::Long)});
  const Value passed = b.op<"LessOrEqual">({b.op<"Unsqueeze">({ends, b.ints(std::vector<int64_t>{0})}),
                                            b.op<"Unsqueeze">({positions, b.ints(std::vector<int64_t>{1})})});
  return reduce(b, "ReduceSum", b.cast(passed, ScalarType::Long), std::vector<int64_t>{1}, false);
}

namespace manual {

Value copy(Builder& b, Value self, Value src, bool /*non_blocking*/) {
  // torch writes src into self's memory: src broadcast to self's shape, in self's dtype.
  const Value converted = b.cast(src, b.dtype(self));
  const auto shape = b.static_shape(self);
  if (shape && b.static_shape(src) == shape) return converted;
  return b.op<"Expand">({converted, shape_of(b, self)});
}

Value resize_(Builder& b, Value self, SymIntList size) {
  // The result reads self's storage from the start: fewer elements keep a prefix; the elements
  // torch adds are uninitialized memory, made zeros here.
  Value flat = b.op<"Reshape">({self, b.ints(std::vector<int64_t>{-1})});
  const auto in = b.static_shape(self);
  const auto out = b.out_static_shape();
  if (in && out) {
    const int64_t have = numel(*in), want = numel(*out);
    if (have == want) return reshape_to_output(b, self, size);
    if (want < have) {
      flat = b.op<"Slice">({flat, b.ints(std::vector<int64_t>{0}), b.ints(std::vector<int64_t>{want})});
    } else {
      flat = b.op<"Pad">({flat, b.ints(std::vector<int64_t>{0, want - have})});
    }
    return reshape_to_output(b, flat, size);
  }
  // Dynamic: the element counts are read at run time (Slice clamps to what there is).
  const Value want = reduce(b, "ReduceProd", b.ints(size), std::vector<int64_t>{0}, true);
  const Value have = b.op<"Reshape">({b.op<"Size">({self}), b.ints(std::vector<int64_t>{1})});
  const Value kept = b.op<"Slice">({flat, b.ints(std::vector<int64_t>{0}), want});
  const Value missing = b.op<"Max">({b.op<"Sub">({want, have}), b.ints(std::vector<int64_t>{0})});
  const Value padded =
      b.op<"Pad">({kept, b.op<"Concat">({b.ints(std::vector<int64_t>{0}), missing}, {Attr::i("axis", 0)})});
  return reshape_to_output(b, padded, size);
}

Value expand(Builder& b, Value self, SymIntList size, bool /*implicit*/) {
  if (b.out_static_shape() && b.out_static_shape() == b.static_shape(self)) return self;
  // ONNX's Expand broadcasts both ways, so torch's -1 (keep the size) can be written 1.
  for (SymInt& s : size) {
    if (s.is_static() && s.value == -1) s = SymInt(int64_t{1});
  }
  return b.op<"Expand">({self, b.ints(size)});
}

Value repeat(Builder& b, Value self, SymIntList repeats) {
  const int64_t rank = b.rank(self);
  const int64_t extra = static_cast<int64_t>(repeats.size()) - rank;
  if (extra < 0) b.fail("repeat needs at least as many repeats as the tensor has dims");
  if (repeats.empty()) return self;
  // ONNX's Tile takes one repeat per dim; torch's extra repeats make new leading dims.
  const Value x = extra > 0 ? b.op<"Unsqueeze">({self, b.ints(iota_vector(0, extra))}) : self;
  return b.op<"Tile">({x, b.ints(repeats)});
}

Value tile(Builder& b, Value self, SymIntList dims) {
  // torch's tile repeats the leading dims once when it is given fewer repeats than dims.
  const auto rank = static_cast<size_t>(b.rank(self));
  if (dims.size() < rank) dims.insert(dims.begin(), rank - dims.size(), SymInt(int64_t{1}));
  return repeat(b, self, dims);
}

Value squeeze(Builder& b, Value self) { return squeeze_size_one(b, self, iota_vector(0, b.rank(self))); }

Value unsqueeze(Builder& b, Value self, int64_t dim) {
  // A negative dim counts from the end of the result, in torch and in ONNX.
  return b.op<"Unsqueeze">({self, b.ints(std::vector<int64_t>{dim})});
}

Value unflatten_int(Builder& b, Value self, int64_t dim, SymIntList sizes) {
  if (b.out_static_shape()) return reshape_to_output(b, self, {});
  // Dynamic: self's sizes, with `sizes` (one of them may be -1) in place of dim's. A size of 0
  // (torch then takes no -1) must not read as "copy the input's": allowzero from opset 14; before,
  // the empty tensor is reshaped to 1s around that 0 and broadcast to the shape.
  dim = wrap_dim(b, dim, b.rank(self));
  const Value shape = shape_replacing(b, self, dim, b.ints(sizes));
  const auto zero =
      std::find_if(sizes.begin(), sizes.end(), [](const SymInt& s) { return s.is_static() && s.value == 0; });
  if (zero == sizes.end()) return b.op<"Reshape">({self, shape});
  if (b.opset() >= 14) return b.op<"Reshape">({self, shape}, {Attr::i("allowzero", 1)});
  std::vector<int64_t> ones(static_cast<size_t>(b.rank(self)) - 1 + sizes.size(), 1);
  ones[static_cast<size_t>(dim + (zero - sizes.begin()))] = -1;
  return b.op<"Expand">({b.op<"Reshape">({self, b.ints(ones)}), shape});
}

Value stack(Builder& b, std::vector<Value> tensors, int64_t dim) {
  const int64_t rank = b.rank(tensors.front()) + 1;
  dim = wrap_dim(b, dim, rank);
  b.cast_all(tensors, b.compute_dtype(tensors));
  const Value axes = b.ints(std::vector<int64_t>{dim});
  std::vector<Value> parts;
  for (Value t : tensors) parts.push_back(b.op<"Unsqueeze">({t, axes}));
  if (parts.size() == 1) return parts.front();
  return b.op<"Concat">(spread(parts), {Attr::i("axis", dim)});
}

Value movedim_intlist(Builder& b, Value self, std::vector<int64_t> source, std::vector<int64_t> destination) {
  const int64_t rank = b.rank(self);
  if (rank == 0) return self;
  if (source.size() != destination.size()) b.fail("movedim needs as many destinations as sources");
  // torch's order: the moved dims at their destinations, the others in their order around them.
  std::vector<int64_t> perm(static_cast<size_t>(rank), -1);
  std::vector<bool> moved(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < source.size(); ++i) {
    const int64_t from = wrap_dim(b, source[i], rank);
    perm[wrap_dim(b, destination[i], rank)] = from;
    moved[from] = true;
  }
  int64_t next = 0;
  for (int64_t& p : perm) {
    if (p >= 0) continue;
    while (moved[next]) ++next;
    p = next++;
  }
  return permute(b, self, perm);
}

Value movedim_int(Builder& b, Value self, int64_t source, int64_t destination) {
  return movedim_intlist(b, self, {source}, {destination});
}

Value repeat_interleave_self_int(Builder& b, Value self, SymInt repeats, std::optional<int64_t> dim,
                                 std::optional<SymInt> /*output_size*/) {
  // Each element repeated in place: (.., n, ..) -> (.., n, r, ..) by broadcasting -> (.., n*r, ..).
  Value x = self;
  int64_t rank = b.rank(self), axis = 0;
  if (!dim || rank == 0) {
    x = b.op<"Reshape">({self, b.ints(std::vector<int64_t>{-1})});
    rank = 1;
  } else {
    axis = wrap_dim(b, *dim, rank);
  }
  SymIntList broadcast(static_cast<size_t>(rank + 1), SymInt(int64_t{1}));
  broadcast[axis + 1] = repeats;
  const Value expanded =
      b.op<"Expand">({b.op<"Unsqueeze">({x, b.ints(std::vector<int64_t>{axis + 1})}), b.ints(broadcast)});
  if (b.out_static_shape()) return reshape_to_output(b, expanded, {});
  if (rank == 1) return b.op<"Reshape">({expanded, b.ints(std::vector<int64_t>{-1})});
  // Dynamic: self's sizes with the axis's replaced by -1.
  return b.op<"Reshape">({expanded, shape_replacing(b, self, axis, b.ints(std::vector<int64_t>{-1}))});
}

Value repeat_interleave_self_Tensor(Builder& b, Value self, Value repeats, std::optional<int64_t> dim,
                                    std::optional<SymInt> output_size) {
  const int64_t rank = b.rank(self);
  Value counts = repeats;
  const auto repeats_shape = b.static_shape(repeats);
  if (repeats_shape && numel(*repeats_shape) == 1) {
    // One count for every element along the axis (of the flattened tensor when dim is absent).
    Value along;
    if (dim && rank > 0) {
      along = dim_size(b, self, wrap_dim(b, *dim, rank));
    } else if (auto shape = b.static_shape(self)) {
      along = b.ints(std::vector<int64_t>{numel(*shape)});
    } else {
      along = b.op<"Reshape">({b.op<"Size">({self}), b.ints(std::vector<int64_t>{1})});
    }
    counts = b.op<"Expand">({b.op<"Reshape">({repeats, b.ints(std::vector<int64_t>{1})}), along});
  }
  return gather_repeated(b, self, dim, repeated_indices(b, counts, output_size));
}

}  // namespace manual
}  // namespace fastonnx
