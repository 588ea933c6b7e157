#include "fastonnx/fold.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "fastonnx/numeric.h"
#include "fold_internal.h"

namespace fastonnx {

size_t ConstView::count() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

namespace {

using namespace fold_detail;

size_t read_limit(const ConstView& v) { return v.model_tensor ? kSmall : kLarge; }

int64_t wrap(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

Folded alias(const ConstView& in, Shape shape) {
  Folded f;
  f.dtype = in.dtype;
  f.shape = std::move(shape);
  f.alias_of = 0;
  return f;
}

std::optional<Shape> reshape_target(const ConstView& data, const ConstView& shape_in, bool allow_zero) {
  Shape target = ints_of(shape_in);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allow_zero) {
      if (i >= data.shape.size()) return std::nullopt;
      target[i] = data.shape[i];
    }
    if (target[i] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(i);
    } else {
      known *= target[i];
    }
  }
  if (infer >= 0) {
    if (known == 0) return std::nullopt;
    target[infer] = static_cast<int64_t>(data.count()) / known;
  }
  if (count_of(target) != data.count()) return std::nullopt;
  return target;
}

Result transpose(const ConstView& in, std::span<const Attr> attrs, const ConstSource& source) {
  const size_t rank = in.shape.size();
  std::vector<int64_t> perm(rank);
  if (const Attr* a = find_attr(attrs, "perm", Attr::Kind::Ints)) {
    perm = a->as_ints();
  } else {
    for (size_t d = 0; d < rank; ++d) perm[d] = static_cast<int64_t>(rank - 1 - d);
  }
  if (perm.size() != rank) return std::nullopt;
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) out[d] = in.shape[perm[d]];
  Folded f;
  f.dtype = in.dtype;
  f.shape = std::move(out);
  if (in.data != nullptr) {
    f.computed = transposed_bytes(in.data, source.owner, element_size(in.dtype), in.shape, perm);
  } else if (const auto cast = source.computed ? source.computed->cast_of() : std::nullopt) {
    // A weight converted while written (export(dtype=...)): transposed in its stored dtype, then
    // converted, range by range.
    f.computed = cast_computed_bytes(
        transposed_bytes(cast->data, cast->owner, element_size(cast->from), in.shape, perm), cast->from, in.dtype);
  } else {
    return std::nullopt;
  }
  if (in.count() <= read_limit(in)) {  // small: materialize now, so later folds can read it
    f.computed->produce([&](const void* p, size_t n) {
      f.bytes.insert(f.bytes.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    });
    f.computed.reset();
  }
  return std::vector<Folded>{std::move(f)};
}

Result cast(const ConstView& in, std::span<const Attr> attrs, const ConstSource& source) {
  const Attr* to_attr = find_attr(attrs, "to", Attr::Kind::Int);
  if (to_attr == nullptr || in.data == nullptr) return std::nullopt;
  const ScalarType to = scalar_type_from_onnx(static_cast<int>(to_attr->as_int()));
  if (!is_numeric(in.dtype) || !is_numeric(to)) return std::nullopt;
  if (to == in.dtype) return std::vector<Folded>{alias(in, in.shape)};
  Folded f;
  f.dtype = to;
  f.shape = in.shape;
  if (in.count() <= read_limit(in)) {
    const size_t is = static_cast<size_t>(element_size(in.dtype)), os = static_cast<size_t>(element_size(to));
    f.bytes.resize(in.count() * os);
    for (size_t i = 0; i < in.count(); ++i) convert_element(in.dtype, in.data + i * is, to, &f.bytes[i * os]);
  } else {
    f.computed = cast_bytes(in.data, source.owner, in.count(), in.dtype, to);
  }
  return std::vector<Folded>{std::move(f)};
}

Result concat(ConstInputs inputs, std::span<const Attr> attrs) {
  const ConstView& first = *inputs[0];
  const int64_t axis = wrap(attr_int(attrs, "axis", 0), first.shape.size());
  Shape out = first.shape;
  out[axis] = 0;
  for (const auto& in : inputs) {
    if (!in || in->dtype != first.dtype || in->shape.size() != first.shape.size()) return std::nullopt;
    out[axis] += in->shape[axis];
  }
  if (count_of(out) > kLarge) return std::nullopt;
  const size_t es = static_cast<size_t>(element_size(first.dtype));
  size_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= static_cast<size_t>(out[d]);
  return std::vector<Folded>{make(first.dtype, out, [&](uint8_t* dst) {
    for (size_t o = 0; o < outer; ++o) {
      for (const auto& in : inputs) {
        const size_t block = in->count() / std::max<size_t>(outer, 1) * es;
        std::memcpy(dst, in->data + o * block, block);
        dst += block;
      }
    }
  })};
}

Result gather(const ConstView& data, const ConstView& indices, std::span<const Attr> attrs) {
  const int64_t axis = wrap(attr_int(attrs, "axis", 0), data.shape.size());
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), indices.shape.begin(), indices.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (count_of(out) > kLarge) return std::nullopt;
  const std::vector<int64_t> idx = ints_of(indices);
  const int64_t n = data.shape[axis];
  for (int64_t i : idx) {
    if (i < -n || i >= n) return std::nullopt;
  }
  size_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= static_cast<size_t>(data.shape[d]);
  for (size_t d = axis + 1; d < data.shape.size(); ++d) inner *= static_cast<size_t>(data.shape[d]);
  const size_t es = static_cast<size_t>(element_size(data.dtype)), block = inner * es;
  return std::vector<Folded>{make(data.dtype, out, [&](uint8_t* dst) {
    for (size_t o = 0; o < outer; ++o) {
      for (int64_t i : idx) {
        const size_t at = static_cast<size_t>(i < 0 ? i + n : i);
        std::memcpy(dst, data.data + (o * static_cast<size_t>(n) + at) * block, block);
        dst += block;
      }
    }
  })};
}

