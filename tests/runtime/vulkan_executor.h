// A program on a Vulkan executor for tests: one thread, and the validation layer on unless
// VRUN_VALIDATION=0 (machines without the layer installed). Without a Vulkan device the test is
// skipped; a device that works only without the layer fails the test (a machine without the
// layer must not pass by skipping; vk_test_util.h does the same for contexts). *ex stays null
// then, and the caller returns.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "runtime/executor.h"

namespace vrun::test {

inline void vulkan_executor(std::shared_ptr<const Program> program, std::unique_ptr<Executor>* ex) {
  ExecutorOptions o;
  o.backend = BackendKind::kVulkan;
  o.threads = 1;
  const char* val = std::getenv("VRUN_VALIDATION");
  o.validation = !(val && std::string(val) == "0");
  auto created = Executor::create(program, o);
  if (!created.is_ok() && o.validation) {
    o.validation = false;
    if (Executor::create(program, o).is_ok())
      GTEST_FAIL() << created.status().message() << "; the device works without the layer: install it, or set "
                   << "VRUN_VALIDATION=0 to run these tests without validation";
  }
  if (!created.is_ok()) GTEST_SKIP() << "no Vulkan device: " << created.status().message();
  *ex = std::move(*created);
}

}  // namespace vrun::test
