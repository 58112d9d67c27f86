// One worker thread per model, fed by a bounded queue. The runners serve one stream at a time,
// so the worker hands the engine one job per step today; an engine that can advance several
// sequences together (batched decode) raises max_batch() and receives up to that many jobs per
// step, with no change to the queue, the admission limit or the HTTP side.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "apps/serve/metrics.h"

namespace vrun::serve {

// A unit of work for a model; concrete jobs (text, speech) carry their inputs and report through
// their own callbacks.
struct Job {
  virtual ~Job() = default;
  // Set by the HTTP side when the client is gone or the request timed out: a queued job is
  // skipped, a running one stops at its next token.
  std::atomic<bool> cancelled{false};
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Jobs this engine advances together in one step.
  virtual int max_batch() const { return 1; }
  // Runs the jobs to completion; every job gets its completion callback, cancelled or not.
  virtual void serve(std::span<const std::shared_ptr<Job>> jobs) = 0;
};

class Scheduler {
 public:
  // max_pending: jobs queued plus running beyond which submit refuses.
  Scheduler(std::string model, std::unique_ptr<Engine> engine, int max_pending, Metrics& metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // False when the model already has max_pending jobs (the caller answers 429).
  bool submit(std::shared_ptr<Job> job);
  // Finishes every queued job, then stops the worker.
  void stop();
  int64_t pending() const;

 private:
  void loop();

  std::string model_;
  std::unique_ptr<Engine> engine_;
  const int max_pending_;
  Metrics& metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  int64_t running_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace vrun::serve
