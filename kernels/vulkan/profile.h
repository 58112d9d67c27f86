// VRUN_VK_PROFILE=1: GPU time per kernel from timestamp queries. A timestamp is written after
// every dispatch and copy; the time between one and the next is charged to the later command
// (launch, barrier wait and run time together: what that command costs the queue), and the time
// between the end of one submitted piece and the start of the next to "(idle: host recording)".
// Totals are printed to stderr when the recorder goes away. VRUN_VK_PROFILE=grid also splits each
// kernel's row by its workgroup count, which tells apart the shapes one kernel runs at (the
// projections of a decode step, say).
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vrun::vulkan {

class Context;

class GpuProfile {
 public:
  // nullptr unless VRUN_VK_PROFILE is set and the queue has timestamps.
  static std::unique_ptr<GpuProfile> create(Context& ctx);
  ~GpuProfile();
  GpuProfile(const GpuProfile&) = delete;
  GpuProfile& operator=(const GpuProfile&) = delete;

  // First command buffer of a method call (resets the queries) / a later piece of it.
  void begin_call(VkCommandBuffer cmd);
  void begin_piece(VkCommandBuffer cmd);
  void after(VkCommandBuffer cmd, std::string_view label);
  bool by_grid() const { return by_grid_; }
  // After the call's fence: reads the timestamps back and adds them up.
  void collect();

 private:
  explicit GpuProfile(Context& ctx) : ctx_(ctx) {}
  void mark(VkCommandBuffer cmd, std::string_view label);
  Context& ctx_;
  VkQueryPool pool_ = VK_NULL_HANDLE;
  double ns_per_tick_ = 1.0;
  uint64_t valid_mask_ = ~uint64_t{0};
  std::vector<std::string> labels_;  // per query of the current call
  struct Total {
    uint64_t count = 0;
    double ns = 0;
  };
  std::map<std::string, Total, std::less<>> totals_;
  bool by_grid_ = false;
  uint64_t calls_ = 0;
  double busy_ns_ = 0;
};

}  // namespace vrun::vulkan
