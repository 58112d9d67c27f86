// Response bodies shaped as the OpenAI API returns them: chat completions and their stream
// chunks, text completions, transcriptions in each response_format, the model list, errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/transcript/transcript.h"
#include "apps/serve/api_types.h"

namespace vrun::serve {

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0;  // of prompt_tokens, those not computed again (prompt_tokens_details)
};

// What identifies one completion across its chunks.
struct CompletionId {
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;
  std::string model;
};

std::string error_body(const ApiError& e);
// "eos"/"stop" -> "stop"; "length"/"context" -> "length".
std::string finish_reason(const std::string& stop_reason);

std::string chat_completion_body(const CompletionId& id, const std::string& text, const std::string& finish,
                                 const Usage& u);
// One chat stream chunk: a role delta (first), a content delta, or the final one with finish.
std::string chat_chunk_body(const CompletionId& id, const std::optional<std::string>& content, bool role,
                            const std::optional<std::string>& finish);
// The stream's last chunk when stream_options.include_usage: empty choices, the usage.
std::string usage_chunk_body(const CompletionId& id, bool chat, const Usage& u);

std::string completion_body(const CompletionId& id, const std::string& text, const std::string& finish,
                            const Usage& u);
std::string completion_chunk_body(const CompletionId& id, const std::string& text,
                                  const std::optional<std::string>& finish);

struct HttpBody {
  std::string content_type, body;
};
// The transcript as response_format asks; errors when a writer fails.
Parsed<HttpBody> transcription_body(const AudioRequest& req, const transcript::Transcript& t);

struct ModelEntry {
  std::string id, owned_by = "vrun";
  int64_t created = 0;
  std::string kind;  // "text" or "speech"
};
std::string models_body(const std::vector<ModelEntry>& models);

// "chatcmpl-" + 24 random alphanumerics.
std::string new_id(const char* prefix);

}  // namespace vrun::serve
