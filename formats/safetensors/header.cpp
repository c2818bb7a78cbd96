#include "formats/safetensors/header.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include <nlohmann/json.hpp>

namespace moepack::st {
namespace {

// Strict UTF-8 (what Rust's str::from_utf8 accepts): no overlongs, no surrogates, <= U+10FFFF.
// Returns the offset of the first invalid byte, or npos.
size_t first_invalid_utf8(std::span<const uint8_t> s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) { len = 3; hi = 0x9F; }
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }
    else return i;
    if (i + len > n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    i += len;
  }
  return std::string::npos;
}

using json = nlohmann::json;

// Builds the tensor list straight from SAX events, checking the schema as it goes. Every
// schema violation is reported as invalid_json, like the reference's serde errors.
class HeaderSax {
 public:
  explicit HeaderSax(Header& out) : out_(out) {}

  std::string error;  // set when a handler returns false
  bool failed_on_limit = false;

  bool null() { return scalar(Kind::null_value, 0); }
  bool boolean(bool) { return scalar(Kind::other, 0); }
  bool number_integer(json::number_integer_t v) {
    // nlohmann reports only negative numbers (and "-0") here.
    if (v == 0) return scalar(Kind::unsigned_number, 0);
    return scalar(Kind::other, 0);
  }
  bool number_unsigned(json::number_unsigned_t v) { return scalar(Kind::unsigned_number, v); }
  bool number_float(json::number_float_t, const std::string&) { return scalar(Kind::other, 0); }
  bool string(std::string& s) {
    pending_string_ = &s;
    return scalar(Kind::string_value, 0);
  }
  bool binary(json::binary_t&) { return fail("unexpected binary value"); }

  bool start_object(size_t) {
    if (++depth_ > kMaxJsonDepth) return limit("JSON nesting deeper than " + std::to_string(kMaxJsonDepth));
    if (skip_depth_ > 0) { ++skip_depth_; return true; }
    switch (depth_) {
      case 1: return true;  // the root object
      case 2:
        if (current_is_metadata_) { out_.has_metadata = true; return true; }
        tensor_ = TensorInfo{};
        tensor_.name = std::move(current_name_);
        seen_dtype_ = seen_shape_ = seen_offsets_ = false;
        fields_seen_.clear();
        return true;
      case 3:
        if (current_is_metadata_) return fail("__metadata__ values must be strings");
        if (field_ == Field::unknown) { skip_depth_ = 1; return true; }
        return fail(std::string("field `") + field_name() + "` of tensor `" + tensor_.name + "` has the wrong type");
      default:
        return fail("unexpected nesting");
    }
  }

  bool end_object() {
    if (skip_depth_ > 0) { --skip_depth_; --depth_; return true; }
    if (depth_ == 2) {
      if (!current_is_metadata_) {
        if (!seen_dtype_) return fail("missing field `dtype` in tensor `" + tensor_.name + "`");
        if (!seen_shape_) return fail("missing field `shape` in tensor `" + tensor_.name + "`");
        if (!seen_offsets_) return fail("missing field `data_offsets` in tensor `" + tensor_.name + "`");
        if (out_.tensors.size() >= kMaxTensors) return limit("more than " + std::to_string(kMaxTensors) + " tensors");
        out_.tensors.push_back(std::move(tensor_));
      }
    }
    --depth_;
    return true;
  }

  bool start_array(size_t) {
    if (++depth_ > kMaxJsonDepth) return limit("JSON nesting deeper than " + std::to_string(kMaxJsonDepth));
    if (skip_depth_ > 0) { ++skip_depth_; return true; }
    if (depth_ == 1) return fail("header is not a JSON object");
    if (depth_ == 2) return fail(current_is_metadata_ ? "__metadata__ must be an object of strings"
                                                      : "tensor `" + current_name_ + "` is not an object");
    if (depth_ == 3 && !current_is_metadata_) {
      if (field_ == Field::unknown) { skip_depth_ = 1; return true; }
      if (field_ == Field::dtype) return fail("field `dtype` of tensor `" + tensor_.name + "` is not a string");
      if (field_ == Field::shape) seen_shape_ = true;
      if (field_ == Field::data_offsets) seen_offsets_ = true;
      array_items_ = 0;
      return true;
    }
    return fail("unexpected array");
  }

  bool end_array() {
    if (skip_depth_ > 0) { --skip_depth_; --depth_; return true; }
    if (depth_ == 3 && field_ == Field::data_offsets && array_items_ != 2)
      return fail("`data_offsets` of tensor `" + tensor_.name + "` must have 2 items, has " + std::to_string(array_items_));
    --depth_;
    return true;
  }

