// MatMul and Gemm nodes whose weight is a constant matrix become MatMulNBits, or read their
// weight through a DequantizeLinear of its quantized values (standard ONNX), the weight quantized
// while it is written (quantized_bytes.h); with MatMulNBits, a Gather from the token embeddings
// becomes GatherBlockQuantized over the same blocks. The weight is read where the model holds it:
// through the transpose and cast the clean-up folded into it, or the Transpose node a tied
// embedding keeps (passes.cpp), so a streamed checkpoint is quantized from its own bytes.
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fastonnx/onnxruntime_passes.h"
#include "fastonnx/quantized_bytes.h"

namespace fastonnx {

namespace {

bool is_weight_dtype(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Half || t == ScalarType::BFloat16;
}

// W [n, k] read from `init`, whose bytes are W transposed ([k, n], `transposed` false) or W
// itself ([n, k], `transposed` true, e.g. a Gemm with transB or a Transpose node's input).
std::optional<WeightMatrix> borrowed_weight(const Graph& g, Value v, int64_t n, int64_t k, bool is_w) {
  const Initializer* init = g.initializer(v);
  if (init == nullptr || init->overridable || init->pinned) return std::nullopt;
  WeightMatrix w;
  w.n = n;
  w.k = k;
  bool holds_w = is_w;
  if (init->computed) {
    const auto b = init->computed->borrowed(g.info(v).dtype);
    if (!b) return std::nullopt;
    // A transpose of a matrix that is not this value's shape reversed (a Reshape folded onto the
    // transposed weight) is not a weight to read as rows.
    if (b->transposed && b->source_shape != (is_w ? std::array<int64_t, 2>{k, n} : std::array<int64_t, 2>{n, k})) {
      return std::nullopt;
    }
    w.data = static_cast<const uint8_t*>(b->data);
    w.owner = b->owner;
    w.dtype = b->dtype;
    holds_w = b->transposed != is_w;
  } else {
    w.data = static_cast<const uint8_t*>(init->data);
    w.owner = init->owner;
    w.dtype = g.info(v).dtype;
  }
  w.model_dtype = g.info(v).dtype;
  if (w.data == nullptr || !is_weight_dtype(w.dtype) || !is_weight_dtype(w.model_dtype)) return std::nullopt;
  w.stride_n = holds_w ? k : 1;
  w.stride_k = holds_w ? 1 : n;
  return w;
}

// The weight `b` a MatMul multiplies by (or a Gemm, `trans_b` its attribute), as W [n, k].
std::optional<WeightMatrix> weight_of(const Graph& g, Value b, bool trans_b) {
  auto shape = g.static_shape(b);
  if (const NodeId t = producer_of(g, b, "Transpose"); !shape && t != kNoNode) {
    // A tied LM head streamed from a checkpoint reads the embedding table through a Transpose
    // whose output carries no shape: the table's, reversed (the perm is checked below).
    if (auto table = g.static_shape(g.inputs(t)[0]); table && table->size() == 2) {
      shape = std::vector<int64_t>{(*table)[1], (*table)[0]};
    }
  }
  if (!shape || shape->size() != 2) return std::nullopt;
  const int64_t k = trans_b ? (*shape)[1] : (*shape)[0], n = trans_b ? (*shape)[0] : (*shape)[1];
  if (g.is_initializer(b)) return borrowed_weight(g, b, n, k, trans_b);
  const NodeId t = producer_of(g, b, "Transpose");
  if (t == kNoNode || trans_b) return std::nullopt;
  const Attr* perm = g.attr(t, "perm", Attr::Kind::Ints);
  if (perm == nullptr || perm->as_ints() != std::vector<int64_t>{1, 0}) return std::nullopt;
  return borrowed_weight(g, g.inputs(t)[0], n, k, true);
}

// "model.layers.0.mlp.up_proj.weight" for the initializer the clean-up named after it.
std::string weight_name(const Graph& g, Value b) {
  std::string name(g.name(b));
  constexpr std::string_view kSuffix = "_transpose";
  if (name.size() > kSuffix.size() && name.ends_with(kSuffix)) name.resize(name.size() - kSuffix.size());
  if (name.empty()) name = "weight";
  if (const NodeId t = producer_of(g, b, "Transpose"); t != kNoNode) name = std::string(g.name(g.inputs(t)[0]));
  return name;
}

class Quantizer {
  // An LM head quantized (a MatMul or Gemm whose result, or its bias Add's, is a graph output),
  // with its bits: a token embedding table it reads is tied to it.
  struct QuantizedHead {
    WeightMatrix weight;
    int bits;
  };

