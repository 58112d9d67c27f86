// A fixed pool of worker threads for data-parallel kernels. parallel_for splits [0, n) into
// contiguous ranges (a few per thread, claimed dynamically); the calling thread takes part, so a
// pool of 1 runs inline.
//
// A decode step of a small model makes hundreds of parallel_for calls of a few microseconds
// each, so waking sleeping threads through the kernel on every call would cost more than the
// work: workers spin on an atomic job counter for a short while after each job (kSpin) and only
// then sleep on a condition variable. Spinning turns to yielding after tens of microseconds, so
// that on a loaded machine a waiting thread does not hold the core the awaited one needs.
#pragma once

#include <atomic>
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
  // The threads a pool made with threads <= 0 has: VRUN_THREADS, else one per hardware thread.
  static int default_size();

  // Calls fn(begin, end) over ranges covering [0, n), each at least `grain` long (except the
  // last), in no fixed order and on any thread. Returns when all ranges are done. Not
  // reentrant: fn must not call parallel_for, and one pool serves one calling thread at a time.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // A process-wide pool used when a caller does not bring its own.
  static ThreadPool& global();

 private:
  void worker_loop();
  // Claims and runs chunks of job `gen` until none is left or another job replaced it.
  void run_chunks(uint32_t gen);

  std::vector<std::thread> workers_;
  // (generation << 32) | next chunk: a claim succeeds only for the job it was meant for.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_chunks_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  uint32_t generation_ = 0;  // the calling thread's copy
  // The current job; written before claim_ publishes it, read only after a successful claim.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0, job_chunks_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace vrun
