#include "attention_mask_probe.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cone_evaluator.h"
#include "fastonnx/numeric.h"
#include "fastonnx/rewrite.h"

namespace fastonnx {

namespace {

// One probe: batch, past and query lengths, and how many keys each batch row pads (on the left,
// as onnxruntime-genai pads a batch, or on the right when `right`).
struct Probe {
  int64_t batch, past, query;
  std::vector<int64_t> pads;
  bool right = false;
};

// Left padding (what generation feeds), right padding, one row, empty and filled past, prompts,
// single-token and multi-token steps; the longest is 13 keys, for windows.
const std::vector<Probe>& probes() {
  static const std::vector<Probe> kProbes = {
      {2, 0, 5, {0, 2}}, {2, 3, 1, {1, 0}},       {2, 4, 4, {0, 3}}, {1, 0, 1, {0}},
      {2, 9, 4, {2, 0}}, {2, 2, 3, {0, 1}, true}, {1, 7, 6, {0}},
  };
  return kProbes;
}

// The probes at the sizes the graph fixes (a batch or a query length traced as static), each row
// keeping at least one token.
std::vector<Probe> probes_for(const AttentionSizes& sizes) {
  std::vector<Probe> out = probes();
  for (Probe& probe : out) {
    if (sizes.batch.is_static()) probe.batch = sizes.batch.value;
    if (sizes.query.is_static()) probe.query = sizes.query.value;
    probe.pads.resize(static_cast<size_t>(probe.batch), 0);
    for (int64_t& pads : probe.pads) pads = std::min(pads, probe.past + probe.query - 1);
  }
  return out;
}

bool is_token(const Probe& p, int64_t b, int64_t k) {
  const int64_t total = p.past + p.query;
  return p.right ? k < total - p.pads[b] : k >= p.pads[b];
}

// The padding mask of `probe`: [batch, past + query], 1 where a key is a token.
ConeTensor padding_tensor(const Probe& probe, ScalarType dtype) {
  const int64_t total = probe.past + probe.query;
  ConeTensor t{dtype, {probe.batch, total}, {}, false};
  const auto es = static_cast<size_t>(element_size(t.dtype));
  t.bytes.resize(static_cast<size_t>(probe.batch * total) * es);
  for (int64_t b = 0; b < probe.batch; ++b) {
    for (int64_t k = 0; k < total; ++k) {
      store_double(t.dtype, t.bytes.data() + static_cast<size_t>(b * total + k) * es,
                   is_token(probe, b, k) ? 1.0 : 0.0);
    }
  }
  return t;
}

// The sizes of `sizes`' dimensions on `probe`.
std::unordered_map<StrId, int64_t> probe_symbols(const AttentionSizes& sizes, const Probe& probe) {
  std::unordered_map<StrId, int64_t> symbols;
  const auto bind = [&](const Dim& d, int64_t size) {
    if (d.symbol != kNoName) symbols[d.symbol] = size;
  };
  bind(sizes.batch, probe.batch);
  bind(sizes.query, probe.query);
  for (const Dim& d : sizes.past) bind(d, probe.past);
  return symbols;
}

}  // namespace

MaskCheck check_causal_mask(const Graph& g, Value mask, MaskKind kind, const AttentionSizes& sizes) {
  MaskCheck check;
  const ConeInputs inputs = cone_inputs(g, mask);
  if (inputs.by_value.size() != 1) {
    check.failure = inputs.by_value.empty() ? "the mask reads no padding mask input"
                                            : "the mask reads the values of more than one input";
    return check;
  }
  const Value padding = inputs.by_value[0];
  check.padding = padding;
  if (g.info(padding).rank != 2) {
    check.failure = "the mask reads input '" + std::string(g.name(padding)) + "', which is not [batch, keys]";
    return check;
  }
  // Per probe, what the mask allows; the window is the shortest distance it cuts that causality
  // and padding allow.
  std::vector<std::vector<uint8_t>> allowed;
  int64_t window = std::numeric_limits<int64_t>::max();
  const std::vector<Probe> sized = probes_for(sizes);
  for (const Probe& probe : sized) {
    ConeEvaluator eval(g, probe_symbols(sizes, probe), {{padding.id, padding_tensor(probe, g.info(padding).dtype)}});
    const ConeTensor* t = eval.eval(mask);
    if (t == nullptr) {
      check.failure = "the mask cannot be evaluated: " + eval.failure();
      return check;
    }
    const int64_t B = probe.batch, S = probe.query, T = probe.past + probe.query;
    const auto& d = t->shape;
    if (d.size() != 4 || (d[0] != 1 && d[0] != B) || d[1] != 1 || d[2] != S || d[3] != T) {
      check.failure = "the mask is not of shape [batch or 1, 1, query, past + query]";
      return check;
    }
    const auto es = static_cast<size_t>(element_size(t->dtype));
    std::vector<uint8_t> got(static_cast<size_t>(B * S * T));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t q = 0; q < S; ++q) {
        for (int64_t k = 0; k < T; ++k) {
          const int64_t at = ((d[0] == 1 ? 0 : b) * S + q) * T + k;
          const double x = load_double(t->dtype, t->bytes.data() + static_cast<size_t>(at) * es);
          bool attend = false;
          if (kind == MaskKind::Boolean) {
            attend = x != 0;
          } else if (x == 0) {
            attend = true;
          } else if (!(x <= -1e30)) {
            check.failure = "the additive mask holds a value other than 0 and -inf (a bias)";
            return check;
          }
          got[static_cast<size_t>((b * S + q) * T + k)] = attend;
          const bool token = is_token(probe, b, k);
          if (attend && (!token || k > probe.past + q)) {
            check.failure = "the mask lets a query see a padded or a later key";
            return check;
          }
          if (!attend && token && k <= probe.past + q) window = std::min(window, probe.past + q - k);
        }
      }
    }
    allowed.push_back(std::move(got));
  }
  if (window == 0) {
    check.failure = "the mask hides a query's own key";
    return check;
  }
  // Causal and padding with that window, exactly, on every probe.
  for (size_t i = 0; i < sized.size(); ++i) {
    const Probe& probe = sized[i];
    const int64_t S = probe.query, T = probe.past + probe.query;
    for (int64_t b = 0; b < probe.batch; ++b) {
      for (int64_t q = 0; q < S; ++q) {
        for (int64_t k = 0; k < T; ++k) {
          const bool expect = is_token(probe, b, k) && k <= probe.past + q && probe.past + q - k < window;
          if (allowed[i][static_cast<size_t>((b * S + q) * T + k)] != static_cast<uint8_t>(expect)) {
            check.failure = "the mask is not causal attention over the padded keys within one window";
            return check;
          }
        }
      }
    }
  }
  if (window != std::numeric_limits<int64_t>::max()) check.window = window;
  return check;
}

}  // namespace fastonnx