 public:
  Quantizer(Graph& g, const QuantizeOptions& options, RewriteReport& report)
      : g_(g), options_(options), report_(report), readers_(g) {}

  void run() {
    const size_t count = g_.num_nodes();  // the nodes made here are not visited
    // The MatMuls first, so that the embeddings know which LM heads were quantized, and to what.
    for (const bool gathers : {false, true}) {
      if (gathers && !embeddings()) break;
      for (uint32_t i = 0; i < count; ++i) {
        const NodeId n{i};
        const Node& node = g_.node(n);
        if (node.dead || node.graph != kMainGraph || node.domain != kNoName) continue;
        const std::string_view op = op_of(g_, n);
        if (gathers) {
          if (op == "Gather") gather(n);
        } else if (op == "MatMul") {
          matmul(n, false, Value{});
        } else if (op == "Gemm") {
          gemm(n);
        }
      }
    }
  }

 private:
  void gemm(NodeId n) {
    const auto in = g_.inputs(n);
    const auto attrs = g_.attrs(n);
    if (attr_int(attrs, "transA", 0) != 0 || attr_float(attrs, "alpha", 1.0) != 1.0) return;
    Value bias;
    if (in.size() > 2 && in[2].valid()) {
      if (attr_float(attrs, "beta", 1.0) != 1.0 || g_.shape(in[2]).size() != 1) return;  // only a bias of [N]
      bias = in[2];
    }
    matmul(n, attr_int(attrs, "transB", 0) != 0, bias);
  }

  void matmul(NodeId n, bool trans_b, Value bias) {
    const Value a = g_.inputs(n)[0], b = g_.inputs(n)[1], out = g_.outputs(n)[0];
    const auto w = weight_of(g_, b, trans_b);
    if (!w) return;  // not a constant weight: activations times activations stay as they are
    const std::string name = weight_name(g_, b);
    const ScalarType dtype = g_.info(a).dtype;
    if (dtype != ScalarType::Float && dtype != ScalarType::Half) {
      report_.line(name +
                   (dequantize_linear() ? ": left unquantized: the DequantizeLinear form is for float32 and float16 "
                                          "activations (those of onnxruntime's fusion into MatMulNBits), these are "
                                        : ": left unquantized: onnxruntime's MatMulNBits runs float32 and float16 "
                                          "activations on the CPU, these are ") +
                   dtype_name(dtype));
      return;
    }
    if (g_.shape(a).size() < 2) return;  // a vector times the weight: left to MatMul
    if (w->n == 0 || w->k == 0) return;  // nothing to quantize
    // A bias the next node adds ([N], a constant): MatMulNBits adds it (the DequantizeLinear form
    // leaves the Add, and only looks for the LM head's output past it).
    NodeId add = kNoNode;
    if (const NodeId r = readers_.sole(out); !bias.valid() && r != kNoNode) {
      if (op_of(g_, r) == "Add" && g_.node(r).domain == kNoName) {
        const auto ins = g_.inputs(r);
        const Value other = ins[0] == out ? ins[1] : ins[0];
        const auto s = g_.static_shape(other);
        if (g_.is_initializer(other) && !g_.initializer(other)->overridable && s && s->size() == 1 && (*s)[0] == w->n &&
            g_.info(other).dtype == dtype) {
          bias = other;
          add = r;
        }
      }
    }
    const Value result = add != kNoNode ? g_.outputs(add)[0] : out;
    const bool head = is_graph_output(result);
    const int bits = head && options_.head_bits >= 0 ? options_.head_bits : options_.bits;
    if (bits == 0) {
      report_.line(name + ": left unquantized (the LM head, head_bits=0)");
      return;
    }
    if (head) heads_.push_back({*w, bits});
    const BlockQuantization q{bits, options_.block_size};
    if (dequantize_linear()) {
      dequantized(n, trans_b, *w, q, name, dtype);
      return;
    }
    const Dim n_dim{w->n, kNoName}, blocks{q.blocks(w->k), kNoName}, blob{q.blob_bytes(), kNoName};
    // The scales first: written before the values, they leave the weight's pages for them.
    const Dim scale_dims[] = {n_dim, blocks};
    const Value scales = g_.add_computed_initializer(dtype, scale_dims, block_scales(*w, q, dtype));
    const Dim value_dims[] = {n_dim, blocks, blob};
    const Value values = g_.add_computed_initializer(ScalarType::Byte, value_dims, quantized_blocks(*w, q, dtype));
    g_.set_name(scales, name + "_scales");
    g_.set_name(values, name + "_Q" + std::to_string(bits));
    Attrs attrs{Attr::i("K", w->k), Attr::i("N", w->n), Attr::i("bits", bits), Attr::i("block_size", q.block)};
    if (options_.accuracy_level != 0) attrs.push_back(Attr::i("accuracy_level", options_.accuracy_level));
    const Value inputs[] = {a, values, scales, Value{}, Value{}, bias};
    const Value outputs[] = {result};
    g_.kill(n);
    if (add != kNoNode) g_.kill(add);
    g_.add_fused("MatMulNBits", kMicrosoftDomain, inputs, outputs, attrs);
    report_.count(bits == 4 ? "MatMulNBits (int4)" : "MatMulNBits (int8)");
  }

