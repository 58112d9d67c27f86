// vrun.export: `vrun export` (models::export_program) from Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "apps/python/bindings.h"
#include "models/registry/families.h"
#include "runtime/base/dtype.h"

namespace vrun::python {

namespace {

std::string export_model(const py::object& src, const py::object& dst, const std::optional<std::string>& dtype, int64_t context,
                         int64_t chunk, const std::optional<int64_t>& local_window, const std::optional<int64_t>& long_frames,
                         int64_t batch_size) {
  const std::string in = fspath(src), out = fspath(dst);
  models::BuildOptions o;
  if (dtype) {
    o.dtype = dtype_from_name(*dtype);
    if (!o.dtype) throw py::value_error("dtype '" + *dtype + "': not a type vrun knows (f32, f16, bf16, q8_0, q4_0)");
  }
  if (context < 0) throw py::value_error("context must be >= 0 (0: the model's maximum), got " + std::to_string(context));
  if (chunk < 1) throw py::value_error("chunk must be >= 1, got " + std::to_string(chunk));
  if (local_window && (*local_window < 0 || *local_window > 100000))
    throw py::value_error("local_window must be in 0..100000, got " + std::to_string(*local_window));
  if (long_frames && (*long_frames < 0 || *long_frames > 100000))
    throw py::value_error("long_frames must be in 0..100000, got " + std::to_string(*long_frames));
  if (batch_size < 0 || batch_size > 64) throw py::value_error("batch_size must be in 0..64, got " + std::to_string(batch_size));
  o.context = context;
  o.chunk = chunk;
  o.local_window = local_window.value_or(-1);
  o.long_frames = long_frames.value_or(-1);
  o.streams = batch_size;
  require_path(in, "export");
  std::vector<std::string> notes;
  auto family = [&] {
    py::gil_scoped_release release;
    return models::export_program(in, out, o, &notes);
  }();
  if (!notes.empty()) {
    auto warn = py::module_::import("warnings").attr("warn");
    for (const auto& n : notes) warn(n);
  }
  return take(std::move(family))->name;
}

}  // namespace

void register_export(py::module_& m) {
  m.def("export", &export_model, py::arg("src"), py::arg("dst"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("context") = 0,
        py::arg("chunk") = 512, py::arg("local_window") = py::none(), py::arg("long_frames") = py::none(), py::arg("batch_size") = 0,
        "export(src, dst, *, dtype=None, context=0, chunk=512, local_window=None, long_frames=None, batch_size=0) -> str\n\n"
        "`vrun export`: imports a checkpoint (GGUF, Hugging Face, CTranslate2, whisper.cpp, .nemo) and writes its\n"
        "program file (.vrp) to dst. dtype converts the large matrices (f32, f16, bf16, q8_0, q4_0: what the family\n"
        "takes); context fixes a Llama program's KV-cache length (0: the model's maximum) and chunk its most tokens\n"
        "per prefill call; local_window sets Parakeet's local-attention window (0: none), long_frames the most encoder\n"
        "frames its full attention takes in one call past 160 s (0: chunks), batch_size the files a batched call takes\n"
        "(Whisper: streams; Parakeet: 160-s jobs; 0: the default), as `vrun export` does. Returns the model family\n"
        "('llama', 'whisper', 'parakeet'). Conversion notes become warnings.");
}

}  // namespace vrun::python
