// Force-included into llama.cpp's Vulkan backend when it is built as a benchmark peer against
// Debian 12's Vulkan headers (1.3.239): the C declarations of VK_KHR_cooperative_matrix and
// VK_NV_cooperative_matrix2 come from vrun's own compat header, and the few vulkan.hpp names that
// llama.cpp uses for them (newer than those headers) are declared here. Values from the Vulkan
// registry.
#pragma once
#include <vulkan/vulkan.h>

#include "kernels/vulkan/coopmat_compat.h"

#include <vulkan/vulkan.hpp>

#include <string>

namespace vk {
#if VK_HEADER_VERSION < 255
enum class ComponentTypeKHR : int {
  eFloat16 = 0, eFloat32 = 1, eFloat64 = 2, eSint8 = 3, eSint16 = 4, eSint32 = 5, eSint64 = 6,
  eUint8 = 7, eUint16 = 8, eUint32 = 9, eUint64 = 10
};
enum class ScopeKHR : int { eDevice = 1, eWorkgroup = 2, eSubgroup = 3, eQueueFamily = 5 };
inline std::string to_string(ComponentTypeKHR v) { return std::to_string(static_cast<int>(v)); }
inline std::string to_string(ScopeKHR v) { return std::to_string(static_cast<int>(v)); }
#endif
#if VK_HEADER_VERSION < 303
struct PhysicalDeviceCooperativeMatrix2PropertiesNV : VkPhysicalDeviceCooperativeMatrix2PropertiesNV {
  PhysicalDeviceCooperativeMatrix2PropertiesNV() : VkPhysicalDeviceCooperativeMatrix2PropertiesNV{} {
    sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV;
  }
};
#endif
}  // namespace vk
