// The grouping rule of an archive job's workers (apps/cli/job_groups.h), on made-up queues.
#include <gtest/gtest.h>

#include <vector>

#include "apps/cli/job_groups.h"

namespace vrun::cli {
namespace {

size_t take(const std::vector<double>& q, size_t n, size_t workers, double alone = 0) {
  return group_size(q, n, workers, alone);
}

TEST(JobGroups, OneWorkerTakesUpToItsBatch) {
  EXPECT_EQ(take({10, 10, 10, 10, 10}, 4, 1), 4u);
  EXPECT_EQ(take({10, 10}, 4, 1), 2u);
  EXPECT_EQ(take({}, 4, 1), 0u);
  EXPECT_EQ(take({10, 10, 10}, 1, 3), 1u);
}

TEST(JobGroups, SeveralWorkersTakeTheirShare) {
  // 400 s over 2 workers: 200 s a group, so the other worker gets the rest.
  EXPECT_EQ(take({100, 100, 100, 100}, 64, 2), 2u);
  // At least one file, even one longer than the share.
  EXPECT_EQ(take({500, 10, 10}, 64, 2), 1u);
  // The share shrinks with the queue: the last files go one by one.
  EXPECT_EQ(take({10, 10}, 64, 2), 1u);
}

TEST(JobGroups, FilesThatGoAloneAreGroupsOfTheirOwn) {
  // 64 files of 5-10 min with 2 workers: each takes one at a time (the share would be 32).
  std::vector<double> long_files(64, 450);
  EXPECT_EQ(take(long_files, 64, 2, 160), 1u);
  EXPECT_EQ(take(long_files, 64, 2), 32u);
  // One worker too: a long file is not batched with the short ones before or after it.
  EXPECT_EQ(take({300, 30, 30}, 8, 1, 160), 1u);
  EXPECT_EQ(take({30, 30, 300, 30}, 8, 1, 160), 2u);
  // A file at the limit still joins a batch.
  EXPECT_EQ(take({160, 30}, 8, 1, 160), 2u);
}

}  // namespace
}  // namespace vrun::cli
