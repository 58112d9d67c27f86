// A fixed pool of worker threads for data-parallel kernels. parallel_for splits [0, n) into
// contiguous ranges; the calling thread takes part, so a pool of 1 runs inline.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vrun {

class ThreadPool {
 public:
  // threads <= 0: one per hardware thread (VRUN_THREADS overrides).
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over ranges covering [0, n), each at least `grain` long (except the
  // last). Returns when all ranges are done. Not reentrant: fn must not call parallel_for.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // A process-wide pool used when a caller does not bring its own.
  static ThreadPool& global();

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0, job_chunks_ = 0;
  int64_t next_chunk_ = 0, done_chunks_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace vrun
