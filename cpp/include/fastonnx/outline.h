// Outlining of module scopes into ONNX local functions (export_modules_as_functions): the
// nodes of each module call become one call node, and module calls whose bodies are equal
// share one FunctionProto.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fastonnx/ir.h"

namespace fastonnx {

// The domain of every local function, listed at version 1 in the model's opset imports.
inline constexpr const char* kFunctionDomain = "fastonnx.functions";

// One module call whose nodes become a function call (Graph::set_scope tags its nodes with its
// index). Scope 0 is the model itself; a scope's parent is the enclosing selected module's
// scope (0 at the top), with a smaller index than its own.
struct Scope {
  std::string function_name;  // the module class's qualified name
  std::string module_path;    // the submodule's path in the model (`blocks.0`): the call node's name
  uint32_t parent = 0;
};

// One FunctionProto. Its nodes are graph nodes marked dead in the main graph; its inputs,
// outputs and constants are graph values, named as in the graph.
struct LocalFunction {
  std::string name;
  std::vector<NodeId> body;  // in topological order
  std::vector<Value> inputs;
  std::vector<Value> outputs;
  // Small constants (initializers) the body reads: Constant nodes of the function, as a function
  // holds no initializers. Weights are inputs.
  std::vector<Value> constants;
};

struct Outlined {
  std::vector<LocalFunction> functions;  // a function before the functions that call it
  std::vector<NodeId> main_order;        // the main graph's live nodes in topological order
};

// Replaces the nodes of every scope by a call of its function, innermost scopes first, so that
// an outer function calls the inner ones. Run after the passes (the bodies are then clean).
// Values one scope computes and another reads are outputs of the first and inputs of the
// second. The call takes the place of the scope's last node; a module call whose values are
// read by another scope before that place (torch interleaved them) stays inlined in its parent.
// Scopes whose nodes the passes removed entirely have no function.
Outlined outline_functions(Graph& g, std::span<const Scope> scopes);

}  // namespace fastonnx
