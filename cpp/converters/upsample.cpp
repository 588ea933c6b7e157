// Upsampling (torch's upsample_* and interpolate) as ONNX Resize.
#include <cmath>
#include <limits>
#include <string>

#include "common.h"
#include "windows.h"

namespace fastonnx {
namespace {

enum class Method { Nearest, NearestExact, Linear, Cubic };

struct Interpolation {
  Method method;
  bool align_corners = false;
  bool antialias = false;
};

// Per-axis scales the caller gave (the .vec overloads' scale_factors, or scales_h/scales_w);
// torch ignores a scale that is absent or not positive.
using Scales = std::vector<std::optional<double>>;

Scales given_scales(const std::optional<std::vector<double>>& factors, size_t nd) {
  Scales out(nd);
  if (factors) {
    for (size_t i = 0; i < nd && i < factors->size(); ++i) out[i] = (*factors)[i];
  }
  return out;
}

// The output's spatial sizes: `output_size`, else torch's recorded output shape, whose dynamic
// sizes are computed as torch computes them: floor(in * scale) in double.
SymIntList output_sizes(Builder& b, Value input, const std::optional<SymIntList>& output_size, const Scales& scales) {
  if (output_size) return *output_size;
  const size_t nd = scales.size();
  const std::vector<Dim>& shape = b.out_meta().shape;
  const int64_t rank = b.rank(input);
  SymIntList sizes;
  for (size_t i = 0; i < nd; ++i) {
    const Dim& d = shape[shape.size() - nd + i];
    if (d.is_static()) {
      sizes.emplace_back(d.value);
      continue;
    }
    if (!scales[i]) b.fail("upsampling without an output size needs a scale factor for every axis");
    const Value in = b.cast(scalar_size_along(b, input, rank - static_cast<int64_t>(nd - i)), ScalarType::Double);
    sizes.emplace_back(b.cast(b.op<"Mul">({in, b.scalar(*scales[i], ScalarType::Double)}), ScalarType::Long));
  }
  return sizes;
}

// The float32 scale for Resize nearest to `scale` that makes torch's output size: ONNX makes
// floor(in * scale) with the scale in float32, while torch rounded in double (1.8 makes 5 -> 9
// in torch, 8 with float32(1.8)). The output coordinates move by an ulp at most.
float float_scale(Builder& b, int64_t in, int64_t out, double scale) {
  float s = static_cast<float>(scale);
  const auto size = [&](float f) {
    return static_cast<int64_t>(std::floor(static_cast<double>(f) * static_cast<double>(in)));
  };
  for (int step = 0; step < 4 && size(s) != out; ++step) {
    s = std::nextafter(s, size(s) < out ? std::numeric_limits<float>::infinity() : 0.0f);
  }
  if (size(s) != out) {
    b.fail("upsampling from " + std::to_string(in) + " to " + std::to_string(out) + " with scale " +
           std::to_string(scale) + ": ONNX Resize makes floor(size * scale), a different size");
  }
  return s;
}

// The float32 scale for Resize along an axis whose input size `in` is dynamic (0-d int64 values,
// `out` torch's output size). Resize makes floor(float(in) * scale) in float32: as float_scale
// does, float(scale) unless that misses torch's size (when in * scale is at or near an integer),
// then its neighbour on the side of `scale`; the choice is made at run time. Where torch's kernels
// copy along an axis whose size stays (linear, 2-d nearest) or halve the index along one whose
// size doubles (2-d nearest) whatever the scale, the scale is 1 or 2 at run time too.
Value dynamic_scale(Builder& b, const Interpolation& how, size_t nd, Value in, Value out, double scale) {
  const auto nearest = static_cast<float>(scale);
  Value s = b.scalar(static_cast<double>(nearest), ScalarType::Float);
  if (static_cast<double>(nearest) != scale) {
    const float toward = static_cast<double>(nearest) < scale ? std::numeric_limits<float>::infinity() : 0.0f;
    const Value size = b.cast(b.op<"Mul">({b.cast(in, ScalarType::Float), s}), ScalarType::Long);
    const Value neighbour = b.scalar(static_cast<double>(std::nextafter(nearest, toward)), ScalarType::Float);
    s = b.op<"Where">({b.op<"Equal">({size, out}), s, neighbour});
  }
  const bool nearest_2d = how.method == Method::Nearest && nd == 2;
  if ((how.method == Method::Linear || nearest_2d) && scale > 1 && scale < 2) {
    s = b.op<"Where">({b.op<"Equal">({out, in}), b.scalar(1.0, ScalarType::Float), s});
  }
  if (nearest_2d && scale > 2 && scale < 3) {
    const Value doubled = b.op<"Mul">({in, b.scalar(int64_t{2}, ScalarType::Long)});
    s = b.op<"Where">({b.op<"Equal">({out, doubled}), b.scalar(2.0, ScalarType::Float), s});
  }
  return b.op<"Unsqueeze">({s, b.ints(std::vector<int64_t>{0})});
}

// Resize's attributes for torch's interpolation `how`.
Attrs resize_mode(const Interpolation& how) {
  Attrs attrs;
  switch (how.method) {
    case Method::Nearest:  // source index floor(dst / scale)
      attrs = {Attr::s("mode", "nearest"), Attr::s("coordinate_transformation_mode", "asymmetric"),
               Attr::s("nearest_mode", "floor")};
      break;
    case Method::NearestExact:  // source index floor((dst + 0.5) / scale)
      attrs = {Attr::s("mode", "nearest"), Attr::s("coordinate_transformation_mode", "half_pixel"),
               Attr::s("nearest_mode", "round_prefer_ceil")};
      break;
    case Method::Linear:
    case Method::Cubic:
      attrs = {Attr::s("mode", how.method == Method::Linear ? "linear" : "cubic"),
               Attr::s("coordinate_transformation_mode", how.align_corners ? "align_corners" : "half_pixel")};
      if (how.method == Method::Cubic) attrs.push_back(Attr::f("cubic_coeff_a", -0.75));
      break;
  }
  return attrs;
}

Value antialiased_resize(Builder& b, Value input, const Interpolation& how,
                         const std::optional<SymIntList>& output_size, const Scales& scales);

Value resize(Builder& b, Value input, const Interpolation& how, const std::optional<SymIntList>& output_size,
             const Scales& scales) {
  if (how.antialias) return antialiased_resize(b, input, how, output_size, scales);
  const size_t nd = scales.size();
  const int64_t rank = b.rank(input);
  const SymIntList out = output_sizes(b, input, output_size, scales);
  std::vector<int64_t> axes;
  std::vector<std::optional<int64_t>> in;  // static input sizes
  for (size_t i = 0; i < nd; ++i) {
    axes.push_back(rank - static_cast<int64_t>(nd) + static_cast<int64_t>(i));
    const Dim& d = b.shape(input)[static_cast<size_t>(axes.back())];
    in.push_back(d.is_static() ? std::optional<int64_t>(d.value) : std::nullopt);
  }
  const auto same_size = [&](size_t i) { return in[i] && out[i].is_static() && out[i].value == *in[i]; };

  bool unchanged = true;
  for (size_t i = 0; i < nd; ++i) unchanged = unchanged && same_size(i);
  if (how.method == Method::Linear && unchanged) return input;  // torch copies when no size changes
  // The scale ONNX divides output coordinates by, per axis: torch uses a given scale (as 1/scale)
  // unless corners are aligned; otherwise in/out, which is what ONNX derives from sizes.
  std::vector<std::optional<double>> onnx_scale(nd);
  bool any_scale = false;
  for (size_t i = 0; i < nd; ++i) {
    if (scales[i] && *scales[i] > 0 && !how.align_corners) onnx_scale[i] = scales[i];
    // Whatever the given scale, torch's linear kernels copy along an axis whose size stays, and
    // its 2-d nearest kernel (not the 1-d or 3-d one) copies or halves the index along an axis
    // whose size stays or doubles; bicubic uses the scale.
    if (onnx_scale[i] && in[i] && out[i].is_static()) {
      const bool nearest_2d = how.method == Method::Nearest && nd == 2;
      if (out[i].value == *in[i] && (how.method == Method::Linear || nearest_2d)) onnx_scale[i] = 1.0;
      if (out[i].value == 2 * *in[i] && nearest_2d) onnx_scale[i] = 2.0;
    }
    any_scale = any_scale || onnx_scale[i].has_value();
  }

  const std::optional<Value> absent;
  Inputs inputs = {input, absent};  // no roi
  if (any_scale) {
    // ONNX takes scales or sizes, not both, and makes the output floor(in * scale) in float32:
    // every axis needs a scale that reproduces torch's size.
    std::vector<Value> items;
    if (b.opset() < 18) {  // scales of every axis: the leading ones 1
      items.push_back(b.list(std::vector<Scalar>(static_cast<size_t>(axes.front()), Scalar(1.0)), ScalarType::Float));
    }
    for (size_t i = 0; i < nd; ++i) {
      if (in[i] && out[i].is_static()) {
        const int64_t o = out[i].value;
        const double s = onnx_scale[i].value_or(static_cast<double>(o) / static_cast<double>(*in[i]));
        items.push_back(b.list({Scalar(static_cast<double>(float_scale(b, *in[i], o, s)))}, ScalarType::Float));
        continue;
      }
      if (!onnx_scale[i]) {
        b.fail(
            "upsampling with scale factors along some axes only needs static sizes along the others "
            "(ONNX Resize takes scales or sizes, not both)");
      }
      items.push_back(
          dynamic_scale(b, how, nd, scalar_size_along(b, input, axes[i]), b.long_scalar(out[i]), *onnx_scale[i]));
    }
    inputs.push_back(b.op<"Concat">(spread(items), {Attr::i("axis", 0)}));
  } else {
    inputs.push_back(absent);
    Value sizes = b.ints(out);
    if (b.opset() < 18)
      sizes = join_sizes(b, {sizes_between(b, input, 0, axes.front()), sizes});  // the leading ones unchanged
    inputs.push_back(sizes);
  }

  Attrs attrs = resize_mode(how);
  if (b.opset() >= 18) attrs.push_back(Attr::ints("axes", axes));
  return b.op<"Resize">(inputs, attrs);
}

// torch's antialiased filters (PIL's): a triangle for bilinear, Keys' cubic with a = -0.5 (not
// the -0.75 of plain bicubic) for bicubic.
float antialias_filter(Method method, float x) {
  x = std::fabs(x);
  if (method == Method::Linear) return x < 1.0f ? 1.0f - x : 0.0f;
  constexpr float a = -0.5f;
  if (x < 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
  if (x < 2.0f) return ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
  return 0.0f;
}

// The (out, in) matrix of torch's antialiased resampling along one axis: each output averages
// the inputs under a filter stretched by the downscaling factor, renormalized where it leaves
// the input. In float32 arithmetic, as torch computes it for float inputs.
std::vector<Scalar> antialias_weights(Method method, int64_t in, int64_t out, bool align_corners,
                                      std::optional<double> given) {
  float scale;
  if (align_corners) {
    scale = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  } else {
    scale = given && *given > 0 ? static_cast<float>(1.0 / *given) : static_cast<float>(in) / static_cast<float>(out);
  }
  const float half_width = method == Method::Linear ? 1.0f : 2.0f;
  const float support = scale >= 1.0f ? half_width * scale : half_width;
  const float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  std::vector<Scalar> weights(static_cast<size_t>(out * in), Scalar(0.0));
  for (int64_t i = 0; i < out; ++i) {
    const float center = scale * (static_cast<float>(i) + 0.5f);
    // torch's antialiasing kernels truncate x + 0.5 (not lround, which differs below zero).
    const int64_t lo =
        std::max<int64_t>(static_cast<int64_t>(center - support + 0.5f), 0);  // NOLINT(bugprone-incorrect-roundings)
    const int64_t hi =
        std::min<int64_t>(static_cast<int64_t>(center + support + 0.5f), in);  // NOLINT(bugprone-incorrect-roundings)
    std::vector<float> w;
    float total = 0.0f;
    for (int64_t j = lo; j < hi; ++j) {
      w.push_back(antialias_filter(method, (static_cast<float>(j) - center + 0.5f) * invscale));
      total += w.back();
    }
    for (int64_t j = lo; j < hi; ++j) {
      const float v = total != 0.0f ? w[static_cast<size_t>(j - lo)] / total : 0.0f;
      weights[static_cast<size_t>(i * in + j)] = Scalar(static_cast<double>(v));
    }
  }
  return weights;
}

// antialias_filter on a float32 tensor, with the same float32 operations.
Value antialias_filter(Builder& b, Method method, Value x) {
  const auto f = [&](double v) { return b.scalar(v, ScalarType::Float); };
  const auto mul = [&](Value l, Value r) { return b.op<"Mul">({l, r}); };
  x = b.op<"Abs">({x});
  const Value zero = f(0.0);
  if (method == Method::Linear) return b.op<"Where">({b.op<"Less">({x, f(1.0)}), b.op<"Sub">({f(1.0), x}), zero});
  constexpr double a = -0.5;
  const Value near = b.op<"Add">({mul(mul(b.op<"Sub">({mul(f(a + 2.0), x), f(a + 3.0)}), x), x), f(1.0)});
  const Value far =
      b.op<"Sub">({mul(b.op<"Add">({mul(b.op<"Sub">({mul(f(a), x), f(5.0 * a)}), x), f(8.0 * a)}), x), f(4.0 * a)});
  return b.op<"Where">({b.op<"Less">({x, f(1.0)}), near, b.op<"Where">({b.op<"Less">({x, f(2.0)}), far, zero})});
}

// antialias_weights in the graph, as an (out, in) float32 matrix, for an axis whose input or
// output size (0-d int64 values) is dynamic; the identity where torch copies (the size stays).
Value runtime_antialias_weights(Builder& b, Method method, Value in, Value out, bool align_corners,
                                std::optional<double> given) {
  const auto f = [&](double v) { return b.scalar(v, ScalarType::Float); };
  const auto to_float = [&](Value v) { return b.cast(v, ScalarType::Float); };
  const Value zero = b.scalar(int64_t{0}, ScalarType::Long), one = b.scalar(int64_t{1}, ScalarType::Long);
  Value scale;
  if (align_corners) {
    const Value ratio = b.op<"Div">({to_float(b.op<"Sub">({in, one})), to_float(b.op<"Sub">({out, one}))});
    scale = b.op<"Where">({b.op<"Greater">({out, one}), ratio, f(0.0)});
  } else if (given && *given > 0) {
    scale = f(static_cast<double>(static_cast<float>(1.0 / *given)));
  } else {
    scale = b.op<"Div">({to_float(in), to_float(out)});
  }
  const Value half_width = f(method == Method::Linear ? 1.0 : 2.0);
  const Value wide = b.op<"GreaterOrEqual">({scale, f(1.0)});
  const Value support = b.op<"Where">({wide, b.op<"Mul">({half_width, scale}), half_width});
  const Value invscale = b.op<"Where">({wide, b.op<"Div">({f(1.0), scale}), f(1.0)});
  const Value rows = b.op<"Unsqueeze">({iota(b, out), b.ints(std::vector<int64_t>{1})});
  const Value cols = iota(b, in);
  const Value center = b.op<"Mul">({scale, b.op<"Add">({to_float(rows), f(0.5)})});
  const auto bound = [&](OpType side) {  // int64(center -+ support + 0.5), truncated
    return b.cast(b.op<"Add">({b.op(side, {center, support}), f(0.5)}), ScalarType::Long);
  };
  const Value lo = b.op<"Max">({bound("Sub"), zero}), hi = b.op<"Min">({bound("Add"), in});
  const Value inside = b.op<"And">({b.op<"GreaterOrEqual">({cols, lo}), b.op<"Less">({cols, hi})});
  const Value at = b.op<"Mul">({b.op<"Add">({b.op<"Sub">({to_float(cols), center}), f(0.5)}), invscale});
  const Value w = b.op<"Where">({inside, antialias_filter(b, method, at), f(0.0)});
  const Value total = reduce(b, "ReduceSum", w, std::vector<int64_t>{1}, true);
  const Value normalized = b.op<"Where">({b.op<"Equal">({total, f(0.0)}), f(0.0), b.op<"Div">({w, total})});
  const Value identity = to_float(b.op<"Equal">({rows, cols}));
  return b.op<"Where">({b.op<"Equal">({out, in}), identity, normalized});
}

// Antialiased resampling (torch's _upsample_*_aa), separable: a matrix product per spatial axis,
// the matrix a constant when the axis's sizes are static, else computed at run time.
// ONNX Resize's antialias filters the border windows differently (it does not renormalize).
Value antialiased_resize(Builder& b, Value input, const Interpolation& how,
                         const std::optional<SymIntList>& output_size, const Scales& scales) {
  const size_t nd = scales.size();
  if (nd > 2) b.fail("antialiased upsampling over more than 2 axes");
  const int64_t rank = b.rank(input);
  const SymIntList out = output_sizes(b, input, output_size, scales);
  const ScalarType dtype = b.dtype(input);
  Value x = input;
  for (size_t i = nd; i-- > 0;) {
    const int64_t axis = rank - static_cast<int64_t>(nd - i);
    const Dim in = b.shape(input)[static_cast<size_t>(axis)];
    const bool last = i == nd - 1;
    if (in.is_static() && out[i].is_static()) {
      if (out[i].value == in.value) continue;  // torch copies along an axis whose size stays, whatever the scale
      const int64_t o = out[i].value, n = in.value;
      const std::vector<Scalar> w = antialias_weights(how.method, n, o, how.align_corners, scales[i]);
      if (last) {  // x @ W^T over the last axis
        std::vector<Scalar> transposed(w.size(), Scalar(0.0));
        for (int64_t r = 0; r < o; ++r) {
          for (int64_t j = 0; j < n; ++j)
            transposed[static_cast<size_t>(j * o + r)] = w[static_cast<size_t>(r * n + j)];
        }
        x = b.op<"MatMul">({x, b.tensor(transposed, {n, o}, dtype)});
      } else {  // W @ x over the second last axis, broadcast over the leading ones
        x = b.op<"MatMul">({b.tensor(w, {o, n}, dtype), x});
      }
      continue;
    }
    const Value out_size = b.long_scalar(out[i]);
    const Value w = b.cast(runtime_antialias_weights(b, how.method, scalar_size_along(b, input, axis), out_size,
                                                     how.align_corners, scales[i]),
                           dtype);
    const std::vector<int64_t> swap = {1, 0};
    x = last ? b.op<"MatMul">({x, b.op<"Transpose">({w}, {Attr::ints("perm", swap)})}) : b.op<"MatMul">({w, x});
  }
  return x;
}

// torch's interpolation mode ("nearest", "nearest-exact", "linear" or "cubic", whatever the
// number of axes) as the Resize it becomes.
Interpolation interpolation(Builder& b, std::string_view mode, bool align_corners, bool antialias) {
  Method method = Method::Nearest;
  if (mode == "nearest-exact") {
    method = Method::NearestExact;
  } else if (mode == "linear") {
    method = Method::Linear;
  } else if (mode == "cubic") {
    method = Method::Cubic;
  } else if (mode != "nearest") {
    b.fail("unknown interpolation mode '" + std::string(mode) + "'");
  }
  return {method, align_corners, antialias};
}

}  // namespace

// The .vec overloads: an output size or scale factors.
Value upsample_vec(Builder& b, Value input, std::string_view mode, bool align_corners, bool antialias,
                   const std::optional<SymIntList>& output_size,
                   const std::optional<std::vector<double>>& scale_factors, int64_t spatial_rank) {
  if (!output_size && !scale_factors) b.fail("upsampling needs an output size or scale factors");
  const auto nd = static_cast<size_t>(spatial_rank);
  return resize(b, input, interpolation(b, mode, align_corners, antialias), output_size,
                given_scales(scale_factors, nd));
}

// The overloads with an output size and a scale per axis.
Value upsample1d(Builder& b, Value self, std::string_view mode, bool align_corners, bool antialias,
                 const SymIntList& output_size, std::optional<double> scales) {
  return resize(b, self, interpolation(b, mode, align_corners, antialias), output_size, {scales});
}

Value upsample2d(Builder& b, Value self, std::string_view mode, bool align_corners, bool antialias,
                 const SymIntList& output_size, std::optional<double> scales_h, std::optional<double> scales_w) {
  return resize(b, self, interpolation(b, mode, align_corners, antialias), output_size, {scales_h, scales_w});
}

Value upsample3d(Builder& b, Value self, std::string_view mode, bool align_corners, bool antialias,
                 const SymIntList& output_size, std::optional<double> scales_d, std::optional<double> scales_h,
                 std::optional<double> scales_w) {
  return resize(b, self, interpolation(b, mode, align_corners, antialias), output_size, {scales_d, scales_h, scales_w});
}

}  // namespace fastonnx
