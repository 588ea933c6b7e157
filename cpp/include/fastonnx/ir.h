// The graph: an arena of values, nodes, edges and attributes addressed by 32-bit ids (ids.h),
// with interned names. The graph owns everything; converters reach it only through the Builder.
// A value records the node that produces it; there are no use-lists: the passes that need a
// value's readers sweep the nodes, which are in topological order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fastonnx/ids.h"
#include "fastonnx/tensor_bytes.h"
#include "fastonnx/types.h"

namespace fastonnx {

class StringPool {
 public:
  StringPool();
  StrId intern(std::string_view s);
  std::string_view str(StrId id) const { return *strings_[id.index]; }
  bool contains(std::string_view s) const { return ids_.count(s) != 0; }

 private:
  std::deque<std::string> storage_;
  std::vector<const std::string*> strings_;
  std::unordered_map<std::string_view, StrId> ids_;
};

// One dimension: static (no symbol) or named symbolic.
struct Dim {
  int64_t value = -1;
  StrId symbol;
  bool is_static() const { return symbol == kNoName && value >= 0; }
};

// Whether two dimensions are known to be equal: the same static size, or the same symbol.
bool same_size(const Dim& a, const Dim& b);

// The sizes of `dims` when every one is static.
std::optional<std::vector<int64_t>> static_shape(std::span<const Dim> dims);

struct ValueInfo {
  StrId name;  // kNoName until named; unnamed values get a unique name when serialized
  ScalarType dtype = ScalarType::Undefined;
  bool has_shape = false;
  // The data decides its rank (a squeeze decided at run time): the shape is the one torch traced,
  // declared for a graph output (ONNX requires one there) but not to be relied on.
  bool rank_varies = false;
  // An ONNX optional of this tensor type: a value a scripted model may leave None.
  bool optional = false;
  // An ONNX sequence of tensors of this element type: a scripted list whose length the graph
  // computes. The shape is that of an item (items may differ: it is not declared).
  bool sequence = false;
  uint32_t dims_begin = 0;
  uint32_t rank = 0;
  NodeId producer = kNoNode;
};

struct Node {
  StrId op_type;
  StrId domain;  // kNoName: ONNX's own
  StrId name;
  uint32_t inputs_begin = 0, n_inputs = 0;
  uint32_t outputs_begin = 0, n_outputs = 0;
  uint32_t attrs_begin = 0, n_attrs = 0;
  GraphId graph = kMainGraph;
  uint32_t scope = 0;  // the module call (export_modules_as_functions) it comes from; 0: none
  StrId origin;        // the FX node whose conversion made it, for errors; kNoName: none
  bool dead = false;
};

// A subgraph shares the arena of the main graph: its nodes are the arena's nodes tagged with its
// id, so value names are unique across every scope (as ONNX requires of values a subgraph reads
// from outside, which it names) and a value of an enclosing graph is used by its id. A
// subgraph's nodes come before the node that owns it, after every outer value they read, so the
// arena's node order stays topological across graphs.
struct Subgraph {
  GraphId parent = kMainGraph;
  std::vector<Value> inputs, outputs;
};

// Tensor bytes that the graph borrows: `owner` keeps the memory alive (a torch tensor, or a
// buffer a converter made) so weights are never copied on their way to the file. A folded
// weight (transposed, cast) has `computed` instead: its bytes are produced while being written.
struct Initializer {
  Value value;
  const void* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<const void> owner;
  std::shared_ptr<const TensorBytes> computed;
  // Also a graph input (keep_initializers_as_inputs): a runtime may feed another value, so the
  // passes must not treat it as a constant.
  bool overridable = false;
  // The bytes of a torch tensor (a weight, a buffer, a lifted constant, a Python converter's
  // constant), not of a constant the C++ core made: the folder reads these eagerly only when
  // small, so weights are never copied.
  bool model_tensor = false;
  // Kept as it is, never folded into another initializer: the model points at its bytes in the
  // checkpoint they come from (weights_mode="reference").
  bool pinned = false;
};

class Graph {
 public:
  StringPool strings;

