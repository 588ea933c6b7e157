// RMSNorm -> SimplifiedLayerNormalization; a residual Add before it or before a LayerNormalization
// -> SkipSimplifiedLayerNormalization / SkipLayerNormalization (onnxruntime_passes.h).
//
// An RMSNorm is matched as the converters write transformers' RMSNorm modules (LlamaRMSNorm and
// its copies): x * (1 / Sqrt(ReduceMean(x^2, last axis) + eps)) [* weight], with x^2 a Pow or a
// Mul, and 1/Sqrt a Reciprocal or a Div; in float16/bfloat16 models x is cast to float32 first
// and the result back before the weight. Every intermediate value must be read inside the
// pattern only. What does not match stays plain ONNX; once the chain up to the Sqrt is there the
// report says why.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fastonnx/numeric.h"
#include "fastonnx/onnxruntime_passes.h"

namespace fastonnx {
namespace {

constexpr std::string_view kSimplified = "SimplifiedLayerNormalization";  // onnxruntime has it in ONNX's domain
constexpr int kRmsNormalizationOpset = 23;

// Why onnxruntime's CPU kernels of the three ops cannot compute in `t`, or "" when they can (1.32:
// SkipSimplifiedLayerNormalization has no double kernel).
std::string unsupported(ScalarType t) {
  if (t == ScalarType::Float || t == ScalarType::Half || t == ScalarType::BFloat16) return "";
  return std::string("it computes in ") + dtype_name(t) +
         ", which onnxruntime's CPU kernels do not take (float32, float16, bfloat16)";
}

std::string shape_text(const Graph& g, Value v) {
  if (!g.info(v).has_shape) return "(shape unknown)";
  std::string s = "[";
  for (const Dim& d : g.shape(v)) {
    if (s.size() > 1) s += ", ";
    s += d.symbol != kNoName ? std::string(g.strings.str(d.symbol)) : d.value >= 0 ? std::to_string(d.value) : "?";
  }
  return s + "]";
}

std::string value_text(const Graph& g, Value v) {
  const std::string_view name = g.name(v);
  if (name.empty()) return "a value";
  std::string s = "`";
  s.append(name).push_back('`');
  return s;
}

// A weight, bias or scale as the fused ops take it: a [hidden] vector, or why not.
using Vector = std::variant<Value, std::string>;

class NormFuser {
 public:
  NormFuser(Graph& g, int opset, RewriteReport& report) : g_(g), opset_(opset), report_(report) {}

  void run() {
    readers_.emplace(g_);
    for (const NodeId n : g_.node_ids()) {
      if (is(n, "ReduceMean")) fuse_rms(n);
    }
    readers_.emplace(g_);  // the SimplifiedLayerNormalization nodes read the inputs now
    for (const NodeId n : g_.node_ids()) {
      if (is(n, kSimplified) || is(n, "LayerNormalization")) fuse_skip(n);
    }
    settle_standalone();
    if (simplified_ > 0) report_.count(kSimplified, simplified_);
    if (rms_ > 0) report_.count("RMSNormalization", rms_);
    if (skip_simplified_ > 0) report_.count("SkipSimplifiedLayerNormalization", skip_simplified_);
    if (skip_ > 0) report_.count("SkipLayerNormalization", skip_);
  }

 private:
  // A live node of the main graph of type `op` in ONNX's domain.
  bool is(NodeId n, std::string_view op) const {
    const Node& node = g_.node(n);
    return !node.dead && node.graph == kMainGraph && node.domain == kNoName && op_of(g_, n) == op;
  }
  // The node of type `op` that alone reads `v`, or kNoNode.
  NodeId sole_reader(Value v, std::string_view op) const {
    const NodeId r = readers_->sole(v);
    return r != kNoNode && is(r, op) ? r : kNoNode;
  }
  // The input of two-input node `n` that is not `v` (the other operand of a commutative op).
  Value other_input(NodeId n, Value v) const {
    const auto ins = g_.inputs(n);
    return ins[0] == v ? ins[1] : ins[0];
  }
  Value output(NodeId n, size_t i = 0) const { return g_.outputs(n)[i]; }

