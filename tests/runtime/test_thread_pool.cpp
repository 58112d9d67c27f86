// ThreadPool: every index covered exactly once per call, across many back-to-back calls (the
// spinning hand-off) and after workers have gone to sleep (the condition-variable hand-off).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/base/thread_pool.h"

namespace vrun {
namespace {

void check_cover(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  for (auto& h : hits) h.store(0);
  pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
    ASSERT_LE(0, b);
    ASSERT_LE(b, e);
    ASSERT_LE(e, n);
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i << " of " << n;
}

TEST(ThreadPool, CoversEveryIndexOnceAcrossManyCalls) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int rep = 0; rep < 2000; ++rep) check_cover(pool, 1 + rep % 97, 1 + rep % 5);
  }
}

TEST(ThreadPool, WakesWorkersThatWentToSleep) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 5; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin window
    std::atomic<int> distinct{0};
    std::vector<std::atomic<bool>> seen(64);
    for (auto& s : seen) s.store(false);
    // Chunks that take long enough for every thread to join in.
    pool.parallel_for(4, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].store(true);
      distinct.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    });
    EXPECT_EQ(distinct.load(), 4);
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(seen[static_cast<size_t>(i)].load());
    check_cover(pool, 1000, 1);
  }
}

TEST(ThreadPool, ResultsAreThoseOfASerialLoop) {
  ThreadPool pool(3);
  std::vector<double> out(10007);
  pool.parallel_for(static_cast<int64_t>(out.size()), 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = static_cast<double>(i) * 0.5 + 1;
  });
  double sum = 0;
  for (double v : out) sum += v;
  const double n = static_cast<double>(out.size());
  EXPECT_DOUBLE_EQ(sum, 0.5 * n * (n - 1) / 2 + n);
}

}  // namespace
}  // namespace vrun
