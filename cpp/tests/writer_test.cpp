// The serializer and the file writer: models written here are read back by onnx
// (check_models.py, run by ctest after this test), which checks each one and compares it with
// the same model in ONNX's textual syntax, written beside it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "fastonnx/model_file.h"
#include "fastonnx/passes.h"
#include "fastonnx/serializer.h"
#include "test_util.h"

namespace fastonnx {
namespace {

using testing::TestGraph;

// The folder check_models.py reads (set by ctest); a temporary one when run by hand.
std::filesystem::path models_dir() {
  const char* dir = std::getenv("FASTONNX_TEST_MODELS");
  const std::filesystem::path path = dir ? dir : std::filesystem::temp_directory_path() / "fastonnx_test_models";
  std::filesystem::create_directories(path);
  return path;
}

void write_text(const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; }

ModelInfo info() {
  ModelInfo m;
  m.opset = testing::kOpset;
  return m;
}

// x -> MatMul(weight) -> + bias -> Transpose, with attributes of several kinds.
struct SmallModel {
  TestGraph t;
  std::vector<float> weight = std::vector<float>(4 * 3), bias = {0.5f, -1.0f, 2.0f};

  // With `shared`, the weight is that model's memory (two graphs of one module); with
  // `model_tensor`, a model's weight rather than bytes the export made.
  explicit SmallModel(const SmallModel* shared = nullptr, bool model_tensor = false) {
    std::iota(weight.begin(), weight.end(), 0.0f);
    const Value x = t.input("x", {2, 4});
    const Dim w_dims[] = {Dim{4, kNoName}, Dim{3, kNoName}}, b_dims[] = {Dim{3, kNoName}};
    const float* w_data = shared != nullptr ? shared->weight.data() : weight.data();
    const Value w = t.g.add_initializer("weight", ScalarType::Float, w_dims, w_data, weight.size() * 4, nullptr);
    if (model_tensor) t.g.set_model_tensor(w);
    const Value b = t.g.add_initializer("bias", ScalarType::Float, b_dims, bias.data(), bias.size() * 4, nullptr);
    const Value y = t.b.op<"Add">({t.b.op<"MatMul">({x, w}), b});
    const Value z = t.b.op<"LeakyRelu">({y}, {Attr::f("alpha", 0.25)});
    const Value out = t.b.op<"Transpose">({z}, {Attr::ints("perm", {1, 0})});
    t.g.set_name(out, "out");
    const Dim out_dims[] = {Dim{3, kNoName}, Dim{2, kNoName}};
    t.g.set_shape(out, out_dims);
    t.g.add_output(out);
  }

  std::string text() const {
    std::string w;
    for (size_t i = 0; i < weight.size(); ++i) w += (i ? ", " : "") + std::to_string(weight[i]);
    return R"(<ir_version: 8, opset_import: ["" : 18]>
main_graph (float[2,4] x) => (float[3,2] out)
<float[4,3] weight = {)" +
           w + R"(}, float[3] bias = {0.5, -1.0, 2.0}> {
  t0 = MatMul(x, weight)
  t1 = Add(t0, bias)
  t2 = LeakyRelu<alpha = 0.25>(t1)
  out = Transpose<perm = [1, 0]>(t2)
})";
  }
};

TEST(Writer, WritesAModelOnnxReads) {
  SmallModel m;
  const auto dir = models_dir();
  write_model([&](ExternalData* external) { return serialize_model(m.t.g, info(), external); },
              (dir / "small.onnx").string(), "", "", [](size_t) {});
  write_text(dir / "small.txt", m.text());
  EXPECT_GT(std::filesystem::file_size(dir / "small.onnx"), 48u * 4);  // the weights are in
}

TEST(Writer, PutsLargeWeightsInTheExternalDataFile) {
  SmallModel m;
  const auto dir = models_dir();
  size_t reported = 0, announced = 0;
  write_model(
      [&](ExternalData* external) {
        EXPECT_NE(external, nullptr);
        external->threshold = 16;  // the weight (48 bytes) goes out, the bias (12 bytes) stays
        return serialize_model(m.t.g, info(), external);
      },
      (dir / "external.onnx").string(), (dir / "external.data").string(), "external.data",
      [&](size_t n) { reported += n; }, {}, [&](size_t total) { announced = total; });
  write_text(dir / "external.txt", m.text());
  EXPECT_EQ(std::filesystem::file_size(dir / "external.data"), m.weight.size() * 4);
  EXPECT_EQ(reported,
            std::filesystem::file_size(dir / "external.data") + std::filesystem::file_size(dir / "external.onnx"));
  EXPECT_EQ(announced, reported);  // a progress bar's total: it ends at 100%
}

