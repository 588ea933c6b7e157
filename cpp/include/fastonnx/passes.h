// Graph clean-up passes; each is linear in the size of the graph.
#pragma once

#include "fastonnx/ir.h"

namespace fastonnx {

// Marks dead every node none of whose outputs reaches a graph output.
void remove_dead_nodes(Graph& g);

}  // namespace fastonnx
