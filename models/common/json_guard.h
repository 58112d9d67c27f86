// nlohmann::json's typed accessors (value(), get<T>(), at()) throw when a file holds a value of
// another type than the reader expects ("model_type": 3). The readers check types where they
// can; this boundary turns whatever they miss into an error naming the file instead of a crash.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/base/status.h"

namespace vrun::models {

template <class F>
auto json_guard(const std::string& source, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const nlohmann::json::exception& e) {
    return err(ErrorCode::kInvalidProgram, source, ": a value has the wrong type or is missing (", e.what(), ")");
  }
}

}  // namespace vrun::models
