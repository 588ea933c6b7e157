// The elementwise ops of the constant folder, with numpy broadcasting, on small tensors.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "fold_internal.h"

namespace fastonnx::fold_detail {

std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::vector<size_t> broadcast_offsets(const Shape& shape, const Shape& out) {
  const size_t rank = out.size(), lead = rank - shape.size();
  std::vector<size_t> stride(rank, 0);
  size_t s = 1;
  for (size_t d = rank; d-- > lead;) {
    stride[d] = shape[d - lead] == 1 ? 0 : s;
    s *= static_cast<size_t>(shape[d - lead]);
  }
  std::vector<size_t> offsets(count_of(out));
  std::vector<int64_t> index(rank, 0);
  for (size_t i = 0; i < offsets.size(); ++i) {
    size_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += static_cast<size_t>(index[d]) * stride[d];
    offsets[i] = off;
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < out[d]) break;
      index[d] = 0;
    }
  }
  return offsets;
}

namespace {

enum class Binary { Add, Sub, Mul, Div, Equal, Less, LessOrEqual, Greater, GreaterOrEqual, Max, Min, And, Or };

bool is_comparison(Binary op) {
  return op == Binary::Equal || op == Binary::Less || op == Binary::LessOrEqual || op == Binary::Greater ||
         op == Binary::GreaterOrEqual;
}

// The comparisons, And and Or: the same on floating-point and integer elements.
template <typename T>
bool logical(Binary op, T x, T y) {
  switch (op) {
    case Binary::Equal:
      return x == y;
    case Binary::Less:
      return x < y;
    case Binary::LessOrEqual:
      return x <= y;
    case Binary::Greater:
      return x > y;
    case Binary::GreaterOrEqual:
      return x >= y;
    case Binary::And:
      return x != 0 && y != 0;
    case Binary::Or:
      return x != 0 || y != 0;
    default:  // arithmetic, which the callers compute
      return false;
  }
}

// Stores `x op y` at `pd` as `out_type`: floating-point elements, computed in double.
void store_floating(Binary op, double x, double y, ScalarType out_type, void* pd) {
  switch (op) {
    case Binary::Add:
      store_double(out_type, pd, x + y);
      break;
    case Binary::Sub:
      store_double(out_type, pd, x - y);
      break;
    case Binary::Mul:
      store_double(out_type, pd, x * y);
      break;
    case Binary::Div:
      store_double(out_type, pd, x / y);
      break;
    case Binary::Max:
      store_double(out_type, pd, std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y));
      break;
    case Binary::Min:
      store_double(out_type, pd, std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y));
      break;
    default:
      store_int(out_type, pd, logical(op, x, y));
      break;
  }
}

// Stores `x op y` at `pd` as `out_type`: integer elements.
void store_integer(Binary op, int64_t x, int64_t y, ScalarType out_type, void* pd) {
  // Unsigned wrap-around: what the runtime's integer arithmetic does on overflow.
  const auto ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  switch (op) {
    case Binary::Add:
      store_int(out_type, pd, static_cast<int64_t>(ux + uy));
      break;
    case Binary::Sub:
      store_int(out_type, pd, static_cast<int64_t>(ux - uy));
      break;
    case Binary::Mul:
      store_int(out_type, pd, static_cast<int64_t>(ux * uy));
      break;
    case Binary::Div:
      store_int(out_type, pd, x == INT64_MIN && y == -1 ? x : x / y);
      break;
    case Binary::Max:
      store_int(out_type, pd, std::max(x, y));
      break;
    case Binary::Min:
      store_int(out_type, pd, std::min(x, y));
      break;
    default:
      store_int(out_type, pd, logical(op, x, y));
      break;
  }
}

Result compute_binary(Binary op, const ConstView& a, const ConstView& b) {
  const auto out_shape = broadcast(a.shape, b.shape);
  if (!out_shape || count_of(*out_shape) > kLarge || a.dtype != b.dtype) return std::nullopt;
  const ScalarType out_type = is_comparison(op) ? ScalarType::Bool : a.dtype;
  const bool floating = is_floating(a.dtype);
  if (op == Binary::Div && !floating) {  // integer division by zero is undefined: leave it to the runtime
    for (int64_t v : ints_of(b)) {
      if (v == 0) return std::nullopt;
    }
  }
  const auto oa = broadcast_offsets(a.shape, *out_shape), ob = broadcast_offsets(b.shape, *out_shape);
  const size_t es = static_cast<size_t>(element_size(a.dtype)), os = static_cast<size_t>(element_size(out_type));
  return std::vector<Folded>{make(out_type, *out_shape, [&](uint8_t* dst) {
    for (size_t i = 0; i < oa.size(); ++i) {
      const void* pa = a.data + oa[i] * es;
      const void* pb = b.data + ob[i] * es;
      void* pd = dst + i * os;
      if (floating) {
        store_floating(op, load_double(a.dtype, pa), load_double(b.dtype, pb), out_type, pd);
      } else {
        store_integer(op, load_int(a.dtype, pa), load_int(b.dtype, pb), out_type, pd);
      }
    }
  })};
}

