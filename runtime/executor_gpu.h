// The executor's Vulkan side: device copies of constants, states and each method's arena, and
// the recording of GPU nodes. Data moves between host and device only where a node on the other
// side reads it (per storage root, tracked as host-fresh / device-fresh), so a method that runs
// wholly on the GPU makes no host round trip until its outputs are read back.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/attrs.h"
#include "runtime/program.h"

namespace vrun {

struct GpuOptions {
  int device = -1;  // -1: VRUN_DEVICE or the best device
  bool validation = false;
};

class GpuExecutor {
 public:
  // nullptr with a reason in *why when Vulkan is unavailable (no loader/device) or not built.
  static std::unique_ptr<GpuExecutor> create(const Program& program, const GpuOptions& options, bool require_gpu_device,
                                             std::string* why);
  virtual ~GpuExecutor() = default;
  virtual std::string device_name() const = 0;
  // Whether node n of method m runs on the GPU.
  virtual bool runs_on_gpu(const MethodDef& m, size_t n) const = 0;

  // One method call: begin, then for each node either gpu_node or (sync_to_host of its inputs,
  // the CPU kernel, host_written of its outputs), then finish.
  struct Storage {
    uint8_t* host = nullptr;  // base of the root's host storage
    int64_t bytes = 0;        // bytes currently in use
  };
  // sym: the call's symbol values (with the method and the residency of the states, they decide
  // everything the GPU records for the call, which lets a repeated call replay its recording).
  virtual Status begin(const MethodDef& m, uint8_t* host_arena, const std::vector<int64_t>& sym) = 0;
  // roots: the storage root value id of each input/output view, and the value's host storage.
  virtual Status gpu_node(const MethodDef& m, size_t n, const std::vector<TensorView>& in, const std::vector<int>& in_roots,
                          const std::vector<TensorView>& out, const std::vector<int>& out_roots, const Attrs& attrs,
                          const std::vector<Storage>& storage) = 0;
  virtual Status sync_to_host(const MethodDef& m, const std::vector<int>& roots, const std::vector<Storage>& storage) = 0;
  virtual void host_written(const MethodDef& m, const std::vector<int>& roots) = 0;
  virtual Status finish(const MethodDef& m, const std::vector<int>& output_roots, const std::vector<Storage>& storage) = 0;
  // After begin: whether this call replays a capture whose node walk is known, so the executor may
  // skip the walk (a decode step's few hundred nodes cost the host about 0.1 ms) and call
  // replay_walk in its place, then finish as usual.
  virtual bool walk_skippable() const = 0;
  // What the captured walk did that outlives it: the same inputs and states go up, and every
  // value's residency becomes what the walk left it.
  virtual Status replay_walk(const MethodDef& m, const std::vector<Storage>& storage) = 0;
  // After the host zeroed the states.
  virtual void states_reset() = 0;
  // Errors the Vulkan validation layer reported (0 when it is off).
  virtual uint64_t validation_errors() const = 0;
  // Calls served by replaying a captured recording.
  virtual uint64_t replayed_calls() const = 0;
};

}  // namespace vrun
