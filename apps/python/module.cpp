// The Python module `vrun`: its exception, the checks its parts share, and the parts themselves
// (audio.cpp, speech.cpp, language.cpp, export.cpp).
#include <pybind11/pybind11.h>

#include <filesystem>

#include "apps/python/bindings.h"

namespace vrun::python {

void raise(const Status& s) { throw Error(s.message()); }

std::string fspath(const py::handle& file) {
  auto os = py::module_::import("os");
  return os.attr("path").attr("expanduser")(os.attr("fspath")(file)).cast<std::string>();
}

void require_path(const std::string& path, const char* what) {
  std::error_code ec;
  if (path.empty()) throw py::value_error(std::string(what) + ": empty path");
  if (!std::filesystem::exists(path, ec)) {
    const std::string message = std::string(what) + ": " + path + ": no such file or folder";
    PyErr_SetObject(PyExc_FileNotFoundError, py::make_tuple(2, message, path).ptr());
    throw py::error_already_set();
  }
}

BackendKind backend_kind(const std::string& name) {
  if (name == "auto") return BackendKind::kAuto;
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "vulkan") return BackendKind::kVulkan;
  throw py::value_error("backend must be auto, cpu or vulkan, got '" + name + "'");
}

void check_threads(int threads) {
  if (threads < 0) throw py::value_error("threads must be >= 0 (0: VRUN_THREADS or all cores), got " + std::to_string(threads));
}

}  // namespace vrun::python

namespace py = pybind11;

PYBIND11_MODULE(vrun, m) {
  namespace vp = vrun::python;
  m.doc() =
      "vrun: language models (Llama family: GGUF, Hugging Face, .vrp) and speech recognisers (Whisper, Parakeet)\n"
      "on the CPU or a Vulkan GPU, through the same engine as the vrun command line.\n\n"
      "  SpeechModel(path).transcribe('talk.wav')       -> Transcript (text, segments, to_srt(), ...)\n"
      "  LanguageModel(path).generate('Once', max_tokens=32, temperature=0)\n"
      "  LanguageModel(path).chat([{'role': 'user', 'content': 'Hi'}], stream=True)\n"
      "  load_audio('talk.mp3')                          -> float32 mono 16-kHz numpy array\n"
      "  export('model.gguf', 'model.vrp', dtype='q8_0')\n\n"
      "Models run with the GIL released. vrun's own errors raise vrun.Error (a RuntimeError); bad\n"
      "arguments raise ValueError, missing files FileNotFoundError, each with vrun's message.";
  auto& error = py::register_exception<vp::Error>(m, "Error", PyExc_RuntimeError);
  error.attr("__doc__") = "An error vrun reports (a model that does not load, audio that does not decode, ...).";
  vp::register_audio(m);
  vp::register_speech(m);
  vp::register_language(m);
  vp::register_export(m);
}
