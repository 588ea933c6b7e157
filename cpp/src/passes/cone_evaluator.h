// Evaluates a value the graph computes from its inputs, on inputs given here, with the constant
// folder's kernels: what a fusion uses to establish what a subgraph computes (an attention mask,
// a rotary table) by running it, rather than by recognising how it is built.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fastonnx/ir.h"

namespace fastonnx {

// A value of the cone: its bytes, or only its shape (an input whose sizes alone are known).
struct ConeTensor {
  ScalarType dtype = ScalarType::Undefined;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  bool sized_only = false;
};

// The graph inputs the cone of `v` reads: by value, or only through a Shape.
struct ConeInputs {
  std::vector<Value> by_value, by_size;
};
ConeInputs cone_inputs(const Graph& g, Value v);

class ConeEvaluator {
 public:
  // `symbols`: the size of each symbolic dimension; `inputs`: the value of each graph input the
  // cone reads by value (any other input is known by its sizes only, through `symbols`).
  ConeEvaluator(const Graph& g, std::unordered_map<StrId, int64_t> symbols,
                std::unordered_map<uint32_t, ConeTensor> inputs);

  // The value of `v`, or nullptr with failure() saying why.
  const ConeTensor* eval(Value v);
  const std::string& failure() const { return failure_; }

 private:
  std::optional<std::vector<int64_t>> sizes_of(Value v) const;
  std::optional<ConeTensor> fail(std::string why);
  std::optional<ConeTensor> compute(Value v);
  std::optional<ConeTensor> graph_input(Value v);

  const Graph& g_;
  std::unordered_map<StrId, int64_t> symbols_;
  std::unordered_map<uint32_t, ConeTensor> inputs_;
  std::unordered_map<uint32_t, ConeTensor> done_;
  std::string failure_;
};

}  // namespace fastonnx
