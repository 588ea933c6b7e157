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
#include "fastonnx/proto_writer.h"
#include "fastonnx/registry.h"

namespace fastonnx {

class Session {
 public:
  explicit Session(int opset);

  Value add_input(std::string_view name, const TensorMeta& meta);
  Value add_initializer(std::string_view name, const TensorMeta& meta, const void* data, size_t nbytes,
                        std::shared_ptr<const void> owner);
  // Converts one FX node; its outputs take `fx_name` and the recorded metadata.
  std::vector<Value> convert(int op_id, const Args& args, std::vector<TensorMeta> metas, std::string_view fx_name);
  void set_outputs(const std::vector<std::pair<Value, std::string>>& outputs);
  // Runs the passes and serializes. The graph is final afterwards.
  ProtoMessage finish(const std::string& producer_version);

  StrId intern(std::string_view s) { return graph_.strings.intern(s); }
  size_t num_nodes() const { return graph_.num_nodes(); }
  // "aten::relu (FX node `relu_1`)": how errors name the node being converted.
  static std::string node_label(int op_id, std::string_view fx_name);

 private:
  // Rejects an argument that refers to a value the graph does not have.
  void check_refs(const Arg& a) const;

  Graph graph_;
  Builder builder_;
  int opset_;
};

}  // namespace fastonnx
