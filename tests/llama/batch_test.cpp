// Continuous batching on the tiny random Llama: greedy sequences in a BatchSession equal
// LlamaRunner::generate alone, on the CPU and on Vulkan; a batched step's row has the bits of the
// single-stream decode; slots free at once and are reused.
#include <gtest/gtest.h>

#include <random>

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

// The programs' greedy output ("next", an argmax on the backend that runs the output head) is the
// host sampler's argmax of the logits at every step, whether the logits are read back with it or
// not (on a GPU the two ways are separate recordings, alternated here).
void check_greedy_output(LlamaRunner& r) {
  ASSERT_TRUE(r.has_greedy_output());
  r.reset();
  const std::vector<int32_t> prompt = {5, 77, 300, 12, 9, 41, 250, 3, 18, 60, 7, 101, 44, 2, 90, 33, 17, 8};
  std::vector<int32_t> with_logits, without;
  auto fed = r.feed_tokens(prompt, true);
  ASSERT_TRUE(fed.is_ok()) << fed.status().to_string();
  for (int i = 0; i < 24; ++i) {
    if (i % 2 == 0) {
      ASSERT_EQ(fed->greedy, argmax(fed->logits)) << "step " << i;
    } else {
      ASSERT_TRUE(fed->logits.empty()) << "step " << i;
    }
    with_logits.push_back(fed->greedy);
    fed = r.feed_tokens(std::span<const int32_t>(&with_logits.back(), 1), i % 2 == 1);
    ASSERT_TRUE(fed.is_ok()) << fed.status().to_string();
  }
  r.reset();
  fed = r.feed_tokens(prompt, false);
  ASSERT_TRUE(fed.is_ok());
  while (without.size() < with_logits.size()) {
    EXPECT_TRUE(fed->logits.empty());
    without.push_back(fed->greedy);
    fed = r.feed_tokens(std::span<const int32_t>(&without.back(), 1), false);
    ASSERT_TRUE(fed.is_ok());
  }
  EXPECT_EQ(without, with_logits);
}

TEST(LlamaBatch, GreedyOutputIsTheArgmaxOfTheLogits) {
  auto r = load(BackendKind::kCpu, 4);
  ASSERT_TRUE(r);
  check_greedy_output(*r);
  auto v = load(BackendKind::kVulkan, 4);
  if (!v) GTEST_SKIP() << "no Vulkan device";
  check_greedy_output(*v);
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

// The guarantee under the greedy tests, bit for bit (batch_check.h), on the CPU and Vulkan: the
// checkpoint's f32 weights, and its projections as f16 and as q8_0 (up to 8 rows on a GPU).
TEST(LlamaBatch, BatchedRowsHaveTheSingleStreamBits) {
  test::check_batched_rows_bits(kTiny, {BackendKind::kCpu, BackendKind::kVulkan});
  for (DType dt : {DType::f16, DType::q8_0})
    test::check_batched_rows_bits(kTiny, {BackendKind::kCpu, BackendKind::kVulkan}, 128, 96, 7, 16, 1, false, dt);
  // Long caches, 1,100 positions, the CPU on 3 threads: the GPU attention splits the keys into
  // chunks sized on the device from the length and the batch (decode_batch_8 differed in 292 of
  // 320 logits when 8 entries took chunks of their own).
  test::check_batched_rows_bits(kTiny, {BackendKind::kCpu, BackendKind::kVulkan}, 2048, 2048, 1100, 128, 3);
}

// q4_0 projections with VRUN_Q4_MATVEC_ROWS=1: a GPU step of 2-8 rows on the one-row q4_0 kernel
// has the single stream's bits too (without it, 315 of 320 logits of row 0 differed at 2 and at 4
// rows on lavapipe; 16 rows take the rows kernel, another order); the CPU's every count.
TEST(LlamaBatch, Q4RowsOnTheOneRowKernelKeepTheBits) {
  setenv("VRUN_Q4_MATVEC_ROWS", "1", 1);
  struct Unset {
    ~Unset() { unsetenv("VRUN_Q4_MATVEC_ROWS"); }
  } unset;
  test::check_batched_rows_bits(kTiny, {BackendKind::kCpu, BackendKind::kVulkan}, 128, 96, 7, 16, 1, false, DType::q4_0);
  test::check_batched_rows_bits(kTiny, {BackendKind::kVulkan}, 2048, 2048, 1100, 128, 1, false, DType::q4_0);
}

// VRUN_MATMUL_ROWS=exact: a GPU step of 16 rows too, short and long caches.
TEST(LlamaBatch, ExactRowsKnobKeepsTheBitsAtSixteenRows) {
  setenv("VRUN_MATMUL_ROWS", "exact", 1);
  struct Unset {
    ~Unset() { unsetenv("VRUN_MATMUL_ROWS"); }
  } unset;
  test::check_batched_rows_bits(kTiny, {BackendKind::kVulkan}, 128, 96, 7, 16, 1, /*exact_rows=*/true);
  test::check_batched_rows_bits(kTiny, {BackendKind::kVulkan}, 2048, 2048, 1100, 128, 1, /*exact_rows=*/true);
}

// A slot keeps the whole prompt chunks its sequence prefilled, and a later sequence whose prompt
// starts with them skips them, with generate's tokens still: while a second slot decodes (its
// steps run the free slot's row too, which must not write over the kept chunks), a prompt that
// shares 35 tokens with the slot's last one (chunks of 16) starts at 32; one that is exactly two
// kept chunks starts at 16 (its last token's logits need a chunk of their own); without
// cache_prompt, at 0.
TEST(LlamaBatch, KeptPromptChunksSkipPrefillWithGeneratesTokens) {
  for (BackendKind backend : {BackendKind::kCpu, BackendKind::kVulkan}) {
    auto r = load(backend, 2);
    if (!r) continue;  // no Vulkan device
    std::mt19937 rng(11);
    std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(r->config().vocab - 1));
    auto random = [&](int n) {
      std::vector<int32_t> p(static_cast<size_t>(n));
      for (auto& t : p) t = id(rng);
      return p;
    };
    const std::vector<int32_t> a = random(40);
    std::vector<int32_t> b(a.begin(), a.begin() + 35), d(a.begin(), a.begin() + 32);
    for (int32_t t : random(10)) b.push_back(t);
    std::vector<test::BatchCase> cases = {{a, 3, 0}, {random(7), 60, 0}, {b, 8, 12}, {d, 5, 30}};
    std::vector<int> cached;
    EXPECT_GT(test::check_batch_matches_generate(*r, cases, {}, false, nullptr, &cached), 5);
    EXPECT_EQ(cached, (std::vector<int>{0, 0, 32, 16})) << backend_kind_name(backend);
    BatchOptions no_reuse;
    no_reuse.reuse_prompts = false;
    test::check_batch_matches_generate(*r, cases, no_reuse, false, nullptr, &cached);
    EXPECT_EQ(cached, (std::vector<int>{0, 0, 0, 0})) << backend_kind_name(backend);
    // Four slots, two busy: a request with nothing kept for it takes the free slot that keeps
    // nothing (slot 3, within the rows the steps run anyway) rather than slot 0, whose chunks the
    // next request then finds.
    auto r4 = load(backend, 4);
    ASSERT_TRUE(r4);
    cases = {{a, 3, 0}, {random(7), 60, 0}, {random(5), 60, 0}, {random(7), 10, 12}, {b, 8, 14}};
    test::check_batch_matches_generate(*r4, cases, {}, false, nullptr, &cached);
    EXPECT_EQ(cached, (std::vector<int>{0, 0, 0, 0, 32})) << backend_kind_name(backend);
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
