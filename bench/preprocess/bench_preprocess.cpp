// Feature extraction speed on one thread, in audio seconds per wall second (x real time), for a
// 10-minute signal made by repeating the LibriVox test clips (or any file given as argument).
//   bench_preprocess [AUDIO] [--minutes N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "preprocess/audio_loader.h"
#include "preprocess/nemo_mel.h"
#include "preprocess/resampler.h"
#include "preprocess/whisper_mel.h"

using namespace vrun::preprocess;

namespace {

// Best of `reps` runs: the least disturbed by whatever else shares the machine.
double best_seconds(int reps, const std::function<void()>& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

void report(const char* name, double audio_s, double wall_s) {
  std::printf("%-44s %8.3f s  %8.0fx real time\n", name, wall_s, audio_s / wall_s);
}

}  // namespace

int main(int argc, char** argv) {
  double minutes = 10;
  std::vector<std::string> sources;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--minutes") && i + 1 < argc) minutes = std::atof(argv[++i]);
    else sources.push_back(argv[i]);
  }
  if (sources.empty())
    for (const char* clip : {"speech_0880.wav", "speech_0930.wav"}) sources.push_back(std::string(VRUN_AUDIO_DATA) + "/" + clip);

  std::vector<float> clips;
  for (const std::string& path : sources) {
    auto a = load_audio(path);
    if (!a) {
      std::fprintf(stderr, "bench_preprocess: %s\n", a.status().to_string().c_str());
      return 1;
    }
    clips.insert(clips.end(), a->samples.begin(), a->samples.end());
  }
  const size_t n = static_cast<size_t>(minutes * 60 * 16000);
  std::vector<float> audio(n);
  for (size_t i = 0; i < n; ++i) audio[i] = clips[i % clips.size()];
  const double audio_s = static_cast<double>(n) / 16000;
  std::printf("signal: %.1f s of speech at 16 kHz (repeated from %zu file(s)); one thread, best of 3\n", audio_s,
              sources.size());

  auto w80 = WhisperMelSpectrogram::create({80});
  auto w128 = WhisperMelSpectrogram::create({128});
  auto nemo = NemoMelSpectrogram::create(NemoMelConfig::parakeet(128));
  if (!w80 || !w128 || !nemo) return 1;
  volatile float sink = 0;

  report("whisper 80 mels, whole file + 30 s padding", audio_s,
         best_seconds(3, [&] { sink = sink + w80->compute(audio).data[0]; }));
  report("whisper 128 mels, whole file + 30 s padding", audio_s,
         best_seconds(3, [&] { sink = sink + w128->compute(audio).data[0]; }));
  report("whisper 80 mels, streamed 3000-frame windows", audio_s, best_seconds(3, [&] {
           const auto s = w80->stream(audio);
           for (int64_t seek = 0; seek < s.content_frames(); seek += WhisperMelConfig::kWindowFrames)
             sink = sink + s.window(seek).data[0];
         }));
  report("nemo parakeet 128 features, whole file", audio_s,
         best_seconds(3, [&] { sink = sink + nemo->compute(audio).data[0]; }));
  report("nemo parakeet 128 features, streamed 1000 frames", audio_s, best_seconds(3, [&] {
           const auto s = nemo->stream(audio);
           for (int64_t b = 0; b < s.output_frames(); b += 1000) sink = sink + s.frames(b, 1000).data[0];
         }));

  // Resampling, as loading a 44.1 kHz file would do.
  auto up = Resampler::resample(audio, 16000, 44100);
  if (!up) return 1;
  const double up_s = static_cast<double>(up->size()) / 44100;
  report("resample 44.1 kHz -> 16 kHz (soxr HQ)", up_s,
         best_seconds(3, [&] { sink = sink + Resampler::resample(*up, 44100, 16000).value()[0]; }));
  return 0;
}
