// The graph, its ids and names, attributes, subgraphs, and the Builder's state guards.
#include <gtest/gtest.h>

#include <type_traits>

#include "fastonnx/builder.h"
#include "fastonnx/ir.h"
#include "test_util.h"

namespace fastonnx {
namespace {

using testing::TestGraph;

// The ids are 32-bit, trivially copyable and distinct types: one cannot stand for another.
static_assert(sizeof(StrId) == 4 && sizeof(NodeId) == 4 && sizeof(GraphId) == 4 && sizeof(Value) == 4);
static_assert(std::is_trivially_copyable_v<StrId> && std::is_trivially_copyable_v<NodeId> &&
              std::is_trivially_copyable_v<GraphId> && std::is_trivially_copyable_v<Value>);
static_assert(!std::is_convertible_v<NodeId, StrId> && !std::is_convertible_v<StrId, GraphId> &&
              !std::is_convertible_v<GraphId, NodeId> && !std::is_convertible_v<uint32_t, NodeId>);
static_assert(sizeof(AttrName) == 4);

TEST(Graph, BuildsNodesWithTheirEdgesAndTypes) {
  TestGraph t;
  const Value x = t.input("x", {2, 3});
  const Value y = t.b.op<"Relu">({x});
  const Value z = t.b.op<"Add">({x, y});
  ASSERT_EQ(t.g.num_nodes(), 2u);
  const NodeId relu = t.g.info(y).producer;
  EXPECT_EQ(relu, NodeId{0});
  EXPECT_EQ(t.op(relu), "Relu");
  ASSERT_EQ(t.g.inputs(relu).size(), 1u);
  EXPECT_EQ(t.g.inputs(relu)[0], x);
  EXPECT_EQ(t.g.outputs(relu)[0], y);
  EXPECT_EQ(t.g.info(x).producer, kNoNode);  // a graph input
  EXPECT_EQ(t.g.inputs(t.g.info(z).producer)[1], y);
  EXPECT_EQ(t.g.info(z).dtype, ScalarType::Float);  // from ONNX's type constraints
  EXPECT_EQ(t.g.graph_inputs(), std::vector<Value>{x});
}

TEST(Graph, DropsTrailingOmittedInputsAndKeepsInnerOnes) {
  TestGraph t;
  const Value x = t.input("x", {4});
  const Value hi = t.b.scalar(6.0, ScalarType::Float);
  const NodeId inner = t.g.info(t.b.op<"Clip">({x, std::optional<Value>{}, hi})).producer;
  ASSERT_EQ(t.g.inputs(inner).size(), 3u);
  EXPECT_FALSE(t.g.inputs(inner)[1].valid());
  const NodeId trailing = t.g.info(t.b.op<"Clip">({x, std::optional<Value>{}, std::optional<Value>{}})).producer;
  EXPECT_EQ(t.g.inputs(trailing).size(), 1u);
}

TEST(Graph, GivesUniqueNamesAndLetsOutputsClaimTheirs) {
  TestGraph t;
  const Value x = t.input("x", {1});
  const Value a = t.b.op<"Relu">({x}), b = t.b.op<"Relu">({x});
  t.g.set_name(a, "y");
  t.g.set_name(b, "y");
  EXPECT_EQ(t.g.name(a), "y");
  EXPECT_EQ(t.g.name(b), "y_1");
  t.g.claim_name(b, "y");  // a graph output the user named wins over an intermediate value
  EXPECT_EQ(t.g.name(b), "y");
  EXPECT_NE(t.g.name(a), "y");
  EXPECT_NE(t.g.name(a), "y_1");
  t.g.name_all();
  EXPECT_FALSE(t.g.strings.str(t.g.node(NodeId{0}).name).empty());
  EXPECT_NE(t.g.node(NodeId{0}).name, t.g.node(NodeId{1}).name);
}

TEST(Graph, StaticShapeNeedsEveryDimensionAndAFixedRank) {
  TestGraph t;
  const Value fixed = t.input("fixed", {2, 3});
  const Dim dims[] = {Dim{-1, t.g.strings.intern("batch")}, Dim{3, kNoName}};
  const Value dynamic = t.g.add_input("dynamic", ScalarType::Float, dims);
  EXPECT_EQ(t.g.static_shape(fixed), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.g.static_shape(dynamic), std::nullopt);
  const Value squeezed = t.b.op<"Relu">({fixed});
  const Dim traced[] = {Dim{2, kNoName}};
  t.g.set_shape(squeezed, traced);
  EXPECT_EQ(t.g.static_shape(squeezed), std::vector<int64_t>{2});
  t.g.set_rank_varies(squeezed);
  EXPECT_EQ(t.g.static_shape(squeezed), std::nullopt);
}

TEST(Attr, NamesAreInternedForTheProcess) {
  const AttrName axis("axis");
  EXPECT_EQ(axis, AttrName(std::string("axis")));
  EXPECT_EQ(axis.str(), "axis");
  EXPECT_FALSE(axis == AttrName("axes"));
}

TEST(Attr, HoldsOneValueOfItsKindAndIsFoundByName) {
  const Attrs attrs = {Attr::i("axis", 1),
                       Attr::f("alpha", 0.5),
                       Attr::s("mode", "linear"),
                       Attr::ints("perm", {1, 0}),
                       Attr::floats("scales", {2.0}),
                       Attr::strings("names", {"a"}),
                       Attr::graph("body", GraphId{1})};
  EXPECT_EQ(attrs[0].kind(), Attr::Kind::Int);
  EXPECT_EQ(attrs[1].kind(), Attr::Kind::Float);
  EXPECT_EQ(attrs[2].kind(), Attr::Kind::String);
  EXPECT_EQ(attrs[3].kind(), Attr::Kind::Ints);
  EXPECT_EQ(attrs[4].kind(), Attr::Kind::Floats);
  EXPECT_EQ(attrs[5].kind(), Attr::Kind::Strings);
  EXPECT_EQ(attrs[6].kind(), Attr::Kind::Graph);
  EXPECT_EQ(attrs[6].as_graph(), GraphId{1});
  ASSERT_NE(find_attr(attrs, "perm"), nullptr);
  EXPECT_EQ(find_attr(attrs, "perm")->as_ints(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(find_attr(attrs, "perm", Attr::Kind::Int), nullptr);
  EXPECT_EQ(find_attr(attrs, "missing"), nullptr);
}

TEST(Attr, IntsOfANodeCanBeReplaced) {
  TestGraph t;
  const Value x = t.input("x", {2, 3});
  const NodeId n = t.g.info(t.b.op<"Transpose">({x}, {Attr::ints("perm", {1, 0})})).producer;
  EXPECT_TRUE(t.g.set_ints_attr(n, "perm", {0, 1}));
  EXPECT_EQ(t.g.attr(n, "perm")->as_ints(), (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(t.g.set_ints_attr(n, "axes", {0}));
}

TEST(Subgraph, TakesNodesUntilEndedAndReturnsToItsParent) {
  TestGraph t;
  const Value x = t.input("x", {2});
  const GraphId body = t.b.begin_subgraph();
  EXPECT_EQ(body, GraphId{1});
  EXPECT_EQ(t.b.insertion_graph(), body);
  const Dim one[] = {Dim{2, kNoName}};
  const Value i = t.b.subgraph_input("i", ScalarType::Float, one);
  const Value sum = t.b.op<"Add">({i, x});  // reads an outer value by its id
  // An outer value returned as it is gets an Identity of the subgraph's own.
  EXPECT_EQ(t.b.end_subgraph({sum, x}), body);
  EXPECT_EQ(t.b.insertion_graph(), kMainGraph);
  const Subgraph& sub = t.g.subgraph(body);
  EXPECT_EQ(sub.parent, kMainGraph);
  EXPECT_EQ(sub.inputs, std::vector<Value>{i});
  ASSERT_EQ(sub.outputs.size(), 2u);
  EXPECT_EQ(sub.outputs[0], sum);
  EXPECT_NE(sub.outputs[1], x);
  EXPECT_EQ(t.producer(sub.outputs[1]).graph, body);
  EXPECT_EQ(t.producer(sum).graph, body);
  const Value after = t.b.op<"Neg">({x});
  EXPECT_EQ(t.producer(after).graph, kMainGraph);
}

TEST(Guards, PutBackWhatTheStateHeld) {
  TestGraph t;
  const Value x = t.input("x", {2});
  {
    const auto origin = t.g.with_origin(t.g.strings.intern("relu_1"));
    const auto scope = t.g.with_scope(3);
    const Value y = t.b.op<"Relu">({x});
    EXPECT_EQ(t.g.strings.str(t.producer(y).origin), "relu_1");
    EXPECT_EQ(t.producer(y).scope, 3u);
    {
      const auto sub = t.b.with_insertion_graph(t.g.add_subgraph(kMainGraph));
      EXPECT_EQ(t.producer(t.b.op<"Neg">({x})).graph, GraphId{1});
    }
    EXPECT_EQ(t.b.insertion_graph(), kMainGraph);
  }
  const Value z = t.b.op<"Relu">({x});
  EXPECT_EQ(t.producer(z).origin, kNoName);
  EXPECT_EQ(t.producer(z).scope, 0u);
}

TEST(Guards, CurrentNodeGivesTheMetadataAndClearsTheConvertersFlags) {
  TestGraph t;
  const Value x = t.input("x", {2});
  const std::vector<TensorMeta> metas = {TensorMeta{ScalarType::Float, {Dim{2, kNoName}}}};
  {
    const Builder::CurrentNode current(t.b, "add_1", metas);
    EXPECT_EQ(t.b.out_count(), 1u);
    EXPECT_EQ(t.b.out_static_shape(), std::vector<int64_t>{2});
    t.b.mark_rank_dynamic();
    EXPECT_EQ(t.g.strings.str(t.producer(t.b.op<"Relu">({x})).origin), "add_1");
  }
  EXPECT_EQ(t.b.out_count(), 0u);
  EXPECT_FALSE(t.b.rank_dynamic());
  EXPECT_THROW(t.b.out_meta(), ConvertError);
}

TEST(Guards, ComplexPairsAreAcceptedOnlyInsideTheGuard) {
  TestGraph t;
  const Value pairs = t.input("pairs", {3, 2});
  const Value complex = t.b.as_complex(pairs);
  EXPECT_EQ(t.b.dtype(complex), ScalarType::ComplexFloat);
  EXPECT_THROW(t.b.op<"Neg">({complex}), ConvertError);
  {
    const auto accepted = t.b.with_complex_pairs();
    EXPECT_EQ(t.b.dtype(t.b.op<"Neg">({complex})), ScalarType::ComplexFloat);
  }
  EXPECT_THROW(t.b.op<"Neg">({complex}), ConvertError);
  EXPECT_EQ(t.b.dtype(t.b.as_real(complex)), ScalarType::Float);  // as_real guards itself
  EXPECT_THROW(t.b.op<"Neg">({complex}), ConvertError);
}

TEST(Builder, IntsTakesABraceList) {
  TestGraph t;
  const Value v = t.b.ints({4, -1});
  const Initializer* init = t.g.initializer(v);
  ASSERT_NE(init, nullptr);
  EXPECT_EQ(t.g.info(v).dtype, ScalarType::Long);
  ASSERT_EQ(init->nbytes, 2 * sizeof(int64_t));
  EXPECT_EQ(static_cast<const int64_t*>(init->data)[0], 4);
  EXPECT_EQ(static_cast<const int64_t*>(init->data)[1], -1);
  EXPECT_EQ(t.g.initializer(t.b.ints({}))->nbytes, 0u);
  EXPECT_EQ(t.g.static_shape(t.b.ints({7})), std::vector<int64_t>{1});
}

TEST(Builder, HalfConstantsRoundToNearestEven) {
  TestGraph t;
  const Value half = t.b.scalar(1.0 + 1.0 / 4096, ScalarType::Half);  // halfway between two halves
  EXPECT_EQ(*static_cast<const uint16_t*>(t.g.initializer(half)->data), 0x3C00);
  const Value bf16 = t.b.scalar(-2.0, ScalarType::BFloat16);
  EXPECT_EQ(*static_cast<const uint16_t*>(t.g.initializer(bf16)->data), 0xC000);
}

}  // namespace
}  // namespace fastonnx
