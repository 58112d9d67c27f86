#include "apps/serve/engines.h"

#include <chrono>

namespace vrun::serve {

void TextEngine::serve(std::span<const std::shared_ptr<Job>> jobs) {
  metrics_.batch(model_, static_cast<int>(jobs.size()));
  for (const auto& base : jobs) {
    auto& job = static_cast<TextJob&>(*base);
    if (job.cancelled) {
      job.on_done(Status(ErrorCode::kInvalidArgument, "the request was cancelled before it ran"));
      continue;
    }
    // Every request starts from an empty cache: no conversation carries over between clients.
    runner_.reset();
    bool first = true;
    auto st = runner_.generate(job.prompt, job.options, [&](const std::string& piece) {
      if (first) {
        first = false;
        metrics_.time_to_first_token(
            model_, std::chrono::duration<double>(std::chrono::steady_clock::now() - job.arrived).count());
      }
      if (job.cancelled) return false;
      return job.on_text(piece);
    });
    runner_.reset();
    if (st.is_ok()) metrics_.tokens(model_, st->prompt_tokens, st->generated_tokens);
    job.on_done(std::move(st));
  }
}

void SpeechEngine::serve_one(SpeechJob& job) {
  auto t = transcribe_(job.samples, job.options);
  if (t.is_ok()) metrics_.audio(model_, t->stats.audio_s);
  job.on_done(std::move(t));
}

void SpeechEngine::serve(std::span<const std::shared_ptr<Job>> jobs) {
  metrics_.batch(model_, static_cast<int>(jobs.size()));
  std::vector<SpeechJob*> live;
  for (const auto& base : jobs) {
    auto& job = static_cast<SpeechJob&>(*base);
    if (job.cancelled)
      job.on_done(Status(ErrorCode::kInvalidArgument, "the request was cancelled before it ran"));
    else
      live.push_back(&job);
  }
  if (live.size() > 1 && batch_) {
    std::vector<std::span<const float>> files;
    std::vector<const SpeechOptions*> opts;
    for (SpeechJob* j : live) {
      files.emplace_back(j->samples);
      opts.push_back(&j->options);
    }
    auto ts = batch_(files, opts);
    if (ts.size() == live.size()) {
      // Parakeet's batch fails every file for one bad file: then each goes alone, and only the
      // bad one fails.
      bool all_failed = true;
      for (const auto& t : ts) all_failed = all_failed && !t.is_ok();
      if (!all_failed) {
        for (size_t k = 0; k < live.size(); ++k) {
          if (ts[k].is_ok()) metrics_.audio(model_, ts[k]->stats.audio_s);
          live[k]->on_done(std::move(ts[k]));
        }
        return;
      }
    }
  }
  for (SpeechJob* j : live) serve_one(*j);
}

}  // namespace vrun::serve
