// The server's continuous-batching text engine on the tiny random Llama, through a Scheduler as
// the server drives it: more jobs than slots, all greedy, each with the tokens generate gives it
// alone; jobs cancelled while running free their slots for the queue.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <regex>

#include "apps/serve/engines.h"

namespace vrun::serve {
namespace {

const std::string kTiny = std::string(VRUN_TEST_DATA) + "/llama/tiny_llama";

std::unique_ptr<llama::LlamaRunner> load() {
  llama::LoadOptions o;
  o.backend = BackendKind::kCpu;
  o.threads = 1;
  o.context = 96;
  o.chunk = 16;  // prompts longer than a chunk prefill over several steps
  o.batch_slots = 4;
  auto r = llama::LlamaRunner::load(kTiny, o);
  return r.is_ok() ? std::move(*r) : nullptr;
}

llama::GenerateOptions greedy(int max_tokens) {
  llama::GenerateOptions o;
  o.max_tokens = max_tokens;
  o.sampling.temperature = 0;
  return o;
}

struct Submitted {
  std::shared_ptr<TextJob> job;
  std::future<Result<llama::GenerateStats>> done;
};

Submitted submit(Scheduler& s, std::vector<int32_t> prompt, int max_tokens, bool ignore_eos = false,
                 std::function<bool(const std::string&)> on_text = nullptr) {
  auto job = std::make_shared<TextJob>();
  job->prompt = std::move(prompt);
  job->options = greedy(max_tokens);
  job->options.ignore_eos = ignore_eos;
  job->on_text = on_text ? std::move(on_text) : [](const std::string&) { return true; };
  auto promise = std::make_shared<std::promise<Result<llama::GenerateStats>>>();
  job->on_done = [promise](Result<llama::GenerateStats> st) { promise->set_value(std::move(st)); };
  EXPECT_TRUE(s.submit(job));
  return {job, promise->get_future()};
}

int64_t gauge(const Metrics& m, const std::string& name) {
  std::smatch match;
  const std::string text = m.render();
  if (!std::regex_search(text, match, std::regex(name + "\\{model=\"tiny\"\\} (\\d+)"))) return -1;
  return std::stoll(match[1]);
}

std::vector<std::unique_ptr<Engine>> one_engine(std::unique_ptr<Engine> e) {
  std::vector<std::unique_ptr<Engine>> v;
  v.push_back(std::move(e));
  return v;
}

TEST(ServeBatchEngine, GreedyJobsEqualGenerateAloneAndCancelledJobsFreeSlots) {
  auto runner = load();
  ASSERT_TRUE(runner);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(runner->config().vocab - 1));
  std::vector<std::vector<int32_t>> prompts;
  for (int n : {5, 1, 23, 9, 40, 2, 17, 3, 31, 6}) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (auto& t : p) t = id(rng);
    prompts.push_back(p);
  }
  std::vector<llama::GenerateStats> alone;
  for (size_t k = 0; k < prompts.size(); ++k) {
    runner->reset();
    auto st = runner->generate(prompts[k], greedy(6 + static_cast<int>(k) * 3), [](const std::string&) { return true; });
    ASSERT_TRUE(st.is_ok()) << st.status().message();
    alone.push_back(*st);
  }
  runner->reset();

  Metrics metrics;
  auto session = llama::BatchSession::create(*runner);
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  Scheduler scheduler("tiny", one_engine(std::make_unique<BatchTextEngine>("tiny", std::move(*session), metrics)), 64, metrics);
  std::vector<Submitted> jobs;
  for (size_t k = 0; k < prompts.size(); ++k) jobs.push_back(submit(scheduler, prompts[k], 6 + static_cast<int>(k) * 3));
  for (size_t k = 0; k < jobs.size(); ++k) {
    auto st = jobs[k].done.get();
    ASSERT_TRUE(st.is_ok()) << st.status().message();
    EXPECT_EQ(st->tokens, alone[k].tokens) << "job " << k;
    EXPECT_EQ(st->stop_reason, alone[k].stop_reason) << "job " << k;
  }

