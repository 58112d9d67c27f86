// Reads the key/value header of a GGUF file (not its tensors) into a MetadataMap; every length
// and count is checked against the bytes that are there.
#pragma once

#include <string>
#include <string_view>

#include "apps/common/tokenizer/metadata.h"
#include "runtime/base/status.h"

namespace vrun::tok {

// Parses the header from a buffer holding at least all of it. *needs_more is set (and an error
// returned) when the buffer ends inside the header, so a file reader can read further.
Result<MetadataMap> parse_gguf_metadata(std::string_view bytes, const std::string& source, bool* needs_more);
// Reads only as much of the file as the header takes.
Result<MetadataMap> read_gguf_metadata(const std::string& path);

}  // namespace vrun::tok
