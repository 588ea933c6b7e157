#include "fastonnx/outline.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "fastonnx/passes.h"

namespace fastonnx {
namespace {

constexpr uint32_t kNoScope = 0xFFFFFFFFu;
// Converter constants up to this size (those the passes merge) become Constant nodes of the
// functions that read them; larger or named initializers (weights) are function inputs.
constexpr size_t kInlinedConstantBytes = 1024;
// first_outside_use_ of a value no other scope reads, and of a graph output (read after every node).
constexpr uint64_t kUnused = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kGraphOutput = kUnused - 1;

template <typename T>
void append(std::string& key, T v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

class Outliner {
 public:
  Outliner(Graph& g, std::span<const Scope> scopes) : g_(g), scopes_(scopes), depth_(scopes.size(), 0) {}

  Outlined run() {
    uint32_t max_depth = 0;
    for (size_t s = 1; s < scopes_.size(); ++s) {
      depth_[s] = depth_[scopes_[s].parent] + 1;
      max_depth = std::max(max_depth, depth_[s]);
    }
    // A node's place in the final order: the nodes' own order, a call right after the node whose
    // place it takes (ties between nested calls go by id, a caller being newer than its callee).
    find_captured_values();
    for (const NodeId n : g_.node_ids()) place_.push_back(uint64_t{n.index} << 8);
    value_scope_.assign(g_.num_values(), kNoScope);
    for (const NodeId n : g_.node_ids()) {
      if (!is_graph_node(n)) continue;
      for (const Value out : g_.outputs(n)) value_scope_[out.id] = g_.scope(n);
    }
    for (uint32_t d = max_depth; d >= 1; --d) outline_depth(d);

    Outlined result;
    for (const NodeId n : g_.node_ids()) {
      if (is_graph_node(n)) result.main_order.push_back(n);
    }
    sort_by_place(result.main_order);
    result.functions = std::move(functions_);
    return result;
  }

 private:
  void sort_by_place(std::vector<NodeId>& nodes) const {
    std::sort(nodes.begin(), nodes.end(), [&](NodeId a, NodeId b) {
      return place_[a.index] != place_[b.index] ? place_[a.index] < place_[b.index] : a < b;
    });
  }

  // Outlines every scope at depth `d`; the deeper ones are calls by now.
  void outline_depth(uint32_t d) {
    std::vector<std::vector<NodeId>> members(scopes_.size());
    first_outside_use_.assign(g_.num_values(), kUnused);
    for (const NodeId n : g_.node_ids()) {
      if (!is_graph_node(n)) continue;
      const uint32_t s = g_.scope(n);
      if (depth_[s] == d) members[s].push_back(n);
      for_each_read(n, [&](Value in) {
        if (!in.valid()) return;
        const uint32_t owner = value_scope_[in.id];
        if (owner != kNoScope && owner != s && depth_[owner] == d) {
          first_outside_use_[in.id] = std::min(first_outside_use_[in.id], place_[n.index]);
        }
      });
    }
    for (const Value out : g_.graph_outputs()) {
      const uint32_t owner = value_scope_[out.id];
      if (owner != kNoScope && depth_[owner] == d) {
        first_outside_use_[out.id] = std::min(first_outside_use_[out.id], kGraphOutput);
      }
    }
    for (size_t s = 1; s < scopes_.size(); ++s) {
      if (members[s].empty()) continue;
      sort_by_place(members[s]);
      outline(static_cast<uint32_t>(s), members[s]);
    }
  }

  // The nodes that outlining moves: the live nodes of the main graph. A subgraph's nodes go with
  // the node that owns it.
  bool is_graph_node(NodeId n) const { return !g_.node(n).dead && g_.node(n).graph == kMainGraph; }

  // Calls `f` with each value node `n` reads, in order: its inputs (an invalid Value for an
  // omitted one, which still counts for the inputs' positions), then the outer values its
  // subgraphs read.
  template <typename F>
  void for_each_read(NodeId n, F&& f) const {
    for (const Value in : g_.inputs(n)) f(in);
    for (const Attr& a : g_.attrs(n)) {
      if (a.kind() != Attr::Kind::Graph) continue;
      for (const Value v : captured_[a.as_graph().index]) f(v);
    }
  }

  // captured_[sub]: the values of enclosing graphs that subgraph `sub` (its nested subgraphs
  // included) reads. A nested subgraph is begun inside its parent, so it has the larger id.
  void find_captured_values() {
    const size_t n_subgraphs = g_.num_subgraphs();
    captured_.assign(n_subgraphs + 1, {});
    std::vector<std::vector<NodeId>> nodes_of(n_subgraphs + 1);
    for (const NodeId n : g_.node_ids()) {
      if (!g_.node(n).dead) nodes_of[g_.node(n).graph.index].push_back(n);
    }
    std::vector<GraphId> defined_in(g_.num_values(), kMainGraph), seen_in(g_.num_values(), kMainGraph);
    for (auto i = static_cast<uint32_t>(n_subgraphs); i >= 1; --i) {
      const GraphId sub{i};
      for (const Value in : g_.subgraph(sub).inputs) defined_in[in.id] = sub;
      for (const NodeId n : nodes_of[i]) {
        for (const Value out : g_.outputs(n)) defined_in[out.id] = sub;
      }
      const auto capture = [&](Value v) {
        if (!v.valid() || defined_in[v.id] == sub || seen_in[v.id] == sub) return;
        seen_in[v.id] = sub;
        captured_[i].push_back(v);
      };
      for (const NodeId n : nodes_of[i]) {
        for (const Value in : g_.inputs(n)) capture(in);
        for (const Attr& a : g_.attrs(n)) {
          if (a.kind() == Attr::Kind::Graph) {
            for (const Value v : captured_[a.as_graph().index]) capture(v);
          }
        }
      }
    }
  }

  bool is_inlined_constant(Value v) const {
    const Initializer* init = g_.initializer(v);
    return init != nullptr && !init->overridable && g_.info(v).name == kNoName && init->nbytes <= kInlinedConstantBytes;
  }

  void append_type(std::string& key, Value v) const {
    const ValueInfo& info = g_.info(v);
    append(key, info.dtype);
    append(key, info.has_shape ? info.rank : uint32_t{0xFFFFFFFFu});
    for (const Dim& d : g_.shape(v)) {
      append(key, d.value);
      append(key, d.symbol);
    }
  }

  // Replaces the nodes of one module call by a call of its function (a new function unless an
  // earlier call's body is the same).
  void outline(uint32_t s, const std::vector<NodeId>& nodes) {
    const uint32_t parent = scopes_[s].parent;
    const NodeId last = nodes.back();
    LocalFunction f;
    // What the body is, values numbered locally: inputs, constants and node outputs by order of
    // first use.
    std::string key = scopes_[s].function_name;
    key.push_back('\0');
    std::unordered_map<uint32_t, uint64_t> local;  // by value id
    for (size_t k = 0; k < nodes.size(); ++k) {
      const NodeId n = nodes[k];
      append(key, g_.node(n).op_type);
      append(key, g_.node(n).domain);
      for_each_read(n, [&](Value in) {
        if (!in.valid()) return append(key, kUnused);
        auto [it, fresh] = local.emplace(in.id, 0);
        if (fresh) {
          if (is_inlined_constant(in)) {
            it->second = (uint64_t{1} << 62) | f.constants.size();
            f.constants.push_back(in);
          } else {
            it->second = (uint64_t{2} << 62) | f.inputs.size();
            f.inputs.push_back(in);
          }
        }
        append(key, it->second);
      });
      append(key, uint64_t{0xFFFFFFFFu});
      const auto outs = g_.outputs(n);
      for (size_t o = 0; o < outs.size(); ++o) {
        local.emplace(outs[o].id, (uint64_t{k} << 16) | o);
        if (first_outside_use_[outs[o].id] == kUnused) continue;
        if (first_outside_use_[outs[o].id] < place_[last.index]) return leave_to_parent(nodes, parent);
        f.outputs.push_back(outs[o]);
      }
      append(key, static_cast<uint32_t>(outs.size()));
      for (const Attr& a : g_.attrs(n)) append_attr_key(key, a);
    }
    if (f.outputs.empty()) return leave_to_parent(nodes, parent);
    for (const Value out : f.outputs) append(key, local[out.id]);
    for (const Value in : f.inputs) append_type(key, in);
    for (const Value c : f.constants) {
      append_type(key, c);
      const Initializer* init = g_.initializer(c);
      if (init->data != nullptr) {
        key.append(static_cast<const char*>(init->data), init->nbytes);
      } else {
        append(key, c);  // bytes produced only when written: equal only to itself
      }
    }

    auto [it, fresh] = signatures_.emplace(std::move(key), functions_.size());
    if (fresh) {
      f.name = function_name(scopes_[s].function_name);
      f.body = nodes;
      for (NodeId n : nodes) {
        if (g_.node(n).name == kNoName) g_.name_node(n, g_.strings.str(g_.node(n).op_type));
      }
      functions_.push_back(f);
    }
    for (NodeId n : nodes) g_.kill(n);
    const NodeId call = [&] {
      const auto scope = g_.with_scope(parent);
      return g_.add_call(functions_[it->second].name, kFunctionDomain, f.inputs, f.outputs);
    }();
    g_.name_node(call, scopes_[s].module_path);
    place_.resize(call.index + 1);
    place_[call.index] = place_[last.index] + 1;
    for (const Value out : f.outputs) value_scope_[out.id] = parent;
  }

  // A module call that cannot be one call node: its nodes join the enclosing scope.
  void leave_to_parent(const std::vector<NodeId>& nodes, uint32_t parent) {
    for (NodeId n : nodes) {
      g_.set_node_scope(n, parent);
      for (const Value out : g_.outputs(n)) value_scope_[out.id] = parent;
    }
  }

  // The class's name for its first function; `name_1`, `name_2`... for bodies that differ.
  std::string function_name(const std::string& base) {
    std::string name = base;
    for (uint32_t i = 1; !names_.insert(name).second; ++i) name = base + "_" + std::to_string(i);
    return name;
  }

  Graph& g_;
  std::span<const Scope> scopes_;
  std::vector<uint32_t> depth_;
  std::vector<uint64_t> place_;                         // by node id
  std::vector<uint32_t> value_scope_;                   // by value id: the scope whose node produces it
  std::vector<uint64_t> first_outside_use_;             // by value id, for the depth being outlined
  std::vector<std::vector<Value>> captured_;            // by subgraph id
  std::unordered_map<std::string, size_t> signatures_;  // body -> index in functions_
  std::unordered_set<std::string> names_;
  std::vector<LocalFunction> functions_;
};

}  // namespace

Outlined outline_functions(Graph& g, std::span<const Scope> scopes) { return Outliner(g, scopes).run(); }

}  // namespace fastonnx
