// `vrun transcribe`'s command line and the workers of a job: each worker has its own model and takes
// files from one shared queue; a finished file's segments, stats, transcript files, summary line and
// progress go out under one lock (docs/archive.md).
#pragma once

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "apps/cli/model_options.h"
#include "apps/cli/raw_pcm.h"
#include "apps/cli/transcribe_job.h"
#include "apps/speech/decoding_choices.h"
#include "apps/speech/speech_recognizer.h"
#include "apps/speech/voice_activity.h"
#include "preprocess/audio_loader.h"
#include "runtime/base/clock.h"

namespace vrun::cli {

struct TranscribeArgs {
  std::string model, formats, output_dir = ".";
  RawPcmArgs raw;  // --rate, --channels, --encoding
  std::vector<std::string> audio;
  int batch_size = 0;  // 0: the model's choice (Recognizer::default_batch)
  BackendArgs run;
  speech::DecodingChoices decoding;  // -l, --task, --beam-size, ..., --attention
  bool progress = false;
  bool vad = false;
  std::string vad_model;
  // The job over many files (docs/archive.md).
  std::string input_list, summary, shard, devices;
  int workers = 1;
  bool resume = false;
};



// SIGINT/SIGTERM during a job: no new file starts, the files being transcribed finish and are
// recorded, and the exit status is 128 + the signal. A second signal ends the process at once
// (transcripts are written by rename, so none is left half written).
extern volatile std::sig_atomic_t g_stop_signal;
void on_stop_signal(int sig);

// What the workers share: the queue, the console, the summary, the progress line, the counts.
struct Job {
  Job(const TranscribeArgs& args, const speech::Options& options, std::vector<std::string> fmts)
      : a(args), o(options), formats(std::move(fmts)) {}
  const TranscribeArgs& a;
  const speech::Options& o;
  preprocess::LoadOptions load;
  std::vector<std::string> formats;
  std::vector<job::Input> queue;
  size_t next = 0;
  bool several_inputs = false, several_workers = false;
  size_t workers = 1;
  // Parakeet with full attention: a file longer than the program attends over at once is encoded
  // in overlapping chunks, which NeMo would not do; each such file gets a note.
  bool note_chunks = false;
  std::mutex queue_mu, console_mu;
  job::Summary summary;
  std::unique_ptr<job::Progress> progress;
  std::atomic<int> failures{0};
  std::atomic<bool> fatal{false};
  std::shared_ptr<speech::VoiceActivity> vad;  // --vad: loaded once, before the models

  // Files longer than this go to a worker one at a time (Recognizer::alone_above_s; 0: none).
  double alone_above_s = 0;
  // The next `n` files of the queue (fewer at its end, none once the job stops), as many as
  // group_size (apps/cli/job_groups.h) allows: with several workers at most a worker's share of
  // the audio still queued, so the groups shrink towards the end of the queue; a file the model
  // transcribes alone (over alone_above_s) a group of its own, since a share of them taken at
  // once would run one after another on one device while the queue empties into the others.
  std::vector<job::Input> take(size_t n);
};

// Writes a file whole or not at all: a temporary file in the same folder, then a rename over the name.
Status write_atomically(const std::string& out, const std::string& text);

// Takes files from the queue until it is empty or the job stops (a signal, a transcript that cannot
// be written). index: the worker's place in the job (0, 1, ...), for the summary.
void worker_loop(Job& j, speech::Recognizer& r, int index);

}  // namespace vrun::cli