  bool key(std::string& k) {
    if (skip_depth_ > 0) return true;
    if (depth_ == 1) {
      if (k.size() > kMaxNameBytes) return limit("a tensor name longer than " + std::to_string(kMaxNameBytes) + " bytes");
      if (!root_keys_.insert(k).second)
        return fail(k == "__metadata__" ? "duplicate field `__metadata__`" : "duplicate tensor name `" + k + "`");
      current_is_metadata_ = (k == "__metadata__");
      current_name_ = k;
      return true;
    }
    if (depth_ == 2 && current_is_metadata_) {
      if (out_.metadata.count(k)) return fail("duplicate key `" + k + "` in __metadata__");
      metadata_key_ = k;
      return true;
    }
    if (depth_ == 2) {
      if (!fields_seen_.insert(k).second) return fail("duplicate field `" + k + "` in tensor `" + tensor_.name + "`");
      if (k == "dtype") field_ = Field::dtype;
      else if (k == "shape") field_ = Field::shape;
      else if (k == "data_offsets") field_ = Field::data_offsets;
      else field_ = Field::unknown;
      return true;
    }
    return fail("unexpected key");
  }

  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    if (error.empty()) error = std::string(ex.what()) + " (byte " + std::to_string(position) + " of the header)";
    return false;
  }

 private:
  enum class Kind { null_value, unsigned_number, string_value, other };
  enum class Field { dtype, shape, data_offsets, unknown };

  const char* field_name() const {
    switch (field_) {
      case Field::dtype: return "dtype";
      case Field::shape: return "shape";
      case Field::data_offsets: return "data_offsets";
      default: return "?";
    }
  }

  bool fail(const std::string& why) {
    if (error.empty()) error = why;
    return false;
  }
  bool limit(const std::string& why) {
    failed_on_limit = true;
    return fail(why);
  }

  bool scalar(Kind kind, uint64_t u) {
    if (skip_depth_ > 0) return true;
    if (depth_ == 0) return fail("header is not a JSON object");
    if (depth_ == 1) {
      if (current_is_metadata_ && kind == Kind::null_value) return true;  // "__metadata__": null is no metadata
      return fail(current_is_metadata_ ? "__metadata__ must be an object of strings"
                                       : "tensor `" + current_name_ + "` is not an object");
    }
    if (depth_ == 2 && current_is_metadata_) {
      if (kind != Kind::string_value) return fail("__metadata__ value of `" + metadata_key_ + "` is not a string");
      out_.metadata.emplace(metadata_key_, std::move(*pending_string_));
      return true;
    }
    if (depth_ == 2) {
      switch (field_) {
        case Field::unknown: return true;  // unknown fields are ignored, as by the reference
        case Field::dtype: {
          if (kind != Kind::string_value) return fail("field `dtype` of tensor `" + tensor_.name + "` is not a string");
          auto t = dtype_from_name(*pending_string_);
          if (!t) return fail("unknown dtype `" + *pending_string_ + "` in tensor `" + tensor_.name + "`");
          tensor_.dtype = *t;
          seen_dtype_ = true;
          return true;
        }
        default:
          return fail(std::string("field `") + field_name() + "` of tensor `" + tensor_.name + "` is not an array");
      }
    }
    if (depth_ == 3) {
      if (kind != Kind::unsigned_number)
        return fail(std::string("`") + field_name() + "` of tensor `" + tensor_.name + "` must hold non-negative integers");
      if (field_ == Field::shape) {
        if (tensor_.shape.size() >= kMaxRank) return limit("tensor `" + tensor_.name + "` has more than " + std::to_string(kMaxRank) + " dimensions");
        tensor_.shape.push_back(u);
      } else if (field_ == Field::data_offsets) {
        if (array_items_ == 0) tensor_.begin = u;
        else if (array_items_ == 1) tensor_.end = u;
      }
      ++array_items_;
      return true;
    }
    return fail("unexpected value");
  }

 private:
  Header& out_;
  int depth_ = 0;
  int skip_depth_ = 0;  // > 0 while inside an ignored field's value
  bool current_is_metadata_ = false;
  std::string current_name_;
  std::string metadata_key_;
  std::string* pending_string_ = nullptr;
  TensorInfo tensor_;
  Field field_ = Field::unknown;
  size_t array_items_ = 0;
  bool seen_dtype_ = false, seen_shape_ = false, seen_offsets_ = false;
  std::unordered_set<std::string> root_keys_;
  std::unordered_set<std::string> fields_seen_;
};

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::string_view rule_name(Rule r) {
  switch (r) {
    case Rule::header_too_small: return "header too small";
    case Rule::header_too_large: return "header too large";
    case Rule::invalid_header_length: return "invalid header length";
    case Rule::invalid_utf8: return "invalid UTF-8 in header";
    case Rule::invalid_json: return "invalid JSON in header";
    case Rule::invalid_offset: return "invalid offset";
    case Rule::validation_overflow: return "overflow computing buffer size from shape and/or element type";
    case Rule::misaligned_slice: return "sub-byte tensor does not end on a byte boundary";
    case Rule::tensor_invalid_info: return "invalid shape, data type, or offset for tensor";
    case Rule::incomplete_buffer: return "incomplete metadata, file not fully covered";
    case Rule::resource_limit: return "header exceeds a resource limit";
  }
  return "?";
}

