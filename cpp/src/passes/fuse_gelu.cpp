// GELU written out in elementwise ops -> com.microsoft FastGelu (the tanh approximation) or
// com.microsoft Gelu (erf), one kernel instead of six to nine (onnxruntime_passes.h). Before
// opset 20 the converters write aten.gelu as its formula (activation.yaml), and transformers'
// own GELU modules (NewGELUActivation, gelu_new) write it in Python ops, in other orders:
//   tanh: 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
//   erf:  0.5 * x * (1 + Erf(x / sqrt(2)))     (or x * 0.70710678)
// A product is matched as the multiset of its factors through nested Muls, whatever their order,
// and x^3 as Pow(x, 3) or x * x * x; each constant must equal the formula's to float32 precision.
// Every intermediate value must be read inside the pattern only.
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fastonnx/onnxruntime_passes.h"

namespace fastonnx {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubeCoefficient = 0.044715;
constexpr double kInverseSqrt2 = 0.7071067811865476;

// A constant of `dtype` equal to `want` to that dtype's precision (float16 models hold the
// formula's constants rounded to float16).
bool near(double c, ScalarType dtype, double want) {
  const double precision = dtype == ScalarType::Half ? 1e-3 : dtype == ScalarType::BFloat16 ? 8e-3 : 1e-6;
  return std::abs(c - want) <= precision * std::abs(want);
}

class GeluFuser {
 public:
  GeluFuser(Graph& g, RewriteReport& report) : g_(g), report_(report), readers_(g) {}

  void run() {
    for (const NodeId node : g_.node_ids()) {  // the range is fixed here: the nodes made below are not visited
      const std::string_view op = op_of(g_, node);
      if (g_.node(node).dead || g_.node(node).graph != kMainGraph || g_.node(node).domain != kNoName ||
          (op != "Tanh" && op != "Erf")) {
        continue;
      }
      fuse(node, op == "Tanh");
    }
  }

 private:
  // A factor of a product: a value, or a constant's number.
  struct Factor {
    Value value;
    std::optional<double> constant;
    ScalarType dtype = ScalarType::Float;
  };

  Factor leaf(Value v) const { return {v, scalar_constant(g_, v), g_.info(v).dtype}; }

  // The factors of `v` through the Muls that make it (each read only by the next Mul up), and
  // those Muls into `inner`. A Div by a constant is a factor of its inverse.
  void factors(Value v, std::vector<Factor>& out, std::vector<NodeId>& inner, bool top) {
    if (!top && readers_.count(v) != 1) {
      out.push_back(leaf(v));
      return;
    }
    if (const NodeId mul = producer_of(g_, v, "Mul"); mul != kNoNode) {
      inner.push_back(mul);
      for (const Value in : g_.inputs(mul)) factors(in, out, inner, false);
      return;
    }
    if (const NodeId div = producer_of(g_, v, "Div"); div != kNoNode) {
      if (const auto d = scalar_constant(g_, g_.inputs(div)[1]); d && *d != 0) {
        inner.push_back(div);
        factors(g_.inputs(div)[0], out, inner, false);
        out.push_back({Value{}, 1 / *d, g_.info(g_.inputs(div)[1]).dtype});
        return;
      }
    }
    out.push_back(leaf(v));
  }

  // `v` as exactly the product `want` (a value `x` counted `x_times`, and constants), or nothing.
  // Each constant in `want` is matched by one factor equal to it.
  bool product_of(Value v, Value x, int x_times, const std::vector<double>& want, std::vector<NodeId>& inner,
                  Value* other = nullptr) {
    std::vector<Factor> fs;
    factors(v, fs, inner, true);
    std::vector<bool> used(want.size(), false);
    int xs = 0;
    for (const Factor& f : fs) {
      if (f.value.valid() && f.value == x) {
        ++xs;
        continue;
      }
      if (f.constant) {
        bool matched = false;
        for (size_t i = 0; i < want.size() && !matched; ++i) {
          if (!used[i] && near(*f.constant, f.dtype, want[i])) used[i] = matched = true;
        }
        if (matched) continue;
      }
      if (other != nullptr && !other->valid() && f.value.valid()) {
        *other = f.value;
        continue;
      }
      return false;
    }
    for (const bool u : used) {
      if (!u) return false;
    }
    return xs == x_times;
  }

