#include "tests/whisper/whisper_clips.h"

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "preprocess/audio_loader.h"

namespace vrun::whisper::testing {

namespace {

const std::string kPs = "/usr/share/pocketsphinx/test/data";

std::string librivox(const char* n) { return kPs + "/librivox/sense_and_sensibility_01_austen_64kb-" + n + ".wav"; }

Result<std::vector<float>> load(const std::string& path, bool raw) {
  if (!std::filesystem::exists(path)) return err(ErrorCode::kNotFound, path, " is missing (Debian package pocketsphinx-testdata)");
  preprocess::LoadOptions o;
  if (raw) o.raw = preprocess::RawFormat{16000, 1, preprocess::RawEncoding::kS16, false};
  VRUN_ASSIGN_OR_RETURN(preprocess::AudioBuffer a, preprocess::load_audio(path, o));
  if (a.source_rate != 16000) return err(ErrorCode::kInvalidArgument, path, ": expected 16 kHz, is ", a.source_rate);
  return std::move(a.samples);
}

}  // namespace

Result<std::vector<float>> make_clip(const std::string& name) {
  if (name == "librivox_0870") return load(librivox("0870"), false);
  if (name == "librivox_0920") return load(librivox("0920"), false);
  if (name == "goforward_raw") return load(kPs + "/goforward.raw", true);
  if (name == "espeak_slow" || name == "espeak_fast") return load(std::string(VRUN_TEST_DATA) + "/whisper/" + name + ".wav", false);
  if (name == "silence_10s") return std::vector<float>(160000, 0.0f);
  if (name == "long_concat") {
    std::vector<float> out;
    auto append = [&](Result<std::vector<float>> r) -> Status {
      if (!r.is_ok()) return r.status();
      out.insert(out.end(), r->begin(), r->end());
      out.insert(out.end(), 8000, 0.0f);
      return Status::ok();
    };
    for (const char* n : {"0870", "0890", "0920", "0880", "0930"}) VRUN_RETURN_IF_ERROR(append(load(librivox(n), false)));
    for (const char* n : {"goforward", "numbers", "something"}) VRUN_RETURN_IF_ERROR(append(load(kPs + "/" + n + ".raw", true)));
    return out;
  }
  return err(ErrorCode::kNotFound, "no clip named '", name, "'");
}

std::string tiny_en_model_dir() {
  if (const char* e = std::getenv("VRUN_WHISPER_MODEL")) return e;
  const char* home = std::getenv("HOME");
  if (!home) return "";
  const std::string dir = std::string(home) + "/.cache/vrun/models/whisper-tiny.en";
  return std::filesystem::exists(dir + "/model.bin") ? dir : "";
}

std::unique_ptr<WhisperRunner> load_tiny_en(int decode_batch) {
  std::unique_ptr<WhisperRunner> out;
  const std::string dir = tiny_en_model_dir();
  if (dir.empty()) return out;
  RunnerOptions o;
  o.backend = BackendKind::kCpu;
  o.decode_batch = decode_batch;
  auto loaded = WhisperRunner::load(dir, o);
  EXPECT_TRUE(loaded.is_ok()) << loaded.status().message();
  if (loaded.is_ok()) out = std::move(*loaded);
  return out;
}

}  // namespace vrun::whisper::testing