FormatError::FormatError(Rule rule, const std::string& file, const std::string& tensor, const std::string& detail)
    : Error(ErrorKind::bad_input,
            describe_location(file, tensor) + ": safetensors: " + std::string(rule_name(rule)) +
                (detail.empty() ? "" : ": " + detail)),
      rule_(rule),
      tensor_(tensor) {}

uint64_t TensorInfo::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

uint64_t tensor_byte_size(DType dtype, std::span<const uint64_t> shape, const std::string& file, const std::string& name) {
  uint64_t n = 1;
  for (uint64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) throw FormatError(Rule::validation_overflow, file, name, "element count overflows");
  uint64_t bits;
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(dtype_bits(dtype)), &bits))
    throw FormatError(Rule::validation_overflow, file, name, "bit count overflows");
  if (bits % 8 != 0)
    throw FormatError(Rule::misaligned_slice, file, name,
                      std::to_string(n) + " elements of " + std::string(dtype_name(dtype)) + " are not a whole number of bytes");
  return bits / 8;
}

Header parse_header_prefix(std::span<const uint8_t> prefix, uint64_t file_size, const std::string& path) {
  // Rules 1-3: the length prefix.
  if (file_size < 8 || prefix.size() < 8) throw FormatError(Rule::header_too_small, path, "", "the file has " + std::to_string(file_size) + " bytes, fewer than the 8-byte length prefix");
  uint64_t n = read_le64(prefix.data());
  if (n > kMaxHeaderBytes)
    throw FormatError(Rule::header_too_large, path, "", "the prefix declares " + std::to_string(n) + " bytes, the limit is " + std::to_string(kMaxHeaderBytes));
  if (8 + n > file_size)
    throw FormatError(Rule::invalid_header_length, path, "", "the prefix declares " + std::to_string(n) + " header bytes but the file has only " + std::to_string(file_size - 8) + " after it");
  if (prefix.size() < 8 + n) throw_internal("parse_header_prefix: prefix shorter than the header");
  std::span<const uint8_t> text = prefix.subspan(8, static_cast<size_t>(n));

  // Rule 4: UTF-8.
  if (size_t bad = first_invalid_utf8(text); bad != std::string::npos)
    throw FormatError(Rule::invalid_utf8, path, "", "invalid byte at offset " + std::to_string(bad) + " of the header");

  // Rule 5: JSON and schema. nlohmann treats a NUL byte as end of input and skips a UTF-8 BOM,
  // both of which the reference rejects: check them first.
  if (const void* nul = std::memchr(text.data(), 0, text.size()))
    throw FormatError(Rule::invalid_json, path, "", "NUL byte at offset " + std::to_string(static_cast<const uint8_t*>(nul) - text.data()) + " of the header");
  if (text.size() >= 3 && text[0] == 0xEF && text[1] == 0xBB && text[2] == 0xBF)
    throw FormatError(Rule::invalid_json, path, "", "the header starts with a byte-order mark");

  Header header;
  header.header_length = n;
  HeaderSax sax(header);
  const char* first = reinterpret_cast<const char*>(text.data());
  bool ok = nlohmann::json::sax_parse(first, first + text.size(), &sax, nlohmann::json::input_format_t::json, true, false);
  if (!ok) {
    if (sax.error.empty()) sax.error = "malformed JSON";
    throw FormatError(sax.failed_on_limit ? Rule::resource_limit : Rule::invalid_json, path, "", sax.error);
  }

  // Rules 6-9, tensor by tensor in offset order; the first offending tensor decides.
  std::stable_sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t running_end = 0;
  for (const TensorInfo& t : header.tensors) {
    if (t.begin != running_end || t.end < t.begin)
      throw FormatError(Rule::invalid_offset, path, t.name,
                        "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] do not continue at " + std::to_string(running_end) + " (tensors must be contiguous, without holes or overlaps)");
    uint64_t bytes = tensor_byte_size(t.dtype, t.shape, path, t.name);
    if (t.end - t.begin != bytes)
      throw FormatError(Rule::tensor_invalid_info, path, t.name,
                        std::string(dtype_name(t.dtype)) + " shape needs " + std::to_string(bytes) + " bytes, data_offsets span " + std::to_string(t.end - t.begin));
    running_end = t.end;
  }
  // Rule 10: the data region is covered exactly (no trailing bytes: no polyglot files).
  uint64_t expected;
  if (__builtin_add_overflow(running_end, 8 + n, &expected) || expected != file_size)
    throw FormatError(Rule::incomplete_buffer, path, "",
                      "tensors cover " + std::to_string(running_end) + " data bytes, the file has " + std::to_string(file_size - 8 - n));
  return header;
}

Header parse_header(std::span<const uint8_t> file, const std::string& path) {
  return parse_header_prefix(file, file.size(), path);
}

}  // namespace moepack::st
