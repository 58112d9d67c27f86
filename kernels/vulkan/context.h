// Vulkan instance, physical-device choice and the logical device with its compute queue. One
// Context serves every method of a program; memory, pipelines and recorders hang off it.
#pragma once

#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::vulkan {

struct DeviceInfo {
  int index = 0;  // position in vkEnumeratePhysicalDevices order (what --device / VRUN_DEVICE take)
  std::string name;
  std::string type;  // discrete | integrated | virtual | cpu | other
  uint32_t api_version = 0;
  uint64_t device_local_bytes = 0;  // largest device-local heap
  uint32_t subgroup_size = 0;
  // Subgroup operations compute shaders may use (VK_SUBGROUP_FEATURE_*_BIT; 0 when compute
  // shaders have no subgroup operations).
  uint32_t subgroup_ops = 0;
  bool fp16 = false;         // shaderFloat16 arithmetic
  bool int8 = false;         // shaderInt8 arithmetic
  bool storage16 = false;    // 16-bit loads/stores from storage buffers
  bool storage8 = false;     // 8-bit loads/stores from storage buffers
  bool coopmat_khr = false;  // VK_KHR_cooperative_matrix
  bool coopmat_nv = false;   // VK_NV_cooperative_matrix
  bool coopmat2 = false;     // VK_NV_cooperative_matrix2 (workgroup-scope matrices)
  bool memory_budget = false;
  // Streaming multiprocessors (VK_NV_shader_sm_builtins), 0 where the device does not say: the
  // tensor-core matmul sizes its tiles so that a grid fills them.
  uint32_t multiprocessors = 0;
};

struct ContextOptions {
  // -1: choose (VRUN_DEVICE when set, else discrete > integrated > virtual > cpu).
  int device_index = -1;
  // Loads VK_LAYER_KHRONOS_validation and counts its errors (validation_errors()).
  bool validation = false;
  // Prints validation messages to stderr as they arrive.
  bool print_validation = true;
};

class Allocator;
class PipelineCache;

