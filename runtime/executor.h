// Runs a program's methods. State buffers (KV caches, recurrent state) belong to the executor and
// persist across calls; each method has one scratch arena sized by the planner. Symbols are
// bound from the inputs' shapes and from values the caller passes (e.g. the cache position).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/program.h"
#include "runtime/base/thread_pool.h"
#include "runtime/base/zeroed_memory.h"

namespace vrun {

// cpu: the host backend only; vulkan: that device backend (an error when it cannot start); auto:
// the first registered device backend that starts on a real device, else the host alone.
enum class BackendKind { kCpu, kVulkan, kAuto };
const char* backend_kind_name(BackendKind k);
Result<BackendKind> parse_backend_kind(const std::string& s);
// Whether an executor made with `kind` (and device index `device`, -1: the default one) runs on a
// GPU: vulkan asked for, or auto where the device it would take is not a CPU implementation.
// Programs whose best form differs by where they run (Whisper's f32-widened small models on the
// CPU) are built from this.
bool runs_on_gpu(BackendKind kind, int device = -1);

struct ExecutorOptions {
  // cpu: every node on the CPU. vulkan: nodes the GPU kernels cover on the Vulkan device (any,
  // CPU implementations included), the rest on the CPU. auto: vulkan when a real GPU is there.
  BackendKind backend = BackendKind::kAuto;
  int threads = 0;   // 0: VRUN_THREADS or one per hardware thread
  int device = -1;   // Vulkan device index; -1: VRUN_DEVICE or the best one
  bool validation = false;  // Vulkan validation layer (tests)
};

class Executor {
 public:
  static Result<std::unique_ptr<Executor>> create(std::shared_ptr<const Program> program,
                                                  const ExecutorOptions& options = {});
  ~Executor();

  // Runs `method`. inputs follow the method's input order and may be strided views. symbols
  // gives values for symbols no input shape binds. The returned views stay valid until the next
  // run of the same method, or of a method sharing its arena (kSharedArenasMeta): they point
  // into its arena, an input, a constant or a state. fetch: a bit per output (bit i, output i;
  // outputs past the 64th always count): the outputs left out are not brought back from a device
  // and come back as absent views (a language model's logits when only its greedy token is read).
  Result<std::vector<TensorView>> run(const std::string& method, const std::vector<TensorView>& inputs,
                                      const std::map<std::string, int64_t>& symbols = {}, uint64_t fetch = kFetchAll);
  static constexpr uint64_t kFetchAll = ~uint64_t{0};

  // Zeroes every state buffer (a new conversation, a new audio file).
  void reset_state();
  // A state buffer by name (invalid view when absent).
  TensorView state(const std::string& name) const;
  const Program& program() const { return *program_; }
  // The backend each node of a method runs on ("cpu", "vulkan").
  std::vector<std::string> node_backends(const std::string& method) const;
  ThreadPool& pool() { return *pool_; }
  // "cpu", or the Vulkan device in use; and why the GPU is not used when it is not.
  std::string device_description() const;
  bool uses_gpu() const { return !devices_.empty(); }
  uint64_t gpu_validation_errors() const;
  // GPU method calls served by replaying an earlier call's recording (0 without a GPU).
  uint64_t gpu_replayed_calls() const;
  // The largest tensor a node on the GPU may read or write, in bytes (0: no limit but memory).
  uint64_t max_tensor_bytes() const;
  // The scratch arena a method's calls need (planned for its symbols' bounds; 0 bytes for none
  // or an unknown method), and whether it is allocated yet (by a first call).
  struct ArenaInfo {
    int64_t bytes = 0;
    bool allocated = false;
  };
  ArenaInfo arena(const std::string& method) const;
  // Memory free for more allocations where the methods run: the GPU's (its driver's budget less
  // its use) when there is one, else the host's available memory; 0 when unknown.
  uint64_t free_memory_bytes() const;

 private:
  struct MethodPlan;
  Executor() = default;
  Status run_node(MethodPlan& plan, size_t index, const std::vector<int64_t>& symbols);
  Status start_backends(const ExecutorOptions& options);
  Status copy_pieced_constants();
  Status share_arenas();
  void print_op_stats(const MethodPlan& plan) const;
  Result<std::vector<TensorView>> run_plan(MethodPlan& plan, const std::vector<TensorView>& inputs,
                                           const std::map<std::string, int64_t>& given, uint64_t fetch);

  std::shared_ptr<const Program> program_;
  std::unique_ptr<ThreadPool> pool_;
  // Each constant's bytes on the host: its data; for a pieced one, a copy where a node run here
  // reads it, else addresses only (its bytes are on the GPU; any host access faults).
  std::vector<const uint8_t*> const_host_;
  std::vector<ZeroedMemory> const_storage_;
  std::vector<ZeroedMemory> state_storage_;
  std::vector<TensorView> states_;
  std::vector<std::unique_ptr<MethodPlan>> plans_;
  // Where nodes run: the host backend (every op) and the device backends this executor started.
  std::unique_ptr<Backend> host_;
  std::vector<std::unique_ptr<Backend>> devices_;
  std::string gpu_why_not_;
};

}  // namespace vrun
