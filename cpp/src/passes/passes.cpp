#include "fastonnx/passes.h"

#include <cctype>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include "fastonnx/fold.h"
#include "fastonnx/rewrite.h"
#include "fold_internal.h"

namespace fastonnx {

void remove_dead_nodes(Graph& g) {
  std::vector<bool> live(g.num_values(), false);
  for (const Value out : g.graph_outputs()) live[out.id] = true;
  // Nodes are in topological order, so one backward sweep settles liveness. A subgraph's nodes
  // come before the node that owns it, so a live owner makes the subgraph's outputs live before
  // the sweep reaches them, and they in turn keep alive the outer values they read.
  for (auto i = static_cast<uint32_t>(g.num_nodes()); i-- > 0;) {
    const NodeId n{i};
    if (g.node(n).dead) continue;
    bool needed = false;
    for (const Value out : g.outputs(n)) needed = needed || live[out.id];
    if (!needed) {
      g.kill(n);
      continue;
    }
    for (const Value in : g.inputs(n)) {
      if (in.valid()) live[in.id] = true;
    }
    for (const Attr& a : g.attrs(n)) {
      if (a.kind() != Attr::Kind::Graph) continue;
      for (const Value out : g.subgraph(a.as_graph()).outputs) live[out.id] = true;
    }
  }
}

namespace {

void append_raw(std::string& key, const void* p, size_t n) { key.append(static_cast<const char*>(p), n); }
template <typename T>
void append(std::string& key, T v) {
  append_raw(key, &v, sizeof(T));
}

}  // namespace

void append_attr_key(std::string& key, const Attr& a) {
  append(key, a.name.id());
  append(key, a.kind());
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          append(key, v.size());
          key += v;
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          append(key, v.size());
          for (const std::string& item : v) {
            append(key, item.size());
            key += item;
          }
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>>) {
          append(key, v.size());
          append_raw(key, v.data(), v.size() * sizeof(v[0]));
        } else {  // a number or a subgraph id
          append(key, v);
        }
      },
      a.value);
}

namespace {

// Small constants made by converters (scalars, axes lists) are merged when equal; weights keep
// their names and are left alone.
constexpr size_t kMergeableConstantBytes = 1024;
// A weight at least this large that is also read as it is (a tied embedding: Gather reads it,
// the LM head's MatMul reads it transposed) keeps its Transpose or Cast node: folded, the file
// would hold the weight twice. Smaller ones are folded; the copy costs little.
constexpr size_t kSharedWeightBytes = size_t{1} << 20;

// Ops whose outputs differ between two evaluations on the same inputs.
bool is_random(std::string_view op) {
  return op.starts_with("Random") || op == "Bernoulli" || op == "Multinomial" || op == "Dropout";
}

class Optimizer {
 public:
  explicit Optimizer(Graph& g) : g_(g), subst_(g.num_values()), pinned_(g.num_values(), false) {
    for (uint32_t v = 0; v < subst_.size(); ++v) subst_[v] = Value{v};
    for (const Value out : g.graph_outputs()) pinned_[out.id] = true;
    // A subgraph's outputs are its interface to the node that owns it: they stay produced by a
    // node of the subgraph (not replaced by an outer value or a constant).
    for (const GraphId sub : g.subgraph_ids()) {
      for (const Value out : g.subgraph(sub).outputs) pinned_[out.id] = true;
    }
  }

  PassStats run() {
    merge_constants();
    find_shared_weights();
    for (const NodeId n : g_.node_ids()) {
      if (g_.node(n).dead) continue;
      rewrite_inputs(n);
      if (produces_output(n) || try_fold(n)) continue;
      compose_transposes(n);
      if (try_forward(n) || try_merge(n)) continue;
    }
    const size_t before = live_count();
    remove_dead_nodes(g_);
    stats_.removed = before - live_count();
    return stats_;
  }

 private:
  Value resolve(Value v) const {
    while (v.id < subst_.size() && subst_[v.id] != v) v = subst_[v.id];
    return v;
  }

  void replace(Value old_value, Value new_value) {
    if (subst_.size() < g_.num_values()) {
      const size_t from = subst_.size();
      subst_.resize(g_.num_values());
      for (size_t v = from; v < subst_.size(); ++v) subst_[v] = Value{static_cast<uint32_t>(v)};
    }
    subst_[old_value.id] = new_value;
  }

