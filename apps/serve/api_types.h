// The requests the server understands, as typed values (parsed and checked once, at the edge),
// and the OpenAI-shaped error every failure becomes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vrun::serve {

// {"error": {"message", "type", "param", "code"}} with its HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field; empty: null
  std::string code;   // e.g. "model_not_found"; empty: null
};

// A value or the error that prevented it.
template <typename T>
struct Parsed {
  std::optional<T> value;
  ApiError error;
  bool ok() const { return value.has_value(); }
  static Parsed fail(ApiError e) { return Parsed{std::nullopt, std::move(e)}; }
};

ApiError bad_request(std::string message, std::string param = "", std::string code = "");

struct ChatMessage {
  std::string role;  // system | user | assistant (developer is read as system)
  std::string content;
};

// What chat and text completions share: sampling and streaming.
struct GenerationFields {
  std::string model;
  double temperature = 1.0;  // OpenAI's default; 0 = greedy
  double top_p = 1.0;
  std::optional<int64_t> max_tokens;
  std::vector<std::string> stop;  // at most 4
  std::optional<int64_t> seed;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool cache_prompt = true;    // llama-server's field: false prefills the whole prompt again
};

struct ChatRequest {
  GenerationFields gen;
  std::vector<ChatMessage> messages;
};

struct CompletionRequest {
  GenerationFields gen;
  std::string prompt;
};

enum class AudioTask { kTranscribe, kTranslate };

struct AudioRequest {
  AudioTask task = AudioTask::kTranscribe;
  std::string model;
  std::vector<uint8_t> file;
  std::string filename;
  std::string language;  // "" = detect (multilingual models)
  std::string prompt;
  double temperature = 0.0;
  std::string response_format = "json";  // json | text | srt | vtt | verbose_json
  bool word_timestamps = false;          // timestamp_granularities[] has "word"
  bool segment_timestamps = true;
  std::optional<bool> vad_filter;  // unset: the server's --vad
};

}  // namespace vrun::serve