// Floating-point functions of one input: computed in double and rounded once to the element type,
// so within an ulp of what the runtime computes in the element type.
Result unary_float(std::string_view op, const ConstView& in) {
  static constexpr std::pair<std::string_view, double (*)(double)> kFunctions[] = {
      {"Sqrt", [](double v) { return std::sqrt(v); }}, {"Reciprocal", [](double v) { return 1.0 / v; }},
      {"Exp", [](double v) { return std::exp(v); }},   {"Log", [](double v) { return std::log(v); }},
      {"Sin", [](double v) { return std::sin(v); }},   {"Cos", [](double v) { return std::cos(v); }}};
  if (!is_floating(in.dtype)) return std::nullopt;
  for (const auto& [name, function] : kFunctions) {
    if (op != name) continue;
    const size_t es = static_cast<size_t>(element_size(in.dtype));
    return std::vector<Folded>{make(in.dtype, in.shape, [&](uint8_t* dst) {
      for (size_t i = 0; i < in.count(); ++i)
        store_double(in.dtype, dst + i * es, function(load_double(in.dtype, in.data + i * es)));
    })};
  }
  return std::nullopt;
}

}  // namespace

Result binary(std::string_view op, const ConstView& a, const ConstView& b) {
  static constexpr std::pair<std::string_view, Binary> kBinary[] = {{"Add", Binary::Add},
                                                                    {"Sub", Binary::Sub},
                                                                    {"Mul", Binary::Mul},
                                                                    {"Div", Binary::Div},
                                                                    {"Equal", Binary::Equal},
                                                                    {"Less", Binary::Less},
                                                                    {"LessOrEqual", Binary::LessOrEqual},
                                                                    {"Greater", Binary::Greater},
                                                                    {"GreaterOrEqual", Binary::GreaterOrEqual},
                                                                    {"Max", Binary::Max},
                                                                    {"Min", Binary::Min},
                                                                    {"And", Binary::And},
                                                                    {"Or", Binary::Or}};
  for (const auto& [name, kind] : kBinary) {
    if (op == name) return compute_binary(kind, a, b);
  }
  return std::nullopt;
}

Result unary(std::string_view op, const ConstView& in) {
  if (op == "Neg" && is_numeric(in.dtype)) {
    return std::vector<Folded>{make(in.dtype, in.shape, [&](uint8_t* dst) {
      const size_t es = static_cast<size_t>(element_size(in.dtype));
      for (size_t i = 0; i < in.count(); ++i) {
        if (is_floating(in.dtype)) {
          store_double(in.dtype, dst + i * es, -load_double(in.dtype, in.data + i * es));
        } else {
          store_int(in.dtype, dst + i * es,
                    static_cast<int64_t>(0 - static_cast<uint64_t>(load_int(in.dtype, in.data + i * es))));
        }
      }
    })};
  }
  if (op == "Not" && in.dtype == ScalarType::Bool) {
    return std::vector<Folded>{make(in.dtype, in.shape, [&](uint8_t* dst) {
      for (size_t i = 0; i < in.count(); ++i) dst[i] = in.data[i] == 0;
    })};
  }
  return unary_float(op, in);
}

Result where(const ConstView& cond, const ConstView& a, const ConstView& b) {
  if (cond.dtype != ScalarType::Bool || a.dtype != b.dtype) return std::nullopt;
  const auto values = broadcast(a.shape, b.shape);
  const auto out = values ? broadcast(cond.shape, *values) : std::nullopt;
  if (!out || count_of(*out) > kLarge) return std::nullopt;
  const auto oc = broadcast_offsets(cond.shape, *out), oa = broadcast_offsets(a.shape, *out),
             ob = broadcast_offsets(b.shape, *out);
  const size_t es = static_cast<size_t>(element_size(a.dtype));
  return std::vector<Folded>{make(a.dtype, *out, [&](uint8_t* dst) {
    for (size_t i = 0; i < oc.size(); ++i) {
      const uint8_t* from = cond.data[oc[i]] != 0 ? a.data + oa[i] * es : b.data + ob[i] * es;
      std::memcpy(dst + i * es, from, es);
    }
  })};
}

}  // namespace fastonnx::fold_detail
