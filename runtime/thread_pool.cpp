#include "runtime/thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace vrun {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) {
    const char* env = std::getenv("VRUN_THREADS");
    threads = env ? std::atoi(env) : 0;
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  for (int i = 0; i + 1 < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool;
  return pool;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t chunks = std::min<int64_t>(max_chunks, size());
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + chunks - 1) / chunks;
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  job_chunks_ = (n + chunk - 1) / chunk;
  next_chunk_ = 0;
  done_chunks_ = 0;
  ++generation_;
  cv_work_.notify_all();
  // The caller works too.
  while (next_chunk_ < job_chunks_) {
    const int64_t c = next_chunk_++;
    lock.unlock();
    fn(c * chunk, std::min(n, (c + 1) * chunk));
    lock.lock();
    ++done_chunks_;
  }
  cv_done_.wait(lock, [&] { return done_chunks_ == job_chunks_; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int /*index*/) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_work_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ && next_chunk_ < job_chunks_); });
    if (stop_) return;
    seen = generation_;
    while (job_ && next_chunk_ < job_chunks_) {
      const int64_t c = next_chunk_++;
      const auto* fn = job_;
      const int64_t n = job_n_, chunk = job_chunk_;
      lock.unlock();
      (*fn)(c * chunk, std::min(n, (c + 1) * chunk));
      lock.lock();
      if (++done_chunks_ == job_chunks_) cv_done_.notify_all();
    }
  }
}

}  // namespace vrun
