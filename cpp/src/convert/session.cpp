#include "fastonnx/session.h"

#include <algorithm>
#include <array>
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
  size_t count = 1;
  for (const Dim& d : meta.shape) {
    if (!d.is_static()) throw ConvertError("weight `" + std::string(name) + "` has a dynamic shape");
    count *= static_cast<size_t>(d.value);
  }
  const size_t expected = byte_size(meta.dtype, count);
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

// A node of an op that moves elements without computing on them (OpEntry::complex_parts) whose
// tensors are complex: ONNX holds a complex tensor as (real, imaginary) pairs in a trailing
// dimension, which a converter written for real tensors would take as one more dimension of the
// data (its axes, shapes and sizes would be off by it). The node is converted twice instead, once
// on the real parts and once on the imaginary parts, each a real tensor of the complex one's
// shape, and the outputs are paired again: right for every such op, whatever its body does.
namespace {

// Part 0 (real) or 1 (imaginary) of the complex value `v`, with its shape.
Value part_of(Graph& g, Builder& b, Value v, int64_t part) {
  const Value out = b.op<"Gather">({b.as_real(v), b.scalar(Scalar(part), ScalarType::Long)}, {Attr::i("axis", -1)});
  const ValueInfo& info = g.info(v);
  if (info.has_shape) {
    const std::vector<Dim> dims(g.shape(v).begin(), g.shape(v).end());
    g.set_shape(out, dims);
  }
  if (info.rank_varies) g.set_rank_varies(out);
  return out;
}

bool is_complex_value(const Graph& g, const Arg& a) {
  return a.kind == Arg::Kind::Value && is_complex(g.info(Value{static_cast<uint32_t>(a.i)}).dtype);
}

// Whether the node makes complex tensors from complex ones (a copy into a real tensor only reads
// the real parts, which its converter does).
bool complex_in_and_out(const Graph& g, const Args& args, const std::vector<TensorMeta>& metas) {
  return std::any_of(metas.begin(), metas.end(), [](const TensorMeta& m) { return is_complex(m.dtype); }) &&
         std::any_of(args.begin(), args.end(), [&](const Arg& a) {
           return is_complex_value(g, a) || std::any_of(a.items.begin(), a.items.end(),
                                                        [&](const Arg& item) { return is_complex_value(g, item); });
         });
}

// The arguments with each complex tensor replaced by its real (part 0) or imaginary (part 1)
// parts. A real tensor is data made complex first (torch's promotion: a zero imaginary part) when
// it is floating, or one of a list holding complex tensors (the tensors cat joins); an integer or
// bool tensor otherwise is an index, a mask or a size, and stays.
Args parts_of(Graph& g, Builder& b, const Args& args, ScalarType complex_type, int64_t part) {
  const auto take = [&](Arg& a, bool beside_complex) {
    if (a.kind != Arg::Kind::Value) return;
    Value v{static_cast<uint32_t>(a.i)};
    const ScalarType t = g.info(v).dtype;
    if (!is_complex(t)) {
      if (!beside_complex && !is_floating(t)) return;
      v = b.cast(v, complex_type);
    }
    a = Arg::value(part_of(g, b, v, part).id);
  };
  Args out = args;
  for (Arg& a : out) {
    take(a, false);
    const bool complex_list =
        std::any_of(a.items.begin(), a.items.end(), [&](const Arg& item) { return is_complex_value(g, item); });
    for (Arg& item : a.items) take(item, complex_list);
  }
  return out;
}

// `metas` with each complex dtype replaced by the type of its parts.
std::vector<TensorMeta> real_metas(std::vector<TensorMeta> metas) {
  for (TensorMeta& m : metas) {
    if (is_complex(m.dtype)) m.dtype = real_part_type(m.dtype);
  }
  return metas;
}

// Converts the node on its tensors' real and imaginary parts apart and pairs the outputs.
Outputs convert_by_parts(Graph& g, Builder& b, const OpEntry& entry, const Args& args,
                         const std::vector<TensorMeta>& metas, std::string_view fx_name, bool& rank_dynamic) {
  const auto complex_out =
      std::find_if(metas.begin(), metas.end(), [](const TensorMeta& m) { return is_complex(m.dtype); });
  const std::vector<TensorMeta> part_metas = real_metas(metas);
  std::array<Outputs, 2> parts;
  for (int64_t part : {0, 1}) {
    Args part_args;
    {
      const Builder::CurrentNode current(b, fx_name, metas);
      part_args = parts_of(g, b, args, complex_out->dtype, part);
    }
    const Builder::CurrentNode current(b, fx_name, part_metas);
    entry.convert(b, part_args, parts[part]);
    rank_dynamic = rank_dynamic || b.rank_dynamic();
  }
  const Builder::CurrentNode current(b, fx_name, metas);
  b.accept_complex_pairs();
  Outputs outs;
  for (size_t i = 0; i < parts[0].size(); ++i) {
    if (i >= metas.size() || !is_complex(metas[i].dtype))
      b.fail("an output of this op is not complex where its inputs are: it cannot be converted on their parts");
    const Value axes = b.ints(std::vector<int64_t>{-1});
    outs.push_back(b.as_complex(b.op<"Concat">(
        {b.op<"Unsqueeze">({parts[0][i], axes}), b.op<"Unsqueeze">({parts[1][i], axes})}, {Attr::i("axis", -1)})));
  }
  return outs;
}

}  // namespace

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
    for (const Arg& a : args) check_refs(a);
    if (entry.complex_parts && complex_in_and_out(graph_, args, metas)) {
      outs = convert_by_parts(graph_, builder_, entry, args, metas, fx_name, rank_dynamic);
    } else {
      const Builder::CurrentNode current(builder_, fx_name, metas);
      entry.convert(builder_, args, outs);
      rank_dynamic = builder_.rank_dynamic();
    }
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
      graph_.set_container_like(v, value);
    }
    if (v.id >= taken.size()) taken.resize(v.id + 1, false);
    taken[v.id] = true;
    if (!name.empty()) graph_.claim_name(v, name);
    graph_.add_output(v);
  }
}

void Session::begin_subgraph() { open_subgraphs_.push_back(builder_.begin_subgraph()); }

Value Session::add_subgraph_input(std::string_view name, const TensorMeta& meta, std::optional<Value> like) {
  if (open_subgraphs_.empty()) throw ConvertError("a subgraph input `" + std::string(name) + "` outside any subgraph");
  check_dtype("subgraph input", name, meta.dtype);
  if (like && like->id >= graph_.num_values()) {
    throw ConvertError("subgraph input `" + std::string(name) + "` is like graph value " + std::to_string(like->id) +
                       ", which does not exist");
  }
  const Value v = builder_.subgraph_input(name, meta.dtype, meta.shape);
  if (like) graph_.set_container_like(v, *like);
  return v;
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
  // An output is an optional or a sequence when its subgraph returns one (a Loop body's outputs
  // begin with its condition): a scripted value that may be None, a list of a computed length.
  const size_t skipped = op_type == "Loop" ? 1 : 0;
  for (const GraphId id : subgraphs) {
    const auto& returned = graph_.subgraph(id).outputs;
    for (size_t i = 0; i < outs.size() && i + skipped < returned.size(); ++i) {
      graph_.set_container_like(outs[i], returned[i + skipped]);
    }
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
      fuse_gelu(graph_, rewrites_);
      fuse_attention(graph_, options.attention, rewrites_);
    }
    if (options.quantize.bits != 0) quantize_weights(graph_, opset_, options.quantize, rewrites_);
    pack_matmuls(graph_, rewrites_);
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