  // 0.044715 * x^3, with x^3 as Pow(x, 3) or a product of three x.
  bool cube_term(Value v, Value x, std::vector<NodeId>& inner) {
    if (readers_.count(v) != 1) return false;
    std::vector<NodeId> nodes;
    if (product_of(v, x, 3, {kCubeCoefficient}, nodes)) {
      inner.insert(inner.end(), nodes.begin(), nodes.end());
      return true;
    }
    nodes.clear();
    Value cube;
    if (!product_of(v, Value{}, 0, {kCubeCoefficient}, nodes, &cube) || readers_.count(cube) != 1) return false;
    const NodeId pow = producer_of(g_, cube, "Pow");
    if (pow == kNoNode || g_.inputs(pow)[0] != x) return false;
    const auto e = scalar_constant(g_, g_.inputs(pow)[1]);
    if (!e || *e != 3) return false;
    inner.insert(inner.end(), nodes.begin(), nodes.end());
    inner.push_back(pow);
    return true;
  }

  // The other input of an Add whose one input is `v`, read only by it, when the Add adds the
  // constant `c` (any order); or invalid.
  NodeId add_of(Value v, double c) {
    const NodeId add = readers_.sole(v);
    if (add == kNoNode || op_of(g_, add) != "Add" || g_.node(add).domain != kNoName || readers_.count(v) != 1) {
      return kNoNode;
    }
    const auto in = g_.inputs(add);
    const Value other = in[0] == v ? in[1] : in[0];
    const auto k = scalar_constant(g_, other);
    return k && near(*k, g_.info(other).dtype, c) ? add : kNoNode;
  }

  void fuse(NodeId act, bool tanh) {
    std::vector<NodeId> inner;
    const Value arg = g_.inputs(act)[0];
    if (readers_.count(arg) != 1) return;
    Value x;
    if (tanh) {
      // sqrt(2/pi) * (x + 0.044715 * x^3): the sum is the argument's one non-constant factor.
      Value inside;
      if (!product_of(arg, Value{}, 0, {kSqrt2OverPi}, inner, &inside) || readers_.count(inside) != 1) return;
      const NodeId sum = producer_of(g_, inside, "Add");
      if (sum == kNoNode) return;
      inner.push_back(sum);
      const auto s = g_.inputs(sum);
      for (int i = 0; i < 2 && !x.valid(); ++i) {
        if (cube_term(s[1 - i], s[i], inner)) x = s[i];
      }
      if (!x.valid()) return;
    } else if (!product_of(arg, Value{}, 0, {kInverseSqrt2}, inner, &x) || !x.valid()) {
      return;
    }
    const NodeId plus_one = add_of(g_.outputs(act)[0], 1.0);
    if (plus_one == kNoNode) return;
    // 0.5 * x * (1 + act(...)): the first Mul up from the Add whose product is exactly that (a
    // model's next Mul, gemma's act(gate) * up, is not part of it).
    const Value one = g_.outputs(plus_one)[0];
    std::vector<NodeId> outer;
    NodeId top = readers_.count(one) == 1 ? readers_.sole(one) : kNoNode;
    while (top != kNoNode && op_of(g_, top) == "Mul" && g_.node(top).domain == kNoName) {
      outer.clear();
      Value rest;
      if (product_of(g_.outputs(top)[0], x, 1, {0.5}, outer, &rest) && rest == one) break;
      const Value out = g_.outputs(top)[0];
      top = readers_.count(out) == 1 ? readers_.sole(out) : kNoNode;
    }
    if (top == kNoNode || op_of(g_, top) != "Mul" || g_.node(top).domain != kNoName) return;
    const ScalarType dtype = g_.info(x).dtype;
    if (dtype != ScalarType::Float && dtype != ScalarType::Half) {
      report_.line(std::string(tanh ? "FastGelu" : "Gelu") + ": left plain, it computes in " + dtype_name(dtype) +
                   ", which onnxruntime's CPU kernel does not take (float32, float16)");
      return;
    }
    for (const NodeId n : inner) g_.kill(n);
    for (const NodeId n : outer) g_.kill(n);
    g_.kill(act);
    g_.kill(plus_one);
    const Value ins[] = {x};
    const Value outs[] = {g_.outputs(top)[0]};
    g_.add_fused(tanh ? "FastGelu" : "Gelu", kMicrosoftDomain, ins, outs, {});
    report_.count(tanh ? "FastGelu" : "Gelu");
  }

  Graph& g_;
  RewriteReport& report_;
  Readers readers_;
};

}  // namespace

void fuse_gelu(Graph& g, RewriteReport& report) { GeluFuser(g, report).run(); }

}  // namespace fastonnx
