// Errors are values: every fallible call returns Status or Result<T>, and messages name the
// thing (file, tensor, op, argument) with the expected and actual values.
#pragma once

#include <cassert>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace vrun {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // caller passed something malformed
  kInvalidProgram,   // a program/checkpoint failed verification
  kNotFound,         // file, method, tensor or key missing
  kUnsupported,      // valid but not handled (dtype, op variant)
  kOutOfMemory,      // host or device allocation failed
  kIo,               // read/write/mmap failed
  kInternal,         // a broken invariant inside vrun
  kUnavailable,      // a device that is gone (a lost GPU)
};

const char* error_code_name(ErrorCode code);
// "1.5 GiB", "312 B": sizes in messages and reports.
std::string human_bytes(uint64_t bytes);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code>: <message>" for printing.
  std::string to_string() const;
  // Prefixes context, e.g. status.with_context("loading model.vrp").
  Status with_context(const std::string& context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.is_ok() && "Result constructed from an ok Status");
  }

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

// Builds a message from streamable parts: err(ErrorCode::kInvalidArgument, "axis ", a, " out of range").
template <typename... Args>
Status err(ErrorCode code, Args&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(parts));
  return Status(code, os.str());
}

}  // namespace vrun

#define VRUN_CONCAT_INNER(a, b) a##b
#define VRUN_CONCAT(a, b) VRUN_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when it is an error.
#define VRUN_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::vrun::Status vrun_status_ = (expr);          \
    if (!vrun_status_.is_ok()) return vrun_status_; \
  } while (0)

// VRUN_ASSIGN_OR_RETURN(auto x, make_x()); declares x from a Result or returns its error.
#define VRUN_ASSIGN_OR_RETURN(lhs, expr) VRUN_ASSIGN_OR_RETURN_IMPL(VRUN_CONCAT(vrun_result_, __LINE__), lhs, expr)
#define VRUN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.is_ok()) return tmp.status();           \
  lhs = std::move(tmp).value()
