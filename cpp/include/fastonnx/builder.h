// The Builder: the only door converters have to the graph. It adds ONNX nodes at the end of
// the graph, makes typed constants, tracks element types, and knows the target opset and the
// metadata torch.export recorded for the FX node being converted.
#pragma once

#include <concepts>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fastonnx/ir.h"
#include "fastonnx/onnx_op.h"
#include "fastonnx/onnx_types.h"
#include "fastonnx/types.h"

namespace fastonnx {

// dtype and shape of a tensor as torch.export recorded it (FX node.meta["val"]).
struct TensorMeta {
  ScalarType dtype = ScalarType::Undefined;
  std::vector<Dim> shape;
};

class Builder {
 public:
  Builder(Graph& graph, int opset) : g_(graph), opset_(opset) {}

  int opset() const { return opset_; }

  // The graph new nodes go to: the main graph, or the subgraph the session is building.
  GraphId insertion_graph() const { return insertion_graph_; }
  // Nodes go to `graph` for the guard's lifetime (MLIR's InsertionGuard).
  ScopedValue<GraphId> with_insertion_graph(GraphId graph) { return {insertion_graph_, graph}; }

  // Subgraphs (the body of a Loop a converter makes, or the session's control flow): nodes go
  // to a new subgraph of the insertion graph from begin_subgraph() on; end_subgraph() sets its
  // outputs, goes back to the enclosing graph and returns the subgraph's id for Attr::graph.
  GraphId begin_subgraph();
  Value subgraph_input(std::string_view name, ScalarType dtype, std::span<const Dim> dims);
  GraphId end_subgraph(const std::vector<Value>& outputs);

  // Standard ONNX nodes, named at compile time (onnx_op.h): `op<"Add">({x, y}, attrs)`. The name,
  // and the length of a braced input list, are checked by the compiler; a list built at run time
  // (an Inputs vector) is checked when the node is built, as is whether the target opset has the
  // op. The element type of each output follows ONNX's type constraints (onnx_types.h).
  template <OpName Name, size_t N>
  Value op(const Input (&inputs)[N], const Attrs& attrs = {}) {
    return add(standard_op<Name>(N), Inputs(inputs, inputs + N), attrs, 1)[0];
  }
  template <OpName Name>
  Value op(const Attrs& attrs = {}) {
    return add(standard_op<Name>(0), {}, attrs, 1)[0];
  }
  template <OpName Name, std::same_as<Inputs> I>
  Value op(const I& inputs, const Attrs& attrs = {}) {
    return add(standard_op<Name>(), inputs, attrs, 1)[0];
  }
  template <OpName Name, size_t N>
  std::vector<Value> op_n(const Input (&inputs)[N], const Attrs& attrs, int n_outputs) {
    return add(standard_op<Name>(N), Inputs(inputs, inputs + N), attrs, n_outputs);
  }
  template <OpName Name, std::same_as<Inputs> I>
  std::vector<Value> op_n(const I& inputs, const Attrs& attrs, int n_outputs) {
    return add(standard_op<Name>(), inputs, attrs, n_outputs);
  }
  // An op chosen at run time among names each checked where it is written (OpType).
  Value op(OpType type, const Inputs& inputs, const Attrs& attrs = {}) { return add(*type.arity, inputs, attrs, 1)[0]; }
  std::vector<Value> op_n(OpType type, const Inputs& inputs, const Attrs& attrs, int n_outputs) {
    return add(*type.arity, inputs, attrs, n_outputs);
  }
  // An op named at run time (a Python converter's g.op): every check happens when it is built.
  std::vector<Value> op_named(std::string_view type, const Inputs& inputs, const Attrs& attrs, int n_outputs);
  // A node of another domain (a custom op): ONNX knows nothing of its types, so its outputs'
  // element types are unknown until the caller sets them. The empty domain and ai.onnx are ONNX's
  // own: op_named.
  std::vector<Value> custom_op(std::string_view domain, std::string_view type, const Inputs& inputs, const Attrs& attrs,
                               int n_outputs);

  // Constants: 0-d scalars and 1-D lists, of a given element type or of the type of `like`.
  Value scalar(const Scalar& s, ScalarType dtype);
  Value scalar_like(const Scalar& s, Value like) { return scalar(s, dtype(like)); }
  Value list(const std::vector<Scalar>& items, ScalarType dtype);
  Value list_like(const std::vector<Scalar>& items, Value like) { return list(items, dtype(like)); }
  // A constant of any shape, from its items in row-major order.
  Value tensor(const std::vector<Scalar>& items, const std::vector<int64_t>& shape, ScalarType dtype);
  Value constant(ScalarType dtype, std::span<const int64_t> shape, std::vector<uint8_t> bytes);
  // An int list as a 1-D int64 tensor: a constant when every item is static, else a Concat of
  // the symbolic items.
  Value ints(const std::vector<int64_t>& items);
  Value ints(std::initializer_list<int64_t> items) { return ints(std::vector<int64_t>(items)); }  // b.ints({0, 1})
  Value ints(const SymIntList& items);
  // An int, static or computed, as a 0-d int64 value.
  Value long_scalar(const SymInt& s);
  std::optional<Value> ints(const std::optional<std::vector<int64_t>>& items);
  std::optional<Value> ints(const std::optional<SymIntList>& items);

