// Transfers between host and device memory: copies recorded into the call (through staging
// that a capture keeps and a replay refills), the downloads' delivery after the wait, and the
// one-off upload()/download() helpers.
#include <algorithm>
#include <cstring>

#include "kernels/vulkan/context.h"
#include "kernels/vulkan/recorder.h"

namespace vrun::vulkan {


Status Recorder::record_buffer_copy(const BufferRef& src, uint64_t src_offset, const BufferRef& dst,
                                    uint64_t dst_offset, uint64_t bytes) {
  if (bytes == 0) return Status::ok();
  VRUN_RETURN_IF_ERROR(begin_if_needed());
  Range rs{src.buffer, src.offset + src_offset, src.offset + src_offset + bytes};
  Range rd{dst.buffer, dst.offset + dst_offset, dst.offset + dst_offset + bytes};
  hazard(std::span<const Range>(&rs, 1), std::span<const Range>(&rd, 1));
  const VkBufferCopy region{src.offset + src_offset, dst.offset + dst_offset, bytes};
  emit([region, from = src.buffer, to = dst.buffer](VkCommandBuffer c) { vkCmdCopyBuffer(c, from, to, 1, &region); });
  if (profile_) profile_->after(cmd_, src.mapped ? "(copy from host)" : dst.mapped ? "(copy to host)" : "(copy on device)");
  return Status::ok();
}

Status Recorder::record_zero(const BufferRef& dst, uint64_t offset, uint64_t bytes) {
  if (bytes == 0 || replay_) return Status::ok();
  if (bytes % 4 != 0)
    return err(ErrorCode::kInternal, "vulkan: zeroing ", bytes, " bytes, not a whole number of 4-byte words");
  VRUN_RETURN_IF_ERROR(begin_if_needed());
  Range rd{dst.buffer, dst.offset + offset, dst.offset + offset + bytes};
  hazard({}, std::span<const Range>(&rd, 1));
  emit([to = dst.buffer, at = dst.offset + offset, bytes](VkCommandBuffer c) { vkCmdFillBuffer(c, to, at, bytes, 0); });
  if (profile_) profile_->after(cmd_, "(zero on device)");
  return Status::ok();
}

Status Recorder::record_upload(const void* src, const BufferRef& dst, uint64_t dst_offset, uint64_t bytes) {
  if (bytes == 0) return Status::ok();
  if (replay_) {
    if (replay_ups_ >= replay_->uploads.size() || replay_->uploads[replay_ups_].buffer != dst.buffer ||
        replay_->uploads[replay_ups_].offset != dst.offset + dst_offset || replay_->uploads[replay_ups_].bytes != bytes)
      return err(ErrorCode::kInternal, "vulkan: a replayed call uploads other data than its capture (upload ", replay_ups_, ")");
    std::memcpy(replay_->uploads[replay_ups_++].staging->mapped(), src, bytes);
    return Status::ok();
  }
  if (capture_) {
    VRUN_ASSIGN_OR_RETURN(auto staging, capture_staging(dst.buffer, dst.offset + dst_offset, bytes, false));
    std::memcpy(staging->mapped(), src, bytes);
    return record_buffer_copy(staging->ref(), 0, dst, dst_offset, bytes);
  }
  VRUN_ASSIGN_OR_RETURN(Buffer staging, ctx_.allocator().allocate(bytes, upload_kind(bytes), "upload staging"));
  std::memcpy(staging.mapped(), src, bytes);
  VRUN_RETURN_IF_ERROR(record_buffer_copy(staging.ref(), 0, dst, dst_offset, bytes));
  scratch_.push_back(std::move(staging));
  return Status::ok();
}

Status Recorder::record_download(const BufferRef& src, uint64_t src_offset, void* dst, uint64_t bytes) {
  if (bytes == 0) return Status::ok();
  if (replay_) {
    if (replay_downs_ >= replay_->downloads.size() || replay_->downloads[replay_downs_].buffer != src.buffer ||
        replay_->downloads[replay_downs_].offset != src.offset + src_offset ||
        replay_->downloads[replay_downs_].bytes != bytes)
      return err(ErrorCode::kInternal, "vulkan: a replayed call reads back other data than its capture (download ",
                 replay_downs_, ")");
    downloads_.push_back({Buffer{}, replay_->downloads[replay_downs_++].staging->mapped(), dst, bytes});
    return Status::ok();
  }
  if (capture_) {
    VRUN_ASSIGN_OR_RETURN(auto staging, capture_staging(src.buffer, src.offset + src_offset, bytes, true));
    VRUN_RETURN_IF_ERROR(record_buffer_copy(src, src_offset, staging->ref(), 0, bytes));
    downloads_.push_back({Buffer{}, staging->mapped(), dst, bytes});
    return Status::ok();
  }
  VRUN_ASSIGN_OR_RETURN(Buffer staging, ctx_.allocator().allocate(bytes, MemoryKind::kHost, "download staging"));
  VRUN_RETURN_IF_ERROR(record_buffer_copy(src, src_offset, staging.ref(), 0, bytes));
  const void* mapped = staging.mapped();
  downloads_.push_back({std::move(staging), mapped, dst, bytes});
  return Status::ok();
}

void Recorder::finish_downloads(bool ok) {
  if (ok)
    for (auto& d : downloads_) std::memcpy(d.dst, d.src, d.bytes);
  downloads_.clear();
}

Status upload(Context& ctx, const BufferRef& dst, uint64_t dst_offset, const void* src, uint64_t bytes) {
  if (dst.mapped) {
    std::memcpy(static_cast<uint8_t*>(dst.mapped) + dst_offset, src, bytes);
    return Status::ok();
  }
  VRUN_ASSIGN_OR_RETURN(auto rec, Recorder::create(ctx));
  for (uint64_t done = 0; done < bytes; done += kStagingChunk) {
    const uint64_t n = std::min(kStagingChunk, bytes - done);
    VRUN_RETURN_IF_ERROR(rec->record_upload(static_cast<const uint8_t*>(src) + done, dst, dst_offset + done, n));
    VRUN_RETURN_IF_ERROR(rec->submit_and_wait());
  }
  return Status::ok();
}

Status download(Context& ctx, const BufferRef& src, uint64_t src_offset, void* dst, uint64_t bytes) {
  VRUN_ASSIGN_OR_RETURN(auto rec, Recorder::create(ctx));
  for (uint64_t done = 0; done < bytes; done += kStagingChunk) {
    const uint64_t n = std::min(kStagingChunk, bytes - done);
    VRUN_RETURN_IF_ERROR(rec->record_download(src, src_offset + done, static_cast<uint8_t*>(dst) + done, n));
    VRUN_RETURN_IF_ERROR(rec->submit_and_wait());
  }
  return Status::ok();
}

}  // namespace vrun::vulkan
