// vrun.SpeechModel and vrun.Transcript: a Whisper or Parakeet model through the speech interface
// (apps/speech), transcripts rendered by the CLI's own writers so that files match its byte for byte.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mutex>
#include <optional>
#include <span>
#include <sstream>

#include "apps/common/transcript/writers.h"
#include "apps/python/bindings.h"
#include "apps/speech/decoding_choices.h"
#include "apps/speech/speech_recognizer.h"
#include "apps/speech/voice_activity.h"
#include "preprocess/audio_loader.h"

namespace vrun::python {

namespace {

// A transcript and the name of what it came from (the path as given; json's "audio").
struct Transcript {
  transcript::Transcript t;
  std::string source;

  std::string render(const std::string& format, const std::optional<std::string>& audio) const {
    return take(transcript::render_transcript(t, format, audio.value_or(source)));
  }
};

// transcribe()'s keywords: the decoding choices `vrun transcribe` takes, under their Python
// names, and vad=True (Silero VAD keeps the speech; vad_model: its .onnx, "" for the cache's).
struct SpeechArgs {
  speech::DecodingChoices choices;
  bool vad = false;
  std::string vad_model;
};

template <typename T>
void set(const py::handle& value, T* field) {
  if (!value.is_none()) *field = value.cast<T>();
}

// The keywords, with the CLI's defaults and checks (`vrun transcribe`'s --temperature,
// --temperature-increment, --no-fallback and so on under their Python names).
SpeechArgs parse_args(const py::kwargs& kw) {
  SpeechArgs args;
  speech::DecodingChoices& a = args.choices;
  for (const auto& [key, value] : kw) {
    const std::string k = key.cast<std::string>();
    if (k == "language") set(value, &a.language);
    else if (k == "task") set(value, &a.task);
    else if (k == "prompt") set(value, &a.prompt);
    else if (k == "attention") set(value, &a.attention);
    else if (k == "timestamps") set(value, &a.timestamps);
    else if (k == "word_timestamps") set(value, &a.word_timestamps);
    else if (k == "fallback") set(value, &a.fallback);
    else if (k == "condition_on_previous_text") set(value, &a.condition_on_previous_text);
    else if (k == "beam_size") set(value, &a.beam_size);
    else if (k == "best_of") set(value, &a.best_of);
    else if (k == "patience") set(value, &a.patience);
    else if (k == "length_penalty") set(value, &a.length_penalty);
    else if (k == "temperature") set(value, &a.temperature);
    else if (k == "temperature_increment") set(value, &a.temperature_increment);
    else if (k == "compression_ratio_threshold") set(value, &a.compression_ratio_threshold);
    else if (k == "logprob_threshold") set(value, &a.logprob_threshold);
    else if (k == "no_speech_threshold") set(value, &a.no_speech_threshold);
    else if (k == "seed") set(value, &a.seed);
    else if (k == "vad") set(value, &args.vad);
    else if (k == "vad_model") set(value, &args.vad_model);
    else
      throw py::type_error("transcribe() got an unexpected keyword argument '" + k +
                           "' (language, task, prompt, timestamps, word_timestamps, beam_size, best_of, patience, "
                           "length_penalty, temperature, temperature_increment, fallback, seed, "
                           "compression_ratio_threshold, logprob_threshold, no_speech_threshold, "
                           "condition_on_previous_text, attention, vad, vad_model)");
  }
  if (Status st = a.validate(); !st.is_ok()) throw py::value_error(st.message());
  return args;
}

// One input's samples: a file read (its path kept for json's "audio") or a numpy array held as is;
// with vad=True, its speech alone.
struct Input {
  std::string source;
  std::vector<float> loaded;
  bool is_array = false;
  py::object array;  // a C-contiguous float32 numpy array, viewed through the buffer protocol
  std::span<const float> view;
  std::optional<speech::SpeechOnly> speech;
  std::span<const float> samples() const {
    if (speech) return speech->samples;
    if (is_array) return view;
    return loaded;
  }
};

Input make_input(const py::handle& audio) {
  Input in;
  if (!py::isinstance<py::str>(audio) && !py::isinstance<py::bytes>(audio) && py::hasattr(audio, "__array_interface__")) {
    in.array = py::module_::import("numpy").attr("ascontiguousarray")(audio, "float32");
    py::buffer_info info = in.array.cast<py::buffer>().request();
    if (info.ndim != 1)
      throw py::value_error("audio as an array must be one-dimensional float32 samples at 16 kHz (vrun.load_audio reads files)");
    in.view = {static_cast<const float*>(info.ptr), static_cast<size_t>(info.shape[0])};
    in.is_array = true;
    return in;
  }
  in.source = fspath(audio);
  require_path(in.source, "transcribe");
  return in;
}

// Reads the files among the inputs (without the GIL).
void load_files(std::vector<Input>& inputs) {
  Status bad = Status::ok();
  {
    py::gil_scoped_release release;
    for (auto& in : inputs) {
      if (in.is_array || !bad.is_ok()) continue;
      auto audio = preprocess::load_audio(in.source);
      if (!audio.is_ok()) bad = audio.status();
      else in.loaded = std::move(audio->samples);
    }
  }
  if (!bad.is_ok()) throw Error(bad.message());
}

class SpeechModel {
 public:
  SpeechModel(const py::object& file, const std::string& backend, int threads, int decode_batch, int batch_size) {
    path_ = fspath(file);
    speech::LoadOptions lo;
    lo.backend = backend_kind(backend);
    check_threads(threads);
    lo.threads = threads;
    if (decode_batch < 1) throw py::value_error("decode_batch must be >= 1, got " + std::to_string(decode_batch));
    lo.decode_batch = decode_batch;
    if (batch_size < 1) throw py::value_error("batch_size must be >= 1, got " + std::to_string(batch_size));
    lo.streams = batch_size;
    batch_size_ = batch_size;
    require_path(path_, "SpeechModel");
    auto r = [&] {
      py::gil_scoped_release release;
      return speech::load(path_, lo);
    }();
    recognizer_ = take(std::move(r));
  }

