#include "runtime/base/knobs.h"
#include "kernels/vulkan/recorder.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/vulkan/context.h"
#include "kernels/vulkan/pipelines.h"

namespace vrun::vulkan {

namespace {
constexpr uint32_t kSetsPerPool = 256;

// Dispatches recorded before a piece is submitted: small at first so the GPU starts early,
// then larger so submission costs stay small against the work. VRUN_VK_PIECES=a,b,c,... sets the
// sizes for comparisons (the last repeats).
const std::vector<int>& piece_sizes() {
  static const std::vector<int> sizes = [] {
    std::vector<int> v;
    if (const char* e = knob_value(Knob::VRUN_VK_PIECES))
      for (const char* p = e; *p;) {
        char* end = nullptr;
        const long n = std::strtol(p, &end, 10);
        if (end == p) break;
        if (n > 0) v.push_back(static_cast<int>(std::min<long>(n, 1 << 20)));
        p = *end == ',' ? end + 1 : end;
      }
    if (v.empty()) v = {4, 8, 16, 32, 64};
    return v;
  }();
  return sizes;
}
int flush_threshold(int flushes) {
  const auto& v = piece_sizes();
  return v[std::min<size_t>(static_cast<size_t>(flushes), v.size() - 1)];
}

// Bytes the view's elements span from element 0 (0 for an empty view).
uint64_t span_bytes(const DeviceView& v) {
  if (v.numel() == 0) return 0;
  if (is_quantized(v.dtype)) return static_cast<uint64_t>(dtype_bytes(v.dtype, v.numel()));
  int64_t last = 0;
  for (int i = 0; i < v.shape.rank; ++i) last += (v.shape[i] - 1) * v.strides[i];
  return static_cast<uint64_t>(last + 1) * static_cast<uint64_t>(dtype_elem_size(v.dtype));
}
}  // namespace

double Recorder::now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

DeviceView DeviceView::dense(const BufferRef& buffer, DType dtype, const Shape& shape, uint64_t offset) {
  DeviceView v;
  v.buffer = buffer;
  v.offset = offset;
  v.dtype = dtype;
  v.shape = shape;
  v.strides = contiguous_strides(shape);
  return v;
}

bool DeviceView::is_contiguous() const { return vrun::is_contiguous(shape, strides); }

Result<std::unique_ptr<Recorder>> Recorder::create(Context& ctx) {
  std::unique_ptr<Recorder> r(new Recorder(ctx));
  VRUN_RETURN_IF_ERROR(r->init());
  return r;
}

Status Recorder::init() {
  VkDevice dev = ctx_.device();
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = ctx_.queue_family();
  VRUN_VK_CHECK(vkCreateCommandPool(dev, &pi, nullptr, &pool_), "creating a command pool");
  VRUN_RETURN_IF_ERROR(add_command_buffer());
  cmd_ = cmds_[0];
  VRUN_VK_CHECK(vkCreateCommandPool(dev, &pi, nullptr, &cap_pool_), "creating a command pool");
  const char* rp = knob_value(Knob::VRUN_VK_REPLAY);
  replay_allowed_ = !(rp && std::string(rp) == "0");
  // A waiting host polls the fence this long before it sleeps in the driver: waking from that
  // sleep costs tens of microseconds, a real share of a decode step's 1-2 ms. Not on a CPU
  // implementation, whose work would lose the polling core.
  const char* spin = knob_value(Knob::VRUN_VK_SPIN_US);
  spin_s_ = spin && *spin ? std::max(0.0, std::atof(spin)) * 1e-6 : ctx_.info().type == "cpu" ? 0.0 : 2e-3;
  stats_.on = vk_stats_level() > 0;
  stats_.per_call = vk_stats_level() == 2;
  profile_ = GpuProfile::create(ctx_);
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VRUN_VK_CHECK(vkCreateFence(dev, &fi, nullptr, &fence_), "creating a fence");
  // Unused bindings of a kernel still need a valid buffer.
  VRUN_ASSIGN_OR_RETURN(dummy_, ctx_.allocator().allocate(256, MemoryKind::kDevice, "unused binding"));
  return Status::ok();
}

Recorder::~Recorder() {
  VkDevice dev = ctx_.device();
  if (recording_) {
    vkEndCommandBuffer(cmd_);
  }
  // Pieces of an abandoned recording may still run: their buffers must outlive them.
  if (flushes_ > 0) vkQueueWaitIdle(ctx_.queue());
  if (stats_.on && stats_.calls > 0)
    std::fprintf(stderr,
                 "vulkan stats: %llu method calls (%llu replayed, %.3f ms on the host before each replay's submission), "
                 "%.1f dispatches, %.1f barriers and %.1f submits per call; "
                 "host recording %.3f ms (%.3f in record(), %.3f of it in dispatch()), waiting %.3f ms per call; "
                 "last call: %d dispatches, %d barriers, recording %.3f ms (%.3f in record(), %.3f in dispatch()), waiting %.3f ms\n",
                 static_cast<unsigned long long>(stats_.calls), static_cast<unsigned long long>(stats_.replays),
                 stats_.replays ? 1e3 * stats_.replay_host_s / static_cast<double>(stats_.replays) : 0.0,
                 double(stats_.dispatches) / stats_.calls,
                 double(stats_.barriers) / stats_.calls, double(stats_.submits) / stats_.calls,
                 1e3 * stats_.record_s / stats_.calls, 1e3 * stats_.in_record_s / stats_.calls,
                 1e3 * stats_.in_dispatch_s / stats_.calls, 1e3 * stats_.wait_s / stats_.calls, stats_.last_dispatches,
                 stats_.last_barriers, 1e3 * stats_.last_record_s, 1e3 * stats_.last_in_record_s, 1e3 * stats_.last_in_dispatch_s,
                 1e3 * stats_.last_wait_s);
  for (auto p : desc_pools_) vkDestroyDescriptorPool(dev, p, nullptr);
  if (fence_) vkDestroyFence(dev, fence_, nullptr);
  if (pool_) vkDestroyCommandPool(dev, pool_, nullptr);
  // Captures the executor still holds free their command buffers into cap_pool_ when they go:
  // the executor drops them before the recorder (it owns both, captures declared later).
  capture_.reset();
  finished_capture_.reset();
  replay_.reset();
  if (!cancelled_cmds_.empty()) vkFreeCommandBuffers(dev, cap_pool_, static_cast<uint32_t>(cancelled_cmds_.size()), cancelled_cmds_.data());
  if (cap_pool_) vkDestroyCommandPool(dev, cap_pool_, nullptr);
}

Status Recorder::begin_if_needed() {
  if (recording_) return Status::ok();
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  if (capture_) {
    VkCommandBuffer cb;
    VRUN_RETURN_IF_ERROR(allocate_command_buffer(cap_pool_, &cb));
    capture_->device = ctx_.device();
    capture_->pool = cap_pool_;
    capture_->cmds.push_back(cb);
    cmd_ = cb;
    bi.flags = 0;  // submitted again on every replay
  }
  VRUN_VK_CHECK(vkBeginCommandBuffer(cmd_, &bi), "beginning a command buffer");
  if (profile_) {
    if (flushes_ == 0) profile_->begin_call(cmd_);
    else profile_->begin_piece(cmd_);
  }
  if (flushes_ == 0 && stats_.on) {
    record_start_ = now_s();
    stats_.call_record0 = stats_.in_record_s;
    stats_.call_dispatch0 = stats_.in_dispatch_s;
    stats_.call_scratch_s = 0;
    stats_.call_scratch_new = stats_.call_scratch_reused = 0;
    stats_.call_scratch_bytes = 0;
    stats_.call_first_submit = -1;
  }
  recording_ = true;
  return Status::ok();
}

Status Recorder::allocate_command_buffer(VkCommandPool pool, VkCommandBuffer* cb) {
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VRUN_VK_CHECK(vkAllocateCommandBuffers(ctx_.device(), &ai, cb), "allocating a command buffer");
  return Status::ok();
}

Status Recorder::add_command_buffer() {
  VkCommandBuffer cb;
  VRUN_RETURN_IF_ERROR(allocate_command_buffer(pool_, &cb));
  cmds_.push_back(cb);
  return Status::ok();
}

Status Recorder::flush() {
  if (!recording_) return Status::ok();
  VRUN_RETURN_IF_ERROR(release_held());
  VRUN_VK_CHECK(vkEndCommandBuffer(cmd_), "ending a command buffer");
  recording_ = false;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  VRUN_VK_CHECK(ctx_.queue_submit(si, VK_NULL_HANDLE), "submitting recorded work");
  if (stats_.on && flushes_ == 0) stats_.call_first_submit = now_s() - record_start_;
  flushes_++;
  since_flush_ = 0;
  // Pipeline barriers order commands across submissions of one queue, so the pending
  // read/write ranges carry over to the next piece unchanged. A capture's next piece is a new
  // kept buffer (begin_if_needed).
  if (!capture_) {
    if (++cmd_index_ == cmds_.size()) VRUN_RETURN_IF_ERROR(add_command_buffer());
    cmd_ = cmds_[cmd_index_];
  }
  return begin_if_needed();
}

void Recorder::hazard(std::span<const Range> reads, std::span<const Range> writes) {
  auto overlaps = [](std::span<const Range> a, const std::vector<Range>& b) {
    for (const auto& x : a)
      for (const auto& y : b)
        if (x.buffer == y.buffer && x.begin < y.end && y.begin < x.end) return true;
    return false;
  };
  // read-after-write, write-after-write and write-after-read on overlapping memory; independent
  // commands (q, k and v projections of one layer) stay free to overlap.
  if (overlaps(reads, pending_writes_) || overlaps(writes, pending_writes_) || overlaps(writes, pending_reads_)) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask =
        VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    emit([mb](VkCommandBuffer c) {
      const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
      vkCmdPipelineBarrier(c, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
    });
    pending_writes_.clear();
    pending_reads_.clear();
    barriers_++;
  }
  pending_reads_.insert(pending_reads_.end(), reads.begin(), reads.end());
  pending_writes_.insert(pending_writes_.end(), writes.begin(), writes.end());
}

Result<Recorder::Bound> Recorder::bind_range(const DeviceView& v) const {
  const auto& lim = ctx_.limits();
  const uint64_t align = std::max<uint64_t>(lim.minStorageBufferOffsetAlignment, 4);
  const uint64_t abs = v.buffer.offset + v.offset;
  Bound b;
  b.buffer = v.buffer.buffer;
  b.base = abs / align * align;
  const uint64_t rem = abs - b.base;
  const uint64_t end = v.buffer.offset + v.buffer.size;
  b.range = std::min<uint64_t>(lim.maxStorageBufferRange / 4 * 4, end - b.base);
  b.range = std::max<uint64_t>(b.range / 4 * 4, 4);
  if (rem + span_bytes(v) > b.range)
    return err(ErrorCode::kUnsupported, "vulkan: a ", dtype_name(v.dtype), " tensor ", v.shape.str(), " spans ",
               span_bytes(v), " bytes, more than one storage binding reaches on ", ctx_.info().name, " (",
               lim.maxStorageBufferRange, ")");
  if (is_quantized(v.dtype)) {
    b.elem_offset = static_cast<uint32_t>(rem);
  } else {
    const uint64_t es = static_cast<uint64_t>(dtype_elem_size(v.dtype));
    if (rem % es)
      return err(ErrorCode::kInvalidArgument, "vulkan: a ", dtype_name(v.dtype), " view at byte offset ", abs,
                 " is not aligned to its element size");
    b.elem_offset = static_cast<uint32_t>(rem / es);
  }
  return b;
}

Result<std::vector<uint32_t>> Recorder::binding_offsets(const std::vector<Binding>& bindings) const {
  std::vector<uint32_t> out;
  for (const auto& b : bindings) {
    if (!b.view || !b.view->present()) {
      out.push_back(0);
      continue;
    }
    VRUN_ASSIGN_OR_RETURN(Bound bd, bind_range(*b.view));
    out.push_back(bd.elem_offset);
  }
  return out;
}

Result<VkDescriptorSet> Recorder::new_set() {
  if (desc_pools_.empty() || desc_pool_used_ == kSetsPerPool) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kNumBindings};
    VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pi.maxSets = kSetsPerPool;
    pi.poolSizeCount = 1;
    pi.pPoolSizes = &size;
    VkDescriptorPool p;
    VRUN_VK_CHECK(vkCreateDescriptorPool(ctx_.device(), &pi, nullptr, &p), "creating a descriptor pool");
    desc_pools_.push_back(p);
    desc_pool_used_ = 0;
  }
  VkDescriptorSetLayout layout = ctx_.pipelines().set_layout();
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = desc_pools_.back();
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout;
  VkDescriptorSet set;
  VRUN_VK_CHECK(vkAllocateDescriptorSets(ctx_.device(), &ai, &set), "allocating a descriptor set");
  desc_pool_used_++;
  return set;
}