  // Gather(table, ids) on axis 0 of a constant [rows, width] table: GatherBlockQuantized, whose
  // uint8 data with bits 4 follows MatMulNBits' conventions (values + 2^(bits-1), two to a byte,
  // low bits first, blocks along the last axis), so its data are quantized_blocks' bytes of the
  // table read as W [rows, width]: [rows, blocks, blob] laid out as [rows, width * bits / 8]. A
  // tied LM head quantizes the same memory the same way, and the writer writes those bytes once.
  void gather(NodeId n) {
    const Value table = g_.inputs(n)[0], ids = g_.inputs(n)[1];
    if (attr_int(g_.attrs(n), "axis", 0) != 0) return;
    const auto shape = g_.static_shape(table);
    if (!shape || shape->size() != 2 || !g_.is_initializer(table)) return;
    const ScalarType id_type = g_.info(ids).dtype;
    if (id_type != ScalarType::Long && id_type != ScalarType::Int) return;
    const std::string name(g_.name(table));
    const int64_t rows = (*shape)[0], width = (*shape)[1];
    const auto w = borrowed_weight(g_, table, rows, width, true);
    if (!w) return;
    const QuantizedHead* tied = tied_head(*w);
    int bits = options_.embedding_bits;
    if (bits < 0) {
      // As the LM head, where a quantized head reads this table: its bytes are in the file already.
      if (tied == nullptr) return;
      bits = tied->bits;
    } else if (tied == nullptr) {
      // Token embeddings, not any constant table (a position table, rotary's cos and sin, a
      // relative bias): the ids are a graph input and the rows are the vocabulary, the width of
      // a graph output (the logits). Other tables keep their precision.
      if (!is_graph_input(ids) || !is_output_width(rows)) {
        report_.line(name +
                     ": left unquantized: not the token embeddings (read by a graph input's ids, as many "
                     "rows as a graph output is wide)");
        return;
      }
    }
    const ScalarType dtype = g_.info(table).dtype;
    const BlockQuantization q{bits, options_.block_size};
    if (dtype != ScalarType::Float && dtype != ScalarType::Half) {
      report_.line(name +
                   ": embeddings left unquantized: onnxruntime's GatherBlockQuantized takes float32 and "
                   "float16 tables on the CPU, this is " +
                   dtype_name(dtype));
      return;
    }
    if (width % q.block != 0) {
      // The op's data are [rows, width * bits / 8]: a last block the width does not fill has no place.
      report_.line(name + ": embeddings left unquantized: their width " + std::to_string(width) +
                   " is not a multiple of block_size " + std::to_string(q.block));
      return;
    }
    const Dim row_dim{rows, kNoName}, blocks{q.blocks(width), kNoName}, packed{width * q.bits / 8, kNoName};
    const Dim scale_dims[] = {row_dim, blocks};
    const Value scales = g_.add_computed_initializer(dtype, scale_dims, block_scales(*w, q, dtype));
    const Dim value_dims[] = {row_dim, packed};
    const Value values = g_.add_computed_initializer(ScalarType::Byte, value_dims, quantized_blocks(*w, q, dtype));
    // Named apart from a tied head's MatMulNBits weight of the same table (its bytes, not its shape).
    g_.set_name(scales, name + "_embedding_scales");
    g_.set_name(values, name + "_embedding_Q" + std::to_string(q.bits));
    const Attrs attrs{Attr::i("bits", q.bits), Attr::i("block_size", q.block), Attr::i("gather_axis", 0),
                      Attr::i("quantize_axis", 1)};
    const Value inputs[] = {values, ids, scales};
    const Value outputs[] = {g_.outputs(n)[0]};
    g_.kill(n);
    g_.add_fused("GatherBlockQuantized", kMicrosoftDomain, inputs, outputs, attrs);
    report_.count(q.bits == 4 ? "GatherBlockQuantized (int4)" : "GatherBlockQuantized (int8)");
  }

