// Weight types chosen at export (`vrun export --dtype`): the large matrices of a Whisper model
// converted to one type so that the program file is smaller (q8_0 tiny.en fits where the f16
// checkpoint does not) or matches what a device runs fastest.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/whisper/whisper_model.h"

namespace vrun::whisper {

// The matrices a conversion touches: every linear weight (self- and cross-attention, feed-forward)
// and the token embedding, which is also the vocabulary projection. Norms, biases, position
// tables and the convolution stem stay as they are: they are small, and the elementwise and
// convolution kernels read them as f32.
bool is_whisper_matrix(const std::string& canonical_name);

// `weights` with those matrices converted to `dtype` (f32, f16, bf16 or q8_0), each converted
// once when first asked for. Quantised rows are whole 32-element blocks: a matrix whose width is
// not a multiple of 32 keeps its type, and `notes` says so.
Result<WeightSource> convert_whisper_matrices(const WeightSource& weights, const WhisperConfig& config, DType dtype,
                                              std::vector<std::string>* notes);

// The program `vrun export` writes for a Whisper checkpoint in any layout import_whisper reads:
// the matrices converted to `dtype` when given, the batched decoder built for 5 rows (beam
// search and best-of at the transcribe defaults), and stream methods for `streams` files decoded
// together when it is above 1. Import and conversion notes go to `notes`.
Result<std::shared_ptr<Program>> export_whisper_program(const std::string& checkpoint, std::optional<DType> dtype,
                                                        std::vector<std::string>* notes, int64_t streams = 0);

}  // namespace vrun::whisper
