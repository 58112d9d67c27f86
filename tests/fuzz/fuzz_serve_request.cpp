// libFuzzer target for what `vrun serve` reads from clients before any model sees it: JSON
// bodies into typed chat/completion requests, multipart form fields into an audio request, and
// the Content-Type and Authorization headers. Every input must give a request that keeps the
// parser's promises or a 4xx error with a message; never a crash.
//
// The first byte picks the reader: 0 chat body, 1 completion body, 2 audio form fields (the rest
// split at NUL bytes into name, value, name, value, ...), 3 headers (Content-Type, newline,
// Authorization).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "apps/serve/request_parser.h"

namespace {

using namespace vrun::serve;

void check_error(const ApiError& e) {
  if (e.message.empty() || e.status < 400 || e.status > 499) __builtin_trap();
}

void check_generation(const GenerationFields& g) {
  if (!(g.temperature >= 0 && g.temperature <= 2) || !(g.top_p >= 0 && g.top_p <= 1)) __builtin_trap();
  if (g.max_tokens && *g.max_tokens < 1) __builtin_trap();
  if (g.stop.size() > 4) __builtin_trap();
  for (const auto& s : g.stop)
    if (s.empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto r = parse_chat_request(rest);
      if (!r.ok()) return check_error(r.error), 0;
      check_generation(r.value->gen);
      if (r.value->messages.empty()) __builtin_trap();
      for (const auto& m : r.value->messages)
        if (m.role != "system" && m.role != "user" && m.role != "assistant") __builtin_trap();
      return 0;
    }
    case 1: {
      auto r = parse_completion_request(rest);
      if (!r.ok()) return check_error(r.error), 0;
      check_generation(r.value->gen);
      if (r.value->prompt.empty()) __builtin_trap();
      return 0;
    }
    case 2: {
      std::vector<FormPart> parts;
      std::vector<std::string> pieces(1);
      for (char c : rest) {
        if (c == '\0')
          pieces.emplace_back();
        else
          pieces.back().push_back(c);
      }
      for (size_t k = 0; k + 1 < pieces.size(); k += 2)
        parts.push_back({pieces[k], "f.wav", "", pieces[k + 1]});
      auto r =
          parse_audio_request(std::move(parts), data[0] & 4 ? AudioTask::kTranslate : AudioTask::kTranscribe);
      if (!r.ok()) return check_error(r.error), 0;
      const auto& a = *r.value;
      if (a.file.empty() || a.model.empty() || !(a.temperature >= 0 && a.temperature <= 1)) __builtin_trap();
      const auto& f = a.response_format;
      if (f != "json" && f != "text" && f != "srt" && f != "vtt" && f != "verbose_json") __builtin_trap();
      return 0;
    }
    default: {
      const size_t nl = rest.find('\n');
      auto b = multipart_boundary(rest.substr(0, nl));
      if (!b.ok())
        check_error(b.error);
      else if (b.value->empty() || b.value->size() > 200)
        __builtin_trap();
      if (nl != std::string_view::npos) {
        const std::string_view auth = rest.substr(nl + 1);
        if (bearer_matches(auth, "key") != (auth == "Bearer key")) __builtin_trap();
      }
      return 0;
    }
  }
}