  Transcript transcribe(const py::handle& audio, const py::object& on_segment, const py::kwargs& kw) {
    const SpeechArgs args = parse_args(kw);
    const speech::Options o = checked_options(args);
    std::vector<Input> inputs;
    inputs.push_back(make_input(audio));
    load_files(inputs);
    // vad=True with batch_size > 1: the speech in chunks of up to 30 s, batch_size side by side.
    const bool chunked = args.vad && batch_size_ > 1 && recognizer_->batch() > 1;
    keep_speech(inputs, args, chunked ? speech::chunk_span_options() : vad::SpanOptions{});
    if (chunked) return transcribe_chunks(inputs[0], o, on_segment);
    speech::OnSegment seg;
    std::optional<py::error_already_set> callback_error;
    if (!on_segment.is_none())
      seg = [&](const transcript::Segment& s) {
        py::gil_scoped_acquire acquire;
        if (callback_error) return;
        try {
          if (inputs[0].speech) {
            transcript::Segment mapped = s;
            speech::map_to_original(&mapped, inputs[0].speech->map);
            on_segment(mapped);
          } else {
            on_segment(s);
          }
        } catch (py::error_already_set& e) {
          callback_error = std::move(e);
        }
      };
    auto t = [&] {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      return recognizer_->transcribe(inputs[0].samples(), o, seg);
    }();
    if (callback_error) throw std::move(*callback_error);
    Transcript out{take(std::move(t)), inputs[0].source};
    if (inputs[0].speech) speech::map_to_original(&out.t, inputs[0].speech->map);
    return out;
  }

  std::vector<Transcript> transcribe_many(const py::list& audios, const py::kwargs& kw) {
    const SpeechArgs args = parse_args(kw);
    const speech::Options o = checked_options(args);
    std::vector<Input> inputs;
    for (const auto& a : audios) inputs.push_back(make_input(a));
    load_files(inputs);
    keep_speech(inputs, args);
    auto ts = [&] {
      py::gil_scoped_release release;
      std::vector<std::span<const float>> spans;
      for (const auto& in : inputs) spans.push_back(in.samples());
      std::lock_guard<std::mutex> lock(mu_);
      return recognizer_->transcribe_many(spans, {o});
    }();
    std::vector<Transcript> out;
    for (size_t i = 0; i < ts.size(); ++i) {
      out.push_back({take(std::move(ts[i])), inputs[i].source});
      if (inputs[i].speech) speech::map_to_original(&out.back().t, inputs[i].speech->map);
    }
    return out;
  }

  const std::string& family() const { return recognizer_->family(); }
  std::string device() const { return recognizer_->device_description(); }
  const std::vector<std::string>& notes() const { return recognizer_->notes(); }
  const std::string& path() const { return path_; }

 private:
  // The options checked against this model before any audio is read (a language an English-only
  // model lacks, translation, ...): ValueError with vrun's message.
  speech::Options checked_options(const SpeechArgs& args) const {
    const speech::Options o = args.choices.options();
    std::vector<std::string> ignored;
    if (Status s = recognizer_->check(o, &ignored); !s.is_ok()) throw py::value_error(s.message());
    if (!ignored.empty()) {
      auto warn = py::module_::import("warnings").attr("warn");
      for (const auto& w : ignored) warn(w);
    }
    return o;
  }