Result slice(ConstInputs inputs) {
  const ConstView& data = *inputs[0];
  const size_t rank = data.shape.size();
  const std::vector<int64_t> starts = ints_of(*inputs[1]), ends = ints_of(*inputs[2]);
  std::vector<int64_t> axes(starts.size()), steps(starts.size(), 1);
  std::iota(axes.begin(), axes.end(), 0);
  if (inputs.size() > 3 && inputs[3]) axes = ints_of(*inputs[3]);
  if (inputs.size() > 4 && inputs[4]) steps = ints_of(*inputs[4]);
  if (axes.size() != starts.size() || ends.size() != starts.size() || steps.size() != starts.size())
    return std::nullopt;
  std::vector<int64_t> begin(rank, 0), step(rank, 1);
  Shape out = data.shape;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = wrap(axes[i], rank);
    const int64_t dim = data.shape[axis], st = steps[i];
    if (st == 0) return std::nullopt;
    auto clampi = [&](int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); };
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (st > 0) {
      s = clampi(s, 0, dim);
      e = clampi(e, 0, dim);
      out[axis] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = clampi(s, 0, dim - 1);
      e = clampi(e, -1, dim - 1);
      out[axis] = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    begin[axis] = s;
    step[axis] = st;
  }
  if (count_of(out) > kLarge) return std::nullopt;
  std::vector<size_t> stride(rank, 1);
  for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * static_cast<size_t>(data.shape[d]);
  const size_t es = static_cast<size_t>(element_size(data.dtype));
  return std::vector<Folded>{make(data.dtype, out, [&](uint8_t* dst) {
    std::vector<int64_t> index(rank, 0);
    for (size_t i = 0, n = count_of(out); i < n; ++i) {
      size_t off = 0;
      for (size_t d = 0; d < rank; ++d) off += static_cast<size_t>(begin[d] + index[d] * step[d]) * stride[d];
      std::memcpy(dst + i * es, data.data + off * es, es);
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < out[d]) break;
        index[d] = 0;
      }
    }
  })};
}

// The axes of a Squeeze, an Unsqueeze or a reduction: input 1 since opset 13 (18 for most
// reductions), the `axes` attribute before; none when neither is given.
std::vector<int64_t> axes_of(ConstInputs inputs, std::span<const Attr> attrs) {
  if (inputs.size() > 1 && inputs[1]) return ints_of(*inputs[1]);
  if (const Attr* a = find_attr(attrs, "axes", Attr::Kind::Ints)) return a->as_ints();
  return {};
}

