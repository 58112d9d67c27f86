// whisper.cpp model files (ggml-*.bin): the u32 magic 0x67676d6c, eleven i32 hyper-parameters
// (n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state,
// n_text_head, n_text_layer, n_mels, ftype), the mel filterbank (i32 n_mel, i32 n_fft, f32 data),
// the vocabulary (i32 count, then per token a u32 length and raw bytes), then tensors to the end of
// the file: i32 n_dims, i32 name length, i32 ggml type, n_dims x i32 sizes (innermost first), the
// name, the data (no padding). Names are openai-whisper's (encoder.blocks.N.attn.query.weight).
#pragma once

#include <string>

#include "models/whisper/ct2_whisper.h"

namespace vrun::whisper {

// A regular file that starts with the ggml magic.
bool is_ggml_whisper_file(const std::string& path);

// f32/f16 tensors are kept; q4_0, q4_1 and q8_0 are kept (vrun runs them); q5_0 and q5_1 become
// q8_0 (one note line says so). The tokenizer is built from the file's vocabulary, the
// suppress lists as openai-whisper derives them, the alignment heads from the dimensions.
Result<ImportedWhisper> import_ggml_whisper(const std::string& path);

}  // namespace vrun::whisper