  // transcribe() of one input's speech in chunks side by side (speech::transcribe_in_chunks);
  // on_segment sees the segments once all chunks are done.
  Transcript transcribe_chunks(const Input& in, const speech::Options& o, const py::object& on_segment) {
    auto t = [&] {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      return speech::transcribe_in_chunks(*recognizer_, *in.speech, o, batch_size_);
    }();
    Transcript out{take(std::move(t)), in.source};
    if (!on_segment.is_none())
      for (const auto& s : out.t.segments) on_segment(s);
    return out;
  }

  // vad=True: Silero VAD (loaded on first use, and again for another vad_model) keeps each
  // input's speech; the transcripts' times are mapped back to the whole audio.
  void keep_speech(std::vector<Input>& inputs, const SpeechArgs& a, const vad::SpanOptions& span_options = {}) {
    if (!a.vad) {
      if (!a.vad_model.empty()) throw py::value_error("vad_model is given but vad is False");
      return;
    }
    Status bad = Status::ok();
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(vad_mu_);
      if (!vad_ || vad_path_ != a.vad_model) {
        auto v = speech::VoiceActivity::load(a.vad_model);
        if (v.is_ok()) {
          vad_ = std::move(*v);
          vad_path_ = a.vad_model;
        } else {
          bad = v.status();
        }
      }
      for (auto& in : inputs) {
        if (!bad.is_ok()) break;
        auto cut = vad_->keep_speech(in.samples(), span_options);
        if (!cut.is_ok()) bad = cut.status().with_context(in.source.empty() ? "vad" : in.source);
        else in.speech = std::move(*cut);
      }
    }
    if (!bad.is_ok()) throw Error(bad.message());
  }

  std::string path_;
  int batch_size_ = 1;
  std::unique_ptr<speech::Recognizer> recognizer_;
  std::mutex mu_;  // one transcription at a time per model
  std::mutex vad_mu_;
  std::shared_ptr<speech::VoiceActivity> vad_;
  std::string vad_path_;
};

const char* kOptionsDoc =
    "Options (keywords, the defaults of `vrun transcribe`): language='auto' ('en', 'de', ...), task='transcribe'\n"
    "or 'translate', prompt='' (text the first window is conditioned on), timestamps=True, word_timestamps=False,\n"
    "beam_size=1 (greedy), best_of=5, patience=1.0, length_penalty=1.0, temperature=0.0,\n"
    "temperature_increment=0.2, fallback=True, seed=0, compression_ratio_threshold=2.4, logprob_threshold=-1.0,\n"
    "no_speech_threshold=0.6, condition_on_previous_text=True; Parakeet: attention='full' or 'local'.\n"
    "vad=False: True transcribes only the speech Silero VAD finds (faster-whisper's defaults), times staying\n"
    "those of the whole audio; vad_model='' (the cache's, scripts/fetch-models.sh silero-vad) or a path.\n"
    "Bad values raise ValueError before any audio is read.";

void register_transcript(py::module_& m) {
  py::class_<transcript::Word>(m, "Word", "A word with its times (seconds) and probability.")
      .def_readonly("start", &transcript::Word::start)
      .def_readonly("end", &transcript::Word::end)
      .def_readonly("text", &transcript::Word::text, "The word with its leading space, as decoded")
      .def_readonly("probability", &transcript::Word::probability)
      .def("__repr__", [](const transcript::Word& w) {
        return "Word(" + std::to_string(w.start) + ", " + std::to_string(w.end) + ", " + py::repr(py::str(w.text)).cast<std::string>() + ")";
      });
  py::class_<transcript::Segment>(m, "Segment", "A segment of a transcript: times in seconds, text, words when asked for.")
      .def_readonly("start", &transcript::Segment::start)
      .def_readonly("end", &transcript::Segment::end)
      .def_readonly("text", &transcript::Segment::text)
      .def_readonly("words", &transcript::Segment::words)
      .def_readonly("tokens", &transcript::Segment::tokens)
      .def_readonly("avg_logprob", &transcript::Segment::avg_logprob)
      .def_readonly("no_speech_prob", &transcript::Segment::no_speech_prob)
      .def_readonly("temperature", &transcript::Segment::temperature)
      .def_readonly("compression_ratio", &transcript::Segment::compression_ratio)
      .def("__repr__", [](const transcript::Segment& s) {
        return "Segment(" + transcript::format_timestamp(s.start) + " --> " + transcript::format_timestamp(s.end) + ", " +
               py::repr(py::str(s.text)).cast<std::string>() + ")";
      });
  py::class_<Transcript>(m, "Transcript",
                         "What SpeechModel.transcribe returns. to_text/to_srt/to_vtt/to_tsv/to_json give the files\n"
                         "`vrun transcribe -o FORMAT` writes, byte for byte.")
      .def_property_readonly("text", [](const Transcript& t) { return t.t.text(); }, "Segment texts joined, outer spaces trimmed")
      .def_property_readonly("language", [](const Transcript& t) { return t.t.language; })
      .def_property_readonly("language_probability", [](const Transcript& t) { return t.t.language_probability; })
      .def_property_readonly("segments", [](const Transcript& t) { return t.t.segments; })
      .def_property_readonly("source", [](const Transcript& t) { return t.source; }, "The path transcribed ('' for an array)")
      .def_property_readonly("duration", [](const Transcript& t) { return t.t.stats.audio_s; }, "Audio seconds")
      .def_property_readonly("stats", [](const Transcript& t) {
            const auto& s = t.t.stats;
            py::dict d;
            d["audio_s"] = s.audio_s, d["features_s"] = s.features_s, d["encode_s"] = s.encode_s, d["decode_s"] = s.decode_s;
            d["align_s"] = s.align_s, d["windows"] = s.windows, d["tokens"] = s.tokens;
            return d;
          }, "Audio seconds and the time spent on features, encoding, decoding and word alignment")
      .def("render", &Transcript::render, py::arg("format"), py::arg("audio") = py::none(),
           "The transcript as 'txt', 'srt', 'vtt', 'tsv' or 'json' (json's \"audio\" is `audio`, else source)")
      .def("to_text", [](const Transcript& t) { return t.render("txt", {}); }, "The txt file: one line per segment")
      .def("to_srt", [](const Transcript& t) { return t.render("srt", {}); }, "SubRip subtitles")
      .def("to_vtt", [](const Transcript& t) { return t.render("vtt", {}); }, "WebVTT subtitles")
      .def("to_tsv", [](const Transcript& t) { return t.render("tsv", {}); }, "start, end (ms) and text, tab-separated")
      .def("to_json", [](const Transcript& t, const std::optional<std::string>& audio) { return t.render("json", audio); },
           py::arg("audio") = py::none(), "Segments, words, tokens and scores as JSON (the CLI's json file)")
      .def("__str__", [](const Transcript& t) { return t.t.text(); })
      .def("__repr__", [](const Transcript& t) {
        return "Transcript(" + std::to_string(t.t.segments.size()) + " segments, " + py::repr(py::str(t.t.text())).cast<std::string>() + ")";
      });
}

}  // namespace

