#include "fastonnx/rewrite.h"

#include <algorithm>

#include "fastonnx/numeric.h"

namespace fastonnx {

Readers::Readers(const Graph& g) : begin_(g.num_values() + 1, 0), external_(g.num_values(), false) {
  for (const NodeId n : g.node_ids()) {
    if (g.node(n).dead) continue;
    for (const Value in : g.inputs(n)) {
      if (in.valid()) ++begin_[in.id + 1];
    }
  }
  for (size_t v = 1; v < begin_.size(); ++v) begin_[v] += begin_[v - 1];
  nodes_.resize(begin_.back());
  std::vector<uint32_t> at(begin_.begin(), begin_.end() - 1);
  for (const NodeId n : g.node_ids()) {
    const Node& node = g.node(n);
    if (node.dead) continue;
    for (const Value in : g.inputs(n)) {
      if (!in.valid()) continue;
      nodes_[at[in.id]++] = n;
      // A subgraph's node reading an outer value: the fusion would not see that read.
      if (node.graph != kMainGraph && g.info(in).producer != kNoNode &&
          g.node(g.info(in).producer).graph != node.graph) {
        external_[in.id] = true;
      }
    }
  }
  for (const Value out : g.graph_outputs()) external_[out.id] = true;
  for (const GraphId sub : g.subgraph_ids()) {
    for (const Value out : g.subgraph(sub).outputs) external_[out.id] = true;
  }
}

std::span<const NodeId> Readers::of(Value v) const {
  return {nodes_.data() + begin_[v.id], begin_[v.id + 1] - begin_[v.id]};
}

bool Readers::only(Value v, NodeId n) const {
  if (external_[v.id]) return false;
  const auto readers = of(v);
  return !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](NodeId r) { return r == n; });
}

NodeId Readers::sole(Value v) const {
  const auto readers = of(v);
  return only(v, readers.empty() ? kNoNode : readers.front()) ? readers.front() : kNoNode;
}

std::string_view op_of(const Graph& g, NodeId n) { return g.strings.str(g.node(n).op_type); }

std::pair<int64_t, int64_t> shape_range(const Graph& g, NodeId shape, int64_t rank) {
  const auto at = [&](const char* name, int64_t fallback) {
    const Attr* a = g.attr(shape, name, Attr::Kind::Int);
    const int64_t i = a == nullptr ? fallback : a->as_int();
    return std::clamp(i < 0 ? i + rank : i, int64_t{0}, rank);
  };
  return {at("start", 0), at("end", rank)};
}

NodeId producer_of(const Graph& g, Value v, std::string_view op) {
  if (!v.valid()) return kNoNode;
  const NodeId p = g.info(v).producer;
  if (p == kNoNode) return kNoNode;
  const Node& node = g.node(p);
  if (node.dead || node.graph != kMainGraph || node.domain != kNoName || op_of(g, p) != op) return kNoNode;
  return p;
}

std::optional<double> scalar_constant(const Graph& g, Value v) {
  if (!v.valid()) return std::nullopt;
  const Initializer* init = g.initializer(v);
  if (init == nullptr || init->overridable || init->data == nullptr) return std::nullopt;
  const ScalarType t = g.info(v).dtype;
  if (!is_numeric(t) || init->nbytes != static_cast<size_t>(element_size(t))) return std::nullopt;
  return load_double(t, init->data);
}

std::optional<std::vector<int64_t>> int_constant(const Graph& g, Value v) {
  if (!v.valid()) return std::nullopt;
  const Initializer* init = g.initializer(v);
  const ScalarType t = g.info(v).dtype;
  if (init == nullptr || init->overridable || init->data == nullptr) return std::nullopt;
  if (t != ScalarType::Long && t != ScalarType::Int) return std::nullopt;
  const size_t es = static_cast<size_t>(element_size(t));
  std::vector<int64_t> out(init->nbytes / es);
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_int(t, static_cast<const uint8_t*>(init->data) + i * es);
  return out;
}

void RewriteReport::count(std::string_view what, size_t n) {
  for (auto& [name, c] : counts) {
    if (name == what) {
      c += n;
      return;
    }
  }
  counts.emplace_back(std::string(what), n);
}

}  // namespace fastonnx
