// `vrun mel`: the features an encoder would see, written as .npy so they can be compared with
// openai-whisper, NeMo or any other tool.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "apps/cli/command.h"

#if VRUN_PREPROCESS
#include "apps/cli/raw_pcm.h"
#include "preprocess/audio_loader.h"
#include "preprocess/nemo_mel.h"
#include "preprocess/whisper_mel.h"

namespace vrun::cli {
namespace {

struct MelOptions {
  std::string audio, output, kind, nemo_config;
  int n_mels = 0;
  double pad_seconds = 30.0;
  RawPcmArgs raw;
};

int run_mel(const MelOptions& o) {
  using namespace vrun::preprocess;
  LoadOptions load;
  load.target_rate = 16000;
  if (Status st = apply_raw_pcm(o.raw, &load); !st.is_ok()) return fail("mel", st.message());
  if (o.kind == "whisper" && !o.nemo_config.empty()) return fail("mel", "--config applies to --kind nemo only");
  std::optional<NemoMelConfig> nemo;
  if (o.kind == "nemo") {
    if (!o.nemo_config.empty()) {
      std::ifstream in(o.nemo_config);
      if (!in) return fail("mel", o.nemo_config + ": cannot open NeMo config");
      std::stringstream text;
      text << in.rdbuf();
      auto cfg = NemoMelConfig::parse(text.str(), o.nemo_config);
      if (!cfg) return fail("mel", cfg.status().message());
      nemo = *cfg;
      if (o.n_mels > 0 && o.n_mels != nemo->features)
        return fail("mel", "--n-mels " + std::to_string(o.n_mels) + " contradicts " + o.nemo_config + " (features: " +
                               std::to_string(nemo->features) + ")");
    } else {
      nemo = NemoMelConfig::parakeet(o.n_mels > 0 ? o.n_mels : 128);
    }
    load.target_rate = nemo->sample_rate;
  }

  auto audio = load_audio(o.audio, load);
  if (!audio) return fail("mel", audio.status().message());

  Features features;
  if (o.kind == "whisper") {
    auto mel = WhisperMelSpectrogram::create({o.n_mels > 0 ? o.n_mels : 80});
    if (!mel) return fail("mel", mel.status().message());
    if (o.pad_seconds < 0) return fail("mel", "--pad must be >= 0 seconds");
    features = mel->compute(audio->samples, static_cast<int64_t>(o.pad_seconds * WhisperMelConfig::kSampleRate));
  } else {
    auto mel = NemoMelSpectrogram::create(*nemo);
    if (!mel) return fail("mel", mel.status().message());
    features = mel->compute(audio->samples);
  }
  if (Status s = write_npy(o.output, features); !s) return fail("mel", s.message());
  std::fprintf(stderr, "vrun mel: %s: %.2f s (%d Hz, %d ch) -> %s [%lld, %lld] float32 (%s)\n", o.audio.c_str(),
               audio->duration_s(), audio->source_rate, audio->source_channels, o.output.c_str(),
               static_cast<long long>(features.n_mels), static_cast<long long>(features.frames), o.kind.c_str());
  return 0;
}

const CommandRegistrar kRegistrar(
    "mel", "Compute Whisper or NeMo log-mel features of an audio file and write them as .npy", [](CLI::App& sub) {
      auto o = std::make_shared<MelOptions>();
      sub.add_option("audio", o->audio,
                     "Audio file: WAV, FLAC, OGG/Vorbis, MP3 (any rate, any channel count; averaged to mono and "
                     "resampled to 16 kHz), or '-' for standard input")
          ->required();
      sub.add_option("-o,--output", o->output, "Where to write the features: .npy, float32, shape [n_mels, frames]")
          ->required();
      sub.add_option("--kind", o->kind,
                     "whisper: openai-whisper's log_mel_spectrogram; nemo: NeMo's AudioToMelSpectrogramPreprocessor "
                     "(Parakeet) in eval mode")
          ->required()
          ->check(CLI::IsMember({"whisper", "nemo"}));
      sub.add_option("--n-mels", o->n_mels,
                     "Mel bins: 80 or 128 for whisper (default 80; large-v3 uses 128); for nemo without --config, "
                     "the feature count (default 128)");
      sub.add_option("--pad", o->pad_seconds,
                     "whisper: seconds of zeros appended before the STFT, as transcribe() does (default 30, giving "
                     "samples/160 + 3000 frames); 0 matches log_mel_spectrogram(audio)")
          ->capture_default_str();
      sub.add_option("--config", o->nemo_config,
                     "nemo: the model's preprocessor config, as JSON or the model_config.yaml of a .nemo archive; "
                     "without it, Parakeet's (25 ms window, 10 ms hop, n_fft 512, per-feature normalisation)");
      add_raw_pcm_options(sub, o->raw, "AUDIO");
      return [o] { return run_mel(*o); };
    });

}  // namespace
}  // namespace vrun::cli
#endif
