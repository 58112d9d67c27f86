// One worker thread per engine of a model (one engine per device it is loaded on), all fed by the
// model's bounded queue. A worker runs its Engine, which
// pulls jobs from the queue as it can take them: an engine that serves a batch at a time takes
// up to its max_batch() and runs them to completion (StepEngine); the continuous-batching text
// engine takes a job whenever one of its KV-cache slots is free and advances every running
// sequence one token per step, so requests join and leave between steps.
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
#include <vector>

#include "apps/serve/metrics.h"

namespace vrun::serve {

// A unit of work for a model; concrete jobs (text, speech) carry their inputs and report through
// their own callbacks.
struct Job {
  virtual ~Job() = default;
  // Set by the HTTP side when the client is gone or the request timed out: a queued job is
  // skipped, a running one stops at its next step.
  std::atomic<bool> cancelled{false};
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
};

// The engine's side of a model's queue.
class JobQueue {
 public:
  virtual ~JobQueue() = default;
  // Up to `most` jobs in arrival order; they count as running until done(). With `wait`, blocks
  // until a job is queued or the queue is stopping. Empty: nothing queued (with `wait`: stopping,
  // and nothing left).
  virtual std::vector<std::shared_ptr<Job>> take(size_t most, bool wait) = 0;
  // `n` jobs taken earlier have had their completion callbacks.
  virtual void done(size_t n) = 0;
  // Whether stop() was called (the engine finishes what it holds and what is queued, then returns).
  virtual bool stopping() const = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // The worker's loop: serves jobs from the queue until it is stopping and empty. Every job taken
  // gets its completion callback, cancelled or not, before done() counts it.
  virtual void run(JobQueue& queue) = 0;
};

// An engine that serves a batch of jobs at a time, each batch to completion.
class StepEngine : public Engine {
 public:
  // Jobs this engine serves together in one step.
  virtual int max_batch() const { return 1; }
  virtual void serve(std::span<const std::shared_ptr<Job>> jobs) = 0;
  void run(JobQueue& queue) override;
};

class Scheduler final : private JobQueue {
 public:
  // max_pending: jobs queued plus running beyond which submit refuses. Each engine gets a worker
  // thread; a job goes to an idle engine when one is waiting, else to whichever takes it first.
  Scheduler(std::string model, std::vector<std::unique_ptr<Engine>> engines, int max_pending, Metrics& metrics);
  ~Scheduler() override;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // False when the model already has max_pending jobs (the caller answers 429).
  bool submit(std::shared_ptr<Job> job);
  // Finishes every queued and running job, then stops the worker.
  void stop();
  // Jobs queued or running.
  int64_t pending() const;

 private:
  std::vector<std::shared_ptr<Job>> take(size_t most, bool wait) override;
  void done(size_t n) override;
  bool stopping() const override;
  void publish();  // with mu_ held

  std::string model_;
  std::vector<std::unique_ptr<Engine>> engines_;
  const int max_pending_;
  Metrics& metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  int64_t running_ = 0;
  bool stopping_ = false;
  int idle_waiting_ = 0;  // workers blocked in take(wait) for a job
  std::vector<std::thread> workers_;
};

}  // namespace vrun::serve