  bool is_graph_output(Value v) const {
    return std::any_of(g_.graph_outputs().begin(), g_.graph_outputs().end(), [&](Value o) { return o == v; });
  }

  // The quantized LM head whose weight `table`, read as W [rows, width], is: the same memory, or (a
  // small table, whose transpose the clean-up folds into a copy) the same elements. Comparing stops
  // at the first element that differs, so an untied head costs a few reads.
  const QuantizedHead* tied_head(const WeightMatrix& table) const {
    const auto it = std::find_if(heads_.begin(), heads_.end(), [&](const QuantizedHead& head) {
      const WeightMatrix& h = head.weight;
      if (h.dtype != table.dtype || h.n != table.n || h.k != table.k) return false;
      if (h.data == table.data && h.stride_n == table.stride_n && h.stride_k == table.stride_k) return true;
      const auto size = static_cast<int64_t>(element_size(h.dtype));
      for (int64_t i = 0; i < h.n; ++i) {
        for (int64_t j = 0; j < h.k; ++j) {
          if (std::memcmp(h.data + (i * h.stride_n + j * h.stride_k) * size,
                          table.data + (i * table.stride_n + j * table.stride_k) * size, size) != 0) {
            return false;
          }
        }
      }
      return true;
    });
    return it == heads_.end() ? nullptr : &*it;
  }

  // `v` is a graph input, or one reshaped or cast (input_ids viewed as [batch * sequence]).
  bool is_graph_input(Value v) const {
    for (;;) {
      const auto& inputs = g_.graph_inputs();
      if (std::find(inputs.begin(), inputs.end(), v) != inputs.end()) return true;
      NodeId p = kNoNode;
      for (const std::string_view op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast", "Identity"}) {
        p = producer_of(g_, v, op);
        if (p != kNoNode) break;
      }
      if (p == kNoNode) return false;
      v = g_.inputs(p)[0];
    }
  }

  bool is_output_width(int64_t rows) const {
    return std::any_of(g_.graph_outputs().begin(), g_.graph_outputs().end(), [&](Value o) {
      const auto dims = g_.shape(o);
      return !dims.empty() && dims.back().is_static() && dims.back().value == rows;
    });
  }

  bool dequantize_linear() const { return options_.form == QuantizedForm::DequantizeLinear; }

