// ONNX's type constraints (onnx_types.h) applied to a node: what the Builder checks as it adds
// nodes, and a last check of the graph as it will be written.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "fastonnx/ir.h"
#include "fastonnx/onnx_types.h"

namespace fastonnx {

// Why ONNX does not define `type` (constraints `spec` at `opset`) for inputs of these element
// types, or "" when it does. An input of unknown type (Undefined) is not checked.
std::string input_types_error(std::string_view type, int opset, const OpTypes& spec,
                              std::span<const ScalarType> inputs);

// The element type ONNX gives output `i` of a node with these input types and attributes, or
// Undefined when its constraints do not say (If, Loop and Scan outputs, ConstantOfShape).
ScalarType output_type(const OpTypes& spec, size_t i, std::span<const ScalarType> inputs, std::span<const Attr> attrs);

// Fails with a ConvertError naming the FX node a node was made for when, as the graph will be
// written (complex values as their real pairs), ONNX does not define the node for its inputs'
// types, infers another element type for an output than the graph declares, or a control-flow
// node declares other types than its subgraph returns: what onnxruntime refuses to load, and
// onnx.checker does not always notice. Linear in the size of the graph.
void check_types(const Graph& g, int opset);

}  // namespace fastonnx
