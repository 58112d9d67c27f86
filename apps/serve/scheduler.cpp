#include "apps/serve/scheduler.h"

#include <algorithm>

namespace vrun::serve {

void StepEngine::run(JobQueue& queue) {
  const size_t most = static_cast<size_t>(std::max(1, max_batch()));
  while (true) {
    auto batch = queue.take(most, /*wait=*/true);
    if (batch.empty()) return;
    serve(batch);
    queue.done(batch.size());
  }
}

Scheduler::Scheduler(std::string model, std::vector<std::unique_ptr<Engine>> engines, int max_pending, Metrics& metrics)
    : model_(std::move(model)), engines_(std::move(engines)), max_pending_(max_pending), metrics_(metrics) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    publish();
  }
  for (auto& e : engines_) workers_.emplace_back([this, engine = e.get()] { engine->run(*this); });
}

Scheduler::~Scheduler() {
  stop();
}

void Scheduler::publish() {
  metrics_.queue_depth(model_, static_cast<int64_t>(queue_.size()) + running_, static_cast<int64_t>(queue_.size()));
}

bool Scheduler::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || static_cast<int64_t>(queue_.size()) + running_ >= max_pending_) return false;
    queue_.push_back(std::move(job));
    publish();
  }
  cv_.notify_one();
  return true;
}

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
}

int64_t Scheduler::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size()) + running_;
}

std::vector<std::shared_ptr<Job>> Scheduler::take(size_t most, bool wait) {
  std::vector<std::shared_ptr<Job>> out;
  std::unique_lock<std::mutex> lock(mu_);
  // A busy engine (taking without waiting) leaves new jobs to an idle one that waits for them.
  if (!wait && idle_waiting_ > 0) return out;
  if (wait) {
    ++idle_waiting_;
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    --idle_waiting_;
  }
  while (!queue_.empty() && out.size() < most) {
    out.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  running_ += static_cast<int64_t>(out.size());
  if (!out.empty()) publish();
  return out;
}

void Scheduler::done(size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  running_ -= static_cast<int64_t>(n);
  publish();
}

bool Scheduler::stopping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

}  // namespace vrun::serve