  // Complex values. ONNX (and onnxruntime) cannot hold complex tensors, so a complex tensor of
  // shape S is carried as a real tensor of shape S + [2] (real, imaginary: torch.view_as_real's
  // layout) while its dtype in the graph stays complex. A converter that knows this calls
  // accept_complex_pairs() before feeding complex values to ONNX ops (which then see their real
  // parts type); in any other converter a complex input is an error, not a silent misreading.
  // as_complex/as_real relabel a value between the two views without moving data.
  void accept_complex_pairs() { complex_pairs_ = true; }
  // Complex pairs are accepted for the guard's lifetime (an Identity that copies them).
  ScopedValue<bool> with_complex_pairs() { return {complex_pairs_, true}; }
  Value as_complex(Value pairs);
  Value as_real(Value complex);

  // Element types.
  ScalarType dtype(Value v) const { return g_.info(v).dtype; }
  // Declares `v` an ONNX optional of its tensor type (what Optional makes).
  void mark_optional(Value v) { g_.set_optional(v); }
  // Declares `v` an ONNX sequence of tensors of its element type (what SequenceEmpty makes).
  void mark_sequence(Value v) { g_.set_sequence(v); }
  // torch's dtype conversion, to or from complex dtypes too (on the pairs, see as_complex).
  Value cast(Value v, ScalarType to);
  void cast_all(std::vector<Value>& values, ScalarType to);
  // The dtype an op computes in: the FX node's output dtype, or, when that is bool (a
  // comparison), torch's promotion of the inputs' dtypes.
  template <typename... Ts>
  ScalarType compute_dtype(const Ts&... tensors) {
    std::vector<Value> all;
    (collect(all, tensors), ...);
    return compute_dtype_of(all);
  }
  ScalarType compute_dtype_of(const std::vector<Value>& tensors) const;
  ScalarType result_type(const std::vector<Value>& tensors) const;

  // Shapes: known for graph inputs, weights, constants and every converter output.
  bool has_shape(Value v) const { return g_.info(v).has_shape && !g_.info(v).rank_varies; }
  int64_t rank(Value v) const;
  std::span<const Dim> shape(Value v) const;
  std::optional<std::vector<int64_t>> static_shape(Value v) const { return g_.static_shape(v); }
  // Dynamic sizes that may be 1 at run time: torch.export's ranges do not exclude it (a size read
  // from data with .item(), a Dim with min=1), so torch traced the ops that treat a size of 1
  // apart (squeeze) without deciding for it, and the graph must decide when it runs.
  void mark_may_be_one(StrId symbol) { may_be_one_.insert(symbol); }
  bool may_be_one(const Dim& d) const { return d.is_static() ? d.value == 1 : may_be_one_.count(d.symbol) != 0; }
  // The current converter's result has a rank the data decides (a squeeze decided at run time):
  // a later converter that needs its shape fails instead of assuming the one torch traced
  // (ValueInfo::rank_varies).
  void mark_rank_dynamic() { rank_dynamic_ = true; }
  bool rank_dynamic() const { return rank_dynamic_; }
  int64_t static_int(const SymInt& s) const;
  std::vector<int64_t> static_ints(const SymIntList& s) const;

  // What torch.export recorded for the outputs of the FX node being converted.
  const TensorMeta& out_meta(size_t i = 0) const;
  // How many outputs it recorded: the length of a list result (split, unbind), which torch.export
  // fixes even when the sizes it splits are dynamic.
  size_t out_count() const { return metas_.size(); }
  std::optional<std::vector<int64_t>> out_static_shape(size_t i = 0) const {
    return fastonnx::static_shape(out_meta(i).shape);
  }

  // While it lives, the Builder converts FX node `fx_name`, whose outputs torch recorded as
  // `metas`: the nodes added name it as their origin, out_meta() reads `metas`, and the
  // converter's flags (accept_complex_pairs, mark_rank_dynamic) start clear. Afterwards no FX
  // node is current and the flags are clear again.
  class [[nodiscard]] CurrentNode {
   public:
    CurrentNode(Builder& b, std::string_view fx_name, std::span<const TensorMeta> metas);
    ~CurrentNode();
    CurrentNode(const CurrentNode&) = delete;
    CurrentNode& operator=(const CurrentNode&) = delete;

   private:
    Builder& b_;
    ScopedValue<StrId> origin_;
  };

  [[noreturn]] void fail(const std::string& message) const;

 private:
  // A node of a standard op whose table entry is known (the input and output counts are checked
  // here for lists built at run time).
  std::vector<Value> add(const OnnxArity& op, const Inputs& inputs, const Attrs& attrs, int n_outputs);
  static void collect(std::vector<Value>& out, Value v) { out.push_back(v); }
  static void collect(std::vector<Value>& out, const std::optional<Value>& v) {
    if (v) out.push_back(*v);
  }
  static void collect(std::vector<Value>& out, const std::vector<Value>& vs) {
    out.insert(out.end(), vs.begin(), vs.end());
  }
  Value cast_complex(Value v, ScalarType to);

  Graph& g_;
  int opset_;
  GraphId insertion_graph_ = kMainGraph;
  // Scalar constants by value id, so a cast of one makes a constant of the new type instead
  // of a Cast node.
  std::unordered_map<uint32_t, Scalar> scalars_;
  std::span<const TensorMeta> metas_;  // of the current FX node (CurrentNode)
  bool complex_pairs_ = false;         // the current converter handles complex values (as real pairs)
  std::unordered_set<StrId> may_be_one_;
  bool rank_dynamic_ = false;  // set by the current converter
};

}  // namespace fastonnx