  Value add_value(ScalarType dtype);
  void set_shape(Value v, std::span<const Dim> dims);
  void set_dtype(Value v, ScalarType t) { values_[v.id].dtype = t; }
  // The shape when every dimension is static and the rank does not vary (ValueInfo::rank_varies).
  std::optional<std::vector<int64_t>> static_shape(Value v) const;
  void set_rank_varies(Value v) { values_[v.id].rank_varies = true; }
  void set_optional(Value v) { values_[v.id].optional = true; }
  void set_sequence(Value v) { values_[v.id].sequence = true; }
  // `v` an optional or a sequence where `like` is one (a value that carries `like` on).
  void set_container_like(Value v, Value like) {
    values_[v.id].optional |= values_[like.id].optional;
    values_[v.id].sequence |= values_[like.id].sequence;
  }
  const ValueInfo& info(Value v) const { return values_[v.id]; }
  std::span<const Dim> shape(Value v) const;
  size_t num_values() const { return values_.size(); }

  NodeId add_node(std::string_view op_type, std::string_view domain, const Inputs& inputs, uint32_t n_outputs,
                  const Attrs& attrs, GraphId graph = kMainGraph);
  // A node of the main graph that takes over producing `outputs`, values of nodes moved into a
  // local function (the call of that function); the values' consumers are unchanged. `inputs`
  // and `outputs` must not view this graph's edges (inputs(), outputs()): adding the node moves
  // them.
  NodeId add_call(std::string_view op_type, std::string_view domain, std::span<const Value> inputs,
                  std::span<const Value> outputs);
  // A node of the main graph that takes over producing `outputs` (existing values: their readers
  // are unchanged) from `inputs`, an invalid Value marking an omitted one of either: what a fusion
  // pass puts in place of the nodes it matched. It is appended to the arena, so the nodes are in
  // topological order again only after sort_nodes() (passes.h). Spans must not view this graph's
  // edges.
  NodeId add_fused(std::string_view op_type, std::string_view domain, std::span<const Value> inputs,
                   std::span<const Value> outputs, const Attrs& attrs);
  // Reorders the arena's nodes: `order` lists every node id once (dead ones too). Node ids change;
  // values keep theirs.
  void permute_nodes(std::span<const NodeId> order);
  const Node& node(NodeId n) const { return nodes_[n.index]; }
  size_t num_nodes() const { return nodes_.size(); }
  IdRange<NodeId> node_ids() const { return {0, nodes_.size()}; }  // dead ones included
  std::span<const Value> inputs(NodeId n) const;                   // an invalid Value marks an omitted input
  std::span<const Value> outputs(NodeId n) const;
  std::span<const Attr> attrs(NodeId n) const;
  const Attr* attr(NodeId n, AttrName name, std::optional<Attr::Kind> kind = std::nullopt) const {
    return find_attr(attrs(n), name, kind);
  }
  void kill(NodeId n) { nodes_[n.index].dead = true; }
  // Undoes kill(): the node lives again and produces its outputs (a fusion that gave way).
  void revive(NodeId n);
  // Gives node `n` a unique name from `base` (name_all() names only live nodes, after their op
  // type: the nodes of a local function, dead in the graph, are named with this).
  void name_node(NodeId n, std::string_view base);

