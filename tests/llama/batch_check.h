// The continuous-batching check shared by the tiny-model and SmolLM2 tests: prompts of different
// lengths join a BatchSession at different steps (more of them than slots, so slots are reused),
// some end early by max_tokens, one is cancelled; every greedy sequence must give the tokens and
// stop reason that LlamaRunner::generate gives for it alone on the same runner.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "apps/llama/batch_session.h"

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
// most_rows (when given): the most rows a decode step of the session ran.
inline int check_batch_matches_generate(LlamaRunner& runner, const std::vector<BatchCase>& cases,
                                        const BatchOptions& options = {}, bool warm_up = false, int64_t* most_rows = nullptr) {
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

}  // namespace vrun::llama::test