void register_speech(py::module_& m) {
  register_transcript(m);
  py::class_<SpeechModel>(m, "SpeechModel",
                          "A speech recogniser: Whisper (CTranslate2 or Hugging Face folder, whisper.cpp ggml-*.bin),\n"
                          "Parakeet (.nemo, Hugging Face folder) or a .vrp exported from either.")
      .def(py::init<const py::object&, const std::string&, int, int, int>(), py::arg("path"), py::arg("backend") = "auto",
           py::arg("threads") = 0, py::arg("decode_batch") = 5, py::arg("batch_size") = 1,
           "SpeechModel(path, backend='auto'|'cpu'|'vulkan', threads=0, decode_batch=5, batch_size=1)\n\n"
           "Loads the model (GIL released). threads 0: VRUN_THREADS or all cores. decode_batch: rows of Whisper's\n"
           "batched decoder (beam_size and best_of need at most this many). batch_size: Whisper inputs that\n"
           "transcribe_many decodes together (the CLI's --batch-size; Parakeet batches by its program); with\n"
           "vad=True, transcribe() cuts the speech into chunks of up to 30 s and runs batch_size of them side by\n"
           "side, each on its own (as `vrun transcribe --vad --batch-size N`).")
      .def("transcribe", &SpeechModel::transcribe, py::arg("audio"), py::kw_only(), py::arg("on_segment") = py::none(),
           (std::string("transcribe(audio, *, on_segment=None, **options) -> Transcript\n\n"
                        "audio: a file path (WAV, FLAC, OGG, MP3; any rate and channel count) or a one-dimensional\n"
                        "float32 array of 16-kHz mono samples (vrun.load_audio). on_segment(Segment) is called as each\n"
                        "segment is decoded. The model runs with the GIL released.\n") + kOptionsDoc).c_str())
      .def("transcribe_many", &SpeechModel::transcribe_many, py::arg("audios"),
           (std::string("transcribe_many(audios, **options) -> list[Transcript]\n\n"
                        "Several inputs (paths or arrays) with the same options; Parakeet encodes them together, Whisper\n"
                        "batch_size at a time (one after another with batch_size 1); each transcript is the one the\n"
                        "input gives alone.\n") + kOptionsDoc).c_str())
      .def_property_readonly("family", &SpeechModel::family, "'whisper' or 'parakeet'")
      .def_property_readonly("device", &SpeechModel::device, "What runs the model")
      .def_property_readonly("notes", &SpeechModel::notes, "Import and conversion notes")
      .def_property_readonly("path", &SpeechModel::path);
}

}  // namespace vrun::python
