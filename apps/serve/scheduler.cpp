#include "apps/serve/scheduler.h"

#include <vector>

namespace vrun::serve {

Scheduler::Scheduler(std::string model, std::unique_ptr<Engine> engine, int max_pending, Metrics& metrics)
    : model_(std::move(model)), engine_(std::move(engine)), max_pending_(max_pending), metrics_(metrics) {
  metrics_.queue_depth(model_, 0);
  worker_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  stop();
}

bool Scheduler::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || static_cast<int64_t>(queue_.size()) + running_ >= max_pending_) return false;
    queue_.push_back(std::move(job));
    metrics_.queue_depth(model_, static_cast<int64_t>(queue_.size()) + running_);
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
  if (worker_.joinable()) worker_.join();
}

int64_t Scheduler::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size()) + running_;
}

void Scheduler::loop() {
  const size_t max_batch = static_cast<size_t>(std::max(1, engine_->max_batch()));
  while (true) {
    std::vector<std::shared_ptr<Job>> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to finish
      while (!queue_.empty() && batch.size() < max_batch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      running_ = static_cast<int64_t>(batch.size());
    }
    metrics_.batch(model_, static_cast<int>(batch.size()));
    engine_->serve(batch);
    std::lock_guard<std::mutex> lock(mu_);
    running_ = 0;
    metrics_.queue_depth(model_, static_cast<int64_t>(queue_.size()));
  }
}

}  // namespace vrun::serve
