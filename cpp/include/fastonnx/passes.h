// Graph clean-up passes; each is linear in the size of the graph.
#pragma once

#include <cstddef>
#include <string>

#include "fastonnx/ir.h"

namespace fastonnx {

// Marks dead every node none of whose outputs reaches a graph output.
void remove_dead_nodes(Graph& g);

// Puts the arena's nodes back in topological order after a rewrite appended nodes that earlier
// ones read (Graph::add_fused), moving as few as it can: each node stays where it was unless a
// node it reads comes later. A subgraph's nodes stay before the node that owns it; dead nodes go
// last.
void sort_nodes(Graph& g);

struct PassStats {
  size_t folded = 0;            // nodes replaced by constants (shape arithmetic, weight transposes)
  size_t forwarded = 0;         // nodes that computed nothing (Identity, no-op Cast/Reshape/Transpose)
  size_t composed = 0;          // transposes of a transpose, made one transpose of the first's input
  size_t merged = 0;            // nodes equal to an earlier one (common subexpressions)
  size_t constants_merged = 0;  // small converter constants equal to an earlier one
  size_t removed = 0;           // dead nodes
};

// Merges equal small constants, then one forward sweep over the nodes in topological order, each
// node in turn: constant folding, composition of transposes, forwarding of no-op nodes,
// common-subexpression elimination; then dead-node removal. Nodes that produce graph outputs
// are kept as they are.
PassStats optimize(Graph& g);

// Appends what identifies attribute `a` (name, kind, value) to `key`: nodes whose attributes
// append the same bytes are equal (common subexpressions, local functions' bodies).
void append_attr_key(std::string& key, const Attr& a);

}  // namespace fastonnx
