#include "runtime/base/knobs.h"
#include "kernels/vulkan/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "kernels/vulkan/context.h"

namespace vrun::vulkan {

namespace {
constexpr uint32_t kQueries = 16384;
constexpr std::string_view kStart = "(start)", kPiece = "(idle: host recording)";
}  // namespace

std::unique_ptr<GpuProfile> GpuProfile::create(Context& ctx) {
  const char* e = knob_value(Knob::VRUN_VK_PROFILE);
  if (!e || !*e || std::string_view(e) == "0") return nullptr;
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(ctx.physical_device(), &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vkGetPhysicalDeviceQueueFamilyProperties(ctx.physical_device(), &n, fams.data());
  const uint32_t bits = ctx.queue_family() < n ? fams[ctx.queue_family()].timestampValidBits : 0;
  if (bits == 0 || ctx.limits().timestampPeriod <= 0) {
    std::fprintf(stderr, "vulkan profile: %s has no timestamps on its compute queue; VRUN_VK_PROFILE ignored\n",
                 ctx.info().name.c_str());
    return nullptr;
  }
  std::unique_ptr<GpuProfile> p(new GpuProfile(ctx));
  VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qi.queryCount = kQueries;
  if (vkCreateQueryPool(ctx.device(), &qi, nullptr, &p->pool_) != VK_SUCCESS) return nullptr;
  p->ns_per_tick_ = ctx.limits().timestampPeriod;
  p->by_grid_ = std::string_view(e) == "grid";
  p->valid_mask_ = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  return p;
}

GpuProfile::~GpuProfile() {
  // Recorders that only moved data (constant uploads) print nothing.
  const bool any_kernel = std::any_of(totals_.begin(), totals_.end(), [](const auto& t) { return t.first[0] != '('; });
  if (calls_ > 0 && any_kernel) {
    std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
    std::fprintf(stderr, "vulkan profile: %llu method calls, GPU span %.3f ms per call\n",
                 static_cast<unsigned long long>(calls_), busy_ns_ / 1e6 / static_cast<double>(calls_));
    std::fprintf(stderr, "  %-40s %10s %12s %10s %7s\n", "command", "per call", "ms per call", "us each", "share");
    for (const auto& [name, t] : rows) {
      const double per_call = static_cast<double>(t.count) / static_cast<double>(calls_);
      std::fprintf(stderr, "  %-40s %10.1f %12.4f %10.2f %6.1f%%\n", name.c_str(), per_call,
                   t.ns / 1e6 / static_cast<double>(calls_), t.ns / 1e3 / static_cast<double>(t.count),
                   100.0 * t.ns / std::max(busy_ns_, 1.0));
    }
  }
  if (pool_) vkDestroyQueryPool(ctx_.device(), pool_, nullptr);
}

void GpuProfile::mark(VkCommandBuffer cmd, std::string_view label) {
  if (labels_.size() >= kQueries) return;  // the rest of a very long call goes uncounted
  vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool_, static_cast<uint32_t>(labels_.size()));
  labels_.emplace_back(label);
}

void GpuProfile::begin_call(VkCommandBuffer cmd) {
  labels_.clear();
  vkCmdResetQueryPool(cmd, pool_, 0, kQueries);
  mark(cmd, kStart);
}

void GpuProfile::begin_piece(VkCommandBuffer cmd) {
  // TOP_OF_PIPE: when the queue reached this piece, i.e. the end of the idle gap before it.
  if (labels_.size() >= kQueries) return;
  vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool_, static_cast<uint32_t>(labels_.size()));
  labels_.emplace_back(kPiece);
}

void GpuProfile::after(VkCommandBuffer cmd, std::string_view label) { mark(cmd, label); }

void GpuProfile::collect() {
  const uint32_t n = static_cast<uint32_t>(labels_.size());
  if (n < 2) return;
  std::vector<uint64_t> ts(n);
  if (vkGetQueryPoolResults(ctx_.device(), pool_, 0, n, n * sizeof(uint64_t), ts.data(), sizeof(uint64_t),
                            VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
    return;
  for (auto& t : ts) t &= valid_mask_;
  for (uint32_t i = 1; i < n; ++i) {
    const double d = static_cast<double>(ts[i] >= ts[i - 1] ? ts[i] - ts[i - 1] : 0) * ns_per_tick_;
    auto it = totals_.find(labels_[i]);
    if (it == totals_.end()) it = totals_.emplace(labels_[i], Total{}).first;
    it->second.count++;
    it->second.ns += d;
  }
  busy_ns_ += static_cast<double>(ts[n - 1] >= ts[0] ? ts[n - 1] - ts[0] : 0) * ns_per_tick_;
  calls_++;
  labels_.clear();
}

}  // namespace vrun::vulkan
