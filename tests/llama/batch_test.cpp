// Continuous batching on the tiny random Llama: greedy sequences in a BatchSession equal
// LlamaRunner::generate alone, on the CPU and on Vulkan; a batched step's row has the bits of the
// single-stream decode; slots free at once and are reused.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "models/llama/hf_llama.h"
#include "models/llama/llama_model.h"
#include "runtime/executor.h"
#include "tests/llama/batch_check.h"

namespace vrun::llama {
namespace {

const std::string kTiny = std::string(VRUN_TEST_DATA) + "/llama/tiny_llama";

std::vector<test::BatchCase> tiny_cases(int64_t vocab) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(vocab - 1));
  auto prompt = [&](int n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (auto& t : p) t = id(rng);
    return p;
  };
  // lengths, max tokens and start steps differ; 6 sequences over 4 slots.
  return {{prompt(5), 12, 0}, {prompt(1), 20, 0}, {prompt(23), 4, 1}, {prompt(9), 16, 3},
          {prompt(40), 9, 4}, {prompt(2), 14, 6}};
}

std::unique_ptr<LlamaRunner> load(BackendKind backend, int64_t slots) {
  LoadOptions o;
  o.backend = backend;
  o.threads = 1;
  o.context = 128;
  o.chunk = 16;  // prompts longer than a chunk prefill over several steps
  o.batch_slots = slots;
  o.batch_context = 96;
  auto r = LlamaRunner::load(kTiny, o);
  if (!r.is_ok()) return nullptr;
  return std::move(*r);
}

TEST(LlamaBatch, ProgramHasBatchedMethods) {
  auto r = load(BackendKind::kCpu, 4);
  ASSERT_TRUE(r);
  for (const char* m : {"prefill_slot", "decode_batch_1", "decode_batch_2", "decode_batch_4"})
    EXPECT_NE(r->program().method(m), nullptr) << m;
  EXPECT_EQ(r->program().method("decode_batch_8"), nullptr);
  EXPECT_NE(r->program().method("decode"), nullptr);
}

TEST(LlamaBatch, GreedyEqualsGenerateAloneCpu) {
  auto r = load(BackendKind::kCpu, 4);
  ASSERT_TRUE(r);
  EXPECT_GT(test::check_batch_matches_generate(*r, tiny_cases(r->config().vocab)), 5);
}

TEST(LlamaBatch, GreedyEqualsGenerateAloneVulkan) {
  auto r = load(BackendKind::kVulkan, 4);
  if (!r) {
    GTEST_SKIP() << "no Vulkan device";
  }
  const uint64_t before = r->replayed_calls();
  EXPECT_GT(test::check_batch_matches_generate(*r, tiny_cases(r->config().vocab)), 5);
  // Positions are device inputs: decode steps of one row count replay their recording.
  EXPECT_GT(r->replayed_calls(), before + 20);
}

// The guarantee under the greedy tests, bit for bit: a sequence's logits from the batched decode
// step (its row among others, any row count) are the single-stream decode step's, after the same
// prompt, on every backend with its default kernels. Kernels that sum a row in another order than
// the batched step's (VRUN_DECODE_BLOCK's one-dispatch kernel) break it.
TEST(LlamaBatch, BatchedRowsHaveTheSingleStreamBits) {
  auto m = import_llama_checkpoint(kTiny);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  BuildSettings s;
  s.context = 128;
  s.chunk = 16;
  s.batch_slots = 4;
  s.batch_context = 96;
  auto prog = build_llama_program(m->config, m->weights, s, m->metadata);
  ASSERT_TRUE(prog.is_ok()) << prog.status().message();
  const int64_t V = m->config.vocab;
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11};
  const auto n = static_cast<int64_t>(prompt.size());
  for (BackendKind backend : {BackendKind::kCpu, BackendKind::kVulkan}) {
    ExecutorOptions eo;
    eo.backend = backend;
    eo.threads = 1;
    auto ex = Executor::create(*prog, eo);
    if (!ex.is_ok()) continue;  // no Vulkan device
    Executor& e = **ex;
    // Three decode steps after the prompt; the last step's logits. rows 0: the single-stream
    // methods (forward, decode); else prefill_slot into slot 0 and decode_batch_<rows>, the
    // other rows decoding token 0 in their own slots.
    auto run = [&](int64_t rows) {
      e.reset_state();
      std::vector<float> out;
      std::vector<int32_t> p = prompt;
      const bool single = rows == 0;
      auto pre = single ? e.run("forward", {TensorView::dense(p.data(), DType::i32, {1, n})}, {{"pos", 0}})
                        : e.run("prefill_slot", {TensorView::dense(p.data(), DType::i32, {1, n})}, {{"pos", 0}, {"slot", 0}});
      EXPECT_TRUE(pre.is_ok()) << pre.status().message();
      for (int32_t step = 0; step < 3 && pre.is_ok(); ++step) {
        const int64_t r = single ? 1 : rows;
        std::vector<int32_t> tok(static_cast<size_t>(r), 0), pos(static_cast<size_t>(r), 0), cache_rows(static_cast<size_t>(r), 0);
        tok[0] = 20 + step;
        pos[0] = static_cast<int32_t>(n + step);
        for (int64_t b = 0; b < r; ++b) cache_rows[b] = static_cast<int32_t>(b * 96) + pos[b];
        auto o = single ? e.run("decode", {TensorView::dense(tok.data(), DType::i32, {1, 1}), TensorView::dense(pos.data(), DType::i32, {1})})
                        : e.run("decode_batch_" + std::to_string(rows),
                                {TensorView::dense(tok.data(), DType::i32, {1, r}), TensorView::dense(pos.data(), DType::i32, {r}),
                                 TensorView::dense(cache_rows.data(), DType::i32, {r})});
        EXPECT_TRUE(o.is_ok()) << o.status().message();
        if (!o.is_ok()) break;
        out.assign((*o)[0].ptr<float>(), (*o)[0].ptr<float>() + V);
      }
      return out;
    };
    const std::vector<float> alone = run(0);
    ASSERT_EQ(alone.size(), static_cast<size_t>(V));
    for (int64_t rows : {1, 2, 4}) {
      const std::vector<float> got = run(rows);
      ASSERT_EQ(got.size(), alone.size());
      int differ = 0;
      for (int64_t i = 0; i < V; ++i) differ += std::memcmp(&got[i], &alone[i], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0) << backend_kind_name(backend) << ": " << differ << " of " << V << " logits of row 0 of decode_batch_" << rows
                           << " differ from the single-stream decode's";
    }
  }
}

