// POST /v1/audio/transcriptions and /v1/audio/translations: the multipart upload is read whole
// (the body-size limit applies) and split into parts by the HTTP library, checked field by field,
// decoded by the CLI's audio loader, queued on the speech model's scheduler, and answered in the requested
// format.
#include <future>

#include "apps/serve/engines.h"
#include "apps/serve/request_parser.h"
#include "apps/serve/responses.h"
#include "apps/serve/server_context.h"
#include "preprocess/audio_loader.h"

namespace vrun::serve {
namespace {

void handle_audio(ServerContext& ctx, const httplib::Request& req, httplib::Response& res,
                  const httplib::ContentReader& reader, AudioTask task) {
  // A body that is not multipart/form-data is refused before it is read.
  auto boundary = multipart_boundary(req.get_header_value("Content-Type"));
  if (!boundary.ok()) return send_error(res, boundary.error);
  std::vector<FormPart> parts;
  const bool read = reader(
      [&](const httplib::MultipartFormData& header) {
        parts.push_back(FormPart{header.name, header.filename, header.content_type, std::string()});
        return parts.size() <= 64;
      },
      [&](const char* data, size_t len) {
        if (parts.empty()) return false;
        parts.back().data.append(data, len);
        return true;
      });
  if (!read && res.status == 413) return send_error(res, payload_too_large(ctx.options.max_body_mb));
  if (!read)
    return send_error(
        res, bad_request("the multipart body is malformed or truncated (or has more than 64 parts)", "file"));
  auto parsed = parse_audio_request(std::move(parts), task);
  if (!parsed.ok()) return send_error(res, parsed.error);
  AudioRequest& a = *parsed.value;
  const char* endpoint =
      task == AudioTask::kTranslate ? "/v1/audio/translations" : "/v1/audio/transcriptions";
  auto found = ctx.find(a.model, ModelKind::kSpeech, endpoint);
  if (!found.ok()) return send_error(res, found.error);
  ServedModel& m = **found.value;
  auto audio = preprocess::load_audio_memory(a.file, a.filename);
  a.file.clear();
  a.file.shrink_to_fit();
  if (!audio.is_ok())
    return send_error(res, bad_request("unsupported or corrupt audio: " + audio.status().message(), "file",
                                       "invalid_audio"));
  if (audio->samples.empty())
    return send_error(res, bad_request("the audio file holds no samples", "file", "invalid_audio"));
  if (audio->duration_s() > ctx.options.max_audio_s)
    return send_error(
        res, bad_request("the audio is " + std::to_string(static_cast<int64_t>(audio->duration_s())) +
                             " s long; this server takes at most " +
                             std::to_string(static_cast<int64_t>(ctx.options.max_audio_s)) + " s",
                         "file", "audio_too_long"));
  // vad_filter (faster-whisper's name; default: the server's --vad): the speech alone is
  // transcribed, and the times mapped back to the whole upload.
  std::optional<speech::SpeechOnly> speech;
  if (a.vad_filter.value_or(ctx.vad != nullptr)) {
    if (!ctx.vad)
      return send_error(res, bad_request("this server runs without a VAD model: start it with --vad to use vad_filter",
                                         "vad_filter"));
    auto cut = ctx.vad->keep_speech(audio->samples);
    if (!cut.is_ok()) return send_error(res, runner_error(cut.status()));
    speech = std::move(*cut);
    audio->samples = speech->samples;
  }
  auto job = std::make_shared<SpeechJob>();
  job->samples = std::move(audio->samples);
  job->options.language = a.language;
  job->options.task = task == AudioTask::kTranslate ? "translate" : "transcribe";
  job->options.prompt = a.prompt;
  job->options.temperature = a.temperature;
  job->options.word_timestamps = a.word_timestamps;
  auto done = std::make_shared<std::promise<Result<transcript::Transcript>>>();
  auto future = done->get_future();
  job->on_done = [done](Result<transcript::Transcript> t) { done->set_value(std::move(t)); };
  if (!m.scheduler->submit(job)) return send_error(res, too_many_requests(m.id));
  if (future.wait_for(std::chrono::seconds(ctx.options.timeout_s)) != std::future_status::ready) {
    job->cancelled = true;
    return send_error(res, timed_out());
  }
  auto t = future.get();
  if (!t.is_ok()) return send_error(res, runner_error(t.status()));
  if (speech) speech::map_to_original(&*t, speech->map);
  auto out = transcription_body(a, *t);
  if (!out.ok()) return send_error(res, out.error);
  res.set_content(out.value->body, out.value->content_type.c_str());
}

}  // namespace

void add_audio_routes(httplib::Server& server, ServerContext& ctx) {
  server.Post("/v1/audio/transcriptions", [&ctx](const httplib::Request& req, httplib::Response& res,
                                                 const httplib::ContentReader& reader) {
    handle_audio(ctx, req, res, reader, AudioTask::kTranscribe);
  });
  server.Post("/v1/audio/translations", [&ctx](const httplib::Request& req, httplib::Response& res,
                                               const httplib::ContentReader& reader) {
    handle_audio(ctx, req, res, reader, AudioTask::kTranslate);
  });
}

}  // namespace vrun::serve