TEST(Writer, WritesTheBytesModelsShareOnceInTheirDataFile) {
  // a and b read one model tensor; c has equal values in its own: a model's tensors are the same
  // bytes when they are the same memory (their contents are not read to compare them). d and e
  // hold equal bytes the export made: those are compared.
  SmallModel a(nullptr, true), b(&a, true), c(nullptr, true), d, e;
  const auto dir = models_dir();
  std::vector<ModelToWrite> models;
  for (const auto& [m, name] : {std::pair{&a, "shared_a"}, std::pair{&b, "shared_b"}, std::pair{&c, "shared_c"},
                                std::pair{&d, "shared_d"}, std::pair{&e, "shared_e"}}) {
    models.push_back({[m](ExternalData* external) {
                        external->threshold = 16;  // the weight goes out, the bias stays
                        return serialize_model(m->t.g, info(), external);
                      },
                      (dir / (std::string(name) + ".onnx")).string()});
    write_text(dir / (std::string(name) + ".txt"), m->text());
  }
  write_models(models, (dir / "shared.data").string(), "shared.data", [](size_t) {});
  // Three weights of 48 bytes (a's and b's, c's, d's and e's), each at a multiple of 64.
  EXPECT_EQ(std::filesystem::file_size(dir / "shared.data"), 2 * 64u + a.weight.size() * 4);
}

TEST(Writer, WritesSubgraphsInTheAttributesOfTheirOwners) {
  TestGraph t;
  const Value x = t.input("x", {3});
  const Value cond = t.input("cond", {}, ScalarType::Bool);
  t.b.begin_subgraph();
  const Value neg = t.b.op<"Neg">({x});
  t.g.set_shape(neg, t.g.shape(x));
  const GraphId then_branch = t.b.end_subgraph({neg});
  t.b.begin_subgraph();
  const Value relu = t.b.op<"Relu">({x});
  t.g.set_shape(relu, t.g.shape(x));
  const GraphId else_branch = t.b.end_subgraph({relu});
  const Value y =
      t.b.op<"If">({cond}, {Attr::graph("then_branch", then_branch), Attr::graph("else_branch", else_branch)});
  t.g.set_name(y, "y");
  t.g.set_dtype(y, ScalarType::Float);  // the branches' type, which ONNX's constraints do not say
  const Dim dims[] = {Dim{3, kNoName}};
  t.g.set_shape(y, dims);
  t.g.add_output(y);
  const auto dir = models_dir();
  const ProtoMessage proto = serialize_model(t.g, info());
  std::ofstream(dir / "if.onnx", std::ios::binary) << model_bytes(proto);
  write_text(dir / "if.txt", R"(<ir_version: 8, opset_import: ["" : 18]>
main_graph (float[3] x, bool cond) => (float[3] y) {
  y = If(cond) <then_branch = g1 () => (float[3] neg) { neg = Neg(x) },
                else_branch = g2 () => (float[3] relu) { relu = Relu(x) }>
})");
}

TEST(Writer, WritesLocalFunctions) {
  TestGraph t;
  const Value x = t.input("x", {3});
  const std::vector<Scope> scopes = {Scope{}, Scope{"Block", "block", 0}};
  t.g.set_scope(1);
  const Value inner = t.b.op<"Relu">({t.b.op<"Neg">({x})});
  t.g.set_scope(0);
  const Value y = t.b.op<"Exp">({inner});
  t.g.set_name(y, "y");
  const Dim dims[] = {Dim{3, kNoName}};
  t.g.set_shape(y, dims);
  t.g.add_output(y);
  const Outlined outlined = outline_functions(t.g, scopes);
  ModelInfo model = info();
  model.outlined = &outlined;
  const auto dir = models_dir();
  std::ofstream(dir / "functions.onnx", std::ios::binary) << model_bytes(serialize_model(t.g, model));
  write_text(dir / "functions.txt", R"(<ir_version: 8, opset_import: ["" : 18, "fastonnx.functions" : 1]>
main_graph (float[3] x) => (float[3] y) {
  t = fastonnx.functions.Block(x)
  y = Exp(t)
}
<domain: "fastonnx.functions", opset_import: ["" : 18]>
Block (a) => (b) {
  c = Neg(a)
  b = Relu(c)
})");
}

TEST(Writer, RefusesAMessageBeyondProtobufsLimit) {
  static const char byte = 0;
  ProtoMessage huge;
  for (int i = 0; i < 3; ++i) huge.borrowed_bytes_field(1, &byte, size_t{1} << 30);  // never read
  EXPECT_THROW(model_bytes(huge), std::length_error);
}

TEST(Writer, NamesThePathOfAFileItCannotWrite) {
  try {
    write_file("/nonexistent/dir/model.onnx", [](const ByteSink&) {}, [](size_t) {});
    FAIL() << "no error";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.onnx"), std::string::npos);
  }
}

}  // namespace
}  // namespace fastonnx