Result squeeze_like(std::string_view op, ConstInputs inputs, std::span<const Attr> attrs) {
  const ConstView& in = *inputs[0];
  const std::vector<int64_t> axes = axes_of(inputs, attrs);
  if (op == "Squeeze") {
    Shape out;
    for (size_t d = 0; d < in.shape.size(); ++d) {
      const bool listed = std::any_of(axes.begin(), axes.end(),
                                      [&](int64_t a) { return wrap(a, in.shape.size()) == static_cast<int64_t>(d); });
      if (axes.empty() ? in.shape[d] != 1 : !listed) out.push_back(in.shape[d]);
    }
    return std::vector<Folded>{alias(in, out)};
  }
  const size_t rank = in.shape.size() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    const int64_t w = wrap(a, rank);
    if (w < 0 || w >= static_cast<int64_t>(rank)) return std::nullopt;
    inserted[w] = true;
  }
  Shape out;
  size_t next = 0;
  for (size_t d = 0; d < rank; ++d) out.push_back(inserted[d] ? 1 : in.shape[next++]);
  return std::vector<Folded>{alias(in, out)};
}

Result range(ConstInputs inputs) {
  const ConstView &start = *inputs[0], &limit = *inputs[1], &delta = *inputs[2];
  if (is_floating(start.dtype)) {
    const double s = load_double(start.dtype, start.data), l = load_double(limit.dtype, limit.data),
                 d = load_double(delta.dtype, delta.data);
    if (d == 0) return std::nullopt;
    const double n = std::max(std::ceil((l - s) / d), 0.0);
    if (n > kLarge) return std::nullopt;
    return std::vector<Folded>{make(start.dtype, {static_cast<int64_t>(n)}, [&](uint8_t* dst) {
      for (int64_t i = 0; i < static_cast<int64_t>(n); ++i)
        store_double(start.dtype, dst + i * element_size(start.dtype), s + i * d);
    })};
  }
  const int64_t s = load_int(start.dtype, start.data), l = load_int(limit.dtype, limit.data),
                d = load_int(delta.dtype, delta.data);
  if (d == 0) return std::nullopt;
  const int64_t n = std::max<int64_t>((l - s + d + (d > 0 ? -1 : 1)) / d, 0);
  if (static_cast<size_t>(n) > kLarge) return std::nullopt;
  return std::vector<Folded>{make(start.dtype, {n}, [&](uint8_t* dst) {
    for (int64_t i = 0; i < n; ++i) store_int(start.dtype, dst + i * element_size(start.dtype), s + i * d);
  })};
}

// Only small: a large Expand is mostly a filled tensor (torch.full), which as a constant would
// only make the file bigger.
Result expand(const ConstView& in, const ConstView& shape) {
  const auto out = broadcast(in.shape, ints_of(shape));
  if (!out || count_of(*out) > kSmall) return std::nullopt;
  const auto offsets = broadcast_offsets(in.shape, *out);
  const size_t es = static_cast<size_t>(element_size(in.dtype));
  return std::vector<Folded>{make(in.dtype, *out, [&](uint8_t* dst) {
    for (size_t i = 0; i < offsets.size(); ++i) std::memcpy(dst + i * es, in.data + offsets[i] * es, es);
  })};
}

Result reduce(std::string_view op, ConstInputs inputs, std::span<const Attr> attrs) {
  const ConstView& in = *inputs[0];
  // Whole-tensor integer products and sums only: no axes, or axes naming every dimension (a
  // flattened shape's product over its one axis).
  std::vector<int64_t> axes = axes_of(inputs, attrs);
  const auto rank = static_cast<int64_t>(in.shape.size());
  for (int64_t& a : axes) a = wrap(a, in.shape.size());
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const bool every_axis =
      axes.empty() || (static_cast<int64_t>(axes.size()) == rank && axes.front() == 0 && axes.back() == rank - 1);
  if (!every_axis || is_floating(in.dtype)) return std::nullopt;
  int64_t acc = op == "ReduceProd" ? 1 : 0;
  for (int64_t v : ints_of(in)) acc = op == "ReduceProd" ? acc * v : acc + v;
  Shape out = attr_int(attrs, "keepdims", 1) ? Shape(in.shape.size(), 1) : Shape{};
  return std::vector<Folded>{make(in.dtype, out, [&](uint8_t* dst) { store_int(in.dtype, dst, acc); })};
}

