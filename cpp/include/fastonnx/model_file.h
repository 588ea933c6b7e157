// Writing a serialized model to disk: one .onnx file, or the model and its external data file.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "fastonnx/proto_writer.h"
#include "fastonnx/serializer.h"

namespace fastonnx {

// Called between pieces of kWritePiece bytes with the bytes written since the previous call
// (progress, a check for Ctrl-C); an exception it throws stops the writing and propagates,
// leaving the file incomplete (callers write to a temporary name).
using BetweenPieces = std::function<void(size_t)>;
constexpr size_t kWritePiece = size_t{16} << 20;

// Writes what `produce` produces to `path`; an I/O error is a std::system_error naming the path.
void write_file(const std::string& path, const std::function<void(const ByteSink&)>& produce,
                const BetweenPieces& between_pieces);

// Writes the model `serialize` makes (given where its external data go, or nullptr) to `path`;
// with a `location`, initializers of ExternalData::threshold bytes or more go to `data_path`,
// which the model names `location`, except those whose bytes lie in one of `references`, which
// the model points at there. Computed weights are prefetched while the bytes are written.
// `will_write`, before anything is written, gets the bytes the files will hold in all: what
// `between_pieces` then reports (the weights found in `references` are not among them).
void write_model(const std::function<ProtoMessage(ExternalData*)>& serialize, const std::string& path,
                 const std::string& data_path, const std::string& location, const BetweenPieces& between_pieces,
                 std::vector<ExternalData::Reference> references = {},
                 const std::function<void(size_t)>& will_write = nullptr);

// One of several models written together: `serialize` makes it given where its external data go.
struct ModelToWrite {
  std::function<ProtoMessage(ExternalData*)> serialize;
  std::string path;
};

// Writes `models`, each to its path, with the initializers of all of them in one data file at
// `data_path`, which they name `location` (as write_model does for one): bytes that several
// hold (a weight two graphs share) are written once and each model points at them. The data
// file is written first, then the models in order; `references` and `will_write` as for
// write_model.
void write_models(const std::vector<ModelToWrite>& models, const std::string& data_path, const std::string& location,
                  const BetweenPieces& between_pieces, std::vector<ExternalData::Reference> references = {},
                  const std::function<void(size_t)>& will_write = nullptr);

// The model as one message's bytes; a std::length_error beyond protobuf's 2 GB limit.
std::string model_bytes(const ProtoMessage& proto);

}  // namespace fastonnx
