// Request bodies into typed requests: every field's type and range is checked here, and the
// first problem becomes a 400 naming the field (param). Unknown fields are ignored, as the
// OpenAI API tolerates clients that send newer ones.
#pragma once

#include <string_view>
#include <vector>

#include "apps/serve/api_types.h"

namespace vrun::serve {

// One part of a multipart/form-data body (the HTTP library splits the body into parts).
struct FormPart {
  std::string name, filename, content_type;
  std::string data;
};

Parsed<ChatRequest> parse_chat_request(std::string_view body);
Parsed<CompletionRequest> parse_completion_request(std::string_view body);
// The form fields of /v1/audio/transcriptions (kTranscribe) or /v1/audio/translations.
Parsed<AudioRequest> parse_audio_request(std::vector<FormPart> parts, AudioTask task);
// Authorization header against the configured key ("Bearer KEY"); true when they match.
// The boundary parameter of a multipart/form-data Content-Type, or the 400 to answer.
Parsed<std::string> multipart_boundary(std::string_view content_type);
bool bearer_matches(std::string_view authorization, std::string_view key);

}  // namespace vrun::serve
