// BatchTextEngine: the continuous-batching loop of a text model's worker.
#include <chrono>

#include "apps/serve/engines.h"

namespace vrun::serve {

void BatchTextEngine::publish() {
  metrics_.slots(model_, engine_, session_->running(), session_->slots());
}

void BatchTextEngine::admit(std::vector<std::shared_ptr<Job>> jobs, JobQueue& queue) {
  for (auto& base : jobs) {
    auto* job = static_cast<TextJob*>(base.get());
    if (job->cancelled) {
      job->on_done(Status(ErrorCode::kInvalidArgument, "the request was cancelled before it ran"));
      queue.done(1);
      continue;
    }
    // The job outlives its sequence: running_ holds it until the sequence is reported finished.
    auto on_text = [this, job, first = true](const std::string& piece) mutable {
      if (first) {
        first = false;
        metrics_.time_to_first_token(
            model_, std::chrono::duration<double>(std::chrono::steady_clock::now() - job->arrived).count());
      }
      if (job->cancelled) return false;
      return job->on_text(piece);
    };
    auto id = session_->add(job->prompt, job->options, std::move(on_text));
    if (!id.is_ok()) {
      job->on_done(id.status());
      queue.done(1);
      continue;
    }
    running_[*id] = std::move(base);
  }
  publish();
}

void BatchTextEngine::collect(JobQueue& queue) {
  for (const auto& [id, job] : running_)
    if (job->cancelled) (void)session_->cancel(id);  // frees the slot now
  auto finished = session_->take_finished();
  if (finished.empty()) return;
  for (auto& f : finished) {
    auto it = running_.find(f.id);
    if (it == running_.end()) continue;
    auto& job = static_cast<TextJob&>(*it->second);
    metrics_.tokens(model_, f.stats.prompt_tokens, f.stats.generated_tokens, f.stats.cached_prompt_tokens);
    job.on_done(std::move(f.stats));
    running_.erase(it);
  }
  queue.done(finished.size());
  publish();
}

void BatchTextEngine::fail_all(const Status& st, JobQueue& queue) {
  for (const auto& [id, job] : running_) (void)session_->cancel(id);
  (void)session_->take_finished();
  for (auto& [id, job] : running_) static_cast<TextJob&>(*job).on_done(st);
  queue.done(running_.size());
  running_.clear();
  publish();
}

void BatchTextEngine::run(JobQueue& queue) {
  publish();
  while (true) {
    // New requests join at a step boundary, as many as there are free slots; an idle engine
    // sleeps until one comes (or the queue stops).
    const int free = session_->free_slots();
    if (free > 0) {
      auto jobs = queue.take(static_cast<size_t>(free), /*wait=*/session_->idle());
      if (jobs.empty() && session_->idle()) return;
      admit(std::move(jobs), queue);
    }
    collect(queue);
    if (session_->idle()) continue;
    const auto t0 = std::chrono::steady_clock::now();
    const Status st = session_->step();
    metrics_.step_time(model_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                       session_->last_prefill_seconds());
    if (!st.is_ok()) {
      fail_all(st, queue);
      continue;
    }
    if (session_->last_batch() > 0) metrics_.batch(model_, session_->last_batch());
    collect(queue);
  }
}

}  // namespace vrun::serve
