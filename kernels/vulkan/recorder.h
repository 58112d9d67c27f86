// Recording: one command buffer per method call. Ops, copies and transfers are appended with
// the barriers they need (a barrier is placed only when a command touches memory that an earlier,
// unfenced command wrote); submit_and_wait() runs everything with no host round trip in between.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ops/attrs.h"
#include "kernels/vulkan/memory.h"
#include "kernels/vulkan/pipelines.h"
#include "kernels/vulkan/profile.h"
#include "runtime/base/status.h"
#include "runtime/base/tensor.h"

namespace vrun::vulkan {

class Context;

// A strided view over device memory. `offset` counts bytes from buffer.offset to element 0;
// strides count elements (block-quantised tensors are dense). An absent optional input has no
// buffer.
struct DeviceView {
  BufferRef buffer;
  uint64_t offset = 0;
  DType dtype = DType::f32;
  Shape shape;
  Strides strides;

  static DeviceView dense(const BufferRef& buffer, DType dtype, const Shape& shape, uint64_t offset = 0);
  bool present() const { return buffer.present(); }
  int64_t numel() const { return shape.numel(); }
  bool is_contiguous() const;
  // Bytes a dense tensor of this shape and dtype takes.
  uint64_t dense_bytes() const { return static_cast<uint64_t>(dtype_bytes(dtype, shape.numel())); }
};

// One descriptor binding of a dispatch: where the tensor lives and whether the kernel writes it.
struct Binding {
  const DeviceView* view = nullptr;
  bool written = false;
};

class Recorder {
 public:
  static Result<std::unique_ptr<Recorder>> create(Context& ctx);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Appends op with dense `outputs` shaped as infer_shapes says (slice_update's output may alias
  // its state input). Errors: kUnsupported when supports() would say no, or a layout the kernel
  // cannot take; nothing is recorded then.
  Status record(OpKind op, const std::vector<DeviceView>& inputs, const std::vector<DeviceView>& outputs,
                const Attrs& attrs);
  // dst = src elementwise for views of one shape (any strides, dtype conversion between float types).
  Status record_copy(const DeviceView& src, const DeviceView& dst);
  // Raw byte copy between buffers.
  Status record_buffer_copy(const BufferRef& src, uint64_t src_offset, const BufferRef& dst, uint64_t dst_offset,
                            uint64_t bytes);
  // Sets bytes [offset, offset + bytes) of dst to zero in order with the recorded work (bytes a
  // multiple of 4). A replayed call's capture holds the command already: nothing to do then.
  Status record_zero(const BufferRef& dst, uint64_t offset, uint64_t bytes);
  // Host data is copied into staging now (the caller may reuse `src` at once); the device copy
  // runs in order with the recorded work.
  Status record_upload(const void* src, const BufferRef& dst, uint64_t dst_offset, uint64_t bytes);
  // The device data lands in `dst` when submit_and_wait() returns.
  Status record_download(const BufferRef& src, uint64_t src_offset, void* dst, uint64_t bytes);

  // Submits, waits, completes downloads, and resets for the next method call. Long recordings
  // are already submitted in pieces while they are recorded (the GPU starts on the first
  // dispatches while the host still records the rest); this submits the last piece and waits.
  Status submit_and_wait();
  // Whether long recordings are submitted in pieces as they grow (default on). Benchmarks turn it
  // off to time whole recordings from their submission.
  void set_submit_in_pieces(bool on) { pieces_ = on; }
  // Dispatches recorded since the last submit (a replayed call counts its capture's).
  int dispatch_count() const;
  int barrier_count() const { return barriers_; }

  // Replaying whole method calls. A capture keeps the command buffer of one call together with
  // the scratch tensors and staging buffers it used; replaying it copies the new call's inputs
  // into that staging and submits the same command buffer again, so a call that repeats (same
  // method, shapes and state residency: the executor decides) costs no recording at all.
  struct Capture;
  // The call starting now (until submit_and_wait) is recorded into kept command buffers, one per
  // piece, submitted as they fill as a normal recording's are. False (and a normal recording) where replay cannot work: no push descriptors (sets
  // are recycled every call), the GPU profiler on, or a recording already under way.
  bool begin_capture();
  // Gives up the capture in progress; the call goes on as a normal recording.
  void cancel_capture();
  // After the call's submit_and_wait: the finished capture, or null when it was given up.
  std::shared_ptr<Capture> end_capture();
  // The call starting now replays `cap`: record() only counts, record_upload() fills the
  // capture's staging, record_download() is served from it after the wait. A call that does not
  // match its capture (another upload, another count of ops) is a kInternal error.
  void begin_replay(std::shared_ptr<Capture> cap);
  // The caller skips the ops of the replayed call (it knows they are the capture's): they count
  // as recorded. Uploads and downloads still go through record_upload / record_download.
  void replay_all_ops();
  // Leaves capture / replay after a call that failed part way.
  void reset_call_mode();
  bool capturing() const { return capture_ != nullptr; }
  bool replaying() const { return replay_ != nullptr; }

  // For the per-family op files.
  Context& context() { return ctx_; }
  // A dense device tensor for the op being recorded. Its memory lives until the call's
  // submit_and_wait() completes, but once the op's record() returns, a later op of the same call
  // may be handed the same memory: the hazard tracking orders its writes after this op's reads.
  // So a call holds about the largest op's scratch, not the sum over its ops.
  Result<DeviceView> scratch(DType dtype, const Shape& shape);
  // n u32 counters, zero when the dispatch they are bound to starts, for a kernel whose
  // workgroups count their arrivals (the last to arrive merges the others' partial results, which
  // saves a second pass and its barrier); the kernel must leave them at zero. They come from one
  // buffer zeroed once per recorder; bind them as written so that a later user of the same
  // counters waits for the earlier one.
  Result<DeviceView> counters(int64_t n);
  static constexpr int64_t kCounterWords = 1 << 18;  // the most counters() hands out at once
  // v itself when its innermost `inner_dims` dims are dense and the rest collapse to one stride,
  // else a dense scratch copy (recorded).
  Result<DeviceView> rows_view(const DeviceView& v, int inner_dims);
  // A dense version of v (v itself when it already is).
  Result<DeviceView> dense_view(const DeviceView& v);
  // Records a dispatch. `offsets` receives, per binding, the view's element offset within the
  // bound range (bytes for block-quantised dtypes), which the kernel adds to its indices.
  Status dispatch(std::string_view kernel, std::span<const int32_t> spec, const std::vector<Binding>& bindings,
                  const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz,
                  std::vector<uint32_t>* offsets = nullptr);
  Status dispatch(std::string_view kernel, std::initializer_list<int32_t> spec, const std::vector<Binding>& bindings,
                  const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz,
                  std::vector<uint32_t>* offsets = nullptr) {
    return dispatch(kernel, std::span<const int32_t>(spec.begin(), spec.size()), bindings, push, push_bytes, gx, gy, gz,
                    offsets);
  }
  Status dispatch(std::string_view kernel, const std::vector<int32_t>& spec, const std::vector<Binding>& bindings,
                  const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz,
                  std::vector<uint32_t>* offsets = nullptr) {
    return dispatch(kernel, std::span<const int32_t>(spec), bindings, push, push_bytes, gx, gy, gz, offsets);
  }
  // Offsets (as dispatch() would compute them) without recording: kernels need them in their push
  // constants before dispatching.
  Result<std::vector<uint32_t>> binding_offsets(const std::vector<Binding>& bindings) const;
  // Splits a 1-D grid of `groups` workgroups into x, y within the device's limits.
  void grid_1d(uint64_t groups, uint32_t* gx, uint32_t* gy) const;

 private:
  explicit Recorder(Context& ctx) : ctx_(ctx) {}
  // record() and dispatch() time these under VRUN_VK_STATS.
  Status record_op(OpKind op, const std::vector<DeviceView>& inputs, const std::vector<DeviceView>& outputs,
                   const Attrs& attrs);
  Status dispatch_impl(std::string_view kernel, std::span<const int32_t> spec, const std::vector<Binding>& bindings,
                       const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz,
                       std::vector<uint32_t>* offsets);
  Status init();
  // Steady-clock seconds, for the VRUN_VK_STATS timings.
  static double now_s();
  Status submit_replay();
  // Submits one command buffer signalling fence_ and waits for the fence; after a failure the
  // queue is drained, so nothing in flight still uses the call's buffers. The caller resets fence_.
  VkResult submit_with_fence(const VkCommandBuffer* cmds, uint32_t count = 1);
  // Staging memory for an upload: small ones (token ids, positions, frame indices) where a copy
  // is a device copy (MemoryKind::kUpload), bulk ones (features, prompts) in host memory.
  static MemoryKind upload_kind(uint64_t bytes) { return bytes <= kSmallUploadBytes ? MemoryKind::kUpload : MemoryKind::kHost; }
  // Copies the downloads' staging into their destinations when the call succeeded; forgets them.
  void finish_downloads(bool ok);
  Status begin_if_needed();
  // Ends the current command buffer and submits it without waiting; recording goes on in the next.
  Status flush();
  // Allocates one more command buffer from pool_ into cmds_.
  Status add_command_buffer();
  // One primary command buffer from `pool`.
  Status allocate_command_buffer(VkCommandPool pool, VkCommandBuffer* cb);
  struct Range {
    VkBuffer buffer;
    uint64_t begin, end;
  };
  void hazard(std::span<const Range> reads, std::span<const Range> writes);
  struct Bound {
    VkBuffer buffer;
    uint64_t base, range;
    uint32_t elem_offset;
  };
  Result<Bound> bind_range(const DeviceView& v) const;
  Result<VkDescriptorSet> new_set();

  Context& ctx_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;  // the one being recorded: cmds_[cmd_index_]
  std::vector<VkCommandBuffer> cmds_;
  size_t cmd_index_ = 0;
  int since_flush_ = 0;  // dispatches in cmd_
  int flushes_ = 0;      // pieces submitted since the last wait
  bool pieces_ = true;
  VkFence fence_ = VK_NULL_HANDLE;
  bool recording_ = false;
  int dispatches_ = 0;
  std::vector<VkDescriptorPool> desc_pools_;
  size_t desc_pool_used_ = 0;  // sets taken from desc_pools_.back()
  std::vector<Range> pending_writes_, pending_reads_;
  int barriers_ = 0;
  // Commands held back, in order, from the first dispatch whose pipeline is still being created
  // (PipelineCache::start) until the command buffer is submitted: the recording goes on meanwhile,
  // so that the new pipelines of a call compile side by side, and no piece is submitted early.
  // Not while profiling (timestamps go in as commands are recorded).
  std::vector<std::function<void(VkCommandBuffer)>> held_;
  std::vector<std::shared_ptr<PipelineCache::Pending>> held_pipelines_;
  bool holding() const { return !held_pipelines_.empty(); }
  // Writes f's commands into the command buffer now, or holds them back.
  template <class F>
  void emit(F&& f) {
    if (holding()) held_.emplace_back(std::forward<F>(f));
    else f(cmd_);
  }
  // Waits for the pipelines the held commands need and writes the commands; on an error the held
  // commands are dropped and it is returned.
  Status release_held();
  std::vector<Buffer> scratch_;  // this call's scratch (a capture keeps its own in Capture::keep)
  // Scratch memory of this call that finished ops gave back (reusable by later ops of the call),
  // and what the op being recorded has taken.
  std::vector<BufferRef> scratch_free_, scratch_op_;
  struct Download {
    Buffer staging;  // owned for a normal call; empty when a capture's shared staging serves it
    const void* src;  // mapped staging
    void* dst;
    uint64_t bytes;
  };
  std::vector<Download> downloads_;
  // Staging of captured calls, shared between captures by (device buffer, offset, bytes, n-th
  // use in the call): calls run one at a time, so captures of one method reuse the same few.
  struct StagingKey {
    VkBuffer buffer;
    uint64_t offset, bytes;
    int nth;
    bool down;
    bool operator<(const StagingKey& o) const;
  };
  std::map<StagingKey, std::shared_ptr<Buffer>> shared_staging_;
  Result<std::shared_ptr<Buffer>> capture_staging(VkBuffer buffer, uint64_t offset, uint64_t bytes, bool down);
  VkCommandPool cap_pool_ = VK_NULL_HANDLE;  // command buffers of captures (never reset wholesale)
  std::shared_ptr<Capture> capture_, finished_capture_, replay_;
  std::vector<VkCommandBuffer> cancelled_cmds_;  // a given-up capture's pieces, freed after its wait
  size_t replay_ups_ = 0, replay_downs_ = 0;
  int replay_ops_ = 0, capture_ops_ = 0;
  bool replay_allowed_ = true;  // VRUN_VK_REPLAY=0 turns capture off
  double spin_s_ = 2e-3;         // VRUN_VK_SPIN_US: fence polling before a blocking wait
  Buffer dummy_;
  Buffer counters_;
  uint64_t counters_next_ = 0;
  std::vector<TensorDesc> record_descs_;
  std::vector<const TensorDesc*> record_ptrs_;
  // VRUN_VK_STATS=1: totals printed when the recorder goes away.
  struct Stats {
    bool on = false;
    bool per_call = false;  // VRUN_VK_STATS=2: a line per recorded call too
    uint64_t calls = 0, dispatches = 0, barriers = 0, submits = 0, replays = 0;
    double record_s = 0, wait_s = 0;
    double replay_host_s = 0;  // replayed calls: host time from the call's start to its submission
    double replay_begin = 0;
    int last_dispatches = 0, last_barriers = 0;
    double last_record_s = 0, last_wait_s = 0;
    double in_record_s = 0, in_dispatch_s = 0;  // host time inside record() and dispatch()
    double call_record0 = 0, call_dispatch0 = 0, last_in_record_s = 0, last_in_dispatch_s = 0;
    double call_scratch_s = 0;      // this call: host time allocating scratch tensors
    int call_scratch_new = 0, call_scratch_reused = 0;  // scratch tensors in new / given-back memory
    uint64_t call_scratch_bytes = 0;                     // bytes of the new ones
    double call_first_submit = -1;  // this call: seconds from its start to its first piece's submission
  } stats_;
  double record_start_ = 0;  // steady-clock seconds when the current recording began
  std::unique_ptr<GpuProfile> profile_;  // VRUN_VK_PROFILE=1
};

// A captured call: its command buffer, the scratch it uses and the staging of its transfers.
struct Recorder::Capture {
  VkDevice device = VK_NULL_HANDLE;
  VkCommandPool pool = VK_NULL_HANDLE;
  // The call's pieces in order: each was submitted as it was recorded (so the GPU started
  // early), and a replay submits them all at once.
  std::vector<VkCommandBuffer> cmds;
  std::vector<Buffer> keep;  // scratch tensors the commands use
  uint64_t keep_bytes = 0;
  struct Transfer {
    std::shared_ptr<Buffer> staging;
    VkBuffer buffer;  // the device side
    uint64_t offset, bytes;
  };
  std::vector<Transfer> uploads, downloads;
  int ops = 0, dispatches = 0, barriers = 0;
  ~Capture() {
    if (!cmds.empty()) vkFreeCommandBuffers(device, pool, static_cast<uint32_t>(cmds.size()), cmds.data());
  }
};

// The largest piece upload() and download() stage at once, and the pieces a load stages its
// constants in (a bounded amount at a time: VulkanExecutor::init).
constexpr uint64_t kStagingChunk = 32ull << 20;

// Synchronous transfers for loading constants (e.g. from an mmapped program) and tests; large
// copies go through a bounded staging buffer in chunks, so a multi-GB segment needs no
// multi-GB staging.
Status upload(Context& ctx, const BufferRef& dst, uint64_t dst_offset, const void* src, uint64_t bytes);
Status download(Context& ctx, const BufferRef& src, uint64_t src_offset, void* dst, uint64_t bytes);

}  // namespace vrun::vulkan
