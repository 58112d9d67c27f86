#include "apps/serve/responses.h"

#include <nlohmann/json.hpp>
#include <random>

#include "apps/common/transcript/writers.h"

namespace vrun::serve {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json null_or(const std::optional<std::string>& s) {
  return s ? json(*s) : json(nullptr);
}

json header(const CompletionId& id, const char* object) {
  return {{"id", id.id},
          {"object", object},
          {"created", id.created},
          {"model", id.model},
          {"system_fingerprint", "vrun"}};
}

}  // namespace

std::string error_body(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  return dump(json{{"error", err}});
}

std::string finish_reason(const std::string& stop_reason) {
  if (stop_reason == "length" || stop_reason == "context") return "length";
  return "stop";
}

std::string chat_completion_body(const CompletionId& id, const std::string& text, const std::string& finish,
                                 const Usage& u) {
  json j = header(id, "chat.completion");
  j["choices"] = json::array({{{"index", 0},
                               {"message", {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}}},
                               {"logprobs", nullptr},
                               {"finish_reason", finish}}});
  j["usage"] = usage_json(u);
  return dump(j);
}

std::string chat_chunk_body(const CompletionId& id, const std::optional<std::string>& content, bool role,
                            const std::optional<std::string>& finish) {
  json delta = json::object();
  if (role) delta["role"] = "assistant";
  if (content) delta["content"] = *content;
  json j = header(id, "chat.completion.chunk");
  j["choices"] = json::array(
      {{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", null_or(finish)}}});
  return dump(j);
}

std::string usage_chunk_body(const CompletionId& id, bool chat, const Usage& u) {
  json j = header(id, chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(u);
  return dump(j);
}

std::string completion_body(const CompletionId& id, const std::string& text, const std::string& finish,
                            const Usage& u) {
  json j = header(id, "text_completion");
  j["choices"] =
      json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish}}});
  j["usage"] = usage_json(u);
  return dump(j);
}

std::string completion_chunk_body(const CompletionId& id, const std::string& text,
                                  const std::optional<std::string>& finish) {
  json j = header(id, "text_completion");
  j["choices"] = json::array(
      {{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", null_or(finish)}}});
  return dump(j);
}

Parsed<HttpBody> transcription_body(const AudioRequest& req, const transcript::Transcript& t) {
  const std::string& f = req.response_format;
  if (f == "json") return {HttpBody{"application/json", dump(json{{"text", t.text()}})}, {}};
  if (f == "text") return {HttpBody{"text/plain; charset=utf-8", t.text() + "\n"}, {}};
  if (f == "srt" || f == "vtt") {
    auto r = transcript::render_transcript(t, f, req.filename);
    if (!r.is_ok()) {
      ApiError e;
      e.status = 500;
      e.type = "server_error";
      e.message = r.status().message();
      return Parsed<HttpBody>::fail(e);
    }
    return {HttpBody{f == "srt" ? "application/x-subrip; charset=utf-8" : "text/vtt; charset=utf-8", *r}, {}};
  }
  // verbose_json
  json segs = json::array(), words = json::array();
  for (size_t k = 0; k < t.segments.size(); ++k) {
    const auto& s = t.segments[k];
    json seg = transcript::segment_json(s);
    seg["id"] = k;
    seg["seek"] = 0;
    segs.push_back(std::move(seg));
    for (const auto& w : s.words)
      words.push_back({{"word", w.text}, {"start", w.start}, {"end", w.end}, {"probability", w.probability}});
  }
  json j = {{"task", req.task == AudioTask::kTranslate ? "translate" : "transcribe"},
            {"language", t.language},
            {"duration", t.stats.audio_s},
            {"text", t.text()},
            {"segments", segs}};
  if (req.word_timestamps) j["words"] = words;
  return {HttpBody{"application/json", dump(j)}, {}};
}

std::string models_body(const std::vector<ModelEntry>& models) {
  json data = json::array();
  for (const auto& m : models)
    data.push_back({{"id", m.id}, {"object", "model"}, {"created", m.created}, {"owned_by", m.owned_by}});
  return dump(json{{"object", "list"}, {"data", data}});
}

std::string new_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = prefix;
  for (int k = 0; k < 24; ++k) id.push_back(kAlphabet[rng() % (sizeof(kAlphabet) - 1)]);
  return id;
}

}  // namespace vrun::serve