// Sums in the element type, one addition after another, as the runtime does: each partial sum
// is rounded (floats) or wrapped (integers) to the type before the next element is added.
Result cumsum(const ConstView& in, const ConstView& axis_in, std::span<const Attr> attrs) {
  const size_t rank = in.shape.size();
  if (in.dtype == ScalarType::Bool || axis_in.count() != 1 || rank == 0) return std::nullopt;
  const int64_t axis = wrap(ints_of(axis_in)[0], rank);
  if (axis < 0 || axis >= static_cast<int64_t>(rank)) return std::nullopt;
  const bool exclusive = attr_int(attrs, "exclusive", 0) != 0, reverse = attr_int(attrs, "reverse", 0) != 0;
  size_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= static_cast<size_t>(in.shape[d]);
  for (size_t d = axis + 1; d < rank; ++d) inner *= static_cast<size_t>(in.shape[d]);
  const size_t n = static_cast<size_t>(in.shape[axis]), es = static_cast<size_t>(element_size(in.dtype));
  const bool floating = is_floating(in.dtype);
  return std::vector<Folded>{make(in.dtype, in.shape, [&](uint8_t* dst) {
    std::vector<uint8_t> sum(es);
    auto accumulate = [&](const uint8_t* element) {
      if (floating) {
        store_double(in.dtype, sum.data(), load_double(in.dtype, sum.data()) + load_double(in.dtype, element));
      } else {
        const auto total =
            static_cast<uint64_t>(load_int(in.dtype, sum.data())) + static_cast<uint64_t>(load_int(in.dtype, element));
        store_int(in.dtype, sum.data(), static_cast<int64_t>(total));
      }
    };
    for (size_t o = 0; o < outer; ++o) {
      for (size_t i = 0; i < inner; ++i) {
        std::fill(sum.begin(), sum.end(), uint8_t{0});  // zero in every numeric type
        for (size_t k = 0; k < n; ++k) {
          const size_t at = (o * n + (reverse ? n - 1 - k : k)) * inner + i;
          if (!exclusive) accumulate(in.data + at * es);
          std::memcpy(dst + at * es, sum.data(), es);
          if (exclusive) accumulate(in.data + at * es);
        }
      }
    }
  })};
}

// GatherND: each row of the last dimension of `indices` picks a slice of `data`, after the
// first `batch_dims` dimensions, which the two share.
Result gather_nd(const ConstView& data, const ConstView& indices, std::span<const Attr> attrs) {
  const int64_t batch = attr_int(attrs, "batch_dims", 0);
  const auto r = static_cast<int64_t>(data.shape.size()), q = static_cast<int64_t>(indices.shape.size());
  if (indices.dtype != ScalarType::Long || q < 1 || batch < 0 || batch >= std::min(r, q)) return std::nullopt;
  const int64_t k = indices.shape[q - 1];
  if (k > r - batch) return std::nullopt;
  for (int64_t d = 0; d < batch; ++d) {
    if (data.shape[d] != indices.shape[d]) return std::nullopt;
  }
  Shape out(indices.shape.begin(), indices.shape.end() - 1);
  out.insert(out.end(), data.shape.begin() + batch + k, data.shape.end());
  if (count_of(out) > kLarge) return std::nullopt;
  size_t batches = 1, per_batch = 1, slice = 1;
  for (int64_t d = 0; d < batch; ++d) batches *= static_cast<size_t>(data.shape[d]);
  for (int64_t d = batch; d < q - 1; ++d) per_batch *= static_cast<size_t>(indices.shape[d]);
  for (int64_t d = batch + k; d < r; ++d) slice *= static_cast<size_t>(data.shape[d]);
  const size_t batch_stride = data.count() / std::max<size_t>(batches, 1);
  // Where each picked slice starts in `data`; an index out of range is left to the runtime.
  const std::vector<int64_t> idx = ints_of(indices);
  std::vector<size_t> starts;
  starts.reserve(batches * per_batch);
  for (size_t b = 0; b < batches; ++b) {
    for (size_t m = 0; m < per_batch; ++m) {
      size_t offset = 0;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t dim = data.shape[batch + j];
        int64_t i = idx[(b * per_batch + m) * static_cast<size_t>(k) + static_cast<size_t>(j)];
        if (i < -dim || i >= dim) return std::nullopt;
        offset = offset * static_cast<size_t>(dim) + static_cast<size_t>(i < 0 ? i + dim : i);
      }
      starts.push_back(b * batch_stride + offset * slice);
    }
  }
  const size_t es = static_cast<size_t>(element_size(data.dtype));
  return std::vector<Folded>{make(data.dtype, out, [&](uint8_t* dst) {
    for (size_t s : starts) {
      std::memcpy(dst, data.data + s * es, slice * es);
      dst += slice * es;
    }
  })};
}

