// The safetensors container: header parsing and validation.
//
//   [0, 8)        N, u64 little-endian: header length
//   [8, 8+N)      UTF-8 JSON object {name: {dtype, shape, data_offsets:[BEGIN, END)}, "__metadata__"?: {str: str}}
//   [8+N, EOF)    data region; offsets are relative to its start, contiguous, covering it exactly
//
// Rules and their order follow huggingface/safetensors : safetensors/src/tensor.rs
// (`read_metadata`, `Metadata::validate`) at 24b0b28; checkpoint-formats.md 1.3.
// Stricter than the reference where it is lax: duplicate JSON keys at any level (tensor names
// included), NUL bytes and a UTF-8 BOM in the header, nesting deeper than kMaxJsonDepth, more
// than kMaxTensors tensors, ranks above kMaxRank and names above kMaxNameBytes are rejected.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "lib/core/dtype.h"
#include "lib/core/error.h"

namespace moepack::st {

inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference's MAX_HEADER_SIZE, inclusive
inline constexpr size_t kMaxTensors = 2'000'000;
inline constexpr size_t kMaxRank = 64;
inline constexpr size_t kMaxNameBytes = 65536;
inline constexpr int kMaxJsonDepth = 64;

// One error kind per reference error variant, plus our stricter checks.
enum class Rule {
  header_too_small,       // HeaderTooSmall
  header_too_large,       // HeaderTooLarge
  invalid_header_length,  // InvalidHeaderLength
  invalid_utf8,           // InvalidHeader(Utf8Error)
  invalid_json,           // InvalidHeaderDeserialization (syntax, schema, unknown dtype, duplicates)
  invalid_offset,         // InvalidOffset(name)
  validation_overflow,    // ValidationOverflow
  misaligned_slice,       // MisalignedSlice
  tensor_invalid_info,    // TensorInvalidInfo
  incomplete_buffer,      // MetadataIncompleteBuffer
  resource_limit,         // our caps: tensor count, rank, name length, depth
};

std::string_view rule_name(Rule r);

class FormatError : public Error {
 public:
  FormatError(Rule rule, const std::string& file, const std::string& tensor, const std::string& detail);
  Rule rule() const { return rule_; }
  const std::string& tensor() const { return tensor_; }

 private:
  Rule rule_;
  std::string tensor_;
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;  // relative to the data region
  uint64_t end = 0;
  uint64_t num_elements() const;  // valid after validation (no overflow)
  uint64_t num_bytes() const { return end - begin; }
};

struct Header {
  uint64_t header_length = 0;                  // N
  std::vector<TensorInfo> tensors;             // sorted by (begin, end): file order
  std::map<std::string, std::string> metadata; // __metadata__, empty when absent or null
  bool has_metadata = false;
  uint64_t data_start() const { return 8 + header_length; }
};

// Validates `file` (the whole file's bytes; only the header region is read, so a sparse data
// region costs nothing) and returns its header. `path` is used in messages only.
Header parse_header(std::span<const uint8_t> file, const std::string& path);

// Same checks given only the first bytes of a file and its total size (for readers that do not
// map the whole file). `prefix` must hold at least min(file_size, 8 + N) bytes.
Header parse_header_prefix(std::span<const uint8_t> prefix, uint64_t file_size, const std::string& path);

// Number of bytes a tensor of `dtype` and `shape` takes, or an error naming the rule
// (validation_overflow, misaligned_slice). Shared by the reader and the writer.
uint64_t tensor_byte_size(DType dtype, std::span<const uint64_t> shape, const std::string& file, const std::string& name);

}  // namespace moepack::st
