#include "runtime/base/knobs.h"
#include "kernels/vulkan/context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/vulkan/coopmat_compat.h"
#include "kernels/vulkan/memory.h"
#include "kernels/vulkan/pipelines.h"

namespace vrun::vulkan {

const char* vk_result_name(VkResult r) {
  switch (r) {
#define C(x) \
  case x: return #x;
    C(VK_SUCCESS) C(VK_NOT_READY) C(VK_TIMEOUT) C(VK_INCOMPLETE) C(VK_ERROR_OUT_OF_HOST_MEMORY)
    C(VK_ERROR_OUT_OF_DEVICE_MEMORY) C(VK_ERROR_INITIALIZATION_FAILED) C(VK_ERROR_DEVICE_LOST)
    C(VK_ERROR_MEMORY_MAP_FAILED) C(VK_ERROR_LAYER_NOT_PRESENT) C(VK_ERROR_EXTENSION_NOT_PRESENT)
    C(VK_ERROR_FEATURE_NOT_PRESENT) C(VK_ERROR_INCOMPATIBLE_DRIVER) C(VK_ERROR_TOO_MANY_OBJECTS)
    C(VK_ERROR_FORMAT_NOT_SUPPORTED) C(VK_ERROR_FRAGMENTED_POOL) C(VK_ERROR_OUT_OF_POOL_MEMORY)
#undef C
    default: return "VK_ERROR_(other)";
  }
}

int vk_stats_level() {
  const char* st = knob_value(Knob::VRUN_VK_STATS);
  if (!st || !*st || std::string_view(st) == "0") return 0;
  return std::string_view(st) == "2" ? 2 : 1;
}

Status vk_error(VkResult r, const std::string& what) {
  if (r == VK_ERROR_DEVICE_LOST)
    return err(ErrorCode::kUnavailable, "vulkan: ", what, ": the GPU was lost (VK_ERROR_DEVICE_LOST: a driver reset, ",
               "a hang or the device removed); this process cannot use it again: run vrun again, or with --backend cpu");
  const ErrorCode code = (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
                             ? ErrorCode::kOutOfMemory
                             : ErrorCode::kInternal;
  return err(code, "vulkan: ", what, ": ", vk_result_name(r), " (", static_cast<int>(r), ")");
}

VkResult Context::queue_submit(const VkSubmitInfo& si, VkFence fence) {
  if (lost_.load()) return VK_ERROR_DEVICE_LOST;
  static const uint64_t fail_at = [] {
    const char* e = knob_value(Knob::VRUN_VK_FAIL_SUBMIT);
    return e && *e ? std::strtoull(e, nullptr, 10) : 0ull;
  }();
  if (fail_at > 0 && ++submits_ == fail_at) {
    // A lost device runs nothing more: let the pieces already submitted finish first, so
    // that nothing still reads memory the caller frees once it sees the loss.
    vkQueueWaitIdle(queue_);
    mark_lost();
    return VK_ERROR_DEVICE_LOST;
  }
  const VkResult r = vkQueueSubmit(queue_, 1, &si, fence);
  if (r == VK_ERROR_DEVICE_LOST) mark_lost();
  return r;
}

namespace {

bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name) {
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

std::vector<VkExtensionProperties> device_extensions(VkPhysicalDevice pd) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, exts.data());
  return exts;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

// The index choose_device takes: `index`, else VRUN_DEVICE, else the best kind with Vulkan 1.2.
Result<int> pick_device(const std::vector<VkPhysicalDevice>& pds, int index) {
  if (pds.empty()) return err(ErrorCode::kUnsupported, "vulkan: no Vulkan device found");
  if (index < 0) {
    if (const char* env = knob_value(Knob::VRUN_DEVICE); env && *env) {
      char* end = nullptr;
      index = static_cast<int>(std::strtol(env, &end, 10));
      if (*end != '\0') return err(ErrorCode::kInvalidArgument, "VRUN_DEVICE: expected a device index, got '", env, "'");
    }
  }
  if (index >= static_cast<int>(pds.size()))
    return err(ErrorCode::kInvalidArgument, "vulkan: device index ", index, " out of range (", pds.size(), " devices)");
  if (index < 0) {
    int best_rank = 99;
    for (size_t i = 0; i < pds.size(); ++i) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(pds[i], &p);
      if (p.apiVersion < VK_API_VERSION_1_2) continue;
      if (type_rank(p.deviceType) < best_rank) {
        best_rank = type_rank(p.deviceType);
        index = static_cast<int>(i);
      }
    }
    if (index < 0) return err(ErrorCode::kUnsupported, "vulkan: no device supports Vulkan 1.2");
  }
  return index;
}

DeviceInfo describe(VkPhysicalDevice pd, int index) {
  DeviceInfo info;
  info.index = index;
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &subgroup};
  vkGetPhysicalDeviceProperties2(pd, &props);
  info.name = props.properties.deviceName;
  info.type = type_name(props.properties.deviceType);
  info.api_version = props.properties.apiVersion;
  info.subgroup_size = subgroup.subgroupSize;
  if (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) info.subgroup_ops = subgroup.supportedOperations;

  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if ((mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && mem.memoryHeaps[h].size > info.device_local_bytes)
      info.device_local_bytes = mem.memoryHeaps[h].size;

  if (props.properties.apiVersion >= VK_API_VERSION_1_2) {
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
    VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
    vkGetPhysicalDeviceFeatures2(pd, &f);
    info.storage16 = f11.storageBuffer16BitAccess;
    info.storage8 = f12.storageBuffer8BitAccess;
    info.fp16 = f12.shaderFloat16;
    info.int8 = f12.shaderInt8;
  }
  const auto exts = device_extensions(pd);
  info.coopmat_khr = has_extension(exts, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  info.coopmat_nv = has_extension(exts, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  info.coopmat2 = has_extension(exts, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
  info.memory_budget = has_extension(exts, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  if (has_extension(exts, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &sm};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    info.multiprocessors = sm.shaderSMCount;
  }
  return info;
}

VkResult make_instance(bool validation, bool debug_utils, VkInstance* out) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vrun";
  // 1.3 where the loader has it: the KHR cooperative-matrix kernels are SPIR-V 1.6.
  uint32_t loader = VK_API_VERSION_1_0;
  vkEnumerateInstanceVersion(&loader);
  app.apiVersion = loader >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;
  std::vector<const char*> layers, exts;
  if (validation) layers.push_back("VK_LAYER_KHRONOS_validation");
  if (debug_utils) exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  uint32_t n = 0;
  vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> avail(n);
  vkEnumerateInstanceExtensionProperties(nullptr, &n, avail.data());
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  // Portability drivers (MoltenVK) are only listed when the application opts in.
  if (has_extension(avail, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    exts.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    ci.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  ci.ppEnabledExtensionNames = exts.data();
  return vkCreateInstance(&ci, nullptr, out);
}

bool layer_available(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

uint32_t validation_layer_version() {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0) return l.specVersion;
  return 0;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  uint32_t n = 0;
  if (vkEnumeratePhysicalDevices(instance, &n, nullptr) != VK_SUCCESS) return {};
  std::vector<VkPhysicalDevice> pds(n);
  vkEnumeratePhysicalDevices(instance, &n, pds.data());
  pds.resize(n);
  return pds;
}

// What one of the cooperative-matrix property queries (`name`, a Fn) lists for the device; nullopt
// when the driver lacks the function or the query fails.
template <typename Fn, typename Props>
std::optional<std::vector<Props>> query_properties(VkInstance instance, VkPhysicalDevice pd, const char* name, VkStructureType type) {
  auto fn = reinterpret_cast<Fn>(vkGetInstanceProcAddr(instance, name));
  if (!fn) return std::nullopt;
  uint32_t n = 0;
  if (fn(pd, &n, nullptr) != VK_SUCCESS) return std::nullopt;
  Props blank{};
  blank.sType = type;
  std::vector<Props> props(n, blank);
  if (fn(pd, &n, props.data()) != VK_SUCCESS) return std::nullopt;
  return props;
}

// The tensor-core kernels use 16x16x16 f16 x f16 -> f32 fragments in 32-wide subgroups: whether
// the device lists that among its cooperative-matrix properties (the query `name`, a Fn, of Props:
// KHR or NV, with that extension's enums and result-type field).
template <typename Fn, typename Props, typename Type, typename Scope>
bool has_tensor_core_fragment(VkInstance instance, VkPhysicalDevice pd, const char* name, VkStructureType type,
                              Type Props::*result, Type f16, Type f32, Scope subgroup) {
  const auto props = query_properties<Fn, Props>(instance, pd, name, type);
  return props && std::any_of(props->begin(), props->end(), [&](const Props& p) {
           return p.MSize == 16 && p.NSize == 16 && p.KSize == 16 && p.AType == f16 && p.BType == f16 &&
                  p.CType == f32 && p.*result == f32 && p.scope == subgroup;
         });
}

bool coopmat_khr_shape_ok(VkInstance instance, VkPhysicalDevice pd) {
  return has_tensor_core_fragment<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>(
      instance, pd, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR,
      &VkCooperativeMatrixPropertiesKHR::ResultType, VK_COMPONENT_TYPE_FLOAT16_KHR, VK_COMPONENT_TYPE_FLOAT32_KHR,
      VK_SCOPE_SUBGROUP_KHR);
}

// Workgroup-scope f16 x f16 -> f32 matrices of VK_NV_cooperative_matrix2: their granularities and
// the workgroup sizes that take them (empty when none).
Context::CoopMat2 coopmat2_shapes(VkInstance instance, VkPhysicalDevice pd) {
  Context::CoopMat2 c;
  const auto props = query_properties<PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV,
                                      VkCooperativeMatrixFlexibleDimensionsPropertiesNV>(
      instance, pd, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV",
      VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV);
  if (!props) return c;
  for (const auto& p : *props)
    if (p.AType == VK_COMPONENT_TYPE_FLOAT16_KHR && p.BType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
        p.CType == VK_COMPONENT_TYPE_FLOAT32_KHR && p.ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
        p.scope == VK_SCOPE_WORKGROUP_KHR && !p.saturatingAccumulation) {
      c.m_granularity = std::max(c.m_granularity, p.MGranularity);
      c.n_granularity = std::max(c.n_granularity, p.NGranularity);
      c.k_granularity = std::max(c.k_granularity, p.KGranularity);
      c.invocations.push_back(p.workgroupInvocations);
    }
  VkPhysicalDeviceCooperativeMatrix2PropertiesNV p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV};
  VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &p2};
  vkGetPhysicalDeviceProperties2(pd, &props2);
  c.max_dimension = p2.cooperativeMatrixFlexibleDimensionsMaxDimension;
  c.reserved_shared = p2.cooperativeMatrixWorkgroupScopeReservedSharedMemory;
  return c;
}

bool coopmat_nv_shape_ok(VkInstance instance, VkPhysicalDevice pd) {
  return has_tensor_core_fragment<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      instance, pd, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV", VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV,
      &VkCooperativeMatrixPropertiesNV::DType, VK_COMPONENT_TYPE_FLOAT16_NV, VK_COMPONENT_TYPE_FLOAT32_NV, VK_SCOPE_SUBGROUP_NV);
}

}  // namespace

std::vector<DeviceInfo> Context::list_devices() {
  VkInstance instance = VK_NULL_HANDLE;
  if (make_instance(false, false, &instance) != VK_SUCCESS) return {};
  std::vector<DeviceInfo> out;
  const auto pds = physical_devices(instance);
  for (size_t i = 0; i < pds.size(); ++i) out.push_back(describe(pds[i], static_cast<int>(i)));
  vkDestroyInstance(instance, nullptr);
  return out;
}

std::optional<DeviceInfo> Context::device_for(int index) {
  VkInstance instance = VK_NULL_HANDLE;
  if (make_instance(false, false, &instance) != VK_SUCCESS) return std::nullopt;
  const auto pds = physical_devices(instance);
  std::optional<DeviceInfo> out;
  if (auto i = pick_device(pds, index); i.is_ok()) out = describe(pds[*i], *i);
  vkDestroyInstance(instance, nullptr);
  return out;
}

Result<std::unique_ptr<Context>> Context::create(const ContextOptions& options) {
  std::unique_ptr<Context> ctx(new Context());
  VRUN_RETURN_IF_ERROR(ctx->init(options));
  return ctx;
}

VKAPI_ATTR VkBool32 VKAPI_CALL Context::on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                         VkDebugUtilsMessageTypeFlagsEXT,
                                                         const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* self = static_cast<Context*>(user);
  const bool error = severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  if (error)
    self->validation_errors_++;
  else
    self->validation_warnings_++;
  if (self->print_validation_)
    std::fprintf(stderr, "vulkan validation %s: %s\n", error ? "error" : "warning", data->pMessage);
  return VK_FALSE;
}

Status Context::create_messenger() {
  auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
  VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
  mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                   VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mi.pfnUserCallback = &Context::on_debug_message;
  mi.pUserData = this;
  if (create) VRUN_VK_CHECK(create(instance_, &mi, nullptr, &messenger_), "creating the validation messenger");
  return Status::ok();
}

// The device (options.device_index, VRUN_DEVICE, else the best kind with Vulkan 1.2) and its
// compute queue family.
Status Context::choose_device(const ContextOptions& options) {
  const auto pds = physical_devices(instance_);
  VRUN_ASSIGN_OR_RETURN(const int index, pick_device(pds, options.device_index));
  physical_ = pds[index];
  info_ = describe(physical_, index);
  if (info_.api_version < VK_API_VERSION_1_2)
    return err(ErrorCode::kUnsupported, "vulkan: device ", index, " (", info_.name, ") lacks Vulkan 1.2");
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(physical_, &props);
  limits_ = props.limits;

  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nq, qf.data());
  bool found = false;
  for (uint32_t i = 0; i < nq && !found; ++i)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      queue_family_ = i;
      found = true;
    }
  if (!found) return err(ErrorCode::kUnsupported, "vulkan: device ", info_.name, " has no compute queue");
  return Status::ok();
}