  // The module scope (export_modules_as_functions) of the nodes added from now on; 0 is the
  // model itself. Nodes only carry it; outline_functions() acts on it.
  void set_scope(uint32_t scope) { scope_ = scope; }
  // The same, for the guard's lifetime.
  ScopedValue<uint32_t> with_scope(uint32_t scope) { return {scope_, scope}; }
  // The FX node the nodes added while the guard lives are made for (errors name it).
  ScopedValue<StrId> with_origin(StrId fx_node) { return {origin_, fx_node}; }
  uint32_t scope(NodeId n) const { return nodes_[n.index].scope; }
  void set_node_scope(NodeId n, uint32_t scope) { nodes_[n.index].scope = scope; }
  // Makes input `i` of node `n` read `v` instead.
  void set_input(NodeId n, size_t i, Value v) { edges_[nodes_[n.index].inputs_begin + i] = v; }
  // Replaces the values of node `n`'s existing ints attribute `name`; false when it has none.
  bool set_ints_attr(NodeId n, AttrName name, std::vector<int64_t> values);

  // A name that no other value, node or graph input/output has; `base` when it is free.
  StrId unique_name(std::string_view base);
  void set_name(Value v, std::string_view base);
  // Gives `v` exactly `name`; a value that had it is renamed (graph outputs the user named win
  // over intermediate values that happened to take the name first).
  void claim_name(Value v, std::string_view name);
  std::string_view name(Value v) const { return strings.str(values_[v.id].name); }
  // Gives every unnamed value and live node a unique name (the serializer needs them all).
  void name_all();

  Value add_input(std::string_view name, ScalarType dtype, std::span<const Dim> dims);
  Value add_initializer(std::string_view name, ScalarType dtype, std::span<const Dim> dims, const void* data,
                        size_t nbytes, std::shared_ptr<const void> owner);
  Value add_computed_initializer(ScalarType dtype, std::span<const Dim> dims, std::shared_ptr<const TensorBytes> bytes);
  // A new initializer with the bytes of `source` (not copied) and another shape.
  Value alias_initializer(Value source, std::span<const Dim> dims);
  void add_output(Value v) { outputs_.push_back(v); }

  // Subgraphs (see Subgraph): a new empty one inside `parent`, its formal inputs and outputs.
  GraphId add_subgraph(GraphId parent);
  Value add_subgraph_input(GraphId graph, std::string_view name, ScalarType dtype, std::span<const Dim> dims);
  void add_subgraph_output(GraphId graph, Value v) { subgraphs_[graph.index - 1].outputs.push_back(v); }
  const Subgraph& subgraph(GraphId graph) const { return subgraphs_[graph.index - 1]; }
  size_t num_subgraphs() const { return subgraphs_.size(); }
  IdRange<GraphId> subgraph_ids() const { return {1, subgraphs_.size() + 1}; }

  const std::vector<Value>& graph_inputs() const { return inputs_; }
  const std::vector<Value>& graph_outputs() const { return outputs_; }
  const std::vector<Initializer>& initializers() const { return initializers_; }
  bool is_initializer(Value v) const;
  void set_overridable(Value v) { initializers_[initializer_of_[v.id]].overridable = true; }
  void set_model_tensor(Value v) { initializers_[initializer_of_[v.id]].model_tensor = true; }
  void set_pinned(Value v) { initializers_[initializer_of_[v.id]].pinned = true; }
  const Initializer* initializer(Value v) const;

 private:
  std::vector<ValueInfo> values_;
  std::vector<Dim> dims_;
  std::vector<Node> nodes_;
  uint32_t scope_ = 0;  // of the nodes added next
  StrId origin_;        // of the nodes added next
  std::vector<Value> edges_;
  std::vector<Attr> attrs_;
  std::vector<Value> inputs_, outputs_;
  std::vector<Initializer> initializers_;
  std::vector<Subgraph> subgraphs_;      // subgraph id - 1
  std::vector<int32_t> initializer_of_;  // value id -> index in initializers_, or -1
  std::unordered_map<StrId, uint32_t> name_counters_;
  std::vector<bool> used_names_;  // indexed by StrId
  std::unordered_map<StrId, Value> value_named_;
};

// Node `n` as messages name it: its op type, the FX node it was converted from, its first output.
std::string node_label(const Graph& g, NodeId n);

}  // namespace fastonnx
