// What every vrun_bench_vulkan row stands on: random device tensors, timing at warm clocks
// (time_runs), one op timed over copies of its inputs (run_op) and the printed row.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops/attrs.h"
#include "kernels/vulkan/context.h"
#include "kernels/vulkan/memory.h"
#include "kernels/vulkan/recorder.h"

namespace vrun::vulkan::bench {

struct DevTensor {
  Buffer buf;
  DeviceView view;
};

// A device tensor of random values in [-1, 1) (quantised for block dtypes); fill = false leaves
// it unset.
DevTensor make(Context& ctx, DType dt, const Shape& shape, bool fill = true);

// The benchmark cannot go on past a failed step: print it and stop.
void must(const Status& s);

// Seconds per run of `record_once`. GPUs drop their clocks when idle and take from tens of
// milliseconds to over a second of load to climb back (an H100 traced with nvidia-smi: 345 MHz idle,
// sometimes several hundred ms at 500-900 MHz before 1980), so the GPU must not wait for the host
// between passes: one pass (enough runs for ~10 ms) is recorded once, captured, and replayed (the
// same command buffer submitted again, no host recording in between) for 300 ms of warm-up, then
// for at least a second of timed passes, of which the fastest counts. Where the recorder cannot
// capture (no push descriptors) every pass is recorded afresh before its timed submission.
template <typename F>
double time_runs(Context& ctx, int reps, F&& record_once) {
  auto rec = std::move(Recorder::create(ctx)).value();
  rec->set_submit_in_pieces(false);
  auto record_pass = [&](int n, bool capture) {
    const bool capturing = capture && rec->begin_capture();
    for (int i = 0; i < n; ++i) must(record_once(*rec));
    return capturing;
  };
  auto wait = [&]() {
    const auto t0 = std::chrono::steady_clock::now();
    must(rec->submit_and_wait());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // Untimed first pass (pipelines created), then one to size the timed pass.
  record_pass(1, false);
  wait();
  record_pass(reps, false);
  const double per_run = wait() / reps;
  const int n = static_cast<int>(std::clamp(0.01 / std::max(per_run, 1e-9), static_cast<double>(reps), 4000.0));
  const bool captured = record_pass(n, true);
  wait();
  const std::shared_ptr<Recorder::Capture> cap = captured ? rec->end_capture() : nullptr;
  auto pass = [&]() {
    if (cap) {
      rec->begin_replay(cap);
      rec->replay_all_ops();
    } else {
      record_pass(n, false);
    }
    return wait();
  };
  double warm = 0;
  for (int i = 0; i < 1000 && warm < 0.3; ++i) warm += pass();
  double best = 1e30, timed = 0;
  for (int k = 0; k < 1000 && (k < 3 || timed < 1.0); ++k) {
    const double t = pass();
    timed += t;
    best = std::min(best, t / n);
  }
  return best;
}

// rotate: the inputs cycle through copies that together exceed the L2 cache. serial: every run
// writes one output, so each waits for the one before (as the ops of a decode step do) instead
// of overlapping it. Seconds per run.
double run_op(Context& ctx, int reps, OpKind op, const std::vector<const DevTensor*>& in, const Attrs& attrs,
              bool rotate = false, bool serial = false);

// Prints one table row: rate = amount / sec in `unit`, and its share of `roof` (none when 0).
void row(const char* name, const std::string& shape, double sec, double amount, const char* unit, double roof);

}  // namespace vrun::vulkan::bench
