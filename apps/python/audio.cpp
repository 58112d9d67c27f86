// vrun.load_audio: any file vrun transcribes, as the mono float32 samples its models take.
#include <pybind11/pybind11.h>

#include "apps/python/bindings.h"
#include "preprocess/audio_loader.h"

namespace vrun::python {

namespace {

// Samples that a numpy array views through the buffer protocol (numpy.frombuffer): no copy, and
// no use of numpy's C API, which differs between numpy 1 and 2.
struct Samples {
  std::vector<float> data;
};

py::object load_audio(const py::object& file, int sample_rate) {
  const std::string path = fspath(file);
  if (sample_rate < 0) throw py::value_error("sample_rate must be > 0 (or 0: the file's own), got " + std::to_string(sample_rate));
  require_path(path, "load_audio");
  preprocess::LoadOptions o;
  o.target_rate = sample_rate;
  auto audio = [&] {
    py::gil_scoped_release release;
    return preprocess::load_audio(path, o);
  }();
  auto buffer = take(std::move(audio));
  auto* samples = new Samples{std::move(buffer.samples)};
  py::object owner = py::cast(samples, py::return_value_policy::take_ownership);
  return py::module_::import("numpy").attr("frombuffer")(owner, "float32");
}

}  // namespace

void register_audio(py::module_& m) {
  py::class_<Samples>(m, "_Samples", py::buffer_protocol()).def_buffer([](Samples& s) {
    return py::buffer_info(s.data.data(), static_cast<py::ssize_t>(s.data.size()));
  });
  m.def("load_audio", &load_audio, py::arg("path"), py::arg("sample_rate") = 16000,
        "load_audio(path, sample_rate=16000) -> numpy.ndarray\n\n"
        "Reads WAV, FLAC, OGG/Vorbis or MP3 at any rate and channel count, averages the channels to mono and\n"
        "resamples (libsoxr) to sample_rate (0 keeps the file's rate): the float32 samples SpeechModel.transcribe\n"
        "takes, the same that `vrun transcribe` reads from the file.");
}

}  // namespace vrun::python
