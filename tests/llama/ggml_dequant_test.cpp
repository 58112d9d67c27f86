// GGUF types vrun converts at import: the dequantisers against gguf-py's own (goldens from
// tests/reference/make_ggml_dequant_goldens.py), the conversions' error bounds, and a tiny
// random-weight Llama GGUF made of those types against float64 logits computed from gguf-py's
// dequantised weights (tests/reference/make_kquant_gguf.py).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/gguf/ggml_dequant.h"
#include "models/gguf/gguf_file.h"
#include "models/llama/gguf_llama.h"
#include "runtime/executor.h"

namespace vrun::gguf {
namespace {

std::string data(const std::string& name) { return std::string(VRUN_TEST_DATA) + "/gguf/" + name; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  return nlohmann::json::parse(f);
}

std::vector<uint8_t> base64(const std::string& s) {
  auto v = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    const int x = v(c);
    if (x < 0) continue;
    acc = (acc << 6) | static_cast<uint32_t>(x);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> bits));
    }
  }
  return out;
}

struct Case {
  std::string name;
  uint32_t type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const nlohmann::json j = read_json(data("dequant_goldens.json"));
  for (auto it = j.begin(); it != j.end(); ++it) {
    const nlohmann::json& c = it.value();
    out.push_back({it.key(), c.at("type").get<uint32_t>(), c.at("rows").get<int64_t>(), c.at("cols").get<int64_t>(),
                   base64(c.at("bytes").get<std::string>()), c.at("values").get<std::vector<float>>()});
  }
  return out;
}

TEST(GgmlDequant, MatchesGgufPy) {
  const auto all = cases();
  ASSERT_GE(all.size(), 10u);
  for (const Case& c : all) {
    ASSERT_TRUE(can_dequantize_ggml(c.type)) << c.name;
    std::vector<float> got(c.values.size());
    dequantize_ggml_row(c.type, c.bytes.data(), got.data(), c.rows * c.cols);
    double amax = 0;
    for (float v : c.values) amax = std::max(amax, std::fabs(static_cast<double>(v)));
    ASSERT_GT(amax, 0.0) << c.name;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], c.values[i], 1e-6 * amax) << c.name << " element " << i;
  }
}

TEST(GgmlDequant, ConversionsStayWithinTheTargetsStep) {
  for (const Case& c : cases()) {
    auto conv = convert_ggml_tensor(c.type, c.bytes.data(), c.rows, c.cols);
    ASSERT_TRUE(conv.is_ok()) << c.name << ": " << conv.status().to_string();
    EXPECT_EQ(conv->dtype, c.type == static_cast<uint32_t>(GgmlType::Q4_K) ? DType::q4_1 : DType::q8_0) << c.name;
    std::vector<float> back(c.values.size());
    for (int64_t r = 0; r < c.rows; ++r)
      dequantize_row(conv->dtype, static_cast<const uint8_t*>(conv->data.get()) + r * dtype_bytes(conv->dtype, c.cols),
                     back.data() + r * c.cols, c.cols);
    for (size_t b = 0; b < back.size(); b += 32) {
      double amax = 0;
      for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(static_cast<double>(c.values[i])));
      // q8_0 rounds to half its step amax / 127, whose f16 rounding adds up to amax * 2^-11; q4_1
      // from q4_K only rounds the f16 scale and
      // offset (relative 2^-11 each, times at most 15 steps plus the offset).
      const double bound = conv->dtype == DType::q8_0 ? amax / 254 + amax / 1024 : amax * 16 / 2048 + 1e-7;
      for (size_t i = b; i < b + 32; ++i) ASSERT_NEAR(back[i], c.values[i], bound) << c.name << " element " << i;
    }
  }
}

TEST(GgmlDequant, GridTypesAreRefusedByName) {
  EXPECT_FALSE(ggml_import_dtype(static_cast<uint32_t>(GgmlType::IQ2_XXS)).has_value());
  auto r = convert_ggml_tensor(static_cast<uint32_t>(GgmlType::IQ2_XXS), nullptr, 1, 256);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("iq2_xxs"), std::string::npos) << r.status().message();
}

// Logits of the tiny K-quant Llama for the reference's tokens, every position, on `backend`.
Result<std::vector<float>> run_tiny(const llama::ImportedModel& m, const llama::WeightSource& weights,
                                    BackendKind backend, const std::vector<int32_t>& tokens) {
  llama::BuildSettings bs;
  bs.context = 32;
  bs.chunk = 16;
  bs.cache_dtype = DType::f32;
  VRUN_ASSIGN_OR_RETURN(auto program, llama::build_llama_program(m.config, weights, bs, m.metadata));
  ExecutorOptions eo;
  eo.backend = backend;
  VRUN_ASSIGN_OR_RETURN(auto ex, Executor::create(program, eo));
  std::vector<int32_t> ids = tokens;
  const auto n = static_cast<int64_t>(ids.size());
  VRUN_ASSIGN_OR_RETURN(auto outs, ex->run("score", {TensorView::dense(ids.data(), DType::i32, {1, n})}, {{"pos", 0}}));
  const float* p = outs[0].template ptr<float>();
  return std::vector<float>(p, p + n * m.config.vocab);
}