void Recorder::grid_1d(uint64_t groups, uint32_t* gx, uint32_t* gy) const {
  const uint64_t maxx = ctx_.limits().maxComputeWorkGroupCount[0];
  groups = std::max<uint64_t>(groups, 1);
  *gx = static_cast<uint32_t>(std::min(groups, maxx));
  *gy = static_cast<uint32_t>((groups + *gx - 1) / *gx);
}

Status Recorder::dispatch(std::string_view kernel, std::span<const int32_t> spec, const std::vector<Binding>& bindings,
                          const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz,
                          std::vector<uint32_t>* offsets) {
  if (!stats_.on) return dispatch_impl(kernel, spec, bindings, push, push_bytes, gx, gy, gz, offsets);
  const double t0 = now_s();
  Status s = dispatch_impl(kernel, spec, bindings, push, push_bytes, gx, gy, gz, offsets);
  stats_.in_dispatch_s += now_s() - t0;
  return s;
}

Status Recorder::dispatch_impl(std::string_view kernel, std::span<const int32_t> spec,
                               const std::vector<Binding>& bindings, const void* push, uint32_t push_bytes, uint32_t gx,
                               uint32_t gy, uint32_t gz, std::vector<uint32_t>* offsets) {
  if (bindings.size() > static_cast<size_t>(kNumBindings))
    return err(ErrorCode::kInternal, "vulkan: kernel ", kernel, " given ", bindings.size(), " bindings");
  if (push_bytes > kPushConstantBytes)
    return err(ErrorCode::kInternal, "vulkan: kernel ", kernel, " push constants of ", push_bytes, " bytes");
  // A pipeline the cache lacks is created on a thread of its own while the recording goes on
  // (commands held back from here until the submission); not while profiling.
  PipelineCache::Started pipeline;
  if (profile_) {
    VRUN_ASSIGN_OR_RETURN(pipeline.pipeline, ctx_.pipelines().get(kernel, spec));
  } else {
    VRUN_ASSIGN_OR_RETURN(pipeline, ctx_.pipelines().start(kernel, spec));
  }
  VRUN_RETURN_IF_ERROR(begin_if_needed());
  const PFN_vkCmdPushDescriptorSetKHR push_set = ctx_.push_descriptor_fn();
  VkDescriptorSet set = VK_NULL_HANDLE;
  if (!push_set) {
    VRUN_ASSIGN_OR_RETURN(set, new_set());
  }

  VkDescriptorBufferInfo infos[kNumBindings];
  VkWriteDescriptorSet writes[kNumBindings];
  Range touched[kNumBindings], written[kNumBindings];
  size_t n_touched = 0, n_written = 0;
  const BufferRef dummy = dummy_.ref();
  for (int i = 0; i < kNumBindings; ++i) {
    const Binding* b = i < static_cast<int>(bindings.size()) ? &bindings[i] : nullptr;
    if (b && b->view && b->view->present()) {
      VRUN_ASSIGN_OR_RETURN(Bound bd, bind_range(*b->view));
      infos[i] = {bd.buffer, bd.base, bd.range};
      if (offsets) offsets->push_back(bd.elem_offset);
      const uint64_t begin = b->view->buffer.offset + b->view->offset;
      Range r{bd.buffer, begin, begin + std::max<uint64_t>(span_bytes(*b->view), 1)};
      if (b->written) written[n_written++] = r;
      else touched[n_touched++] = r;
    } else {
      infos[i] = {dummy.buffer, dummy.offset, dummy.size};
      if (offsets && b) offsets->push_back(0);
    }
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  hazard(std::span<const Range>(touched, n_touched), std::span<const Range>(written, n_written));
  if (pipeline.pending) held_pipelines_.push_back(pipeline.pending);
  const VkPipelineLayout layout = ctx_.pipelines().layout();
  const VkDevice device = ctx_.device();
  auto write = [push_set, layout, device, set, gx, gy, gz](VkCommandBuffer c, VkPipeline p, VkDescriptorBufferInfo* infos,
                                                          VkWriteDescriptorSet* writes, const void* push, uint32_t push_bytes) {
    for (int i = 0; i < kNumBindings; ++i) writes[i].pBufferInfo = &infos[i];
    vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    if (push_set) {
      push_set(c, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, kNumBindings, writes);
    } else {
      vkUpdateDescriptorSets(device, kNumBindings, writes, 0, nullptr);
      vkCmdBindDescriptorSets(c, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, nullptr);
    }
    if (push_bytes) vkCmdPushConstants(c, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    vkCmdDispatch(c, gx, gy, gz);
  };
  if (!holding()) {
    write(cmd_, pipeline.pipeline, infos, writes, push, push_bytes);
  } else {
    // Everything the commands read, by value: the pipeline is looked up once it is made.
    struct Held {
      PipelineCache::Started pipeline;
      VkDescriptorBufferInfo infos[kNumBindings];
      VkWriteDescriptorSet writes[kNumBindings];
      uint8_t push[kPushConstantBytes];
      uint32_t push_bytes;
    };
    auto h = std::make_shared<Held>();
    h->pipeline = pipeline;
    std::copy(infos, infos + kNumBindings, h->infos);
    std::copy(writes, writes + kNumBindings, h->writes);
    if (push_bytes) std::memcpy(h->push, push, push_bytes);
    h->push_bytes = push_bytes;
    held_.emplace_back([h, write](VkCommandBuffer c) {
      VkPipeline p = h->pipeline.pipeline;
      if (h->pipeline.pending) p = *h->pipeline.pending->wait();  // made: release_held waited for it
      write(c, p, h->infos, h->writes, h->push, h->push_bytes);
    });
  }
  if (profile_) {
    // Elementwise passes by opcode (copies, adds, ...): one kernel does them all.
    std::string label = kernel == "eltwise" && !spec.empty() ? "eltwise op " + std::to_string(spec[0]) : std::string(kernel);
    if (profile_->by_grid()) label += " x" + std::to_string(uint64_t{gx} * gy * gz);
    profile_->after(cmd_, label);
  }
  dispatches_++;
  if (++since_flush_ >= flush_threshold(flushes_) && pieces_ && !holding()) return flush();
  return Status::ok();
}

Status Recorder::release_held() {
  if (!holding()) return Status::ok();
  Status made = Status::ok();
  for (const auto& p : held_pipelines_) {
    Result<VkPipeline> r = p->wait();
    if (!r.is_ok() && made.is_ok()) made = r.status();
  }
  if (made.is_ok())
    for (auto& f : held_) f(cmd_);
  held_.clear();
  held_pipelines_.clear();
  return made;
}

int Recorder::dispatch_count() const { return replay_ ? replay_->dispatches : dispatches_; }

VkResult Recorder::submit_with_fence(const VkCommandBuffer* cmds, uint32_t count) {
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = count;
  si.pCommandBuffers = cmds;
  VkResult r = ctx_.queue_submit(si, fence_);
  if (r == VK_SUCCESS && spin_s_ > 0) {
    const double until = now_s() + spin_s_;
    do r = vkGetFenceStatus(ctx_.device(), fence_);
    while (r == VK_NOT_READY && now_s() < until);
  }
  if (r == VK_SUCCESS || r == VK_NOT_READY) r = vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX);
  if (r == VK_ERROR_DEVICE_LOST) ctx_.mark_lost();
  if (r != VK_SUCCESS && !ctx_.lost()) vkQueueWaitIdle(ctx_.queue());
  return r;
}

Status Recorder::submit_and_wait() {
  if (replay_) return submit_replay();
  Status result = Status::ok();
  if (recording_) {
    result = release_held();
    // Make device writes visible to the host reads that follow the fence.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    VRUN_VK_CHECK(vkEndCommandBuffer(cmd_), "ending a command buffer");
    recording_ = false;
    const double t0 = stats_.on ? now_s() : 0;
    // The fence covers every earlier submission of the queue too (the flushed pieces).
    const VkResult r = submit_with_fence(&cmd_);
    if (r != VK_SUCCESS && result.is_ok()) result = vk_error(r, "running a recorded method");
    if (stats_.on) {
      const double t1 = now_s();
      stats_.calls++;
      stats_.dispatches += static_cast<uint64_t>(dispatches_);
      stats_.barriers += static_cast<uint64_t>(barriers_);
      stats_.submits += static_cast<uint64_t>(flushes_ + 1);
      stats_.record_s += t0 - record_start_;
      stats_.wait_s += t1 - t0;
      stats_.last_dispatches = dispatches_;
      stats_.last_barriers = barriers_;
      stats_.last_record_s = t0 - record_start_;
      stats_.last_wait_s = t1 - t0;
      stats_.last_in_record_s = stats_.in_record_s - stats_.call_record0;
      stats_.last_in_dispatch_s = stats_.in_dispatch_s - stats_.call_dispatch0;
      if (stats_.per_call)
        std::fprintf(stderr,
                     "vulkan call %llu: %d dispatches, %d barriers, %d pieces (the first submitted at %.3f ms); "
                     "recording %.3f ms (%.3f in record(), %.3f in dispatch(), %.3f allocating scratch), waiting %.3f ms; "
                     "scratch: %d tensors in new memory (%.1f MiB), %d in memory earlier ops gave back\n",
                     static_cast<unsigned long long>(stats_.calls), dispatches_, barriers_, flushes_ + 1,
                     1e3 * (stats_.call_first_submit >= 0 ? stats_.call_first_submit : t0 - record_start_),
                     1e3 * stats_.last_record_s, 1e3 * stats_.last_in_record_s, 1e3 * stats_.last_in_dispatch_s,
                     1e3 * stats_.call_scratch_s, 1e3 * stats_.last_wait_s, stats_.call_scratch_new,
                     stats_.call_scratch_bytes / 1048576.0, stats_.call_scratch_reused);
    }
    if (profile_ && r == VK_SUCCESS) profile_->collect();
    vkResetFences(ctx_.device(), 1, &fence_);
    vkResetCommandPool(ctx_.device(), pool_, 0);
    if (capture_) {
      if (r == VK_SUCCESS && result.is_ok()) {  // not a capture whose held commands were dropped
        capture_->ops = capture_ops_;
        capture_->dispatches = dispatches_;
        capture_->barriers = barriers_;
        finished_capture_ = std::move(capture_);
      } else {
        cancel_capture();
      }
    }
    if (!cancelled_cmds_.empty()) {
      vkFreeCommandBuffers(ctx_.device(), cap_pool_, static_cast<uint32_t>(cancelled_cmds_.size()), cancelled_cmds_.data());
      cancelled_cmds_.clear();
    }
  } else if (flushes_ > 0) {
    vkQueueWaitIdle(ctx_.queue());
    vkResetCommandPool(ctx_.device(), pool_, 0);
  }
  flushes_ = 0;
  since_flush_ = 0;
  cmd_index_ = 0;
  cmd_ = cmds_[0];
  finish_downloads(result.is_ok());
  scratch_.clear();
  scratch_free_.clear();
  scratch_op_.clear();
  pending_writes_.clear();
  pending_reads_.clear();
  barriers_ = 0;
  for (auto p : desc_pools_) vkResetDescriptorPool(ctx_.device(), p, 0);
  if (!desc_pools_.empty()) {
    // Keep one pool for the next call; the rest were only needed for a long method.
    for (size_t i = 1; i < desc_pools_.size(); ++i) vkDestroyDescriptorPool(ctx_.device(), desc_pools_[i], nullptr);
    desc_pools_.resize(1);
  }
  desc_pool_used_ = 0;
  dispatches_ = 0;
  return result;
}

}  // namespace vrun::vulkan