  void rewrite_inputs(NodeId n) {
    const auto inputs = g_.inputs(n);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].valid()) continue;
      const Value r = resolve(inputs[i]);
      if (r != inputs[i]) g_.set_input(n, i, r);
    }
  }

  // A node that produces a graph output keeps it, so the output keeps its name and producer.
  bool produces_output(NodeId n) const {
    for (const Value out : g_.outputs(n)) {
      if (out.id < pinned_.size() && pinned_[out.id]) return true;
    }
    return false;
  }

  Value int64_constant(std::vector<int64_t> values, bool scalar) {
    auto bytes = std::make_shared<std::vector<int64_t>>(std::move(values));
    std::vector<Dim> dims;
    if (!scalar) dims.push_back(Dim{static_cast<int64_t>(bytes->size()), kNoName});
    const void* data = bytes->data();
    const size_t nbytes = bytes->size() * sizeof(int64_t);
    return g_.add_initializer("", ScalarType::Long, dims, data, nbytes, std::move(bytes));
  }

  void fold_to(NodeId n, std::vector<Value> results) {
    const auto outs = g_.outputs(n);
    for (size_t i = 0; i < outs.size(); ++i) replace(outs[i], results[i]);
    g_.kill(n);
    ++stats_.folded;
  }

  // Sizes that are static even where the tensor is not constant: Shape, Size, and a Gather of
  // static dimensions out of a Shape (`x.shape[1]` under a dynamic batch).
  bool try_fold_shape(NodeId n) {
    const std::string_view op = op_of(g_, n);
    const auto in = g_.inputs(n);
    if ((op == "Shape" || op == "Size") && !in.empty()) {
      const auto shape = g_.static_shape(in[0]);
      if (!shape) return false;
      if (op == "Size") {
        int64_t count = 1;
        for (int64_t d : *shape) count *= d;
        fold_to(n, {int64_constant({count}, true)});
        return true;
      }
      const auto [start, end] = shape_range(g_, n, static_cast<int64_t>(shape->size()));
      fold_to(n, {int64_constant(std::vector<int64_t>(shape->begin() + start, shape->begin() + std::max(start, end)),
                                 false)});
      return true;
    }
    if (op == "Gather" && in.size() == 2) {
      const NodeId producer = g_.info(in[0]).producer;
      const Initializer* index = g_.initializer(in[1]);
      if (producer == kNoNode || op_of(g_, producer) != "Shape" || g_.attrs(producer).size() != 0 || index == nullptr ||
          g_.info(in[1]).dtype != ScalarType::Long || index->data == nullptr || index->nbytes != sizeof(int64_t)) {
        return false;
      }
      const Value source = g_.inputs(producer)[0];
      if (!g_.info(source).has_shape || g_.info(source).rank_varies) return false;
      const auto dims = g_.shape(source);
      int64_t i;
      std::memcpy(&i, index->data, sizeof(i));
      if (i < 0) i += static_cast<int64_t>(dims.size());
      if (i < 0 || i >= static_cast<int64_t>(dims.size()) || !dims[i].is_static()) return false;
      fold_to(n, {int64_constant({dims[i].value}, g_.shape(in[1]).empty())});
      return true;
    }
    return false;
  }

  bool try_fold(NodeId n) {
    if (try_fold_shape(n)) return true;
    const auto in = g_.inputs(n);
    if (!in.empty() && in[0].valid() && in[0].id < shared_weight_.size() && shared_weight_[in[0].id] &&
        copies_weight(op_of(g_, n))) {
      return false;
    }
    std::vector<std::optional<ConstView>> views;
    std::vector<ConstSource> sources;
    for (const Value v : in) {
      if (!v.valid()) {
        views.emplace_back();
        sources.emplace_back();
        continue;
      }
      const Initializer* init = g_.initializer(v);
      const auto shape = g_.static_shape(v);
      if (init == nullptr || init->overridable || init->pinned || !shape) return false;
      views.push_back(ConstView{g_.info(v).dtype, *shape, static_cast<const uint8_t*>(init->data), init->model_tensor});
      sources.push_back(ConstSource{init->data, init->owner, init->computed});
    }
    if (views.empty()) return false;
    const auto folded = fold(op_of(g_, n), g_.attrs(n), views, sources);
    if (!folded || folded->size() != g_.outputs(n).size()) return false;
    std::vector<Value> results;
    for (const Folded& f : *folded) {
      std::vector<Dim> dims;
      for (int64_t d : f.shape) dims.push_back(Dim{d, kNoName});
      if (f.alias_of >= 0) {
        results.push_back(g_.alias_initializer(in[f.alias_of], dims));
      } else if (f.computed) {
        results.push_back(g_.add_computed_initializer(f.dtype, dims, f.computed));
      } else {
        auto bytes = std::make_shared<std::vector<uint8_t>>(f.bytes);
        const void* data = bytes->data();
        const size_t nbytes = bytes->size();
        results.push_back(g_.add_initializer("", f.dtype, dims, data, nbytes, std::move(bytes)));
      }
    }
    if (results.size() == 1) name_after_weight(n, results[0]);
    fold_to(n, std::move(results));
    return true;
  }

  // A folded weight is named after the weight it comes from (`fc.weight_transpose`).
  void name_after_weight(NodeId n, Value result) {
    for (const Value v : g_.inputs(n)) {
      if (!v.valid()) continue;
      const ValueInfo& source = g_.info(v);
      const Initializer* init = g_.initializer(v);
      if (source.name == kNoName || init == nullptr || init->nbytes <= kMergeableConstantBytes) continue;
      std::string name = std::string(g_.strings.str(source.name)) + "_";
      for (char c : op_of(g_, n)) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      g_.set_name(result, name);
      return;
    }
  }

  // Transpose(Transpose(x, p), q) reads x with one permutation, p[q[i]] (attention takes K
  // through a permute and then swaps its last two dimensions); an identity is then forwarded,
  // and the inner Transpose goes when nothing else reads it. Within one graph and one module
  // scope, like CSE.
  void compose_transposes(NodeId n) {
    if (op_of(g_, n) != "Transpose") return;
    const auto in = g_.inputs(n);
    if (in.empty() || !in[0].valid()) return;
    const NodeId p = g_.info(in[0]).producer;
    if (p == kNoNode || g_.node(p).dead || op_of(g_, p) != "Transpose" || g_.node(p).graph != g_.node(n).graph ||
        g_.scope(p) != g_.scope(n)) {
      return;
    }
    // Without a perm (the default, reversed one) a Transpose is left alone.
    const Attr* outer = g_.attr(n, "perm", Attr::Kind::Ints);
    const Attr* inner = g_.attr(p, "perm", Attr::Kind::Ints);
    if (outer == nullptr || inner == nullptr || outer->as_ints().size() != inner->as_ints().size()) return;
    const size_t rank = outer->as_ints().size();
    std::vector<int64_t> composed(rank);
    for (size_t i = 0; i < rank; ++i) {
      const int64_t q = outer->as_ints()[i];
      if (q < 0 || static_cast<size_t>(q) >= rank) return;
      composed[i] = inner->as_ints()[q];
    }
    g_.set_input(n, 0, g_.inputs(p)[0]);
    g_.set_ints_attr(n, "perm", std::move(composed));
    ++stats_.composed;
  }

  // Nodes that compute nothing: their output is their input.
  bool try_forward(NodeId n) {
    const std::string_view op = op_of(g_, n);
    const auto in = g_.inputs(n);
    if (in.empty() || !in[0].valid() || g_.outputs(n).size() != 1) return false;
    const Value x = in[0], y = g_.outputs(n)[0];
    bool same = op == "Identity";
    if (op == "Cast") same = g_.info(x).dtype == g_.info(y).dtype;
    if (op == "Transpose") {
      // A Transpose's only attribute is its perm; without one it reverses the dimensions.
      const Attr* perm = g_.attr(n, "perm", Attr::Kind::Ints);
      same = perm != nullptr;
      for (size_t i = 0; perm != nullptr && i < perm->as_ints().size(); ++i) {
        same = same && perm->as_ints()[i] == static_cast<int64_t>(i);
      }
    }
    if (op == "Slice") same = slices_everything(in);
    if (op == "Reshape" || op == "Expand" || op == "Squeeze" || op == "Unsqueeze") {
      const auto a = g_.static_shape(x), b = g_.static_shape(y);
      same = a && b && *a == *b;
    }
    if (!same) return false;
    replace(y, x);
    g_.kill(n);
    ++stats_.forwarded;
    return true;
  }

  // The values of a constant integer input (an initializer), if it is one.
  std::optional<std::vector<int64_t>> constant_ints(Value v) const {
    const Initializer* init = g_.initializer(v);
    const auto shape = g_.static_shape(v);
    const ScalarType dtype = g_.info(v).dtype;
    if (init == nullptr || init->overridable || !shape || (dtype != ScalarType::Long && dtype != ScalarType::Int)) {
      return std::nullopt;
    }
    return fold_detail::ints_of(ConstView{dtype, *shape, static_cast<const uint8_t*>(init->data), init->model_tensor});
  }

  // A Slice from 0 to the end (INT64_MAX, as torch's `x[:, :]` records it) with step 1 on every
  // axis it names copies its input, whatever the input's size.
  bool slices_everything(std::span<const Value> in) const {
    if (in.size() < 3 || !in[1].valid() || !in[2].valid()) return false;
    const auto starts = constant_ints(in[1]), ends = constant_ints(in[2]);
    if (!starts || !ends || starts->size() != ends->size()) return false;
    std::optional<std::vector<int64_t>> steps = std::vector<int64_t>(starts->size(), 1);
    if (in.size() > 4 && in[4].valid()) steps = constant_ints(in[4]);
    if (!steps || steps->size() != starts->size()) return false;
    for (size_t i = 0; i < starts->size(); ++i) {
      if ((*starts)[i] != 0 || (*ends)[i] != std::numeric_limits<int64_t>::max() || (*steps)[i] != 1) return false;
    }
    return true;
  }

  // Common-subexpression elimination: a node equal to an earlier one (same op, inputs and
  // attributes) reuses its outputs. Only within one graph: a value computed in one If branch
  // does not exist in the other, nor outside the subgraph.
  bool try_merge(NodeId n) {
    const Node& node = g_.node(n);
    if (is_random(op_of(g_, n))) return false;
    std::string key;
    append(key, node.graph);
    append(key, node.op_type);
    append(key, node.domain);
    append(key, node.n_outputs);
    // Nodes of two module calls that become local functions stay apart: merged, one call would
    // compute a value for the other, and the calls' bodies would differ.
    append(key, g_.scope(n));
    for (const Value v : g_.inputs(n)) append(key, v);
    append(key, uint32_t{0xFFFFFFFFu});
    for (const Attr& a : g_.attrs(n)) append_attr_key(key, a);
    auto [it, inserted] = seen_.emplace(std::move(key), n);
    if (inserted) return false;
    const auto outs = g_.outputs(n), earlier = g_.outputs(it->second);
    for (size_t i = 0; i < outs.size(); ++i) replace(outs[i], earlier[i]);
    g_.kill(n);
    ++stats_.merged;
    return true;
  }

  void merge_constants() {
    std::unordered_map<std::string, Value> first;
    const size_t count = g_.initializers().size();
    for (size_t i = 0; i < count; ++i) {
      const Initializer& init = g_.initializers()[i];
      const ValueInfo& info = g_.info(init.value);
      if (info.name != kNoName || init.computed || init.overridable || init.nbytes > kMergeableConstantBytes) continue;
      std::string key;
      append(key, info.dtype);
      for (const Dim& d : g_.shape(init.value)) append(key, d.value);
      append(key, int64_t{-2});
      append_raw(key, init.data, init.nbytes);
      auto [it, inserted] = first.emplace(std::move(key), init.value);
      if (!inserted && !pinned_[init.value.id]) {
        replace(init.value, it->second);
        ++stats_.constants_merged;
      }
    }
  }

  // Folds that write a new copy of their input rather than an alias of it.
  static bool copies_weight(std::string_view op) { return op == "Transpose" || op == "Cast"; }

  // Marks the large weights read in more than one way: by an op other than a copying fold, or by
  // two copying folds that differ (two perms). Equal folds are one (CSE merges them).
  void find_shared_weights() {
    shared_weight_.assign(g_.num_values(), false);
    std::unordered_map<uint32_t, std::string> first_read;  // weight's value id -> how it is first read
    for (const NodeId n : g_.node_ids()) {
      if (g_.node(n).dead) continue;
      const auto in = g_.inputs(n);
      for (size_t i = 0; i < in.size(); ++i) {
        const Initializer* init = in[i].valid() ? g_.initializer(in[i]) : nullptr;
        if (init == nullptr || init->computed || init->nbytes < kSharedWeightBytes) continue;
        std::string how;  // empty: read as it is
        if (i == 0 && copies_weight(op_of(g_, n))) {
          how = op_of(g_, n);
          for (const Attr& a : g_.attrs(n)) append_attr_key(how, a);
        }
        auto [it, inserted] = first_read.emplace(in[i].id, how);
        if (!inserted && it->second != how) shared_weight_[in[i].id] = true;
      }
    }
  }

  size_t live_count() const {
    size_t n = 0;
    for (const NodeId i : g_.node_ids()) n += !g_.node(i).dead;
    return n;
  }

  Graph& g_;
  std::vector<Value> subst_;  // by value id: the value that replaces it (itself when none)
  std::vector<bool> pinned_;
  std::unordered_map<std::string, NodeId> seen_;
  std::vector<bool> shared_weight_;  // by value id, see find_shared_weights
  PassStats stats_;
};

}  // namespace

PassStats optimize(Graph& g) { return Optimizer(g).run(); }

}  // namespace fastonnx
