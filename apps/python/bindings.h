// What the Python module's files share: turning vrun's errors into Python exceptions, checks of
// paths and options made before anything loads, and the registration of each part of the module.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "runtime/base/status.h"
#include "runtime/executor.h"

namespace vrun::python {

namespace py = pybind11;

// The C++ side of vrun.Error (a RuntimeError): an error vrun itself reports, with its message.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Raises the status as vrun.Error, its message unchanged (ValueError is for the arguments the
// bindings check themselves before anything runs).
[[noreturn]] void raise(const Status& s);
inline void check(const Status& s) {
  if (!s.is_ok()) raise(s);
}
template <typename T>
T take(Result<T>&& r) {
  if (!r.is_ok()) raise(r.status());
  return std::move(r).value();
}

// A str or os.PathLike as a path, a leading ~ expanded (TypeError for anything else).
std::string fspath(const py::handle& file);
// FileNotFoundError naming `what` and the path when nothing is there (before any load).
void require_path(const std::string& path, const char* what);
// "auto", "cpu" or "vulkan", else ValueError.
BackendKind backend_kind(const std::string& name);
// ValueError unless threads >= 0.
void check_threads(int threads);

void register_audio(py::module_& m);
void register_speech(py::module_& m);
void register_language(py::module_& m);
void register_export(py::module_& m);

}  // namespace vrun::python
