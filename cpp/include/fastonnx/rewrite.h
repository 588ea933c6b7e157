// What the fusion passes (onnxruntime_passes.h) ask of the graph while matching a pattern: who
// reads a value, which node made it, and the values of small constants. Matching is on the ONNX
// graph the converters and the clean-up passes left, never on module or class names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fastonnx/ir.h"

namespace fastonnx {

// The readers of every value, from one sweep over the live nodes. A graph output, or a value a
// subgraph or an outlined function reads, counts as a reader that is no node (`external`): a
// fusion must not swallow it.
class Readers {
 public:
  explicit Readers(const Graph& g);
  // The live nodes that read `v`, once per input slot (a node reading it twice is listed twice).
  std::span<const NodeId> of(Value v) const;
  size_t count(Value v) const { return of(v).size() + (external_[v.id] ? 1 : 0); }
  // Read only by `n`: the value can disappear into a fusion that replaces `n`.
  bool only(Value v, NodeId n) const;
  // The one node that reads `v` (in one or more of its slots) when nothing else does; kNoNode
  // otherwise.
  NodeId sole(Value v) const;
  bool external(Value v) const { return external_[v.id]; }

 private:
  std::vector<uint32_t> begin_;  // by value id, into nodes_ (CSR)
  std::vector<NodeId> nodes_;
  std::vector<bool> external_;
};

// The live node of the main graph that produces `v`, when its op type is `op` in ONNX's domain;
// kNoNode otherwise.
NodeId producer_of(const Graph& g, Value v, std::string_view op);
std::string_view op_of(const Graph& g, NodeId n);

// The dims [first, second) a Shape node reads of a value of rank `rank`: its start and end
// attributes, negative from the back, clamped to [0, rank] as ONNX's Shape says (empty when
// first >= second).
std::pair<int64_t, int64_t> shape_range(const Graph& g, NodeId shape, int64_t rank);

// The value of a constant with one element (an initializer of any shape that holds one element,
// of a numeric dtype, whose bytes are in memory), or nullopt.
std::optional<double> scalar_constant(const Graph& g, Value v);
// The elements of a small integer constant (a shape, axes), or nullopt.
std::optional<std::vector<int64_t>> int_constant(const Graph& g, Value v);

// Counts and lines of what a rewrite did and did not do, for the export's report.
struct RewriteReport {
  std::vector<std::pair<std::string, size_t>> counts;  // what was fused, in first-seen order
  std::vector<std::string> lines;                      // per layer: fused, or left and why
  void count(std::string_view what, size_t n = 1);
  void line(std::string text) { lines.push_back(std::move(text)); }
};

}  // namespace fastonnx