  void fuse_rms(NodeId mean);
  void fuse_skip(NodeId norm);
  void settle_standalone();
  std::string misfit(Value v, ScalarType dtype, int64_t hidden) const;
  Vector vector(Value v, ScalarType dtype, int64_t hidden);
  Value plus_scalar(Value v, double addend, int64_t hidden);
  Value ones(ScalarType dtype, int64_t hidden);

  Graph& g_;
  int opset_;
  RewriteReport& report_;
  std::optional<Readers> readers_;
  size_t simplified_ = 0, skip_simplified_ = 0, skip_ = 0, rms_ = 0;
  // Each SimplifiedLayerNormalization made, and the nodes it replaced.
  std::vector<std::pair<NodeId, std::vector<NodeId>>> made_;
};

void NormFuser::fuse_rms(NodeId mean) {
  const Value squares = g_.inputs(mean)[0];
  const NodeId pow = producer_of(g_, squares, "Pow"), mul = producer_of(g_, squares, "Mul");
  const NodeId square = pow != kNoNode ? pow : mul;
  Value x;
  if (pow != kNoNode && scalar_constant(g_, g_.inputs(pow)[1]) == 2.0) x = g_.inputs(pow)[0];
  if (mul != kNoNode && g_.inputs(mul)[0] == g_.inputs(mul)[1]) x = g_.inputs(mul)[0];
  if (!x.valid()) return;
  const NodeId add = sole_reader(output(mean), "Add");
  if (add == kNoNode) return;
  const std::optional<double> eps = scalar_constant(g_, other_input(add, output(mean)));
  const NodeId sqrt = sole_reader(output(add), "Sqrt");
  if (!eps || sqrt == kNoNode) return;  // not the denominator of a norm

  // An RMSNorm from here on: whatever keeps it plain is reported.
  const auto left = [&](const std::string& why) {
    report_.line(node_label(g_, mean) + ": RMSNorm left plain: " + why);
  };
  const ValueInfo xi = g_.info(x);
  std::optional<std::vector<int64_t>> axes;
  if (g_.inputs(mean).size() > 1) {
    axes = int_constant(g_, g_.inputs(mean)[1]);
  } else if (const Attr* a = g_.attr(mean, "axes", Attr::Kind::Ints)) {
    axes = a->as_ints();
  }
  if (!axes || axes->empty()) return left("ReduceMean's axes are not a constant (or it reduces every axis)");
  const bool last = axes->size() == 1 && ((*axes)[0] == -1 || (xi.has_shape && (*axes)[0] == xi.rank - 1));
  if (!last) {
    std::string list;
    for (const int64_t a : *axes) list += (list.empty() ? "" : ", ") + std::to_string(a);
    return left("it reduces over axes [" + list + "] of a value " + shape_text(g_, x) + ", not the last axis alone");
  }
  if (const Attr* k = g_.attr(mean, "keepdims", Attr::Kind::Int); k != nullptr && k->as_int() == 0) {
    return left("ReduceMean drops the reduced axis (keepdims=0)");
  }
  if (*eps < 0) return left("epsilon " + std::to_string(*eps) + " is negative");
  if (!readers_->only(squares, mean)) return left("x^2 is read outside the norm");

  // x * Reciprocal(Sqrt(...)), or x / Sqrt(...).
  const NodeId recip = sole_reader(output(sqrt), "Reciprocal");
  NodeId scale = kNoNode;
  if (recip != kNoNode) {
    const NodeId times = sole_reader(output(recip), "Mul");
    if (times != kNoNode && other_input(times, output(recip)) == x) scale = times;
  } else {
    const NodeId div = sole_reader(output(sqrt), "Div");
    if (div != kNoNode && g_.inputs(div)[0] == x && g_.inputs(div)[1] == output(sqrt)) scale = div;
  }
  if (scale == kNoNode) return left("1 / Sqrt(mean(x^2) + eps) is not multiplied into x alone");

  std::vector<NodeId> matched{square, mean, add, sqrt, scale};
  if (recip != kNoNode) matched.push_back(recip);
  Value input = x, out = output(scale);
  ScalarType dtype = xi.dtype;
  // A float16/bfloat16 model computes the norm in float32, cast back before the weight: the
  // fused op takes the model's dtype and computes in float32 itself (stash_type=1).
  const NodeId cast_in = producer_of(g_, x, "Cast"), cast_out = sole_reader(out, "Cast");
  if (dtype == ScalarType::Float && cast_in != kNoNode && cast_out != kNoNode) {
    const Value original = g_.inputs(cast_in)[0];
    const ScalarType t = g_.info(original).dtype;
    if ((t == ScalarType::Half || t == ScalarType::BFloat16) && g_.info(output(cast_out)).dtype == t) {
      input = original;
      out = output(cast_out);
      dtype = t;
      matched.push_back(cast_out);
      const auto x_readers = readers_->of(x);
      const bool inside = !readers_->external(x) && std::all_of(x_readers.begin(), x_readers.end(),
                                                                [&](NodeId r) { return r == square || r == scale; });
      if (inside) matched.push_back(cast_in);
    }
  }
  if (std::string why = unsupported(dtype); !why.empty()) return left(why);
  const auto dims = g_.shape(input);
  if (!g_.info(input).has_shape || dims.empty() || !dims.back().is_static()) {
    return left("the size of the normalized axis is not static");
  }
  const int64_t hidden = dims.back().value;

  Value weight;
  if (const NodeId mul = sole_reader(out, "Mul"); mul != kNoNode) {
    Vector w = vector(other_input(mul, out), dtype, hidden);
    if (auto* why = std::get_if<std::string>(&w)) return left("its weight " + *why);
    weight = std::get<Value>(w);
    out = output(mul);
    matched.push_back(mul);
  } else {
    weight = ones(dtype, hidden);  // no weight (elementwise_affine=False)
  }

  const auto origin = g_.with_origin(g_.node(mean).origin);
  const std::array<Value, 2> inputs{input, weight};
  const std::array<Value, 1> outputs{out};
  const NodeId fused = g_.add_fused(kSimplified, "", inputs, outputs,
                                    {Attr::i("axis", -1), Attr::f("epsilon", *eps), Attr::i("stash_type", 1)});
  for (const NodeId n : matched) g_.kill(n);
  made_.emplace_back(fused, std::move(matched));
  ++simplified_;
}

// A residual Add into the norm (a SimplifiedLayerNormalization made above, or a
// LayerNormalization): onnxruntime's Skip... op adds and normalizes, and returns the sum too for
// the next residual.
void NormFuser::fuse_skip(NodeId norm) {
  const bool simplified = op_of(g_, norm) == kSimplified;
  const Value sum = g_.inputs(norm)[0];
  const NodeId add = producer_of(g_, sum, "Add");
  // A constant addend is a bias (a Linear's), not a residual.
  if (add == kNoNode || g_.is_initializer(g_.inputs(add)[0]) || g_.is_initializer(g_.inputs(add)[1])) return;
  const std::string fused = simplified ? "SkipSimplifiedLayerNormalization" : "SkipLayerNormalization";
  const auto left = [&](const std::string& why) {
    report_.line(node_label(g_, norm) + ": not fused with the Add before it into " + fused + ": " + why);
  };
  const ScalarType dtype = g_.info(sum).dtype;
  const std::vector<Dim> dims(g_.shape(sum).begin(), g_.shape(sum).end());  // new values may move the arena's
  const size_t rank = g_.info(sum).has_shape ? dims.size() : 0;
  if (rank != 2 && rank != 3)
    return left("the sum is " + shape_text(g_, sum) + ", onnxruntime's kernel takes rank 2 or 3");
  if (!dims.back().is_static()) return left("the size of the normalized axis is not static");
  const int64_t hidden = dims.back().value;
  if (std::string why = unsupported(dtype); !why.empty()) return left(why);

  Value gamma = g_.inputs(norm)[1], beta;
  const double epsilon = attr_float(g_.attrs(norm), "epsilon", 1e-5);  // LayerNormalization's default
  if (!simplified) {
    const int64_t axis = attr_int(g_.attrs(norm), "axis", -1);
    if (axis != -1 && axis != static_cast<int64_t>(rank) - 1) {
      return left("it normalizes from axis " + std::to_string(axis) + ", not over the last axis alone");
    }
    for (size_t i = 1; i < g_.outputs(norm).size(); ++i) {
      if (output(norm, i).valid() && readers_->count(output(norm, i)) > 0) {
        return left("its mean or inverse standard deviation is read");
      }
    }
    if (epsilon < 0) return left("epsilon is negative");
    Vector scale = vector(gamma, dtype, hidden);
    if (auto* why = std::get_if<std::string>(&scale)) return left("its scale " + *why);
    gamma = std::get<Value>(scale);
    if (g_.inputs(norm).size() > 2 && g_.inputs(norm)[2].valid()) {
      Vector b = vector(g_.inputs(norm)[2], dtype, hidden);
      if (auto* why = std::get_if<std::string>(&b)) return left("its bias " + *why);
      beta = std::get<Value>(b);
    }
  }

  // input: an addend of the sum's shape; skip: the other, of that shape or [1, seq, hidden] or
  // [seq, hidden] (the kernel repeats it over the batch).
  const auto full = [&](Value v) {
    const auto d = g_.shape(v);
    return g_.info(v).has_shape && d.size() == rank &&
           std::equal(d.begin(), d.end(), dims.begin(), [](const Dim& a, const Dim& b) { return same_size(a, b); });
  };
  const auto repeated = [&](Value v) {
    const auto d = g_.shape(v);
    if (!g_.info(v).has_shape || rank != 3 || d.size() < 2 || d.size() > 3) return false;
    if (d.size() == 3 && !(d[0].is_static() && d[0].value == 1)) return false;
    return same_size(d[d.size() - 2], dims[1]) && same_size(d.back(), dims[2]);
  };
  Value input = g_.inputs(add)[0], skip = g_.inputs(add)[1];
  if (!full(input)) std::swap(input, skip);
  if (!full(input) || !(full(skip) || repeated(skip))) {
    return left("its addends are " + shape_text(g_, g_.inputs(add)[0]) + " and " + shape_text(g_, g_.inputs(add)[1]) +
                ", the kernel takes two of the sum's shape " + shape_text(g_, sum) +
                " (or a second of [1, seq, hidden] or [seq, hidden])");
  }
  // A Linear's bias added to an addend of the sum's shape just before: the kernel's `bias` input.
  Value bias;
  NodeId bias_add = kNoNode;
  for (const Value addend : {input, skip}) {
    const NodeId p = producer_of(g_, addend, "Add");
    if (p == kNoNode || !full(addend) || !readers_->only(addend, add)) continue;
    for (const Value operand : {g_.inputs(p)[0], g_.inputs(p)[1]}) {
      const Value rest = other_input(p, operand);
      if (!full(rest) || !g_.initializer(operand) || !misfit(operand, dtype, hidden).empty()) continue;
      bias = std::get<Value>(vector(operand, dtype, hidden));
      bias_add = p;
      skip = addend == input ? skip : input;
      input = rest;
      break;
    }
    if (bias_add != kNoNode) break;
  }

  const auto origin = g_.with_origin(g_.node(norm).origin);
  std::vector<Value> inputs{input, skip, gamma};
  if (!simplified) inputs.push_back(beta);
  inputs.push_back(bias);
  std::vector<Value> outputs{output(norm)};
  if (!readers_->only(sum, norm)) {
    outputs.push_back(g_.add_value(ScalarType::Float));  // mean, unused
    outputs.push_back(g_.add_value(ScalarType::Float));  // inverse standard deviation, unused
    outputs.push_back(sum);
  }
  g_.add_fused(fused, kMicrosoftDomain, inputs, outputs, {Attr::f("epsilon", epsilon)});
  g_.kill(norm);
  g_.kill(add);
  if (bias_add != kNoNode) g_.kill(bias_add);
  if (simplified) {
    --simplified_;
    ++skip_simplified_;
  } else {
    ++skip_;
  }
}

// Why constant `v` is not a [hidden] vector of `dtype` (leading axes of 1 aside), or "" when it is.
std::string NormFuser::misfit(Value v, ScalarType dtype, int64_t hidden) const {
  const Initializer* init = g_.initializer(v);
  if (init == nullptr) return value_text(g_, v) + " is not a constant";
  if (init->overridable) return value_text(g_, v) + " is a graph input (keep_initializers_as_inputs)";
  if (g_.info(v).dtype != dtype) {
    return value_text(g_, v) + " is " + dtype_name(g_.info(v).dtype) + ", the input " + dtype_name(dtype);
  }
  const std::optional<std::vector<int64_t>> shape = g_.static_shape(v);
  bool fits = shape && !shape->empty() && shape->back() == hidden;
  for (size_t i = 0; fits && i + 1 < shape->size(); ++i) fits = (*shape)[i] == 1;
  return fits ? "" : value_text(g_, v) + " is " + shape_text(g_, v) + ", not [" + std::to_string(hidden) + "]";
}

// `v` as the [hidden] vector the fused ops take: a constant that fits (misfit), or gemma's 1 + w
// of one when the clean-up left that Add (a weight too large to fold), computed here.
Vector NormFuser::vector(Value v, ScalarType dtype, int64_t hidden) {
  if (g_.initializer(v) == nullptr) {
    const NodeId add = producer_of(g_, v, "Add");
    if (add == kNoNode) return value_text(g_, v) + " is not a constant";
    for (const Value operand : {g_.inputs(add)[0], g_.inputs(add)[1]}) {
      const std::optional<double> addend = scalar_constant(g_, other_input(add, operand));
      const Initializer* w = g_.initializer(operand);
      if (!addend || w == nullptr) continue;
      if (std::string why = misfit(operand, dtype, hidden); !why.empty()) return why;
      if (w->data == nullptr && !w->computed) return value_text(g_, operand) + " has no bytes in memory to add to";
      return plus_scalar(operand, *addend, hidden);
    }
    return value_text(g_, v) + " is not a constant";
  }
  if (std::string why = misfit(v, dtype, hidden); !why.empty()) return why;
  if (g_.shape(v).size() == 1) return v;
  const std::array<Dim, 1> dims{Dim{hidden, kNoName}};
  return g_.alias_initializer(v, dims);
}

Value NormFuser::plus_scalar(Value v, double addend, int64_t hidden) {
  const Initializer& w = *g_.initializer(v);
  const ScalarType t = g_.info(v).dtype;
  const auto size = static_cast<size_t>(element_size(t));
  auto bytes = std::make_shared<std::vector<uint8_t>>(w.nbytes);
  if (w.data != nullptr) {
    std::memcpy(bytes->data(), w.data, w.nbytes);
  } else {
    w.computed->fill(0, w.nbytes, bytes->data());
  }
  for (size_t i = 0; i < bytes->size(); i += size)
    store_double(t, bytes->data() + i, load_double(t, bytes->data() + i) + addend);
  const std::array<Dim, 1> dims{Dim{hidden, kNoName}};
  return g_.add_initializer("", t, dims, bytes->data(), bytes->size(), bytes);
}

Value NormFuser::ones(ScalarType dtype, int64_t hidden) {
  const auto size = static_cast<size_t>(element_size(dtype));
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(hidden) * size);
  for (size_t i = 0; i < bytes->size(); i += size) store_double(dtype, bytes->data() + i, 1.0);
  const std::array<Dim, 1> dims{Dim{hidden, kNoName}};
  return g_.add_initializer("", dtype, dims, bytes->data(), bytes->size(), bytes);
}

}  // namespace

