// The continuous-batching check shared by the tiny-model and SmolLM2 tests: prompts of different
// lengths join a BatchSession at different steps (more of them than slots, so slots are reused),
// some end early by max_tokens, one is cancelled; every greedy sequence must give the tokens and
// stop reason that LlamaRunner::generate gives for it alone on the same runner; and the bits
// under that: a batched step's row against the single-stream decode step (check_batched_rows_bits).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "apps/llama/batch_session.h"
#include "models/llama/hf_llama.h"
#include "models/llama/llama_model.h"
#include "runtime/executor.h"

namespace vrun::llama::test {

struct BatchCase {
  std::vector<int32_t> prompt;
  int max_tokens = 0;
  int start_step = 0;  // added at the first step at or after this one with a free slot
};

inline GenerateOptions greedy(int max_tokens) {
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.sampling.temperature = 0;
  return o;
}

// Runs the cases through a session on `runner` and compares with generate. Returns the number of
// decode steps that ran more than one sequence. warm_up: the session's warm_up() runs first (what
// it writes into the slots must not reach any sequence).
// most_rows (when given): the most rows a decode step of the session ran. cached (when given):
// each case's prompt tokens that its slot had kept (GenerateStats::cached_prompt_tokens).
inline int check_batch_matches_generate(LlamaRunner& runner, const std::vector<BatchCase>& cases,
                                        const BatchOptions& options = {}, bool warm_up = false, int64_t* most_rows = nullptr,
                                        std::vector<int>* cached = nullptr) {
  std::vector<GenerateStats> alone;
  std::vector<std::string> alone_text;
  for (const BatchCase& c : cases) {
    runner.reset();
    std::string text;
    auto st = runner.generate(c.prompt, greedy(c.max_tokens), [&](const std::string& t) {
      text += t;
      return true;
    });
    EXPECT_TRUE(st.is_ok()) << st.status().message();
    if (!st.is_ok()) return 0;
    alone.push_back(*st);
    alone_text.push_back(text);
  }
  runner.reset();
  auto session = BatchSession::create(runner, options);
  EXPECT_TRUE(session.is_ok()) << session.status().message();
  if (!session.is_ok()) return 0;
  BatchSession& b = **session;
  if (warm_up) {
    auto calls = b.warm_up();
    EXPECT_TRUE(calls.is_ok()) << calls.status().message();
    EXPECT_GT(calls.is_ok() ? *calls : 0, 1);
  }
  std::map<int, size_t> case_of;  // sequence id -> case
  std::vector<std::string> text(cases.size());
  std::vector<bool> done(cases.size(), false);
  if (cached) cached->assign(cases.size(), -1);
  size_t next = 0;
  int shared_steps = 0;
  for (int step = 0; step < 10000; ++step) {
    while (next < cases.size() && cases[next].start_step <= step && b.free_slots() > 0) {
      const size_t k = next++;
      auto id = b.add(cases[k].prompt, greedy(cases[k].max_tokens), [&text, k](const std::string& t) {
        text[k] += t;
        return true;
      });
      EXPECT_TRUE(id.is_ok()) << id.status().message();
      if (!id.is_ok()) return 0;
      case_of[*id] = k;
    }
    if (b.idle() && next == cases.size()) break;
    const int before = b.running();
    const Status s = b.step();
    EXPECT_TRUE(s.is_ok()) << s.message();
    if (!s.is_ok()) return 0;
    if (before > 1 && b.last_rows() > 1) ++shared_steps;
    if (most_rows) *most_rows = std::max(*most_rows, b.last_rows());
    for (BatchFinished& f : b.take_finished()) {
      const size_t k = case_of.at(f.id);
      done[k] = true;
      if (cached) (*cached)[k] = f.stats.cached_prompt_tokens;
      EXPECT_EQ(f.stats.tokens, alone[k].tokens) << "sequence " << k << " (prompt of " << cases[k].prompt.size() << " tokens)";
      EXPECT_EQ(f.stats.stop_reason, alone[k].stop_reason) << "sequence " << k;
      EXPECT_EQ(f.stats.generated_tokens, alone[k].generated_tokens) << "sequence " << k;
      EXPECT_EQ(text[k], alone_text[k]) << "sequence " << k;
    }
  }
  for (size_t k = 0; k < cases.size(); ++k) EXPECT_TRUE(done[k]) << "sequence " << k << " never finished";
  EXPECT_EQ(b.free_slots(), b.slots());
  return shared_steps;
}

// The guarantee under the greedy comparisons, bit for bit: a sequence's logits from the batched
// decode step (its row among others, 1 to 16 rows) are the single-stream decode step's after the
// same prompt, on each backend given (skipped where it cannot load) with its default kernels.
// Kernels that sum a row in another order than the batched step's (VRUN_DECODE_BLOCK's
// one-dispatch kernel; once the CPU's VNNI one-row q4_1 kernel) break it.
// context and slot_context: the single-stream and the slots' KV capacities; prompt_len: the
// prompt's length (past a GPU attention's first key chunks, 64 keys and more, the chunks must
// agree), fed `chunk` tokens at a time; threads: the CPU's; projections: the projection matrices
// converted to that type first (convert_projections); gpu_rows: the most rows checked on a GPU.
inline void check_batched_rows_bits(const std::string& path, const std::vector<BackendKind>& backends,
                                    int64_t context = 128, int64_t slot_context = 96, int64_t prompt_len = 7,
                                    int64_t chunk = 16, int threads = 1, bool exact_rows = false,
                                    std::optional<DType> projections = std::nullopt, int64_t gpu_rows = 8) {
  setenv("VRUN_MM_EXACT_ROWS", "0", 1);  // the tensor cores' exact mode off (see below)
  struct UnsetExact {
    ~UnsetExact() { unsetenv("VRUN_MM_EXACT_ROWS"); }
  } unset_exact;
  auto m = import_llama_checkpoint(path);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  BuildSettings s;
  s.context = context;
  s.chunk = chunk;
  s.batch_slots = 16;
  s.batch_context = slot_context;
  WeightSource weights = m->weights;
  if (projections) {
    auto converted = convert_projections(m->weights, m->config, *projections, nullptr);
    ASSERT_TRUE(converted.is_ok()) << converted.status().message();
    weights = *converted;
  }
  auto prog = build_llama_program(m->config, weights, s, m->metadata);
  ASSERT_TRUE(prog.is_ok()) << prog.status().message();
  const int64_t V = m->config.vocab;
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
  for (int64_t i = 0; i < prompt_len; ++i) prompt[i] = static_cast<int32_t>(5 + (i * 37) % (V - 5));
  const auto n = static_cast<int64_t>(prompt.size());
  for (BackendKind backend : backends) {
    ExecutorOptions eo;
    eo.backend = backend;
    eo.threads = threads;
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
      Result<std::vector<TensorView>> pre = std::vector<TensorView>{};
      for (int64_t at = 0; at < n && pre.is_ok(); at += s.chunk) {  // in chunks, as the runners feed
        const int64_t len = std::min<int64_t>(s.chunk, n - at);
        pre = single ? e.run("forward", {TensorView::dense(p.data() + at, DType::i32, {1, len})}, {{"pos", at}})
                     : e.run("prefill_slot", {TensorView::dense(p.data() + at, DType::i32, {1, len})}, {{"pos", at}, {"slot", 0}});
      }
      EXPECT_TRUE(pre.is_ok()) << pre.status().message();
      for (int32_t step = 0; step < 3 && pre.is_ok(); ++step) {
        const int64_t r = single ? 1 : rows;
        std::vector<int32_t> tok(static_cast<size_t>(r), 0), pos(static_cast<size_t>(r), 0), cache_rows(static_cast<size_t>(r), 0);
        tok[0] = 20 + step;
        pos[0] = static_cast<int32_t>(n + step);
        for (int64_t b = 0; b < r; ++b) cache_rows[b] = static_cast<int32_t>(b * slot_context) + pos[b];
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
    // The GPU's batched rows have the single-stream bits only up to the matvec's 8 rows of float,
    // q4_1 and q8_0 weights (docs/serving.md): its rows kernel (9 rows and more) and its one-row
    // q4_0 kernel sum in orders of their own, and so does the tensor cores' exact mode, which on
    // NVIDIA takes f16 weights from 5 rows (kept off in this check, VRUN_MM_EXACT_ROWS=0 above;
    // the greedy tests hold it to generate's tokens). exact_rows: the caller set
    // VRUN_MATMUL_ROWS=exact (matvec passes for any count): every count.
    for (int64_t rows : {1, 2, 4, 8, 16}) {
      if (backend != BackendKind::kCpu && rows > gpu_rows && !exact_rows) continue;
      if (!e.program().method("decode_batch_" + std::to_string(rows))) continue;
      const std::vector<float> got = run(rows);
      ASSERT_EQ(got.size(), alone.size());
      int differ = 0;
      for (int64_t i = 0; i < V; ++i) differ += std::memcmp(&got[i], &alone[i], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0) << backend_kind_name(backend) << ": " << differ << " of " << V << " logits of row 0 of decode_batch_" << rows
                           << " differ from the single-stream decode's";
    }
  }
}

}  // namespace vrun::llama::test
