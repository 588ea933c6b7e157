// Each pass on a small graph: constant folding, forwarding, CSE, transpose composition,
// dead-node removal, outlining of module scopes into local functions, and onnxruntime's norm
// fusions.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fastonnx/fold.h"
#include "fastonnx/numeric.h"
#include "fastonnx/onnxruntime_passes.h"
#include "fastonnx/outline.h"
#include "fastonnx/passes.h"
#include "test_util.h"

namespace fastonnx {
namespace {

using testing::TestGraph;

std::vector<int64_t> int64s(const Graph& g, Value v) {
  const Initializer* init = g.initializer(v);
  std::vector<int64_t> out(init->nbytes / sizeof(int64_t));
  if (!out.empty()) std::memcpy(out.data(), init->data, init->nbytes);
  return out;
}

std::vector<uint8_t> bytes_of(const TensorBytes& t) {
  std::vector<uint8_t> out;
  t.produce([&](const void* p, size_t n) {
    out.insert(out.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  });
  return out;
}

// export(dtype=...): a weight converted while written, then transposed by the graph, is folded
// into the conversion of the transposed stored bytes.
TEST(Fold, TransposesAWeightConvertedWhileWritten) {
  const int64_t rows = 3, cols = 5;
  std::vector<uint16_t> stored(rows * cols);  // bfloat16
  for (size_t i = 0; i < stored.size(); ++i) stored[i] = float_to_bfloat16(static_cast<float>(i) - 4.5f);
  const auto converted = cast_bytes(stored.data(), nullptr, stored.size(), ScalarType::BFloat16, ScalarType::Half);
  const std::optional<ConstView> view = ConstView{ScalarType::Half, {rows, cols}, nullptr, true};
  const ConstSource source{nullptr, nullptr, converted};
  const auto folded = fold("Transpose", {}, std::span(&view, 1), std::span(&source, 1));
  ASSERT_TRUE(folded && folded->size() == 1);
  const Folded& f = (*folded)[0];
  EXPECT_EQ(f.shape, (std::vector<int64_t>{cols, rows}));
  const std::vector<uint8_t> out = f.computed ? bytes_of(*f.computed) : f.bytes;  // small: computed at once
  ASSERT_EQ(out.size(), stored.size() * 2);
  for (int64_t r = 0; r < cols; ++r) {
    for (int64_t c = 0; c < rows; ++c) {
      uint16_t half;
      std::memcpy(&half, out.data() + (r * rows + c) * 2, 2);
      EXPECT_EQ(half_to_float(half), bfloat16_to_float(stored[c * cols + r]));
    }
  }
}

// A transposed matrix over 64 MB is computed in larger ranges (and drops the pages it reads
// when they belong to a registered checkpoint mapping; this one is not): the same bytes.
TEST(Fold, TransposesALargeMatrixInLargeRanges) {
  const int64_t rows = 4100, cols = 4099;  // 67 MB of float32, neither a multiple of a tile
  std::vector<float> data(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  const auto t = transposed_bytes(data.data(), nullptr, 4, {rows, cols}, {1, 0});
  EXPECT_GT(t->chunk_bytes(kTensorChunkBytes, kLargestChunkBytes), kTensorChunkBytes);
  // A writer that gives each range less memory (prefetch.cpp, for a model with few computed
  // bytes) gets ranges within it, still whole output rows.
  const size_t most = size_t{4} << 20;
  const size_t bounded = t->chunk_bytes(kTensorChunkBytes, most);
  EXPECT_LE(bounded, most);
  EXPECT_GE(bounded, kTensorChunkBytes);
  EXPECT_EQ(bounded % (rows * 4), 0U);
  std::vector<float> out(data.size());
  size_t at = 0;
  t->produce([&](const void* p, size_t n) {
    std::memcpy(reinterpret_cast<uint8_t*>(out.data()) + at, p, n);
    at += n;
  });
  ASSERT_EQ(at, data.size() * 4);
  for (int64_t r = 0; r < cols; r += 97) {
    for (int64_t c = 0; c < rows; c += 89) EXPECT_EQ(out[r * rows + c], data[c * cols + r]);
  }
}

TEST(Optimize, FoldsArithmeticOnConstants) {
  TestGraph t;
  const Value x = t.input("x", {4, 6});
  const Value shape = t.b.op<"Add">({t.b.ints({1, 2}), t.b.ints({3, 4})});
  const Value y = t.b.op<"Reshape">({x, shape});
  t.g.add_output(y);
  const PassStats stats = optimize(t.g);
  EXPECT_EQ(stats.folded, 1u);
  EXPECT_EQ(t.live_ops(), std::vector<std::string>{"Reshape"});
  const Value folded = t.g.inputs(t.g.info(y).producer)[1];
  ASSERT_TRUE(t.g.is_initializer(folded));
  EXPECT_EQ(int64s(t.g, folded), (std::vector<int64_t>{4, 6}));
}

TEST(Optimize, FoldsTheShapeOfAStaticallyShapedValue) {
  TestGraph t;
  const Value x = t.input("x", {2, 5});
  const Value y = t.b.op<"Reshape">({x, t.b.op<"Shape">({x}, {Attr::i("start", 1)})});
  t.g.add_output(y);
  optimize(t.g);
  EXPECT_EQ(int64s(t.g, t.g.inputs(t.g.info(y).producer)[1]), std::vector<int64_t>{5});
}

TEST(Optimize, MergesCommonSubexpressions) {
  TestGraph t;
  const Value x = t.input("x", {3});
  const Value a = t.b.op<"Relu">({x}), b = t.b.op<"Relu">({x});
  const Value sum = t.b.op<"Add">({a, b});
  t.g.add_output(sum);
  const PassStats stats = optimize(t.g);
  EXPECT_EQ(stats.merged, 1u);
  EXPECT_EQ(t.live_ops(), (std::vector<std::string>{"Relu", "Add"}));
  const auto in = t.g.inputs(t.g.info(sum).producer);
  EXPECT_EQ(in[0], a);
  EXPECT_EQ(in[1], a);
}

TEST(Optimize, KeepsNodesWhoseAttributesDiffer) {
  TestGraph t;
  const Value x = t.input("x", {3, 4});
  const Value a = t.b.op<"Softmax">({x}, {Attr::i("axis", 0)}), b = t.b.op<"Softmax">({x}, {Attr::i("axis", 1)});
  t.g.add_output(t.b.op<"Add">({a, b}));
  EXPECT_EQ(optimize(t.g).merged, 0u);
  EXPECT_EQ(t.live_ops().size(), 3u);
}

TEST(Optimize, ComposesTransposesAndForwardsAnIdentityOne) {
  TestGraph t;
  const Value x = t.input("x", {2, 3, 4});
  const Value inner = t.b.op<"Transpose">({x}, {Attr::ints("perm", {1, 0, 2})});
  const Value outer = t.b.op<"Transpose">({inner}, {Attr::ints("perm", {0, 2, 1})});
  const Value y = t.b.op<"Relu">({outer});
  t.g.add_output(y);
  const PassStats stats = optimize(t.g);
  EXPECT_EQ(stats.composed, 1u);
  EXPECT_EQ(t.live_ops(), (std::vector<std::string>{"Transpose", "Relu"}));
  const NodeId composed = t.g.info(outer).producer;
  EXPECT_EQ(t.g.inputs(composed)[0], x);
  EXPECT_EQ(t.g.attr(composed, "perm")->as_ints(), (std::vector<int64_t>{1, 2, 0}));

  TestGraph u;
  const Value z = u.input("z", {2, 3});
  const Value back =
      u.b.op<"Transpose">({u.b.op<"Transpose">({z}, {Attr::ints("perm", {1, 0})})}, {Attr::ints("perm", {1, 0})});
  const Value w = u.b.op<"Relu">({back});
  u.g.add_output(w);
  const PassStats identity = optimize(u.g);
  EXPECT_EQ(identity.composed, 1u);
  EXPECT_EQ(identity.forwarded, 1u);
  EXPECT_EQ(u.live_ops(), std::vector<std::string>{"Relu"});
  EXPECT_EQ(u.g.inputs(u.g.info(w).producer)[0], z);
}

TEST(Optimize, KeepsTheNodesThatProduceGraphOutputs) {
  TestGraph t;
  const Value x = t.input("x", {3});
  const Value y = t.b.op<"Identity">({x});
  t.g.add_output(y);
  optimize(t.g);
  EXPECT_EQ(t.live_ops(), std::vector<std::string>{"Identity"});
}

TEST(RemoveDeadNodes, KillsWhatReachesNoOutput) {
  TestGraph t;
  const Value x = t.input("x", {3});
  const Value unused = t.b.op<"Neg">({t.b.op<"Exp">({x})});
  t.g.add_output(t.b.op<"Relu">({x}));
  remove_dead_nodes(t.g);
  EXPECT_EQ(t.live_ops(), std::vector<std::string>{"Relu"});
  EXPECT_TRUE(t.producer(unused).dead);
}

TEST(RemoveDeadNodes, KeepsWhatASubgraphOfALiveNodeReads) {
  TestGraph t;
  const Value x = t.input("x", {3});
  const Value cond = t.input("cond", {}, ScalarType::Bool);
  const Value outer = t.b.op<"Exp">({x});
  t.b.begin_subgraph();
  const GraphId then_branch = t.b.end_subgraph({t.b.op<"Neg">({outer})});
  t.b.begin_subgraph();
  const GraphId else_branch = t.b.end_subgraph({t.b.op<"Relu">({outer})});
  const Value y =
      t.b.op<"If">({cond}, {Attr::graph("then_branch", then_branch), Attr::graph("else_branch", else_branch)});
  t.g.add_output(y);
  remove_dead_nodes(t.g);
  EXPECT_EQ(t.live_ops(), (std::vector<std::string>{"Exp", "Neg", "Relu", "If"}));
}

TEST(OutlineFunctions, EqualModuleCallsShareOneFunction) {
  TestGraph t;
  const Value x = t.input("x", {3});
  const std::vector<Scope> scopes = {Scope{}, Scope{"Block", "blocks.0", 0}, Scope{"Block", "blocks.1", 0}};
  t.g.set_scope(1);
  const Value first = t.b.op<"Relu">({t.b.op<"Neg">({x})});
  t.g.set_shape(first, t.g.shape(x));  // as the session does: the calls' inputs are typed alike
  t.g.set_scope(2);
  const Value second = t.b.op<"Relu">({t.b.op<"Neg">({first})});
  t.g.set_scope(0);
  t.g.add_output(t.b.op<"Exp">({second}));
  const Outlined outlined = outline_functions(t.g, scopes);
  ASSERT_EQ(outlined.functions.size(), 1u);
  const LocalFunction& f = outlined.functions[0];
  EXPECT_EQ(f.name, "Block");
  EXPECT_EQ(f.body.size(), 2u);
  EXPECT_EQ(f.inputs, std::vector<Value>{x});
  EXPECT_EQ(f.outputs, std::vector<Value>{first});
  std::vector<std::string> main;
  for (const NodeId n : outlined.main_order) main.emplace_back(t.op(n));
  EXPECT_EQ(main, (std::vector<std::string>{"Block", "Block", "Exp"}));
  EXPECT_EQ(t.g.strings.str(t.producer(second).name), "blocks.1");
  EXPECT_EQ(t.g.strings.str(t.producer(second).domain), kFunctionDomain);
}

TEST(OutlineFunctions, DifferentBodiesGetNumberedNames) {
  TestGraph t;
  const Value x = t.input("x", {3});
  const std::vector<Scope> scopes = {Scope{}, Scope{"Block", "a", 0}, Scope{"Block", "b", 0}};
  t.g.set_scope(1);
  const Value first = t.b.op<"Relu">({x});
  t.g.set_scope(2);
  const Value second = t.b.op<"Neg">({first});
  t.g.set_scope(0);
  t.g.add_output(t.b.op<"Exp">({second}));
  const Outlined outlined = outline_functions(t.g, scopes);
  ASSERT_EQ(outlined.functions.size(), 2u);
  EXPECT_EQ(outlined.functions[0].name, "Block");
  EXPECT_EQ(outlined.functions[1].name, "Block_1");
}

// LlamaRMSNorm as the converters write it: x * Reciprocal(Sqrt(ReduceMean(x^2) + eps)), times the
// weight `weight` (a constant when null).
Value rms_norm(TestGraph& t, Value x, Value weight = {}) {
  const Value mean = t.b.op<"ReduceMean">({t.b.op<"Pow">({x, t.b.scalar(2.0, ScalarType::Float)}), t.b.ints({-1})});
  const Value eps = t.b.scalar(1e-6, ScalarType::Float);
  const Value inverse = t.b.op<"Reciprocal">({t.b.op<"Sqrt">({t.b.op<"Add">({mean, eps})})});
  if (!weight.valid()) weight = t.b.tensor({1.0, 2.0, 3.0, 4.0}, {4}, ScalarType::Float);
  return t.b.op<"Mul">({weight, t.b.op<"Mul">({x, inverse})});
}

// A residual sum that the next residual reads too: one op adds, normalizes and returns the sum.
TEST(FuseNorms, AResidualAndAnRmsNormBecomeOneSkipOp) {
  TestGraph t;
  const Value sum = t.b.op<"Add">({t.input("a", {2, 3, 4}), t.input("r", {2, 3, 4})});
  const std::vector<Dim> dims{{2, kNoName}, {3, kNoName}, {4, kNoName}};
  t.g.set_shape(sum, dims);  // as the lowering sets it from torch's
  const Value y = rms_norm(t, sum);
  t.g.add_output(t.b.op<"Add">({sum, y}));
  RewriteReport report;
  fuse_norms(t.g, 18, report);
  sort_nodes(t.g);
  EXPECT_EQ(t.live_ops(), (std::vector<std::string>{"SkipSimplifiedLayerNormalization", "Add"}));
  const NodeId fused = t.g.info(y).producer;
  EXPECT_EQ(t.g.strings.str(t.g.node(fused).domain), kMicrosoftDomain);
  ASSERT_EQ(t.g.outputs(fused).size(), 4u);
  EXPECT_EQ(t.g.outputs(fused)[3], sum);
  EXPECT_EQ(t.g.attr(fused, "epsilon")->as_float(), static_cast<double>(1e-6f));  // the float32 constant's
  EXPECT_EQ(report.counts, (std::vector<std::pair<std::string, size_t>>{{"SkipSimplifiedLayerNormalization", 1}}));
  EXPECT_TRUE(report.lines.empty());
}

TEST(FuseNorms, AWeightThatIsNoConstantStaysPlainAndSaysWhy) {
  TestGraph t;
  const Value y = rms_norm(t, t.input("x", {2, 3, 4}), t.input("w", {4}));
  t.g.add_output(y);
  const std::vector<std::string> before = t.live_ops();
  RewriteReport report;
  fuse_norms(t.g, 18, report);
  EXPECT_EQ(t.live_ops(), before);
  EXPECT_TRUE(report.counts.empty());
  ASSERT_EQ(report.lines.size(), 1u);
  EXPECT_NE(report.lines[0].find("ReduceMean node"), std::string::npos) << report.lines[0];
  EXPECT_NE(report.lines[0].find("RMSNorm left plain: its weight `w` is not a constant"), std::string::npos)
      << report.lines[0];
}

}  // namespace
}  // namespace fastonnx