class Context {
 public:
  // Errors: no Vulkan loader/ICD (kUnsupported, so callers can fall back to the CPU), a device
  // index out of range (kInvalidArgument), or device creation failing.
  static Result<std::unique_ptr<Context>> create(const ContextOptions& options = {});
  // Every physical device with its features; empty when Vulkan is unavailable.
  static std::vector<DeviceInfo> list_devices();
  // The device create() would take for device_index `index` (-1: VRUN_DEVICE, else the best kind
  // with Vulkan 1.2), described without creating it; nullopt where create() would fail to choose.
  static std::optional<DeviceInfo> device_for(int index);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const { return info_; }
  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical_device() const { return physical_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  // vkQueueSubmit through the lost-device check: once a submission or a wait has reported
  // VK_ERROR_DEVICE_LOST (mark_lost), every later one fails at once with it, so no work is queued
  // on a device that is gone. VRUN_VK_FAIL_SUBMIT=N makes the Nth submission of the process
  // report a lost device (tests of that path).
  VkResult queue_submit(const VkSubmitInfo& si, VkFence fence);
  bool lost() const { return lost_.load(); }
  void mark_lost() { lost_.store(true); }
  uint32_t queue_family() const { return queue_family_; }
  const VkPhysicalDeviceLimits& limits() const { return limits_; }
  // True when the device has what the kernels need (16- and 8-bit storage); without it every
  // op reports unsupported and runs on the CPU.
  bool kernels_usable() const { return info_.storage16 && info_.storage8; }
  // Which cooperative-matrix matmul the device can run (none on lavapipe).
  enum class CoopMat { kNone, kKhr, kNv };
  CoopMat coopmat() const { return coopmat_; }
  // VK_NV_cooperative_matrix2 as enabled on this device (with the KHR extension; on = false
  // elsewhere): the workgroup sizes and tile granularities its f16 x f16 -> f32 workgroup-scope
  // matrices take (VkCooperativeMatrixFlexibleDimensionsPropertiesNV).
  struct CoopMat2 {
    bool on = false;
    uint32_t m_granularity = 0, n_granularity = 0, k_granularity = 0;
    std::vector<uint32_t> invocations;  // workgroup sizes with such matrices
    uint32_t max_dimension = 0;         // largest matrix dimension
    uint32_t reserved_shared = 0;       // shared memory the driver keeps for them, bytes
    // Tensor loads that expand blocks through a decode function (block-quantised weights straight
    // into the matrices): cooperativeMatrixBlockLoads with bufferDeviceAddress, both enabled.
    bool block_loads = false;
    // Row reductions and conversions between matrix uses (the attention kernel, sdpa_cm2.comp).
    bool reductions = false;
    // Whether a workgroup of `threads` invocations takes M x N x K products: a workgroup size with
    // such matrices, each dimension a multiple of its granularity, within the largest dimension.
    bool takes(int m, int n, int k, int threads) const {
      auto mult = [](int v, uint32_t g) { return v > 0 && (g == 0 || v % static_cast<int>(g) == 0); };
      bool size = false;
      for (uint32_t i : invocations) size = size || i == static_cast<uint32_t>(threads);
      const int largest = m > n ? (m > k ? m : k) : (n > k ? n : k);
      return on && size && mult(m, m_granularity) && mult(n, n_granularity) && mult(k, k_granularity) &&
             (max_dimension == 0 || static_cast<uint32_t>(largest) <= max_dimension);
    }
  };
  const CoopMat2& coopmat2() const { return coopmat2_; }
  // vkCmdPushDescriptorSetKHR when the device has VK_KHR_push_descriptor (descriptors are then
  // written into the command buffer: no set allocation or update per dispatch), else null.
  PFN_vkCmdPushDescriptorSetKHR push_descriptor_fn() const { return push_descriptor_; }
  // VRUN_GPU_EXACT=1: f32 activations stay f32 in every kernel (no f16 rounding on the way into
  // the tensor cores); slower on devices with cooperative matrices.
  bool exact_f32() const { return exact_f32_; }

  Allocator& allocator() { return *allocator_; }
  PipelineCache& pipelines() { return *pipelines_; }

  uint64_t validation_errors() const { return validation_errors_.load(); }
  uint64_t validation_warnings() const { return validation_warnings_.load(); }

 private:
  Context() = default;
  Status init(const ContextOptions& options);
  Status create_messenger();
  Status choose_device(const ContextOptions& options);
  PFN_vkCmdPushDescriptorSetKHR push_descriptor_ = nullptr;
  bool exact_f32_ = false;

  static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                         VkDebugUtilsMessageTypeFlagsEXT type,
                                                         const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                         void* user);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkPhysicalDeviceLimits limits_{};
  DeviceInfo info_;
  CoopMat coopmat_ = CoopMat::kNone;
  CoopMat2 coopmat2_;
  bool print_validation_ = true;
  std::atomic<uint64_t> validation_errors_{0};
  std::atomic<uint64_t> validation_warnings_{0};
  std::atomic<bool> lost_{false};
  std::atomic<uint64_t> submits_{0};
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<PipelineCache> pipelines_;
};

// "VkResult name" for messages.
const char* vk_result_name(VkResult r);
// err(...) for a failed Vulkan call: "vulkan: <what>: VK_ERROR_...".
Status vk_error(VkResult r, const std::string& what);
// VRUN_VK_STATS: 0 (unset or "0"), 2 ("2": totals and a line per recorded call and new memory
// block), else 1 (totals when the recorder, allocator and pipeline cache go).
int vk_stats_level();

}  // namespace vrun::vulkan

#define VRUN_VK_CHECK(call, what)                                         \
  do {                                                                    \
    VkResult vrun_vk_r_ = (call);                                         \
    if (vrun_vk_r_ != VK_SUCCESS) return ::vrun::vulkan::vk_error(vrun_vk_r_, what); \
  } while (0)