Status Context::init(const ContextOptions& options) {
  print_validation_ = options.print_validation;
  const bool validation = options.validation && layer_available("VK_LAYER_KHRONOS_validation");
  if (options.validation && !validation)
    return err(ErrorCode::kUnsupported,
               "vulkan: validation requested but VK_LAYER_KHRONOS_validation is not installed "
               "(Debian: vulkan-validationlayers)");
  VkResult r = make_instance(validation, validation, &instance_);
  if (r != VK_SUCCESS) return err(ErrorCode::kUnsupported, "vulkan: no usable Vulkan loader/driver (vkCreateInstance: ", vk_result_name(r), ")");

  if (validation) VRUN_RETURN_IF_ERROR(create_messenger());
  VRUN_RETURN_IF_ERROR(choose_device(options));

  const auto exts = device_extensions(physical_);
  std::vector<const char*> enable;
  if (info_.memory_budget) enable.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  if (const char* e = knob_value(Knob::VRUN_GPU_EXACT)) exact_f32_ = *e && std::string(e) != "0";
  // VRUN_PUSH_DESCRIPTORS=0 falls back to descriptor pools (for comparison).
  const char* pd_env = knob_value(Knob::VRUN_PUSH_DESCRIPTORS);
  const bool want_push = !(pd_env && std::string(pd_env) == "0");
  const bool has_push = want_push && has_extension(exts, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  if (has_push) enable.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);

  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  f11.storageBuffer16BitAccess = info_.storage16;
  f12.storageBuffer8BitAccess = info_.storage8;
  f12.shaderFloat16 = info_.fp16;
  f12.shaderInt8 = info_.int8;
  {
    // The cooperative-matrix kernels declare the Vulkan memory model.
    VkPhysicalDeviceVulkan12Features q12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 q{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &q12};
    vkGetPhysicalDeviceFeatures2(physical_, &q);
    f12.vulkanMemoryModel = q12.vulkanMemoryModel;
    f12.vulkanMemoryModelDeviceScope = q12.vulkanMemoryModelDeviceScope;
  }
  VkPhysicalDeviceFeatures base{};
  vkGetPhysicalDeviceFeatures(physical_, &base);
  features.features.shaderInt16 = base.shaderInt16;
  features.features.shaderInt64 = base.shaderInt64;

  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop_khr{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_nv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  void** tail = &f12.pNext;
  // VRUN_COOPMAT: 0 = portable kernels only (for comparison), nv / khr = only that extension.
  const char* coop_env = knob_value(Knob::VRUN_COOPMAT);
  const std::string coop_pref = coop_env ? coop_env : "";
  // A validation layer older than the KHR extension (1.3.255) reports its use as errors; under
  // such a layer the NV extension (which it knows) is preferred.
  const bool khr_validatable = !validation || validation_layer_version() >= VK_MAKE_API_VERSION(0, 1, 3, 255);
  const bool coop_wanted = coop_pref != "0";
  const bool coop_base = coop_wanted && info_.fp16 && info_.subgroup_size == 32 && f12.vulkanMemoryModel;
  if (coop_base && coop_pref != "nv" && (khr_validatable || coop_pref == "khr") && info_.coopmat_khr && info_.api_version >= VK_API_VERSION_1_3 &&
      coopmat_khr_shape_ok(instance_, physical_)) {
    VkPhysicalDeviceFeatures2 q{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &coop_khr};
    vkGetPhysicalDeviceFeatures2(physical_, &q);
    if (coop_khr.cooperativeMatrix) {
      coop_khr.pNext = nullptr;
      coop_khr.cooperativeMatrixRobustBufferAccess = VK_FALSE;
      *tail = &coop_khr;
      tail = &coop_khr.pNext;
      enable.push_back(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
      coopmat_ = CoopMat::kKhr;
    }
  }
  // Workgroup-scope matrices on top of the KHR ones; VRUN_COOPMAT2=0 leaves them off.
  const char* cm2_env = knob_value(Knob::VRUN_COOPMAT2);
  VkPhysicalDeviceCooperativeMatrix2FeaturesNV cm2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
  if (coopmat_ == CoopMat::kKhr && info_.coopmat2 && !(cm2_env && std::string(cm2_env) == "0")) {
    CoopMat2 shapes = coopmat2_shapes(instance_, physical_);
    VkPhysicalDeviceFeatures2 q{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &cm2};
    vkGetPhysicalDeviceFeatures2(physical_, &q);
    if (!shapes.invocations.empty() && cm2.cooperativeMatrixWorkgroupScope && cm2.cooperativeMatrixFlexibleDimensions &&
        cm2.cooperativeMatrixTensorAddressing && cm2.cooperativeMatrixPerElementOperations) {
      cm2.pNext = nullptr;
      *tail = &cm2;
      tail = &cm2.pNext;
      enable.push_back(VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
      coopmat2_ = std::move(shapes);
      coopmat2_.on = true;
      // A decode function receives its block by device address: block loads need both.
      VkPhysicalDeviceVulkan12Features q12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
      VkPhysicalDeviceFeatures2 qa{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &q12};
      vkGetPhysicalDeviceFeatures2(physical_, &qa);
      if (!q12.bufferDeviceAddress) cm2.cooperativeMatrixBlockLoads = VK_FALSE;
      if (cm2.cooperativeMatrixBlockLoads) f12.bufferDeviceAddress = VK_TRUE;
      coopmat2_.block_loads = cm2.cooperativeMatrixBlockLoads;
      coopmat2_.reductions = cm2.cooperativeMatrixReductions && cm2.cooperativeMatrixConversions;
    }
  }
  if (coopmat_ == CoopMat::kNone && coop_base && coop_pref != "khr" && info_.coopmat_nv && coopmat_nv_shape_ok(instance_, physical_)) {
    VkPhysicalDeviceFeatures2 q{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &coop_nv};
    vkGetPhysicalDeviceFeatures2(physical_, &q);
    if (coop_nv.cooperativeMatrix) {
      coop_nv.pNext = nullptr;
      coop_nv.cooperativeMatrixRobustBufferAccess = VK_FALSE;
      *tail = &coop_nv;
      enable.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
      coopmat_ = CoopMat::kNv;
    }
  }

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = queue_family_;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &features};
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = static_cast<uint32_t>(enable.size());
  di.ppEnabledExtensionNames = enable.data();
  VRUN_VK_CHECK(vkCreateDevice(physical_, &di, nullptr, &device_), "creating the device for " + info_.name);
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  if (has_push)
    push_descriptor_ =
        reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(vkGetDeviceProcAddr(device_, "vkCmdPushDescriptorSetKHR"));

  allocator_ = std::make_unique<Allocator>(*this);
  VRUN_RETURN_IF_ERROR(allocator_->init());
  pipelines_ = std::make_unique<PipelineCache>(*this);
  VRUN_RETURN_IF_ERROR(pipelines_->init());
  return Status::ok();
}

Context::~Context() {
  if (device_) vkDeviceWaitIdle(device_);
  pipelines_.reset();
  allocator_.reset();
  if (device_) vkDestroyDevice(device_, nullptr);
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
  }
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

}  // namespace vrun::vulkan
