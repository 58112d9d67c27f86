// Capture and replay of whole method calls (see Recorder::begin_capture): the recorder's state
// machine for a call that is recorded once into kept command buffers and submitted again later.
#include <tuple>

#include "kernels/vulkan/context.h"
#include "kernels/vulkan/recorder.h"

namespace vrun::vulkan {

bool Recorder::StagingKey::operator<(const StagingKey& o) const {
  return std::tie(buffer, offset, bytes, nth, down) < std::tie(o.buffer, o.offset, o.bytes, o.nth, o.down);
}

Result<std::shared_ptr<Buffer>> Recorder::capture_staging(VkBuffer buffer, uint64_t offset, uint64_t bytes, bool down) {
  int nth = 0;
  for (const auto& t : down ? capture_->downloads : capture_->uploads)
    if (t.buffer == buffer && t.offset == offset && t.bytes == bytes) nth++;
  std::shared_ptr<Buffer>& slot = shared_staging_[StagingKey{buffer, offset, bytes, nth, down}];
  if (!slot) {
    VRUN_ASSIGN_OR_RETURN(Buffer b, ctx_.allocator().allocate(bytes, down ? MemoryKind::kHost : upload_kind(bytes),
                                                                down ? "download staging" : "upload staging"));
    slot = std::make_shared<Buffer>(std::move(b));
  }
  (down ? capture_->downloads : capture_->uploads).push_back({slot, buffer, offset, bytes});
  return slot;
}

bool Recorder::begin_capture() {
  reset_call_mode();
  if (!replay_allowed_ || !ctx_.push_descriptor_fn() || profile_ || recording_ || flushes_ > 0) return false;
  capture_ = std::make_shared<Capture>();
  capture_ops_ = 0;
  return true;
}

void Recorder::cancel_capture() {
  if (!capture_) return;
  // The pieces so far (submitted, or the one being recorded, which this call's submit_and_wait
  // submits) are freed after its wait; its scratch lives until then too.
  if (recording_ || flushes_ > 0) {
    cancelled_cmds_.insert(cancelled_cmds_.end(), capture_->cmds.begin(), capture_->cmds.end());
  } else if (!capture_->cmds.empty()) {
    vkFreeCommandBuffers(ctx_.device(), cap_pool_, static_cast<uint32_t>(capture_->cmds.size()), capture_->cmds.data());
  }
  capture_->cmds.clear();
  for (auto& b : capture_->keep) scratch_.push_back(std::move(b));
  capture_.reset();
}

std::shared_ptr<Recorder::Capture> Recorder::end_capture() { return std::move(finished_capture_); }

void Recorder::begin_replay(std::shared_ptr<Capture> cap) {
  reset_call_mode();
  if (recording_ || flushes_ > 0) return;  // leftovers of a failed call: record normally
  replay_ = std::move(cap);
  if (stats_.on) stats_.replay_begin = now_s();
  replay_ups_ = replay_downs_ = 0;
  replay_ops_ = 0;
}

void Recorder::replay_all_ops() {
  if (replay_) replay_ops_ = replay_->ops;
}

void Recorder::reset_call_mode() {
  cancel_capture();
  finished_capture_.reset();
  if (replay_) {
    replay_.reset();
    downloads_.clear();
  }
}

Status Recorder::submit_replay() {
  std::shared_ptr<Capture> cap = std::move(replay_);
  Status result = Status::ok();
  if (replay_ops_ != cap->ops || replay_ups_ != cap->uploads.size() || replay_downs_ != cap->downloads.size())
    result = err(ErrorCode::kInternal, "vulkan: a replayed call differs from its capture (", replay_ops_, " ops, ",
                 replay_ups_, " uploads, ", replay_downs_, " downloads; the capture had ", cap->ops, ", ",
                 cap->uploads.size(), ", ", cap->downloads.size(), ")");
  const double t0 = stats_.on ? now_s() : 0;
  if (stats_.on) stats_.replay_host_s += t0 - stats_.replay_begin;
  if (result.is_ok()) {
    const VkResult r = submit_with_fence(cap->cmds.data(), static_cast<uint32_t>(cap->cmds.size()));
    if (r != VK_SUCCESS) result = vk_error(r, "running a replayed method call");
    vkResetFences(ctx_.device(), 1, &fence_);
  }
  if (stats_.on) {
    const double t1 = now_s();
    stats_.calls++;
    stats_.replays++;
    stats_.dispatches += static_cast<uint64_t>(cap->dispatches);
    stats_.barriers += static_cast<uint64_t>(cap->barriers);
    stats_.submits++;
    stats_.wait_s += t1 - t0;
    stats_.last_dispatches = cap->dispatches;
    stats_.last_barriers = cap->barriers;
    stats_.last_record_s = 0;
    stats_.last_wait_s = t1 - t0;
    stats_.last_in_record_s = stats_.last_in_dispatch_s = 0;
  }
  finish_downloads(result.is_ok());
  return result;
}

}  // namespace vrun::vulkan
