#include "fastonnx/session.h"

#include <algorithm>
#include <new>
#include <stdexcept>
#include <string>

#include "fastonnx/tensor_bytes.h"
#include "fastonnx/typecheck.h"
#include "opsets.h"

namespace fastonnx {

Session::Session(int opset, bool keep_initializers_as_inputs)
    : builder_(graph_, opset), opset_(opset), keep_initializers_as_inputs_(keep_initializers_as_inputs) {
  if (opset < kMinOpset || opset > kMaxOpset) {
    throw ConvertError("opset " + std::to_string(opset) + " is outside the supported range " +
                       std::to_string(kMinOpset) + ".." + std::to_string(kMaxOpset));
  }
}

namespace {
// Rejects dtypes ONNX cannot hold, naming the input or weight.
void check_dtype(const char* what, std::string_view name, ScalarType dtype) {
  try {
    onnx_dtype(dtype);
  } catch (const ConvertError& e) {
    throw ConvertError(std::string(what) + " `" + std::string(name) + "`: " + e.what() +
                       "; give it a dtype ONNX has (a complex tensor as its real and imaginary parts: "
                       "torch.view_as_real)");
  }
}
}  // namespace

Value Session::add_input(std::string_view name, const TensorMeta& meta) {
  check_dtype("input", name, meta.dtype);
  return graph_.add_input(name, meta.dtype, meta.shape);
}

Value Session::add_initializer(std::string_view name, const TensorMeta& meta, const void* data, size_t nbytes,
                               std::shared_ptr<const void> owner) {
  check_dtype("weight", name, meta.dtype);
  // The serializer reads exactly the bytes the shape says: a buffer of another size would be
  // read past its end.
  size_t expected = static_cast<size_t>(element_size(meta.dtype));
  for (const Dim& d : meta.shape) {
    if (!d.is_static()) throw ConvertError("weight `" + std::string(name) + "` has a dynamic shape");
    expected *= static_cast<size_t>(d.value);
  }
  if (nbytes != expected || (data == nullptr && nbytes != 0)) {
    throw ConvertError("weight `" + std::string(name) + "`: a buffer of " + std::to_string(nbytes) + " bytes at " +
                       (data ? "an address" : "null") + " for " + std::to_string(expected) + " bytes of data");
  }
  const Value v = graph_.add_initializer(name, meta.dtype, meta.shape, data, nbytes, std::move(owner));
  graph_.set_model_tensor(v);
  if (keep_initializers_as_inputs_) graph_.set_overridable(v);
  if (pin_weights_) graph_.set_pinned(v);
  return v;
}

Value Session::add_cast_initializer(std::string_view name, const TensorMeta& meta, const void* data, ScalarType stored,
                                    std::shared_ptr<const void> owner) {
  check_dtype("weight", name, meta.dtype);
  size_t count = 1;
  for (const Dim& d : meta.shape) {
    if (!d.is_static()) throw ConvertError("weight `" + std::string(name) + "` has a dynamic shape");
    count *= static_cast<size_t>(d.value);
  }
  if (data == nullptr && count != 0) throw ConvertError("weight `" + std::string(name) + "`: no data");
  const Value v = graph_.add_computed_initializer(meta.dtype, meta.shape,
                                                  cast_bytes(data, std::move(owner), count, stored, meta.dtype));
  graph_.claim_name(v, name);
  graph_.set_model_tensor(v);
  if (keep_initializers_as_inputs_) graph_.set_overridable(v);
  if (pin_weights_) graph_.set_pinned(v);
  return v;
}

std::string Session::node_label(int op_id, std::string_view fx_name) {
  const auto table = op_table();
  const std::string op = op_id >= 0 && static_cast<size_t>(op_id) < table.size()
                             ? std::string("aten::") + table[op_id].overload
                             : "converter #" + std::to_string(op_id);
  return op + " (FX node `" + std::string(fx_name) + "`)";
}

void Session::check_refs(const Arg& a) const {
  if (a.kind == Arg::Kind::Value && (a.i < 0 || static_cast<size_t>(a.i) >= graph_.num_values())) {
    throw ConvertError("an argument refers to graph value " + std::to_string(a.i) + ", which does not exist");
  }
  for (const Arg& item : a.items) check_refs(item);
}

std::vector<Value> Session::convert(int op_id, const Args& args, std::vector<TensorMeta> metas,
                                    std::string_view fx_name) {
  const auto table = op_table();
  if (op_id < 0 || static_cast<size_t>(op_id) >= table.size()) {
    throw ConvertError(node_label(op_id, fx_name) + ": no converter with this id");
  }
  const OpEntry& entry = table[op_id];
  const uint32_t first_new_value = static_cast<uint32_t>(graph_.num_values());
  Outputs outs;
  bool rank_dynamic = false;
  try {
    const Builder::CurrentNode current(builder_, fx_name, metas);
    for (const Arg& a : args) check_refs(a);
    entry.convert(builder_, args, outs);
    rank_dynamic = builder_.rank_dynamic();
  } catch (const ConvertError& e) {
    throw ConvertError(node_label(op_id, fx_name) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {  // a bug in a converter: still name the node
    throw std::runtime_error(node_label(op_id, fx_name) + ": " + e.what());
  }
  // Values the converter made take the FX node's name and torch's metadata; a value it passed
  // through unchanged (clone, dropout in eval) keeps its own.
  for (size_t i = 0; i < outs.size() && i < metas.size(); ++i) {
    const Value v = outs[i];
    if (v.id < first_new_value || graph_.is_initializer(v)) continue;
    const ValueInfo& info = graph_.info(v);
    if (info.dtype != ScalarType::Undefined && metas[i].dtype != ScalarType::Undefined &&
        info.dtype != metas[i].dtype) {
      throw ConvertError(std::string("aten::") + entry.overload + " (FX node `" + std::string(fx_name) +
                         "`): the converter produced " + dtype_name(info.dtype) + " where torch has " +
                         dtype_name(metas[i].dtype));
    }
    if (metas[i].dtype != ScalarType::Undefined) graph_.set_dtype(v, metas[i].dtype);
    graph_.set_shape(v, metas[i].shape);
    if (rank_dynamic) graph_.set_rank_varies(v);
    if (info.name == kNoName)
      graph_.set_name(v, outs.size() == 1 ? fx_name : std::string(fx_name) + "_" + std::to_string(i));
  }
  return outs;
}

void Session::set_outputs(const std::vector<std::pair<Value, std::string>>& outputs) {
  for (const auto& [value, name] : outputs) {
    if (value.id >= graph_.num_values()) {
      throw ConvertError("output `" + name + "` refers to graph value " + std::to_string(value.id) +
                         ", which does not exist");
    }
  }
  std::vector<bool> taken(graph_.num_values(), false);
  const auto pairs = builder_.with_complex_pairs();  // an Identity copies complex values as their real pairs
  for (const auto& [value, name] : outputs) {
    Value v = value;
    // A graph output must be produced by a node of its own: a passed-through input or weight,
    // or a value already returned, gets an Identity.
    if (graph_.info(v).producer == kNoNode || (v.id < taken.size() && taken[v.id])) {
      const ValueInfo src = graph_.info(v);
      v = builder_.op<"Identity">({v});
      if (src.has_shape) {
        std::vector<Dim> dims(graph_.shape(value).begin(), graph_.shape(value).end());
        graph_.set_shape(v, dims);
      }
      if (src.rank_varies) graph_.set_rank_varies(v);
    }
    if (v.id >= taken.size()) taken.resize(v.id + 1, false);
    taken[v.id] = true;
    if (!name.empty()) graph_.claim_name(v, name);
    graph_.add_output(v);
  }
}

void Session::begin_subgraph() { open_subgraphs_.push_back(builder_.begin_subgraph()); }

Value Session::add_subgraph_input(std::string_view name, const TensorMeta& meta) {
  if (open_subgraphs_.empty()) throw ConvertError("a subgraph input `" + std::string(name) + "` outside any subgraph");
  check_dtype("subgraph input", name, meta.dtype);
  return builder_.subgraph_input(name, meta.dtype, meta.shape);
}

GraphId Session::end_subgraph(const std::vector<Value>& outputs) {
  if (open_subgraphs_.empty()) throw ConvertError("end_subgraph without begin_subgraph");
  for (const Value v : outputs) {
    if (v.id >= graph_.num_values()) {
      throw ConvertError("a subgraph output refers to graph value " + std::to_string(v.id) + ", which does not exist");
    }
  }
  const GraphId graph = [&] {
    const auto pairs = builder_.with_complex_pairs();  // an Identity copies complex values as their real pairs
    return builder_.end_subgraph(outputs);
  }();
  open_subgraphs_.pop_back();
  return graph;
}

std::vector<Value> Session::control_flow(std::string_view op_type, const Inputs& inputs, const Attrs& attrs,
                                         const std::vector<TensorMeta>& metas, std::string_view fx_name) {
  const std::string label = std::string(op_type) + " (FX node `" + std::string(fx_name) + "`)";
  for (const Input& in : inputs) {
    if (in.value.valid() && in.value.id >= graph_.num_values()) {
      throw ConvertError(label + ": an input refers to graph value " + std::to_string(in.value.id) +
                         ", which does not exist");
    }
  }
  std::vector<GraphId> subgraphs;
  for (const Attr& a : attrs) {
    if (a.kind() != Attr::Kind::Graph) continue;
    const GraphId id = a.as_graph();
    const std::string name(a.name.str());
    if (id.index < 1 || id.index > graph_.num_subgraphs() || graph_.subgraph(id).parent != builder_.insertion_graph()) {
      throw ConvertError(label + ": attribute `" + name + "` names no subgraph ended in this graph");
    }
    // Two owners (or two attributes) would write the subgraph twice, each copy defining the
    // same value names.
    if ((id.index < owned_.size() && owned_[id.index]) ||
        std::find(subgraphs.begin(), subgraphs.end(), id) != subgraphs.end()) {
      throw ConvertError(label + ": attribute `" + name + "` names a subgraph another node or attribute owns");
    }
    subgraphs.push_back(id);
  }
  std::vector<Value> outs;
  try {
    const auto origin = graph_.with_origin(graph_.strings.intern(fx_name));
    outs = builder_.op_named(op_type, inputs, attrs, static_cast<int>(metas.size()));
  } catch (const ConvertError& e) {
    throw ConvertError(label + ": " + e.what());
  }
  owned_.resize(graph_.num_subgraphs() + 1, false);
  for (const GraphId id : subgraphs) owned_[id.index] = true;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (metas[i].dtype != ScalarType::Undefined) set_meta(outs[i], metas[i]);
    graph_.set_name(outs[i], outs.size() == 1 ? fx_name : std::string(fx_name) + "_" + std::to_string(i));
  }
  return outs;
}

void Session::set_meta(Value v, const TensorMeta& meta) {
  const ValueInfo& info = graph_.info(v);
  // The element type ONNX gives the value is what the file declares: torch's may only fill in
  // one ONNX does not say (a custom domain's node, a control-flow node's output).
  if (info.dtype != ScalarType::Undefined && meta.dtype != ScalarType::Undefined && info.dtype != meta.dtype) {
    throw ConvertError(std::string("the value is ") + dtype_name(info.dtype) + " in the ONNX graph where torch has " +
                       dtype_name(meta.dtype));
  }
  if (info.producer == kNoNode) return;  // a graph input or weight passed through keeps its own
  if (meta.dtype != ScalarType::Undefined) graph_.set_dtype(v, meta.dtype);
  graph_.set_shape(v, meta.shape);
}

uint32_t Session::add_scope(std::string function_name, std::string module_path, uint32_t parent) {
  if (parent >= scopes_.size()) throw ConvertError("scope " + std::to_string(parent) + " does not exist");
  scopes_.push_back(Scope{std::move(function_name), std::move(module_path), parent});
  return static_cast<uint32_t>(scopes_.size() - 1);
}

void Session::set_scope(uint32_t scope) {
  if (scope >= scopes_.size()) throw ConvertError("scope " + std::to_string(scope) + " does not exist");
  graph_.set_scope(scope);
}

PassStats Session::finish(const FinishOptions& options) {
  if (!open_subgraphs_.empty()) throw ConvertError("a subgraph was begun and not ended");
  graph_.set_scope(0);
  const PassStats stats = optimize(graph_);
  if (options.fuse_for_onnxruntime || options.quantize.bits != 0) {
    if (scopes_.size() > 1) {
      throw ConvertError(
          "onnxruntime's fused ops and quantized weights do not go into local functions "
          "(export_modules_as_functions)");
    }
    if (options.fuse_for_onnxruntime) {
      fuse_norms(graph_, opset_, rewrites_);
      fuse_attention(graph_, options.attention, rewrites_);
    }
    if (options.quantize.bits != 0) {
      quantize_weights(graph_, options.quantize, rewrites_);
      pack_quantized_matmuls(graph_, rewrites_);
    }
    sort_nodes(graph_);
    remove_dead_nodes(graph_);
  }
  check_types(graph_, opset_);
  if (scopes_.size() > 1) outlined_ = outline_functions(graph_, scopes_);
  return stats;
}

size_t Session::num_nodes() const {
  size_t n = 0;
  for (const NodeId i : graph_.node_ids()) n += !graph_.node(i).dead;
  return n;
}

ProtoMessage Session::serialize(const std::string& producer_version, ExternalData* external) {
  ModelInfo info;
  info.opset = opset_;
  info.producer_version = producer_version;
  info.domain_versions = domain_versions_;
  info.function_protos = function_protos_;
  if (scopes_.size() > 1) info.outlined = &outlined_;
  return serialize_model(graph_, info, external);
}

bool Session::add_function_proto(const std::string& domain, const std::string& name, std::string proto) {
  const std::pair<std::string, std::string> key{domain, name};
  if (std::find(function_names_.begin(), function_names_.end(), key) != function_names_.end()) return false;
  function_names_.push_back(key);
  function_protos_.push_back(std::move(proto));
  return true;
}

size_t Session::weights_nbytes() const {
  std::vector<bool> used(graph_.num_values(), false);
  for (const NodeId n : graph_.node_ids()) {
    if (graph_.node(n).dead) continue;
    for (const Value in : graph_.inputs(n)) {
      if (in.valid()) used[in.id] = true;
    }
  }
  size_t total = 0;
  for (const Initializer& init : graph_.initializers()) total += used[init.value.id] ? init.nbytes : 0;
  return total;
}

}  // namespace fastonnx
