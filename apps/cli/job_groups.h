// How many files of an archive job's queue a worker takes at once (Job::take), apart from the
// queue itself so that the rule is tested on its own (tests/cli/job_groups_test.cpp).
#pragma once

#include <cstddef>
#include <span>

namespace vrun::cli {

// queued_s: the expected seconds of the files still queued, in queue order; n: the most files the
// worker's model takes in one call; workers: how many pull from the queue; alone_above_s: files
// longer than this go alone (0: none do). With several workers a group holds at most its share of
// the queued audio (the total over the workers; at least one file), so that one worker does not
// take a folder another device could share; a file that goes alone is a group of its own.
inline size_t group_size(std::span<const double> queued_s, size_t n, size_t workers, double alone_above_s) {
  double share = 0;  // 0: no limit
  if (workers > 1 && n > 1) {
    for (double s : queued_s) share += s;
    share /= static_cast<double>(workers);
  }
  double taken = 0;
  size_t k = 0;
  for (; k < n && k < queued_s.size(); ++k) {
    const double s = queued_s[k];
    const bool alone = alone_above_s > 0 && s > alone_above_s;
    if (k > 0 && (alone || (share > 0 && taken + s > share))) break;
    taken += s;
    if (alone) return 1;
  }
  return k;
}

}  // namespace vrun::cli