// A SimplifiedLayerNormalization no Skip op took in: onnxruntime registers it in ONNX's own
// domain, where ONNX defines no such op, so onnx's checker rejects a file holding it. From
// opset 23 ONNX's RMSNormalization computes the same (axis, epsilon, stash_type); before, the
// norm goes back to the plain nodes it replaced.
void NormFuser::settle_standalone() {
  for (const auto& [norm, replaced] : made_) {
    if (g_.node(norm).dead) continue;
    const std::vector<Value> inputs(g_.inputs(norm).begin(), g_.inputs(norm).end());
    const std::vector<Value> outputs(g_.outputs(norm).begin(), g_.outputs(norm).end());
    const Attrs attrs(g_.attrs(norm).begin(), g_.attrs(norm).end());
    g_.kill(norm);
    --simplified_;
    if (opset_ >= kRmsNormalizationOpset) {
      g_.add_fused("RMSNormalization", "", inputs, outputs, attrs);
      ++rms_;
      continue;
    }
    for (const NodeId n : replaced) g_.revive(n);
    report_.line(node_label(g_, replaced.front()) +
                 ": RMSNorm left plain: with no residual Add before it, onnxruntime's fused op is "
                 "SimplifiedLayerNormalization, which it registers in ONNX's own domain where ONNX defines no such op "
                 "(onnx's checker rejects the file); opset_version 23 or later writes ONNX's RMSNormalization");
  }
}

void fuse_norms(Graph& g, int opset, RewriteReport& report) { NormFuser(g, opset, report).run(); }

}  // namespace fastonnx