bool all_present(ConstInputs inputs, size_t n) {
  if (inputs.size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (!inputs[i]) return false;
  }
  return true;
}

bool readable(ConstInputs inputs) {
  return std::all_of(inputs.begin(), inputs.end(),
                     [](const auto& v) { return !v || (v->data && is_numeric(v->dtype)); });
}

}  // namespace

std::optional<std::vector<Folded>> fold(std::string_view op, std::span<const Attr> attrs, ConstInputs inputs,
                                        std::span<const ConstSource> sources) {
  if (inputs.empty() || !inputs[0]) return std::nullopt;
  const ConstView& x = *inputs[0];
  // Metadata-only ops: any size, the bytes stay where they are.
  if (op == "Identity") return std::vector<Folded>{alias(x, x.shape)};
  if (op == "Squeeze" || op == "Unsqueeze") {
    if (!readable(inputs.subspan(1))) return std::nullopt;
    return squeeze_like(op, inputs, attrs);
  }
  if (op == "Reshape") {
    if (!all_present(inputs, 2) || !readable(inputs.subspan(1))) return std::nullopt;
    const auto target = reshape_target(x, *inputs[1], attr_int(attrs, "allowzero", 0) != 0);
    if (!target) return std::nullopt;
    return std::vector<Folded>{alias(x, *target)};
  }
  if (op == "Flatten") {
    const int64_t axis = wrap(attr_int(attrs, "axis", 1), x.shape.size());
    int64_t lead = 1;
    for (int64_t d = 0; d < axis; ++d) lead *= x.shape[d];
    return std::vector<Folded>{alias(x, {lead, lead ? static_cast<int64_t>(x.count()) / lead : 0})};
  }
  if (op == "Transpose") return transpose(x, attrs, sources[0]);
  if (op == "Cast") return cast(x, attrs, sources[0]);
  // Everything else computes its result eagerly, from inputs within their limits.
  if (!readable(inputs)) return std::nullopt;
  for (const auto& in : inputs) {
    if (in && in->count() > read_limit(*in)) return std::nullopt;
  }
  if (inputs.size() == 2 && all_present(inputs, 2)) {
    if (auto folded = binary(op, x, *inputs[1])) return folded;
  }
  if (auto folded = unary(op, x)) return folded;
  if (op == "Where" && all_present(inputs, 3)) return where(x, *inputs[1], *inputs[2]);
  if (op == "CumSum" && all_present(inputs, 2)) return cumsum(x, *inputs[1], attrs);
  if (op == "GatherND" && all_present(inputs, 2)) return gather_nd(x, *inputs[1], attrs);
  if (op == "Concat") return concat(inputs, attrs);
  if (op == "Gather" && all_present(inputs, 2)) return gather(x, *inputs[1], attrs);
  if (op == "Slice" && all_present(inputs, 3)) return slice(inputs);
  if (op == "Range" && all_present(inputs, 3)) return range(inputs);
  if (op == "Expand" && all_present(inputs, 2)) return expand(x, *inputs[1]);
  if (op == "ReduceProd" || op == "ReduceSum") return reduce(op, inputs, attrs);
  return std::nullopt;
}

}  // namespace fastonnx