  // Long jobs (to the end of the slot), cancelled at once: each ends early, before it ran or at
  // its next step, and a job queued behind them is served with its own tokens.
  std::vector<Submitted> long_jobs;
  for (int k = 0; k < 6; ++k) long_jobs.push_back(submit(scheduler, prompts[0], -1, /*ignore_eos=*/true));
  auto late = submit(scheduler, prompts[3], 15);
  for (auto& j : long_jobs) j.job->cancelled = true;
  for (auto& j : long_jobs) {
    auto st = j.done.get();
    if (st.is_ok()) {
      EXPECT_TRUE(st->stop_reason == "cancelled" || st->stop_reason == "callback") << st->stop_reason;
    }
  }
  auto st = late.done.get();
  ASSERT_TRUE(st.is_ok());
  EXPECT_EQ(st->tokens, alone[3].tokens);
  scheduler.stop();
  EXPECT_EQ(gauge(metrics, "vrun_slots_busy"), 0);
  EXPECT_EQ(gauge(metrics, "vrun_queue_depth"), 0);
}

// Two engines (two copies of the model, as `vrun serve --devices 0,0` makes) on one queue: both
// take jobs, and every job's tokens are those generate gives it alone. A job's first text waits
// (up to 10 s) until another job's first text is waiting too: an engine's step delivers its jobs'
// text one after the other, so two waiting at once means two engines stepping at once.
TEST(ServeBatchEngine, TwoEnginesShareTheQueue) {
  auto a = load(), b = load();
  ASSERT_TRUE(a && b);
  std::vector<std::vector<int32_t>> prompts;
  for (int k = 0; k < 8; ++k) prompts.push_back({static_cast<int32_t>(5 + k), static_cast<int32_t>(40 + 3 * k), 7});
  std::vector<llama::GenerateStats> alone;
  for (const auto& p : prompts) {
    a->reset();
    auto st = a->generate(p, greedy(20), [](const std::string&) { return true; });
    ASSERT_TRUE(st.is_ok()) << st.status().message();
    alone.push_back(*st);
  }
  a->reset();
  Metrics metrics;
  auto sa = llama::BatchSession::create(*a), sb = llama::BatchSession::create(*b);
  ASSERT_TRUE(sa.is_ok() && sb.is_ok());
  std::vector<std::unique_ptr<Engine>> engines;
  engines.push_back(std::make_unique<BatchTextEngine>("tiny", std::move(*sa), metrics, 0));
  engines.push_back(std::make_unique<BatchTextEngine>("tiny", std::move(*sb), metrics, 1));
  Scheduler scheduler("tiny", std::move(engines), 64, metrics);
  std::mutex mu;
  std::condition_variable cv;
  int waiting = 0, most_waiting = 0;
  std::vector<Submitted> jobs;
  for (const auto& p : prompts)
    jobs.push_back(submit(scheduler, p, 20, /*ignore_eos=*/true, [&, first = true](const std::string&) mutable {
      if (!first) return true;
      first = false;
      std::unique_lock<std::mutex> lock(mu);
      most_waiting = std::max(most_waiting, ++waiting);
      cv.notify_all();
      cv.wait_for(lock, std::chrono::seconds(10), [&] { return most_waiting >= 2; });
      --waiting;
      return true;
    }));
  for (size_t k = 0; k < jobs.size(); ++k) {
    auto st = jobs[k].done.get();
    ASSERT_TRUE(st.is_ok()) << st.status().message();
    EXPECT_EQ(std::vector<int32_t>(st->tokens.begin(), st->tokens.begin() + std::min<size_t>(st->tokens.size(), alone[k].tokens.size())),
              alone[k].tokens)
        << "job " << k;
  }
  EXPECT_EQ(most_waiting, 2) << "two engines delivering text at the same time";
  scheduler.stop();
  EXPECT_EQ(gauge(metrics, "vrun_slots_total"), 8);
  EXPECT_EQ(gauge(metrics, "vrun_slots_busy"), 0);
}

}  // namespace
}  // namespace vrun::serve
