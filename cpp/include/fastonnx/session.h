// One export: the graph being built, the converter registry, and the FX-node-at-a-time entry
// point the Python lowering calls.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fastonnx/args.h"
#include "fastonnx/builder.h"
#include "fastonnx/ir.h"
#include "fastonnx/onnxruntime_passes.h"
#include "fastonnx/outline.h"
#include "fastonnx/passes.h"
#include "fastonnx/proto_writer.h"
#include "fastonnx/registry.h"
#include "fastonnx/serializer.h"

namespace fastonnx {

// What finish() does beyond the clean-up passes: onnxruntime's fused ops, quantized weights.
struct FinishOptions {
  bool fuse_for_onnxruntime = false;
  AttentionOptions attention;
  QuantizeOptions quantize;
};

class Session {
 public:
  // `keep_initializers_as_inputs`: weights are also graph inputs, which callers may override.
  explicit Session(int opset, bool keep_initializers_as_inputs = false);

  Value add_input(std::string_view name, const TensorMeta& meta);
  Value add_initializer(std::string_view name, const TensorMeta& meta, const void* data, size_t nbytes,
                        std::shared_ptr<const void> owner);
  // Weights added from now on are never folded (Initializer::pinned).
  void pin_weights() { pin_weights_ = true; }
  // A weight of `meta`'s dtype whose bytes, of dtype `stored`, are converted as they are written
  // (a checkpoint streamed with export(dtype=...)).
  Value add_cast_initializer(std::string_view name, const TensorMeta& meta, const void* data, ScalarType stored,
                             std::shared_ptr<const void> owner);
  // Converts one FX node; its outputs take `fx_name` and the recorded metadata.
  std::vector<Value> convert(int op_id, const Args& args, std::vector<TensorMeta> metas, std::string_view fx_name);
  void set_outputs(const std::vector<std::pair<Value, std::string>>& outputs);

  // Control flow. begin_subgraph() opens a subgraph inside the graph being built, and nodes go
  // to it until end_subgraph(), which sets its outputs and returns its id for a Graph attribute
  // of the node that owns it (made next, by control_flow). A subgraph reads values of the
  // graphs around it by their ids, as ONNX's subgraphs read outer values by name.
  void begin_subgraph();
  // `like`: the value a Loop's state starts from, an optional or a sequence where that is one (as
  // the values the body builds from the input then are).
  Value add_subgraph_input(std::string_view name, const TensorMeta& meta, std::optional<Value> like = std::nullopt);
  GraphId end_subgraph(const std::vector<Value>& outputs);
  // An If, Loop or Scan node whose Graph attributes name subgraphs just ended; its outputs take
  // `fx_name` and torch's metadata (their element types follow the subgraphs, which ONNX's type
  // constraints do not say).
  std::vector<Value> control_flow(std::string_view op_type, const Inputs& inputs, const Attrs& attrs,
                                  const std::vector<TensorMeta>& metas, std::string_view fx_name);
  // A call of the submodule at `module_path` whose nodes become a call of the local function
  // `function_name`, inside the scope `parent` (0: the model itself); returns its scope id.
  uint32_t add_scope(std::string function_name, std::string module_path, uint32_t parent);
  // The scope of the nodes converted from now on (0: the model itself); a subgraph's nodes go
  // with the node that owns it, whatever their scope.
  void set_scope(uint32_t scope);
  // Runs the passes (and the rewrites `options` asks for), then outlines the scopes into local
  // functions; the graph is final afterwards.
  PassStats finish(const FinishOptions& options = {});
  // What the rewrites of finish() did and did not do.
  const RewriteReport& rewrites() const { return rewrites_; }
  // Nodes of a custom domain (Python converters), and the value of one of their outputs'
  // metadata, which only the caller knows; a dtype that contradicts the one ONNX gives the value
  // is an error.
  std::vector<Value> custom_node(std::string_view domain, std::string_view type, const Inputs& inputs,
                                 const Attrs& attrs, int n_outputs) {
    return builder_.custom_op(domain, type, inputs, attrs, n_outputs);
  }
  void set_meta(Value v, const TensorMeta& meta);
  Builder& builder() { return builder_; }
  void set_domain_version(std::string domain, int64_t version) {
    domain_versions_.emplace_back(std::move(domain), version);
  }
  // A FunctionProto (serialized) the model carries as written, once per (domain, name): false
  // when that function is already there.
  bool add_function_proto(const std::string& domain, const std::string& name, std::string proto);

  // The finished graph as a ModelProto, large weights in `external` when given.
  ProtoMessage serialize(const std::string& producer_version, ExternalData* external = nullptr);
  // Bytes of the initializers the model references, as written.
  size_t weights_nbytes() const;

  StrId intern(std::string_view s) { return graph_.strings.intern(s); }
  // The dynamic size `symbol` (as the shapes name it) may be 1 at run time (Builder::may_be_one).
  void mark_may_be_one(std::string_view symbol) { builder_.mark_may_be_one(intern(symbol)); }

  // Time spent in the native side of converting FX nodes (for the export's phase timings).
  double convert_seconds = 0;
  // Nodes in the graph (after finish(): those the passes kept).
  size_t num_nodes() const;
  // "aten::relu (FX node `relu_1`)": how errors name the node being converted.
  static std::string node_label(int op_id, std::string_view fx_name);

 private:
  // Rejects an argument that refers to a value the graph does not have.
  void check_refs(const Arg& a) const;

  Graph graph_;
  Builder builder_;
  int opset_;
  bool keep_initializers_as_inputs_;
  bool pin_weights_ = false;
  std::vector<std::pair<std::string, int64_t>> domain_versions_;
  std::vector<std::pair<std::string, std::string>> function_names_;  // (domain, name), as function_protos_
  std::vector<std::string> function_protos_;
  std::vector<GraphId> open_subgraphs_;  // innermost last
  std::vector<bool> owned_;              // by subgraph id: a node owns it already
  std::vector<Scope> scopes_{Scope{}};   // scopes_[0]: the model itself
  Outlined outlined_;
  RewriteReport rewrites_;
};

}  // namespace fastonnx
