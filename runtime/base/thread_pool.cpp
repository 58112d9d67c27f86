#include "runtime/base/knobs.h"
#include "runtime/base/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define VRUN_PAUSE() _mm_pause()
#else
#define VRUN_PAUSE() std::this_thread::yield()
#endif

namespace vrun {

namespace {

// How long an idle worker keeps polling for the next job before it sleeps: longer than the gap
// between two kernels of a decode step, short enough not to hold a core once work has stopped.
constexpr auto kSpin = std::chrono::microseconds(200);

// Chunks per thread of one job, claimed dynamically: when a thread loses its core for a while
// (another process), the others take over the chunks it has not claimed instead of waiting for
// its whole share (2-thread decode on a loaded 2-core machine: ~80 against ~67 tok/s with one
// chunk per thread).
constexpr int64_t kChunksPerThread = 8;

// Pauses before a wait loop starts yielding (tens of microseconds: longer than most kernels of a
// decode step take to finish their last chunk).
constexpr int kPausesBeforeYield = 1000;

// One step of a wait loop: pause at first, then yield. With more runnable threads than cores
// (other processes, or the caller and a worker put on one core), a thread that only pauses holds
// the core that the thread it waits for needs.
inline void relax(int i) {
  if (i < kPausesBeforeYield)
    VRUN_PAUSE();
  else
    std::this_thread::yield();
}

}  // namespace

int ThreadPool::default_size() {
  const char* env = knob_value(Knob::VRUN_THREADS);
  const int threads = env ? std::atoi(env) : 0;
  return threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = default_size();
  for (int i = 0; i + 1 < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool;
  return pool;
}

void ThreadPool::run_chunks(uint32_t gen) {
  uint64_t v = claim_.load(std::memory_order_acquire);
  while (true) {
    if (static_cast<uint32_t>(v >> 32) != gen) return;
    const int64_t c = static_cast<int64_t>(v & 0xffffffffu);
    if (c >= job_chunks_) return;
    if (!claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    (*job_)(c * job_chunk_, std::min(job_n_, (c + 1) * job_chunk_));
    done_chunks_.fetch_add(1, std::memory_order_acq_rel);
    v = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t chunks = std::min<int64_t>(max_chunks, size() * kChunksPerThread);
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + chunks - 1) / chunks;
  // Close the previous generation before the job fields change: a worker still holding its claim
  // word would otherwise pass the chunk check against the new job_chunks_ and run a chunk of the
  // new job under the old generation.
  claim_.store((static_cast<uint64_t>(generation_) << 32) | 0xffffffffu, std::memory_order_seq_cst);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  job_chunks_ = (n + chunk - 1) / chunk;
  done_chunks_.store(0, std::memory_order_relaxed);
  const uint32_t gen = ++generation_;
  // seq_cst store then load, against the worker's seq_cst increment then load: one side sees
  // the other. A worker that still misses the job only costs parallelism: the caller claims
  // every chunk left over itself.
  claim_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  run_chunks(gen);  // the caller works too
  for (int i = 0; done_chunks_.load(std::memory_order_acquire) < job_chunks_; ++i) relax(i);
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  while (true) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    uint32_t gen = static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32);
    for (int i = 0; gen == seen && !stop_.load(std::memory_order_relaxed); ++i) {
      relax(i);
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
      gen = static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      cv_.wait(lock, [&] {
        return stop_.load() || static_cast<uint32_t>(claim_.load(std::memory_order_seq_cst) >> 32) != seen;
      });
      sleepers_.fetch_sub(1, std::memory_order_acq_rel);
      gen = static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32);
    }
    if (stop_.load()) return;
    seen = gen;
    run_chunks(gen);
  }
}

}  // namespace vrun
