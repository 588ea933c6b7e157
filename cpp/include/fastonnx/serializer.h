// Graph -> ONNX ModelProto (wire format), with weights borrowed as raw_data.
#pragma once

#include <string>

#include "fastonnx/ir.h"
#include "fastonnx/proto_writer.h"

namespace fastonnx {

struct ModelInfo {
  int opset = 0;
  std::string producer_name = "fastonnx";
  std::string producer_version;
  std::string graph_name = "main_graph";
};

// Names every value and node of `g` that has no name yet.
ProtoMessage serialize_model(Graph& g, const ModelInfo& info);

}  // namespace fastonnx
