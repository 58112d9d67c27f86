// --rate, --channels and --encoding: audio read as headerless PCM (`vrun transcribe`, `vrun mel`).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "preprocess/audio_loader.h"

namespace vrun::cli {

struct RawPcmArgs {
  int rate = 0;  // 0: the files' headers say
  int channels = 1;
  std::string encoding = "s16";
};

// `inputs` names what --rate applies to in its help ("AUDIO", "every AUDIO").
inline void add_raw_pcm_options(CLI::App& sub, RawPcmArgs& a, const std::string& inputs) {
  sub.add_option("--rate", a.rate, "Read " + inputs + " as headerless PCM at this sample rate (Hz)");
  sub.add_option("--channels", a.channels, "Headerless PCM: interleaved channel count")->capture_default_str();
  sub.add_option("--encoding", a.encoding, "Headerless PCM sample type, little-endian")
      ->check(CLI::IsMember({"s16", "s24", "s32", "u8", "f32", "f64"}))
      ->capture_default_str();
}

// With --rate, the format `load` reads every input as; without, `load` is left as it is.
inline Status apply_raw_pcm(const RawPcmArgs& a, preprocess::LoadOptions* load) {
  if (a.rate <= 0) return Status::ok();
  VRUN_ASSIGN_OR_RETURN(const preprocess::RawEncoding enc, preprocess::parse_raw_encoding(a.encoding));
  load->raw = preprocess::RawFormat{a.rate, a.channels, enc, false};
  return Status::ok();
}

}  // namespace vrun::cli
