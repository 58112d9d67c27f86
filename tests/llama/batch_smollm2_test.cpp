// Continuous batching on SmolLM2-135M-Instruct (Q4_1): six chat prompts of different lengths,
// joining at different steps over four slots, each equal to generate alone at temperature 0, on
// the CPU and on Vulkan; and eighteen over sixteen slots on the CPU (steps of 16 rows).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "runtime/backend.h"
#include "tests/llama/batch_check.h"

namespace vrun::llama {
namespace {

// Whether a Vulkan device other than a CPU implementation is there (the backends describe what
// they find; lavapipe's type is "cpu").
bool has_gpu() {
  const BackendEntry* vk = find_backend("vulkan");
  if (!vk || !vk->describe) return false;
  for (const std::string& line : vk->describe())
    if (line.rfind("vulkan device ", 0) == 0 && line.find("(cpu)") == std::string::npos) return true;
  return false;
}

std::string model_path() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("VRUN_SMOLLM2_GGUF")) candidates.push_back(env);
  if (const char* home = std::getenv("HOME"))
    candidates.push_back(std::string(home) + "/.cache/vrun/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  for (const auto& c : candidates)
    if (std::filesystem::exists(c)) return c;
  return "";
}

// repeat: each prompt that many times (later copies a few tokens longer), joining a step apart,
// so that more sequences than 8 decode together.
void run(BackendKind backend, int64_t slots = 4, int repeat = 1) {
  const std::string path = model_path();
  if (path.empty()) {
    GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not found (set VRUN_SMOLLM2_GGUF)";
  }
  if (backend == BackendKind::kVulkan && !has_gpu()) {
    // The tiny model's batch test covers lavapipe; SmolLM2 there takes minutes.
    GTEST_SKIP() << "no Vulkan GPU (only a CPU implementation)";
  }
  LoadOptions o;
  o.backend = backend;
  o.context = 512;
  o.batch_slots = slots;
  o.batch_context = 512;
  auto r = LlamaRunner::load(path, o);
  if (!r.is_ok() && backend == BackendKind::kVulkan) {
    GTEST_SKIP() << r.status().message();
  }
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  LlamaRunner& runner = **r;
  const std::vector<std::pair<std::string, int>> prompts = {
      {"What is the capital of France?", 24},
      {"Write a short poem about the sea.", 40},
      {"Hi", 8},
      {"Explain in two sentences why the sky is blue, and mention Rayleigh scattering by name.", 32},
      {"List three prime numbers.", 20},
      {"Translate 'good morning' into Spanish, French and German, one per line.", 36}};
  std::vector<test::BatchCase> cases;
  int start = 0;
  for (int r = 0; r < repeat; ++r)
    for (const auto& [text, max_tokens] : prompts) {
      const std::string chat = "<|im_start|>user\n" + text + "<|im_end|>\n<|im_start|>assistant\n";
      // lavapipe (a CPU implementation of Vulkan) is slow: fewer tokens there.
      const int tokens = (backend == BackendKind::kVulkan ? max_tokens / 4 : max_tokens) + 4 * r;
      cases.push_back({runner.tokenizer().encode(chat), tokens, start});
      start += backend == BackendKind::kVulkan || repeat > 1 ? 1 : 3;
    }
  const uint64_t before = runner.replayed_calls();
  int64_t most_rows = 0;
  EXPECT_GT(test::check_batch_matches_generate(runner, cases, {}, false, &most_rows), backend == BackendKind::kVulkan ? 3 : 10);
  if (repeat > 1) {
    EXPECT_EQ(most_rows, slots) << "no step ran all " << slots << " rows";
  }
  if (backend == BackendKind::kVulkan) {
    EXPECT_GT(runner.replayed_calls(), before + 10);
  }
}

TEST(LlamaBatchSmolLM2, GreedyEqualsGenerateAloneCpu) { run(BackendKind::kCpu); }
TEST(LlamaBatchSmolLM2, GreedyEqualsGenerateAloneVulkan) { run(BackendKind::kVulkan); }
// Eight slots: decode_batch_8.
TEST(LlamaBatchSmolLM2, GreedyEqualsGenerateAloneCpuEightSlots) { run(BackendKind::kCpu, 8); }

// Sixteen slots, 18 sequences: steps of 16 rows, where the CPU's quantised linear would take
// dequantise-and-sgemm but for the decode rows' one-row products (linear's decode).
TEST(LlamaBatchSmolLM2, GreedyEqualsGenerateAloneCpuSixteenRows) { run(BackendKind::kCpu, 16, 3); }

// Bit for bit on the CPU (q4_1 weights: the one-row VNNI kernel and the batched rows), and on a
// GPU where there is one.
TEST(LlamaBatchSmolLM2, BatchedRowsHaveTheSingleStreamBits) {
  const std::string path = model_path();
  if (path.empty()) {
    GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not found (set VRUN_SMOLLM2_GGUF)";
  }
  std::vector<BackendKind> backends = {BackendKind::kCpu};
  if (has_gpu()) backends.push_back(BackendKind::kVulkan);
  test::check_batched_rows_bits(path, backends);
  // Past the GPU attention's first key chunks (sized from the length and the batch).
  if (has_gpu()) test::check_batched_rows_bits(path, {BackendKind::kVulkan}, 2048, 2048, 1100, 128);
}

}  // namespace
}  // namespace vrun::llama
