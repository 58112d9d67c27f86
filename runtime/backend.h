// The interface between the executor and the places where nodes run.
//
// The executor keeps the host copy of every value: inputs, outputs, constants, states and each
// method's arena live in host memory. The host backend (the CPU) computes on those copies in place
// and has a kernel for every op, so no node is ever left without a place to run. A device backend
// (Vulkan) keeps copies of its own, tracks which copy of each storage root is current, and moves
// data only where a node on the other side reads it. A method call is:
//
//   for each device backend: begin
//   for each node placed on backend B:
//       every other device backend: sync_to_host(the node's input roots)
//       B: run(the node)
//       every other device backend: host_written(the node's output roots)   (when B is the host)
//   for each device backend: finish(the method's output roots)
//
// A device backend may record a call and replay the recording when the same call comes again
// (walk_skippable / replay_walk); that stays its own business. Backends register themselves with
// register_backend (each in its own folder under kernels/), so a new backend is a new folder.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/ops/attrs.h"
#include "runtime/base/status.h"
#include "runtime/base/tensor.h"
#include "runtime/base/thread_pool.h"
#include "runtime/program.h"

namespace vrun {

// The host storage of one storage root during a call.
struct ValueStorage {
  uint8_t* host = nullptr;  // base of the root's host storage
  int64_t bytes = 0;        // bytes currently in use
};

// One node to run: views of its inputs and outputs (in host memory; outputs dense and shaped),
// the storage root of each (device backends), and its resolved attributes.
struct NodeCall {
  const MethodDef* method = nullptr;  // null for an op run outside any program (run_host_op)
  size_t node = 0;
  OpKind op{};
  std::span<const TensorView> in;
  std::span<TensorView> out;
  std::span<const int> in_roots, out_roots;  // empty for the host backend
  const Attrs* attrs = nullptr;
  std::span<const ValueStorage> storage;     // per value id of the method (device backends)
  ThreadPool* pool = nullptr;                // host backend: threads for this call (null: its own)
};

struct BackendOptions {
  int device = -1;           // device index; -1: the backend's own choice (e.g. VRUN_DEVICE)
  bool validation = false;   // the device API's validation layer (tests)
  bool require_gpu = false;  // refuse a device that is a CPU implementation (backend "auto")
  ThreadPool* pool = nullptr;  // the executor's thread pool (the host backend computes on it)
  // Per op kind: true where the op must run on the host backend (VRUN_CPU_OPS): a device backend
  // takes no such node.
  std::vector<bool> host_only_ops;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The name `vrun info` and Executor::node_backends use for nodes placed here ("cpu", "vulkan").
  virtual const char* kind() const = 0;
  virtual std::string device_name() const = 0;
  // Whether node n of method m runs here (decided when the backend was made for the program).
  virtual bool supports(const MethodDef& m, size_t n) const = 0;
  virtual Status run(const NodeCall& call) = 0;

  // The method-call protocol above; the host backend needs none of it. host_arena holds
  // arena_bytes (at least the method's arena_size); methods that share an arena
  // (kSharedArenasMeta) are begun with the same host_arena, and a device keeps one copy for them.
  // fetch: the outputs the call brings back (Executor::run's bits); finish gets only their roots.
  virtual Status begin(const MethodDef&, uint8_t* /*host_arena*/, int64_t /*arena_bytes*/, std::span<const int64_t> /*symbols*/,
                       uint64_t /*fetch*/) {
    return Status::ok();
  }
  virtual Status sync_to_host(const MethodDef&, std::span<const int> /*roots*/, std::span<const ValueStorage>) {
    return Status::ok();
  }
  virtual void host_written(const MethodDef&, std::span<const int> /*roots*/) {}
  virtual Status finish(const MethodDef&, std::span<const int> /*output_roots*/, std::span<const ValueStorage>) {
    return Status::ok();
  }
  // After begin: whether this call replays a recording of an earlier identical call whose node
  // walk is known, so the executor may skip the walk and call replay_walk in its place.
  virtual bool walk_skippable() const { return false; }
  virtual Status replay_walk(const MethodDef&, std::span<const ValueStorage>) { return Status::ok(); }
  // After the executor zeroed the states (a new conversation or file).
  virtual void states_reset() {}
  // Errors a validation layer reported (0 when it is off), and calls served by replaying.
  virtual uint64_t validation_errors() const { return 0; }
  virtual uint64_t replayed_calls() const { return 0; }
  // The largest tensor one node may read or write here, in bytes (0: no limit but memory).
  virtual uint64_t max_tensor_bytes() const { return 0; }
  // Device memory free for more allocations; 0 when unknown (or a host backend).
  virtual uint64_t free_memory_bytes() const { return 0; }
};

// ---- the registry of backends
// program: what the backend is made for (null: single ops only, run_host_op).
using BackendMaker = std::function<Result<std::unique_ptr<Backend>>(const Program* program, const BackendOptions&)>;
// Lines that describe what the backend finds on this machine (`vrun info`).
using BackendDescriber = std::function<std::vector<std::string>()>;
// How many devices the backend finds on this machine (the indices BackendOptions::device takes);
// null for the host backend.
using BackendDeviceCounter = std::function<int()>;
// Whether the device a backend made with BackendOptions::device = `device` and require_gpu
// would take is a real GPU (not a CPU implementation); null for the host backend.
using BackendGpuCheck = std::function<bool(int device)>;

struct BackendEntry {
  std::string kind;
  bool host = false;  // has a kernel for every op and computes on host memory
  BackendMaker make;
  BackendDescriber describe;
  BackendDeviceCounter device_count;
  BackendGpuCheck is_gpu;
};

// Called by each backend's own code when the program starts (a static registrar in its folder).
void register_backend(BackendEntry entry);
// The registered backends, the host backend first.
const std::vector<BackendEntry>& registered_backends();
const BackendEntry* find_backend(const std::string& kind);

// One op on the host backend, outside any program: products an importer computes once when it
// builds a program (the same kernels a program's nodes run).
Status run_host_op(OpKind op, std::span<const TensorView> in, std::span<TensorView> out, const Attrs& attrs,
                   ThreadPool* pool);

}  // namespace vrun