// The server's warm-up at load runs every batched method into free slots first.
TEST(LlamaBatch, GreedyEqualsGenerateAloneAfterWarmUp) {
  for (BackendKind backend : {BackendKind::kCpu, BackendKind::kVulkan}) {
    auto r = load(backend, 4);
    if (!r) continue;  // no Vulkan device
    EXPECT_GT(test::check_batch_matches_generate(*r, tiny_cases(r->config().vocab), {}, /*warm_up=*/true), 5)
        << backend_kind_name(backend);
  }
}

TEST(LlamaBatch, WarmUpRefusesARunningSession) {
  auto r = load(BackendKind::kCpu, 4);
  ASSERT_TRUE(r);
  auto s = BatchSession::create(*r);
  ASSERT_TRUE(s.is_ok());
  ASSERT_TRUE((*s)->add({5, 6, 7}, test::greedy(4), nullptr).is_ok());
  EXPECT_FALSE((*s)->warm_up().is_ok());
}

TEST(LlamaBatch, CancelFreesTheSlotAtOnce) {
  auto r = load(BackendKind::kCpu, 2);
  ASSERT_TRUE(r);
  auto s = BatchSession::create(*r);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  BatchSession& b = **s;
  const std::vector<int32_t> p = {5, 6, 7, 8};
  auto a = b.add(p, test::greedy(50), nullptr);
  auto c = b.add(p, test::greedy(50), nullptr);
  ASSERT_TRUE(a.is_ok() && c.is_ok());
  EXPECT_FALSE(b.add(p, test::greedy(5), nullptr).is_ok());  // both slots busy
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(b.step().is_ok());
  ASSERT_TRUE(b.cancel(*a).is_ok());
  EXPECT_EQ(b.free_slots(), 1);
  EXPECT_FALSE(b.cancel(*a).is_ok());
  auto f = b.take_finished();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].stats.stop_reason, "cancelled");
  // a: its prefill's token and a decode in step 1, one decode in each of steps 2 to 4.
  EXPECT_EQ(f[0].stats.generated_tokens, 5);
  // A callback that returns false ends its sequence as generate's does.
  int calls = 0;
  auto d = b.add(p, test::greedy(50), [&](const std::string&) { return ++calls < 2; });
  ASSERT_TRUE(d.is_ok());
  for (int i = 0; i < 200 && b.running() > 1; ++i) ASSERT_TRUE(b.step().is_ok());
  f = b.take_finished();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].id, *d);
  EXPECT_EQ(f[0].stats.stop_reason, "callback");
}

TEST(LlamaBatch, BadInputsAreErrors) {
  auto r = load(BackendKind::kCpu, 2);
  ASSERT_TRUE(r);
  auto s = BatchSession::create(*r);
  ASSERT_TRUE(s.is_ok());
  EXPECT_FALSE((*s)->add({}, test::greedy(4), nullptr).is_ok());
  EXPECT_FALSE((*s)->add(std::vector<int32_t>(97, 5), test::greedy(4), nullptr).is_ok());  // over the slot's 96
  EXPECT_FALSE((*s)->add({-1}, test::greedy(4), nullptr).is_ok());
  auto plain = load(BackendKind::kCpu, 0);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(BatchSession::create(*plain).is_ok());
}

}  // namespace
}  // namespace vrun::llama
