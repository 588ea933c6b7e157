#include "fastonnx/ir.h"

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

namespace fastonnx {

StringPool::StringPool() { intern(""); }

StrId StringPool::intern(std::string_view s) {
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  const std::string& stored = storage_.emplace_back(s);
  const StrId id{static_cast<uint32_t>(strings_.size())};
  strings_.push_back(&stored);
  ids_.emplace(std::string_view(stored), id);
  return id;
}

Value Graph::add_value(ScalarType dtype) {
  Value v{static_cast<uint32_t>(values_.size())};
  values_.push_back(ValueInfo{kNoName, dtype});
  initializer_of_.push_back(-1);
  return v;
}

void Graph::set_shape(Value v, std::span<const Dim> dims) {
  ValueInfo& info = values_[v.id];
  info.has_shape = true;
  info.dims_begin = static_cast<uint32_t>(dims_.size());
  info.rank = static_cast<uint32_t>(dims.size());
  dims_.insert(dims_.end(), dims.begin(), dims.end());
}

std::span<const Dim> Graph::shape(Value v) const {
  const ValueInfo& info = values_[v.id];
  return {dims_.data() + info.dims_begin, info.rank};
}

bool same_size(const Dim& a, const Dim& b) {
  if (a.symbol != kNoName || b.symbol != kNoName) return a.symbol == b.symbol;
  return a.value >= 0 && a.value == b.value;
}

std::optional<std::vector<int64_t>> static_shape(std::span<const Dim> dims) {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (const Dim& d : dims) {
    if (!d.is_static()) return std::nullopt;
    out.push_back(d.value);
  }
  return out;
}

std::optional<std::vector<int64_t>> Graph::static_shape(Value v) const {
  const ValueInfo& info = values_[v.id];
  if (!info.has_shape || info.rank_varies) return std::nullopt;
  return fastonnx::static_shape(shape(v));
}

NodeId Graph::add_node(std::string_view op_type, std::string_view domain, const Inputs& inputs, uint32_t n_outputs,
                       const Attrs& attrs, GraphId graph) {
  const NodeId id{static_cast<uint32_t>(nodes_.size())};
  Node n;
  n.graph = graph;
  n.scope = scope_;
  n.origin = origin_;
  n.op_type = strings.intern(op_type);
  n.domain = strings.intern(domain);
  // ONNX drops trailing omitted inputs; inner ones stay as empty names.
  size_t count = inputs.size();
  while (count > 0 && !inputs[count - 1].value.valid()) --count;
  n.inputs_begin = static_cast<uint32_t>(edges_.size());
  n.n_inputs = static_cast<uint32_t>(count);
  for (size_t i = 0; i < count; ++i) edges_.push_back(inputs[i].value);
  n.outputs_begin = static_cast<uint32_t>(edges_.size());
  n.n_outputs = n_outputs;
  for (uint32_t i = 0; i < n_outputs; ++i) {
    Value out = add_value(ScalarType::Undefined);
    values_[out.id].producer = id;
    edges_.push_back(out);
  }
  n.attrs_begin = static_cast<uint32_t>(attrs_.size());
  n.n_attrs = static_cast<uint32_t>(attrs.size());
  attrs_.insert(attrs_.end(), attrs.begin(), attrs.end());
  nodes_.push_back(n);
  return id;
}

NodeId Graph::add_call(std::string_view op_type, std::string_view domain, std::span<const Value> inputs,
                       std::span<const Value> outputs) {
  const NodeId id = add_node(op_type, domain, {}, 0, {});
  Node& n = nodes_[id.index];
  n.inputs_begin = static_cast<uint32_t>(edges_.size());
  n.n_inputs = static_cast<uint32_t>(inputs.size());
  edges_.insert(edges_.end(), inputs.begin(), inputs.end());
  n.outputs_begin = static_cast<uint32_t>(edges_.size());
  n.n_outputs = static_cast<uint32_t>(outputs.size());
  edges_.insert(edges_.end(), outputs.begin(), outputs.end());
  for (const Value v : outputs) values_[v.id].producer = id;
  return id;
}

NodeId Graph::add_fused(std::string_view op_type, std::string_view domain, std::span<const Value> inputs,
                        std::span<const Value> outputs, const Attrs& attrs) {
  const NodeId id = add_node(op_type, domain, {}, 0, attrs);
  Node& n = nodes_[id.index];
  size_t count = inputs.size();
  while (count > 0 && !inputs[count - 1].valid()) --count;  // as add_node: trailing omitted inputs dropped
  n.inputs_begin = static_cast<uint32_t>(edges_.size());
  n.n_inputs = static_cast<uint32_t>(count);
  edges_.insert(edges_.end(), inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(count));
  n.outputs_begin = static_cast<uint32_t>(edges_.size());
  n.n_outputs = static_cast<uint32_t>(outputs.size());
  edges_.insert(edges_.end(), outputs.begin(), outputs.end());
  for (const Value v : outputs) {
    if (v.valid()) values_[v.id].producer = id;
  }
  return id;
}

void Graph::revive(NodeId n) {
  Node& node = nodes_[n.index];
  node.dead = false;
  for (uint32_t i = 0; i < node.n_outputs; ++i) values_[edges_[node.outputs_begin + i].id].producer = n;
}

void Graph::permute_nodes(std::span<const NodeId> order) {
  std::vector<Node> nodes;
  nodes.reserve(nodes_.size());
  std::vector<uint32_t> new_index(nodes_.size());
  for (const NodeId n : order) {
    new_index[n.index] = static_cast<uint32_t>(nodes.size());
    nodes.push_back(nodes_[n.index]);
  }
  if (nodes.size() != nodes_.size()) throw std::logic_error("permute_nodes: the order does not list every node once");
  nodes_ = std::move(nodes);
  for (ValueInfo& v : values_) {
    if (v.producer != kNoNode) v.producer = NodeId{new_index[v.producer.index]};
  }
}

std::span<const Value> Graph::inputs(NodeId n) const {
  const Node& node = nodes_[n.index];
  return {edges_.data() + node.inputs_begin, node.n_inputs};
}
std::span<const Value> Graph::outputs(NodeId n) const {
  const Node& node = nodes_[n.index];
  return {edges_.data() + node.outputs_begin, node.n_outputs};
}
std::span<const Attr> Graph::attrs(NodeId n) const {
  const Node& node = nodes_[n.index];
  return {attrs_.data() + node.attrs_begin, node.n_attrs};
}

StrId Graph::unique_name(std::string_view base) {
  StrId id = strings.intern(base);
  auto taken = [&](StrId s) { return s.index < used_names_.size() && used_names_[s.index]; };
  if (taken(id) || base.empty()) {
    uint32_t& counter = name_counters_[id];
    std::string candidate;
    do {
      candidate = std::string(base) + "_" + std::to_string(++counter);
    } while (strings.contains(candidate) && taken(strings.intern(candidate)));
    id = strings.intern(candidate);
  }
  if (id.index >= used_names_.size()) used_names_.resize(id.index + 1 + used_names_.size() / 2, false);
  used_names_[id.index] = true;
  return id;
}

void Graph::set_name(Value v, std::string_view base) {
  const StrId id = unique_name(base);
  values_[v.id].name = id;
  value_named_[id] = v;
}

void Graph::claim_name(Value v, std::string_view name) {
  const StrId id = strings.intern(name);
  if (values_[v.id].name == id) return;
  auto it = value_named_.find(id);
  if (it != value_named_.end()) {
    const Value other = it->second;
    values_[other.id].name = unique_name(name);  // the claimed name is taken, so this is fresh
    value_named_[values_[other.id].name] = other;
  } else {
    unique_name(name);  // marks it used
  }
  values_[v.id].name = id;
  value_named_[id] = v;
}

void Graph::name_all() {
  for (uint32_t v = 0; v < values_.size(); ++v) {
    if (values_[v].name == kNoName) set_name(Value{v}, "_v");
  }
  for (auto& n : nodes_) {
    if (n.name == kNoName && !n.dead) n.name = unique_name(strings.str(n.op_type));
  }
}

void Graph::name_node(NodeId n, std::string_view base) { nodes_[n.index].name = unique_name(base); }

Value Graph::add_input(std::string_view name, ScalarType dtype, std::span<const Dim> dims) {
  Value v = add_value(dtype);
  set_shape(v, dims);
  set_name(v, name);
  inputs_.push_back(v);
  return v;
}

Value Graph::add_initializer(std::string_view name, ScalarType dtype, std::span<const Dim> dims, const void* data,
                             size_t nbytes, std::shared_ptr<const void> owner) {
  Value v = add_value(dtype);
  set_shape(v, dims);
  if (!name.empty()) set_name(v, name);
  initializer_of_[v.id] = static_cast<int32_t>(initializers_.size());
  initializers_.push_back(Initializer{v, data, nbytes, std::move(owner), nullptr});
  return v;
}

bool Graph::set_ints_attr(NodeId n, AttrName name, std::vector<int64_t> values) {
  const Attr* a = find_attr(attrs(n), name, Attr::Kind::Ints);
  if (a == nullptr) return false;
  attrs_[static_cast<size_t>(a - attrs_.data())].value = std::move(values);
  return true;
}

Value Graph::add_computed_initializer(ScalarType dtype, std::span<const Dim> dims,
                                      std::shared_ptr<const TensorBytes> bytes) {
  Value v = add_value(dtype);
  set_shape(v, dims);
  initializer_of_[v.id] = static_cast<int32_t>(initializers_.size());
  const size_t nbytes = bytes->size();
  initializers_.push_back(Initializer{v, nullptr, nbytes, nullptr, std::move(bytes)});
  return v;
}

Value Graph::alias_initializer(Value source, std::span<const Dim> dims) {
  Initializer copy = initializers_[initializer_of_[source.id]];  // shares the owner, not the bytes
  Value v = add_value(info(source).dtype);
  set_shape(v, dims);
  initializer_of_[v.id] = static_cast<int32_t>(initializers_.size());
  copy.value = v;
  initializers_.push_back(std::move(copy));
  return v;
}

GraphId Graph::add_subgraph(GraphId parent) {
  subgraphs_.push_back(Subgraph{parent, {}, {}});
  return GraphId{static_cast<uint32_t>(subgraphs_.size())};
}

Value Graph::add_subgraph_input(GraphId graph, std::string_view name, ScalarType dtype, std::span<const Dim> dims) {
  Value v = add_value(dtype);
  set_shape(v, dims);
  set_name(v, name);
  subgraphs_[graph.index - 1].inputs.push_back(v);
  return v;
}

bool Graph::is_initializer(Value v) const { return initializer_of_[v.id] >= 0; }

const Initializer* Graph::initializer(Value v) const {
  const int32_t i = initializer_of_[v.id];
  return i >= 0 ? &initializers_[i] : nullptr;
}

std::string node_label(const Graph& g, NodeId n) {
  const Node& node = g.node(n);
  std::string s = "ONNX " + std::string(g.strings.str(node.op_type)) + " node";
  if (node.origin != kNoName) s += " of FX node `" + std::string(g.strings.str(node.origin)) + "`";
  const auto outs = g.outputs(n);
  if (!outs.empty() && !g.name(outs[0]).empty()) s += " (output `" + std::string(g.name(outs[0])) + "`)";
  return s;
}

}  // namespace fastonnx
