#include "cone_evaluator.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fastonnx/fold.h"
#include "fastonnx/rewrite.h"

namespace fastonnx {

namespace {

void append_int64(std::vector<uint8_t>& bytes, int64_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  bytes.insert(bytes.end(), p, p + sizeof(v));
}

}  // namespace

ConeEvaluator::ConeEvaluator(const Graph& g, std::unordered_map<StrId, int64_t> symbols,
                             std::unordered_map<uint32_t, ConeTensor> inputs)
    : g_(g), symbols_(std::move(symbols)), inputs_(std::move(inputs)) {}

const ConeTensor* ConeEvaluator::eval(Value v) {
  if (const auto it = done_.find(v.id); it != done_.end()) return &it->second;
  std::optional<ConeTensor> t = compute(v);
  if (!t) return nullptr;
  return &done_.emplace(v.id, std::move(*t)).first->second;
}

std::optional<std::vector<int64_t>> ConeEvaluator::sizes_of(Value v) const {
  if (!g_.info(v).has_shape || g_.info(v).rank_varies) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& d : g_.shape(v)) {
    if (d.is_static()) {
      out.push_back(d.value);
    } else if (const auto it = symbols_.find(d.symbol); it != symbols_.end()) {
      out.push_back(it->second);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<ConeTensor> ConeEvaluator::fail(std::string why) {
  if (failure_.empty()) failure_ = std::move(why);
  return std::nullopt;
}

std::optional<ConeTensor> ConeEvaluator::compute(Value v) {
  if (const Initializer* init = g_.initializer(v)) {
    if (init->overridable || init->data == nullptr) return fail("it reads a weight");
    ConeTensor t{g_.info(v).dtype, *g_.static_shape(v), {}, false};
    const auto* p = static_cast<const uint8_t*>(init->data);
    t.bytes.assign(p, p + init->nbytes);
    return t;
  }
  const NodeId n = g_.info(v).producer;
  if (n == kNoNode) return graph_input(v);
  const Node& node = g_.node(n);
  if (node.graph != kMainGraph || node.domain != kNoName) return fail("it is computed by a subgraph or a fused op");
  const std::string_view op = op_of(g_, n);
  const auto ins = g_.inputs(n);
  if (op == "Shape") {
    // The sizes of a value the probe determines, without computing the value itself.
    std::vector<int64_t> shape;
    if (const auto declared = sizes_of(ins[0])) {
      shape = *declared;
    } else {
      const ConeTensor* in = eval(ins[0]);
      if (in == nullptr) return std::nullopt;
      shape = in->shape;
    }
    const auto [b, e] = shape_range(g_, n, static_cast<int64_t>(shape.size()));
    ConeTensor t{ScalarType::Long, {std::max<int64_t>(e - b, 0)}, {}, false};
    for (int64_t i = b; i < e; ++i) append_int64(t.bytes, shape[i]);
    return t;
  }
  std::vector<std::optional<ConstView>> views;
  std::vector<ConstSource> sources;
  for (const Value in : ins) {
    if (!in.valid()) {
      views.emplace_back();
      sources.emplace_back();
      continue;
    }
    const ConeTensor* t = eval(in);
    if (t == nullptr) return std::nullopt;
    if (t->sized_only) return fail("it reads the values of input '" + std::string(g_.name(in)) + "'");
    views.push_back(ConstView{t->dtype, t->shape, t->bytes.data(), false});
    sources.push_back(ConstSource{t->bytes.data(), nullptr, nullptr});
  }
  const auto folded = fold(op, g_.attrs(n), views, sources);
  if (!folded) return fail("the constant folder does not evaluate its " + std::string(op));
  const auto outs = g_.outputs(n);
  std::optional<ConeTensor> result;
  for (size_t i = 0; i < folded->size() && i < outs.size(); ++i) {
    const Folded& f = (*folded)[i];
    if (f.computed) return fail("the constant folder defers its " + std::string(op));
    ConeTensor t{f.dtype, f.shape, f.alias_of >= 0 ? done_.at(ins[f.alias_of].id).bytes : f.bytes, false};
    if (outs[i] == v) {
      result = std::move(t);
    } else {
      done_.emplace(outs[i].id, std::move(t));
    }
  }
  if (!result) return fail("the constant folder does not evaluate its " + std::string(op));
  return result;
}

std::optional<ConeTensor> ConeEvaluator::graph_input(Value v) {
  if (const auto it = inputs_.find(v.id); it != inputs_.end()) return it->second;
  const auto shape = sizes_of(v);
  if (!shape) return fail("it depends on the sizes of input '" + std::string(g_.name(v)) + "'");
  return ConeTensor{g_.info(v).dtype, *shape, {}, true};
}

ConeInputs cone_inputs(const Graph& g, Value root) {
  ConeInputs out;
  // Values reached as values, and reached only for their sizes.
  std::vector<bool> seen_value(g.num_values(), false), seen_size(g.num_values(), false);
  std::vector<std::pair<Value, bool>> stack{{root, true}};
  while (!stack.empty()) {
    const auto [v, by_value] = stack.back();
    stack.pop_back();
    if (!v.valid() || g.is_initializer(v) || seen_value[v.id] || (!by_value && seen_size[v.id])) continue;
    (by_value ? seen_value : seen_size)[v.id] = true;
    const NodeId n = g.info(v).producer;
    if (n == kNoNode) {
      auto& list = by_value ? out.by_value : out.by_size;
      if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
      continue;
    }
    const bool shape = op_of(g, n) == "Shape";
    for (const Value in : g.inputs(n)) stack.emplace_back(in, !shape);
  }
  return out;
}

}  // namespace fastonnx