  // GatherBlockQuantized is onnxruntime's: the DequantizeLinear form (standard ONNX) keeps the
  // embeddings float.
  bool embeddings() const { return options_.embedding_bits != 0 && !dequantize_linear(); }

  // MatMul `n` (a Gemm: `trans_b` its attribute) reads W as DequantizeLinear(values, scales,
  // axis=0, block_size) of [K, N], MatMul's own B: the layout onnxruntime fuses into MatMulNBits
  // (its DQMatMulNBits selector: a DequantizeLinear read by that node alone, of constant int4 or
  // int8 values of rank 2 and float32 or float16 scales of [ceil(K / block), N], axis 0, a
  // power-of-two block of 16 or more; a Gemm with transB 0).
  void dequantized(NodeId n, bool trans_b, const WeightMatrix& w, BlockQuantization q, const std::string& name,
                   ScalarType dtype) {
    const Dim k_dim{w.k, kNoName}, n_dim{w.n, kNoName}, blocks{q.blocks(w.k), kNoName};
    // The scales first: written before the values, they leave the weight's pages for them.
    const Dim scale_dims[] = {blocks, n_dim};
    const Value scales = g_.add_computed_initializer(dtype, scale_dims, column_scales(w, q, dtype));
    const Dim value_dims[] = {k_dim, n_dim};
    const Value values = g_.add_computed_initializer(q.bits == 4 ? ScalarType::Int4 : ScalarType::Char, value_dims,
                                                     quantized_columns(w, q, dtype));
    g_.set_name(scales, name + "_scales");
    g_.set_name(values, name + "_Q" + std::to_string(q.bits));
    const Value weight = g_.add_value(dtype);
    g_.set_shape(weight, value_dims);
    g_.set_name(weight, name + "_dequantized");
    const Value dq_inputs[] = {values, scales};
    const Value dq_outputs[] = {weight};
    g_.add_fused("DequantizeLinear", "", dq_inputs, dq_outputs, {Attr::i("axis", 0), Attr::i("block_size", q.block)});
    if (trans_b) {  // a Gemm of W itself: of its [K, N] dequantized now
      const auto in = g_.inputs(n);
      const Value inputs[] = {in[0], weight, in.size() > 2 ? in[2] : Value{}};
      const Value outputs[] = {g_.outputs(n)[0]};
      Attrs attrs;
      for (const Attr& at : g_.attrs(n)) {
        if (at.name != AttrName("transB")) attrs.push_back(at);
      }
      g_.kill(n);
      g_.add_fused("Gemm", "", inputs, outputs, attrs);
    } else {
      g_.set_input(n, 1, weight);
    }
    report_.count(q.bits == 4 ? "DequantizeLinear (int4)" : "DequantizeLinear (int8)");
  }

  Graph& g_;
  const QuantizeOptions& options_;
  RewriteReport& report_;
  Readers readers_;
  std::vector<QuantizedHead> heads_;
};

}  // namespace

void quantize_weights(Graph& g, int opset, const QuantizeOptions& options, RewriteReport& report) {
  if (options.form == QuantizedForm::DequantizeLinear && opset < 21) {
    throw std::invalid_argument(
        "quantize: the DequantizeLinear form needs opset 21 or later (its block_size and "
        "int4), this export's is " +
        std::to_string(opset) + ": pass opset_version=21 or more");
  }
  if (options.block_size < 16 || options.block_size > BlockQuantization::kMaxBlock ||
      (options.block_size & (options.block_size - 1)) != 0) {
    throw std::invalid_argument("quantize: block_size must be a power of two from 16 to " +
                                std::to_string(BlockQuantization::kMaxBlock));
  }
  if (options.embedding_bits != -1 && options.embedding_bits != 0 && options.embedding_bits != 4 &&
      options.embedding_bits != 8) {
    throw std::invalid_argument("quantize: embedding_bits must be -1 (as a tied head), 0, 4 or 8");
  }
  Quantizer(g, options, report).run();
}

}  // namespace fastonnx