// Worst over positions of max |ours - ref| / max |ref|.
double worst_relative(const std::vector<float>& got, const std::vector<std::vector<double>>& want) {
  double worst = 0;
  const size_t vocab = want[0].size();
  for (size_t i = 0; i < want.size(); ++i) {
    double diff = 0, scale = 0;
    for (size_t v = 0; v < vocab; ++v) {
      diff = std::max(diff, std::fabs(got[i * vocab + v] - want[i][v]));
      scale = std::max(scale, std::fabs(want[i][v]));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

TEST(GgmlDequant, KQuantLlamaMatchesFloat64) {
  auto m = llama::import_gguf(data("tiny_kquant.gguf"));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  std::string notes;
  for (const auto& n : m->notes) notes += n + "\n";
  for (const char* t : {"q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q5_0", "q5_1", "iq4_nl", "iq4_xs"})
    EXPECT_NE(notes.find(std::string(t) + " tensors converted"), std::string::npos) << t << " in\n" << notes;
  EXPECT_NE(notes.find("q4_K tensors converted to q4_1"), std::string::npos) << notes;
  const auto ref = read_json(data("tiny_kquant_logits.json"));
  const auto tokens = ref["tokens"].get<std::vector<int32_t>>();
  const auto want = ref["logits"].get<std::vector<std::vector<double>>>();
  const auto gaps = ref["gaps"].get<std::vector<double>>();
  // The same tensors dequantised to f32 instead: the importer's tensor names, shapes and
  // dequantisers are then the only difference from the float64 model.
  auto file = File::open(data("tiny_kquant.gguf"));
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  const llama::WeightSource f32_weights = [&](const std::string& name) -> std::optional<llama::Weight> {
    auto w = m->weights(name);
    const TensorInfo* t = (*file)->tensor(name);
    if (!w || !t || t->type == static_cast<uint32_t>(GgmlType::F32)) return w;
    auto c = convert_ggml_tensor(t->type, t->data, t->numel() / t->ne[0], t->ne[0], DType::f32);
    if (!c.is_ok()) return std::nullopt;
    w->dtype = DType::f32;
    w->data = c->data.get();
    w->keep = c->data;
    return w;
  };
  for (BackendKind backend : {BackendKind::kCpu, BackendKind::kVulkan}) {
    const char* name = backend == BackendKind::kCpu ? "cpu" : "vulkan";
    auto exact = run_tiny(*m, f32_weights, backend, tokens);
    if (!exact.is_ok() && backend == BackendKind::kVulkan) {
      std::printf("skipping Vulkan: %s\n", exact.status().to_string().c_str());
      continue;
    }
    ASSERT_TRUE(exact.is_ok()) << exact.status().to_string();
    const double e_exact = worst_relative(*exact, want);
    auto converted = run_tiny(*m, m->weights, backend, tokens);
    ASSERT_TRUE(converted.is_ok()) << converted.status().to_string();
    const double e_conv = worst_relative(*converted, want);
    std::printf("%s: worst relative logit error %.2e dequantised to f32, %.4f as imported (q8_0/q4_1)\n", name,
                e_exact, e_conv);
    EXPECT_LT(e_exact, 1e-4) << name;
    // As imported, the weights carry q8_0's rounding (and the CPU's 8-bit activations): this
    // random model turns 0.2% weight noise into ~5% logit changes (the reference script measures
    // it), so the check is loose; the greedy token must still agree wherever the gap is clear.
    EXPECT_LT(e_conv, 0.25) << name;
    const size_t vocab = want[0].size();
    for (size_t i = 0; i < want.size(); ++i) {
      if (gaps[i] < 0.5) continue;
      const auto top = std::max_element(converted->begin() + static_cast<std::ptrdiff_t>(i * vocab),
                                        converted->begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab)) -
                       (converted->begin() + static_cast<std::ptrdiff_t>(i * vocab));
      const auto ref_top = std::max_element(want[i].begin(), want[i].end()) - want[i].begin();
      EXPECT_EQ(top, ref_top) << name << " position " << i << " (float64 gap " << gaps[i] << ")";
    }
  }
}

}  // namespace
}  // namespace vrun::gguf
