// Tiny random-weight Hugging Face checkpoints (tests/reference/make_llama_reference.py) against
// transformers' logits: after the prompt and after each of 10 greedy steps, loaded from the folder
// and from an exported .vrp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/llama/llama_runner.h"
#include "models/llama/hf_llama.h"

namespace vrun::llama {
namespace {

struct Reference {
  std::vector<int32_t> prompt, generated;
  std::vector<std::vector<float>> logits;  // after the prompt, then after each generated token
};

Reference read_reference(const std::string& name) {
  std::ifstream f(std::string(VRUN_TEST_DATA) + "/llama/tiny_" + name + "_logits.json");
  EXPECT_TRUE(f.good()) << "missing reference for " << name;
  const auto j = nlohmann::json::parse(f);
  Reference r;
  r.prompt = j["prompt"].get<std::vector<int32_t>>();
  r.generated = j["generated"].get<std::vector<int32_t>>();
  r.logits = j["logits"].get<std::vector<std::vector<float>>>();
  return r;
}

std::string folder(const std::string& name) { return std::string(VRUN_TEST_DATA) + "/llama/tiny_" + name; }

// Largest |ours - ref| over the largest |ref| of the row.
double relative_error(const std::vector<float>& ours, const std::vector<float>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(ours[i]) - ref[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
  }
  return diff / scale;
}

size_t argmax(const std::vector<float>& v) { return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

// Feeds the prompt, then the reference's greedy tokens one at a time; returns the worst relative error.
double check_against_reference(LlamaRunner& runner, const Reference& ref, double tolerance) {
  EXPECT_EQ(ref.logits.size(), ref.generated.size() + 1);
  double worst = 0;
  auto logits = runner.feed(ref.prompt);
  EXPECT_TRUE(logits.is_ok()) << logits.status().to_string();
  if (!logits.is_ok()) return 1e9;
  for (size_t step = 0; step < ref.logits.size(); ++step) {
    EXPECT_EQ(logits->size(), ref.logits[step].size());
    const double e = relative_error(*logits, ref.logits[step]);
    EXPECT_LE(e, tolerance) << "step " << step;
    worst = std::max(worst, e);
    if (step < ref.generated.size()) {
      EXPECT_EQ(argmax(*logits), static_cast<size_t>(ref.generated[step])) << "greedy token at step " << step;
      logits = runner.feed(std::span<const int32_t>(&ref.generated[step], 1));
      EXPECT_TRUE(logits.is_ok()) << logits.status().to_string();
      if (!logits.is_ok()) return 1e9;
    }
  }
  return worst;
}

LoadOptions cpu_options() {
  LoadOptions o;
  o.backend = BackendKind::kCpu;
  o.threads = 2;
  o.context = 64;
  o.chunk = 16;  // the 22-token prompt is prefilled in two chunks
  return o;
}

class HfParity : public ::testing::TestWithParam<std::string> {};

TEST_P(HfParity, FolderMatchesTransformers) {
  const Reference ref = read_reference(GetParam());
  auto runner = LlamaRunner::load(folder(GetParam()), cpu_options());
  ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
  EXPECT_EQ((*runner)->config().rope_mode, RopeMode::kHalf);
  const double worst = check_against_reference(**runner, ref, 1e-4);
  std::printf("%s: worst relative logit error %.3g over %zu rows\n", GetParam().c_str(), worst, ref.logits.size());
}

TEST_P(HfParity, ExportedProgramMatchesTransformers) {
  const Reference ref = read_reference(GetParam());
  const std::string vrp = ::testing::TempDir() + "/tiny_" + GetParam() + ".vrp";
  ExportOptions eo;
  eo.context = 64;
  eo.chunk = 16;
  std::vector<std::string> notes;
  const Status s = export_llama_program(folder(GetParam()), vrp, eo, &notes);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  auto runner = LlamaRunner::load(vrp, cpu_options());
  ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
  check_against_reference(**runner, ref, 1e-4);
  std::filesystem::remove(vrp);
}

// The same on Vulkan (lavapipe in CI): stacked q/k/v and gate/up projections, the cache written
// through slice_update, sdpa over the cache in place, decode steps replayed with their position
// read on the device.
TEST_P(HfParity, VulkanMatchesTransformers) {
  const Reference ref = read_reference(GetParam());
  LoadOptions o = cpu_options();
  o.backend = BackendKind::kVulkan;
  auto runner = LlamaRunner::load(folder(GetParam()), o);
  if (!runner.is_ok() && runner.status().code() == ErrorCode::kUnsupported) GTEST_SKIP() << runner.status().to_string();
  ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
  const double worst = check_against_reference(**runner, ref, 1e-4);
  std::printf("%s on Vulkan: worst relative logit error %.3g over %zu rows\n", GetParam().c_str(), worst, ref.logits.size());
  EXPECT_GT((*runner)->replayed_calls(), 0u) << "decode steps should replay their recording";
}

INSTANTIATE_TEST_SUITE_P(Tiny, HfParity, ::testing::Values("llama", "qwen2"));

TEST(HfImport, ConfigDetails) {
  auto llama = import_hf_folder(folder("llama"));
  ASSERT_TRUE(llama.is_ok()) << llama.status().to_string();
  EXPECT_EQ(llama->config.kv_heads, 2);
  EXPECT_EQ(llama->config.heads, 4);
  EXPECT_FALSE(llama->config.tied_embeddings);
  // llama3 scaling with original context 64: the fastest frequencies (wavelength < 16) are kept,
  // the slowest (wavelength > 64) divided by the factor 8.
  ASSERT_EQ(llama->config.rope_freq_factors.size(), 8u);
  EXPECT_FLOAT_EQ(llama->config.rope_freq_factors.front(), 1.0f);
  EXPECT_FLOAT_EQ(llama->config.rope_freq_factors.back(), 8.0f);
  EXPECT_TRUE(llama->weights("output.weight").has_value());
  auto qwen = import_hf_folder(folder("qwen2"));
  ASSERT_TRUE(qwen.is_ok()) << qwen.status().to_string();
  EXPECT_TRUE(qwen->config.tied_embeddings);
  EXPECT_FALSE(qwen->weights("output.weight").has_value());
  ASSERT_TRUE(qwen->weights("blk.1.attn_k.bias").has_value());
  EXPECT_EQ(qwen->weights("blk.1.attn_k.bias")->shape, (Shape{32}));
  EXPECT_EQ(qwen->metadata.at("tokenizer.kind").s, "hf_json");
}

// Quantised export: the projections really are q8_0 in the program, and the logits stay close to
// the f32 reference (q8_0 keeps about 8 bits per weight).
TEST(HfExport, Q8ProjectionsStayClose) {
  const Reference ref = read_reference("llama");
  const std::string vrp = ::testing::TempDir() + "/tiny_llama_q8.vrp";
  ExportOptions eo;
  eo.dtype = DType::q8_0;
  eo.context = 64;
  eo.chunk = 16;
  std::vector<std::string> notes;
  const Status s = export_llama_program(folder("llama"), vrp, eo, &notes);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(notes.empty());
  auto runner = LlamaRunner::load(vrp, cpu_options());
  ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
  int q8 = 0;
  for (const auto& c : (*runner)->program().constants)
    if (c.dtype == DType::q8_0) ++q8;
  // 4 matrices a layer (q/k/v stacked, output, gate/up stacked, down), 2 layers, and the output projection.
  EXPECT_EQ(q8, 2 * 4 + 1);
  auto logits = (*runner)->feed(ref.prompt);
  ASSERT_TRUE(logits.is_ok()) << logits.status().to_string();
  const double e = relative_error(*logits, ref.logits[0]);
  EXPECT_LE(e, 2e-2);
  EXPECT_GT(e, 1e-6);  // it did change the weights
  std::filesystem::remove(vrp);
}

}  // namespace
}  // namespace vrun::llama
