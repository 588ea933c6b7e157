// The generated table of converters: one row per mapped ATen overload.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fastonnx/args.h"
#include "fastonnx/builder.h"

namespace fastonnx {

using Outputs = std::vector<Value>;
// Unpacks the node's arguments into the typed signature (schema defaults for missing ones),
// runs the converter and appends its results to `outs`.
using UnpackFn = void (*)(Builder& b, const Args& args, Outputs& outs);

struct OpEntry {
  const char* overload;  // as in native_functions.yaml: "add.Tensor", "relu"
  UnpackFn convert;
  std::span<const char* const> arg_names;  // every schema argument, in order
  // Bit i: argument i must be a number known when exporting (the spec's `static:`), so a node
  // whose argument i the graph computes is decomposed rather than converted.
  uint64_t static_args;
  // The op moves elements without computing on them (the spec's `complex: parts`): a node with
  // complex tensors is converted twice, on their real and on their imaginary parts (Session::convert).
  bool complex_parts;
};

std::span<const OpEntry> op_table();

}  // namespace fastonnx
