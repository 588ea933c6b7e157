// Graph -> ONNX ModelProto (wire format), with weights borrowed as raw_data.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "fastonnx/ir.h"
#include "fastonnx/outline.h"
#include "fastonnx/proto_writer.h"

namespace fastonnx {

struct ModelInfo {
  int opset = 0;
  std::string producer_name = "fastonnx";
  std::string producer_version;
  std::string graph_name = "main_graph";
  // Versions of the other domains the nodes use (custom ops); a domain not listed is version 1.
  std::vector<std::pair<std::string, int64_t>> domain_versions;
  // The local functions and the main graph's node order, when modules were outlined.
  const Outlined* outlined = nullptr;
  // FunctionProtos made outside the graph (onnxscript functions of Python converters), as bytes.
  std::vector<std::string> function_protos;
};

// Where initializers of at least `threshold` bytes go when the model keeps its weights in an
// external data file (ONNX's external data: above 2 GB a ModelProto cannot hold them). Offsets
// are aligned so that onnxruntime can memory-map each tensor in place.
struct ExternalData {
  std::string location;  // the data file's name, relative to the model file
  size_t threshold = 1024;

  // Filled by serialize_model: each externalized initializer and its offset in the data file.
  struct Placement {
    size_t offset;
    const Initializer* initializer;
  };
  std::vector<Placement> placements;
  size_t size = 0;  // of the whole data file

  // Files mapped whole into memory (the safetensors files of weights_mode="reference"): an
  // initializer whose bytes lie in one is not written at all; the model points at its bytes in
  // that file, named `location` (relative to the model's directory).
  struct Reference {
    const uint8_t* begin;
    size_t size;
    std::string location;
  };
  std::vector<Reference> references;

  // The computed initializers among the placements, in file order.
  std::vector<const TensorBytes*> computed() const;

  // The offset of `init`'s bytes in the file: where an initializer holding the same bytes was
  // placed (several graphs sharing this file, or one weight under two names), else at the end,
  // aligned. The same bytes: the same model tensor, computed from one the same way (transposed,
  // cast), or equal bytes the export made.
  size_t place(const Initializer& init);

 private:
  // Indices of placements by a hash of what makes bytes the same (see place).
  std::unordered_multimap<size_t, size_t> placed_;
};

// Names every value and node of `g` that has no name yet. With `external`, large initializers
// are referenced there instead of being written into the message; serializing several graphs
// against one ExternalData lays out one data file for all of them.
ProtoMessage serialize_model(Graph& g, const ModelInfo& info, ExternalData* external = nullptr);

// Produces the bytes of the external data file that `external` lays out; computed initializers
// come from `ahead` when given (built from external.computed()).
void write_external_data(const ExternalData& external, const ByteSink& sink, Prefetcher* ahead = nullptr);

}  // namespace fastonnx
