#include "safetensors/malformed_corpus.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

namespace moepack::test::corpus {
namespace fs = std::filesystem;

namespace {

// The base file every mutation family starts from: two tensors, no padding, no metadata, so
// that every byte of the header has a known role.
const std::string kBaseHeader =
    R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"U8","shape":[4],"data_offsets":[16,20]}})";
constexpr size_t kBaseData = 20;

// Offsets in kBaseHeader of the tensor-name bytes: flipping one of those renames a tensor, which
// is still a valid file, so the bit-flip family skips them.
std::set<size_t> name_byte_offsets() {
  std::set<size_t> out;
  for (const char* key : {"\"a\":", "\"b\":"}) out.insert(kBaseHeader.find(key) + 1);
  return out;
}

std::string tensor(const std::string& name, const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

// Collects cases; single-file cases store their bytes as "<name>.safetensors".
class Builder {
 public:
  void file(const std::string& name, std::vector<uint8_t> bytes, bool representative = false) {
    CorpusCase c;
    c.name = name;
    c.open = c.culprit = name + ".safetensors";
    c.files.emplace(c.open, std::move(bytes));
    c.representative = representative;
    add(std::move(c));
  }
  // A one-tensor-or-more file whose header is `header` and whose data region has `data` bytes.
  void header(const std::string& name, const std::string& header, size_t data, bool representative = false) {
    file(name, st_bytes(header, data), representative);
  }
  void directory(const std::string& name, std::map<std::string, std::vector<uint8_t>> files, const std::string& culprit,
                 bool representative = false) {
    CorpusCase c;
    c.name = name;
    c.files = std::move(files);
    c.culprit = culprit;
    c.representative = representative;
    add(std::move(c));
  }
  std::vector<CorpusCase> take() { return std::move(cases_); }

 private:
  void add(CorpusCase c) {
    if (!names_.insert(c.name).second) throw std::logic_error("duplicate corpus case name " + c.name);
    cases_.push_back(std::move(c));
  }
  std::vector<CorpusCase> cases_;
  std::set<std::string> names_;
};

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

void length_prefix_variants(Builder& b) {
  const std::vector<uint8_t> base = st_bytes(kBaseHeader, kBaseData);
  const uint64_t len = kBaseHeader.size();
  // Files shorter than the prefix itself.
  for (size_t n = 0; n < 8; ++n) b.file("short_file_" + std::to_string(n), {base.begin(), base.begin() + static_cast<long>(n)}, n == 3);
  // Declared lengths around the true one and at the arithmetic edges.
  const std::vector<std::pair<std::string, uint64_t>> declared = {
      {"zero", 0},
      {"one", 1},
      {"minus_one", len - 1},
      {"plus_one", len + 1},
      {"plus_eight", len + 8},
      {"whole_file", base.size() - 8},
      {"past_eof", base.size() - 7},
      {"max_header", 100'000'000},
      {"max_header_plus_one", 100'000'001},
      {"two_pow_32", uint64_t{1} << 32},
      {"two_pow_32_plus_len", (uint64_t{1} << 32) + len},
      {"two_pow_63", uint64_t{1} << 63},
      {"u64_max", ~uint64_t{0}},
      {"u64_max_minus_7", ~uint64_t{0} - 7},  // 8 + N wraps to 0
      {"big_endian", __builtin_bswap64(len)},
  };
  for (const auto& [name, n] : declared)
    b.file("len_" + name, st_bytes(n, kBaseHeader, kBaseData), name == "u64_max" || name == "plus_one" || name == "zero");
  // Each byte of the prefix set to 0xFF in turn (byte 0 alone still leaves N < 1e8 but past EOF).
  for (int i = 0; i < 8; ++i) {
    std::vector<uint8_t> f = base;
    f[static_cast<size_t>(i)] = 0xFF;
    b.file("len_byte" + std::to_string(i) + "_ff", f);
  }
}

void truncations(Builder& b) {
  const std::vector<uint8_t> base = st_bytes(kBaseHeader, kBaseData);
  // The file cut at every byte boundary (prefix, header and data): the prefix then points past
  // the end, or the data region is short.
  for (size_t n = 8; n < base.size(); ++n)
    b.file("cut_file_at_" + std::to_string(n), {base.begin(), base.begin() + static_cast<long>(n)}, n == 40 || n == base.size() - 1);
  // The header text cut at every byte with the prefix adjusted: the JSON parser sees every
  // incomplete prefix of a valid document.
  for (size_t n = 1; n < kBaseHeader.size(); ++n)
    b.header("cut_json_at_" + std::to_string(n), kBaseHeader.substr(0, n), kBaseData, n == 57);
}

void bit_flips(Builder& b) {
  const std::set<size_t> names = name_byte_offsets();
  for (size_t i = 0; i < kBaseHeader.size(); ++i) {
    // Bit 7 makes an ASCII byte invalid UTF-8, wherever it is.
    std::string hi = kBaseHeader;
    hi[i] = static_cast<char>(static_cast<uint8_t>(hi[i]) | 0x80);
    b.header("flip_bit7_at_" + std::to_string(i), hi, kBaseData, i == 20);
    // Bit 0 turns structure into syntax errors, dtypes into unknown names, keys into unknown
    // fields, digits into wrong sizes or offsets. Only tensor names survive it (a rename).
    if (names.count(i)) continue;
    std::string lo = kBaseHeader;
    lo[i] = static_cast<char>(lo[i] ^ 0x01);
    b.header("flip_bit0_at_" + std::to_string(i), lo, kBaseData, i == 9 || i == 30);
  }
}

void offsets(Builder& b) {
  const std::string u64max = "18446744073709551615";
  b.header("offsets_gap", "{" + tensor("a", "F32", "[1]", "[0,4]") + "," + tensor("b", "F32", "[1]", "[8,12]") + "}", 12, true);
  b.header("offsets_overlap", "{" + tensor("a", "F32", "[2]", "[0,8]") + "," + tensor("b", "F32", "[2]", "[4,12]") + "}", 12, true);
  b.header("offsets_first_not_zero", "{" + tensor("a", "F32", "[1]", "[4,8]") + "}", 8);
  b.header("offsets_reversed", "{" + tensor("a", "U8", "[0]", "[4,0]") + "}", 4);
  b.header("offsets_past_eof", "{" + tensor("a", "F32", "[4]", "[0,16]") + "}", 8, true);
  b.header("offsets_trailing_bytes", "{" + tensor("a", "F32", "[1]", "[0,4]") + "}", 12);
  b.header("offsets_end_u64_max", "{" + tensor("a", "U8", "[" + u64max + "]", "[0," + u64max + "]") + "}", 4, true);
  {
    // Eight tensors of 2^61 - 1 bytes end at 2^64 - 8: each size is representable, but the data
    // start (8 + N) plus that end wraps around.
    const uint64_t chunk = (uint64_t{1} << 61) - 1;
    std::string h = "{";
    for (uint64_t i = 0; i < 8; ++i)
      h += (i ? "," : "") + tensor("t" + std::to_string(i), "U8", "[" + std::to_string(chunk) + "]",
                                   "[" + std::to_string(i * chunk) + "," + std::to_string((i + 1) * chunk) + "]");
    b.header("offsets_end_wraps_file_size", h + "}", 8, true);
  }
  b.header("offsets_begin_u64_max", "{" + tensor("a", "U8", "[1]", "[0,1]") + "," + tensor("b", "U8", "[0]", "[" + u64max + "," + u64max + "]") + "}", 1);
  b.header("offsets_above_u64", "{" + tensor("a", "U8", "[1]", "[0,18446744073709551616]") + "}", 1);
  b.header("offsets_negative", "{" + tensor("a", "U8", "[1]", "[-1,0]") + "}", 1);
  b.header("offsets_float", "{" + tensor("a", "U8", "[1]", "[0,1.0]") + "}", 1);
  b.header("offsets_exponent", "{" + tensor("a", "U8", "[1]", "[0,1e0]") + "}", 1);
  b.header("offsets_string", "{" + tensor("a", "U8", "[1]", "[\"0\",1]") + "}", 1);
  b.header("offsets_one_item", "{" + tensor("a", "U8", "[1]", "[1]") + "}", 1);
  b.header("offsets_three_items", "{" + tensor("a", "U8", "[1]", "[0,1,1]") + "}", 1);
  b.header("offsets_empty", "{" + tensor("a", "U8", "[1]", "[]") + "}", 1);
  b.header("offsets_nested", "{" + tensor("a", "U8", "[1]", "[[0],[1]]") + "}", 1);
  b.header("offsets_object", "{" + tensor("a", "U8", "[1]", "{\"begin\":0}") + "}", 1);
  b.header("offsets_null", "{" + tensor("a", "U8", "[1]", "null") + "}", 1);
  // The attack of a hundred thousand tensors claiming the same bytes.
  b.header("offsets_100k_overlapping", many_tensors_header(100'000, false), 100'000, true);
}

void shapes(Builder& b) {
  b.header("shape_overflow_elements", "{" + tensor("a", "I32", "[2,18446744073709551614]", "[0,16]") + "}", 16, true);
  b.header("shape_overflow_bits", "{" + tensor("a", "I32", "[2,9223372036854775807]", "[0,16]") + "}", 16);
  b.header("shape_overflow_square", "{" + tensor("a", "U8", "[4294967296,4294967296]", "[0,16]") + "}", 16);
  b.header("shape_overflow_f64", "{" + tensor("a", "F64", "[4611686018427387904]", "[0,16]") + "}", 16);
  b.header("shape_huge_fits_u64", "{" + tensor("a", "U8", "[1152921504606846976]", "[0,1152921504606846976]") + "}", 16, true);
  b.header("shape_mismatch_size", "{" + tensor("a", "F32", "[1000000]", "[0,4000000]") + "}", 16);
  b.header("shape_zero_dim_nonzero_bytes", "{" + tensor("a", "F32", "[4,0]", "[0,16]") + "}", 16);
  b.header("shape_above_u64", "{" + tensor("a", "U8", "[18446744073709551616]", "[0,1]") + "}", 1);
  b.header("shape_negative", "{" + tensor("a", "U8", "[-1]", "[0,1]") + "}", 1);
  b.header("shape_float", "{" + tensor("a", "U8", "[1.0]", "[0,1]") + "}", 1);
  b.header("shape_string", "{" + tensor("a", "U8", "\"[1]\"", "[0,1]") + "}", 1);
  b.header("shape_number", "{" + tensor("a", "U8", "1", "[0,1]") + "}", 1);
  b.header("shape_null_item", "{" + tensor("a", "U8", "[null]", "[0,1]") + "}", 1);
  b.header("shape_nested", "{" + tensor("a", "U8", "[[1]]", "[0,1]") + "}", 1);
  b.header("shape_object", "{" + tensor("a", "U8", "{}", "[0,1]") + "}", 1);
  // Rank above the cap (64): every dimension 1, so only the cap can refuse it.
  for (size_t rank : {65, 1000, 100'000}) {
    std::string dims = "[1";
    for (size_t i = 1; i < rank; ++i) dims += ",1";
    b.header("shape_rank_" + std::to_string(rank), "{" + tensor("a", "U8", dims + "]", "[0,1]") + "}", 1, rank == 65);
  }
}

void dtypes(Builder& b) {
  // Every dtype with a data region one byte longer than its shape needs.
  const std::vector<std::pair<std::string, int>> all = {
      {"BOOL", 8}, {"F4", 4}, {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8}, {"I8", 8}, {"F8_E5M2", 8}, {"F8_E4M3", 8},
      {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"I16", 16}, {"U16", 16}, {"F16", 16}, {"BF16", 16},
      {"I32", 32}, {"U32", 32}, {"F32", 32}, {"C64", 64}, {"F64", 64}, {"I64", 64}, {"U64", 64},
  };
  for (const auto& [name, bits] : all) {
    size_t bytes = 4 * static_cast<size_t>(bits) / 8 + 1;
    b.header("dtype_" + name + "_size_plus_one", "{" + tensor("a", name, "[4]", "[0," + std::to_string(bytes) + "]") + "}", bytes, name == "F4");
  }
  // Sub-byte element counts that do not end on a byte boundary.
  b.header("dtype_F4_odd", "{" + tensor("a", "F4", "[3]", "[0,2]") + "}", 2, true);
  b.header("dtype_F4_3x3", "{" + tensor("a", "F4", "[3,3]", "[0,5]") + "}", 5);
  b.header("dtype_F6_E2M3_two", "{" + tensor("a", "F6_E2M3", "[2]", "[0,2]") + "}", 2);
  b.header("dtype_F6_E3M2_five", "{" + tensor("a", "F6_E3M2", "[5]", "[0,4]") + "}", 4);
  // Names that are not safetensors dtypes (case, aliases, padding, escapes).
  const std::vector<std::string> unknown = {"F8_E4M3FN", "FP4", "f32", "NVFP4", "MXFP4", "", "I32 ", " I32", "i32", "F8_E4M3\\u0000", "BF16\\n", "Float32", "uint8"};
  for (size_t i = 0; i < unknown.size(); ++i)
    b.header("dtype_unknown_" + std::to_string(i), "{" + tensor("a", unknown[i], "[1]", "[0,1]") + "}", 4, i == 0);
  // dtype of the wrong JSON type.
  const std::vector<std::pair<std::string, std::string>> wrong = {{"int", "5"}, {"null", "null"}, {"array", "[\"F32\"]"}, {"object", "{\"name\":\"F32\"}"}, {"bool", "true"}};
  for (const auto& [tag, value] : wrong)
    b.header("dtype_as_" + tag, "{\"a\":{\"dtype\":" + value + ",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
}

void schema(Builder& b) {
  // Not an object at the root, or trailing content.
  for (const auto& [tag, text] : std::vector<std::pair<std::string, std::string>>{
           {"array", "[]"}, {"null", "null"}, {"number", "1"}, {"string", "\"x\""}, {"bool", "true"}, {"empty", ""},
           {"spaces", "        "}, {"two_objects", "{}{}"}, {"trailing_word", "{} x"}, {"comment", "{/*c*/}"},
           {"line_comment", "{}//"}, {"trailing_comma", "{" + tensor("a", "U8", "[1]", "[0,1]") + ",}"},
           {"single_quotes", "{'a':{}}"}, {"formfeed_pad", "{}\f"}, {"nan", "{\"a\":NaN}"}, {"unterminated_string", "{\"a"},
           {"raw_newline_in_string", "{\"a\n\":{}}"}, {"bad_escape", "{\"\\x41\":{}}"}, {"lone_surrogate_escape", "{\"\\ud800\":{}}"}}) {
    b.header("root_" + tag, text, tag == "empty" ? 0 : 1, tag == "array" || tag == "trailing_comma");
  }
  // Tensor entries of the wrong shape.
  for (const auto& [tag, value] : std::vector<std::pair<std::string, std::string>>{
           {"array", "[1,2]"}, {"string", "\"x\""}, {"number", "1"}, {"null", "null"}, {"empty_object", "{}"},
           {"missing_dtype", "{\"shape\":[1],\"data_offsets\":[0,1]}"},
           {"missing_shape", "{\"dtype\":\"U8\",\"data_offsets\":[0,1]}"},
           {"missing_offsets", "{\"dtype\":\"U8\",\"shape\":[1]}"}}) {
    b.header("tensor_" + tag, "{\"a\":" + value + "}", 1, tag == "missing_offsets");
  }
  // __metadata__ misuse.
  for (const auto& [tag, value] : std::vector<std::pair<std::string, std::string>>{
           {"int_value", "{\"format\":1}"}, {"null_value", "{\"format\":null}"}, {"array_value", "{\"format\":[\"pt\"]}"},
           {"object_value", "{\"format\":{\"x\":\"y\"}}"}, {"string", "\"pt\""}, {"array", "[]"}, {"number", "0"},
           {"tensor_shaped", "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}"}}) {
    b.header("metadata_" + tag, "{\"__metadata__\":" + value + "," + tensor("a", "U8", "[1]", "[0,1]") + "}", 1, tag == "int_value");
  }
}

void duplicates(Builder& b) {
  const std::string a = tensor("a", "U8", "[1]", "[0,1]");
  b.header("dup_tensor_same_info", "{" + a + "," + a + "}", 1, true);
  b.header("dup_tensor_other_info", "{" + a + "," + tensor("a", "U8", "[1]", "[1,2]") + "}", 2);
  b.header("dup_tensor_escaped_name", "{" + a + ",\"\\u0061\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
  b.header("dup_metadata", "{\"__metadata__\":{},\"__metadata__\":{}," + a + "}", 1);
  b.header("dup_metadata_key", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}," + a + "}", 1);
  b.header("dup_field_dtype", "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
  b.header("dup_field_shape", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
  b.header("dup_field_offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"data_offsets\":[0,1]}}", 1);
}

void nesting(Builder& b) {
  auto nested = [](size_t depth, const std::string& open, const std::string& close) {
    std::string s;
    for (size_t i = 0; i < depth; ++i) s += open;
    s += "1";
    for (size_t i = 0; i < depth; ++i) s += close;
    return s;
  };
  for (size_t depth : {65, 10'000, 1'000'000}) {
    std::string d = std::to_string(depth);
    // Inside an unknown (ignored) tensor field: only the depth cap can refuse it.
    b.header("deep_array_in_field_" + d,
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":" + nested(depth, "[", "]") + "}}", 1, depth == 10'000);
    b.header("deep_object_in_field_" + d,
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":" + nested(depth, "{\"k\":", "}") + "}}", 1);
    b.header("deep_array_root_" + d, nested(depth, "[", "]"), 1);
    b.header("deep_metadata_" + d, "{\"__metadata__\":" + nested(depth, "{\"k\":", "}") + "}", 1);
  }
  // Unclosed nesting.
  b.header("deep_unclosed", std::string(100'000, '['), 1);
}

void encodings(Builder& b) {
  const std::string a = tensor("a", "U8", "[1]", "[0,1]");
  b.header("bom", "\xEF\xBB\xBF{" + a + "}", 1, true);
  b.header("bom_only", "\xEF\xBB\xBF", 0);
  b.header("nul_first", std::string(1, '\0') + "{" + a + "}", 1);
  b.header("nul_padding", "{" + a + "}" + std::string(4, '\0'), 1, true);
  b.header("nul_between", "{" + a + "}" + std::string(1, '\0') + " ", 1);
  b.header("nul_in_name", "{\"a" + std::string(1, '\0') + "b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
  // Invalid UTF-8 sequences, in a tensor name and in a metadata value.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"overlong_nul", "\xC0\x80"}, {"overlong_slash", "\xE0\x80\xAF"}, {"surrogate", "\xED\xA0\x80"}, {"above_max", "\xF4\x90\x80\x80"},
      {"f5", "\xF5\x80\x80\x80"}, {"lone_continuation", "\x80"}, {"truncated", "\xE2\x82"}, {"ff", "\xFF"}, {"fe", "\xFE"},
      {"c1", "\xC1\xBF"}, {"latin1", "caf\xE9"}};
  for (const auto& [tag, seq] : bad) {
    b.header("utf8_name_" + tag, "{\"x" + seq + "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, tag == "surrogate");
    b.header("utf8_metadata_" + tag, "{\"__metadata__\":{\"k\":\"" + seq + "\"}," + a + "}", 1);
    b.header("utf8_outside_string_" + tag, "{" + a + "}" + seq, 1);
  }
}

// Sharded checkpoints: a directory with model.safetensors.index.json and two shards.
void sharded(Builder& b) {
  const std::string kIndex = "model.safetensors.index.json";
  const std::string kShard1 = "model-00001-of-00002.safetensors";
  const std::string kShard2 = "model-00002-of-00002.safetensors";
  auto with_index = [&](const std::string& index_text) {
    auto files = index_fixture_shards();
    files[kIndex] = bytes_of(index_text);
    return files;
  };
  auto map_with = [&](const std::string& b_value) {
    return "{\"metadata\":{\"total_size\":5},\"weight_map\":{\"a\":\"" + kShard1 + "\",\"b\":" + b_value + "}}";
  };
  // Shard names that leave the directory, or are not names at all.
  for (const auto& [tag, value] : std::vector<std::pair<std::string, std::string>>{
           {"dotdot", "\"../" + kShard2 + "\""}, {"dotdot_inner", "\"sub/../../" + kShard2 + "\""}, {"dotdot_only", "\"..\""},
           {"absolute", "\"/etc/passwd\""}, {"absolute_shard", "\"/" + kShard2 + "\""}, {"empty", "\"\""},
           {"nul_inside", "\"" + kShard2 + "\\u0000.txt\""}, {"number", "2"}, {"null", "null"}, {"array", "[\"" + kShard2 + "\"]"},
           {"object", "{\"file\":\"" + kShard2 + "\"}"}, {"bool", "true"}}) {
    b.directory("index_value_" + tag, with_index(map_with(value)), kIndex, tag == "dotdot" || tag == "absolute" || tag == "number");
  }
  // The index document itself malformed.
  for (const auto& [tag, text] : std::vector<std::pair<std::string, std::string>>{
           {"empty", ""}, {"not_json", "weight_map"}, {"array", "[]"}, {"no_weight_map", "{\"metadata\":{}}"},
           {"weight_map_array", "{\"weight_map\":[]}"}, {"weight_map_string", "{\"weight_map\":\"x\"}"},
           {"dup_weight_map", "{\"weight_map\":{},\"weight_map\":{}}"},
           {"dup_tensor", "{\"weight_map\":{\"a\":\"" + kShard1 + "\",\"a\":\"" + kShard2 + "\"}}"},
           {"bom", "\xEF\xBB\xBF" + map_with("\"" + kShard2 + "\"")}, {"nul", map_with("\"" + kShard2 + "\"") + std::string(1, '\0')},
           {"invalid_utf8", "{\"weight_map\":{\"a\xFF\":\"" + kShard1 + "\"}}"}, {"truncated", map_with("\"" + kShard2 + "\"").substr(0, 40)},
           {"deep", std::string(200, '[') + std::string(200, ']')}, {"trailing_comma", "{\"weight_map\":{},}"}}) {
    b.directory("index_doc_" + tag, with_index(text), kIndex, tag == "dup_tensor" || tag == "not_json");
  }
  // The index points at shards that are missing, malformed, or are not files.
  b.directory("index_missing_shard", with_index(map_with("\"model-00003-of-00003.safetensors\"")), "model-00003-of-00003.safetensors", true);
  b.directory("index_tensor_not_in_shard", with_index(map_with("\"" + kShard1 + "\"")), kShard1, true);
  {
    auto files = with_index(map_with("\"" + kShard2 + "\""));
    files[kShard2] = st_bytes(R"({"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 3);
    b.directory("index_shard_malformed", std::move(files), kShard2, true);
  }
  {
    auto files = with_index(map_with("\"" + kShard2 + "\""));
    files.erase(kShard2);
    files[kShard2 + "/"] = {};
    b.directory("index_shard_is_directory", std::move(files), kShard2, true);
  }
  b.directory("index_shard_is_index", with_index(map_with("\"" + kIndex + "\"")), kIndex);
  {
    auto files = index_fixture_shards();
    files[kIndex + "/"] = {};
    b.directory("index_is_directory", std::move(files), kIndex);
  }
  // Without an index every *.safetensors file is read: one bad shard, or a name in two shards.
  {
    auto files = index_fixture_shards();
    files["model-00003-of-00003.safetensors"] = st_bytes("{", 0);
    b.directory("noindex_bad_shard", std::move(files), "model-00003-of-00003.safetensors", true);
  }
  {
    auto files = index_fixture_shards();
    files[kShard2] = files[kShard1];
    b.directory("noindex_tensor_in_two_shards", std::move(files), kShard2, true);
  }
}

}  // namespace

std::vector<uint8_t> st_bytes(uint64_t declared, std::string_view header, size_t data_bytes) {
  std::vector<uint8_t> out;
  out.reserve(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(declared >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data_bytes, 0x5A);
  return out;
}

std::vector<uint8_t> st_bytes(std::string_view header, size_t data_bytes) { return st_bytes(header.size(), header, data_bytes); }

std::string many_tensors_header(size_t count, bool contiguous) {
  std::string s = "{";
  for (size_t i = 0; i < count; ++i) {
    size_t begin = contiguous ? i : 0;
    if (i) s += ',';
    s += tensor("t" + std::to_string(i), "U8", "[1]", "[" + std::to_string(begin) + "," + std::to_string(begin + 1) + "]");
  }
  return s + "}";
}

std::map<std::string, std::vector<uint8_t>> index_fixture_shards() {
  return {
      {"model-00001-of-00002.safetensors", st_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1)},
      {"model-00002-of-00002.safetensors", st_bytes(R"({"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 4)},
  };
}

std::vector<std::string> valid_index_texts() {
  return {
      R"({"metadata":{"total_size":5},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})",
      R"({"metadata":{},"weight_map":{"b":"model-00002-of-00002.safetensors","a":"model-00001-of-00002.safetensors"}})",
      R"({"weight_map":{"a":"./model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"},"extra":[1,{"x":null}]})",
      R"({"weight_map":{"a":"model-00001-of-00002.safetensors"}})",
  };
}

std::vector<std::pair<std::string, std::vector<uint8_t>>> valid_files() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  auto add = [&](const std::string& name, const std::string& header, size_t data) { out.emplace_back(name, st_bytes(header, data)); };
  add("base", kBaseHeader, kBaseData);
  add("upstream_deserialization", R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})", 16);
  add("upstream_empty_shape", R"({"test":{"dtype":"I32","shape":[],"data_offsets":[0,4]}})", 4);
  add("upstream_zero_sized", R"({"test":{"dtype":"I32","shape":[2,0],"data_offsets":[0, 0]}})", 0);
  add("upstream_whitespace_trailing", "{}\r \t\n", 0);
  add("upstream_whitespace_leading", "\t\n{}\r ", 0);
  add("empty_object", "{}", 0);
  add("writer_empty_padded", "{}      ", 0);
  add("writer_metadata", "{\"__metadata__\":{\"framework\":\"pt\"}}     ", 0);
  add("metadata_null", R"({"__metadata__":null,"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1);
  add("metadata_last", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"__metadata__":{"format":"pt"}})", 1);
  add("unknown_field", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"foo":[1,{"x":null}]}})", 1);
  add("json_order_not_offset_order", R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 2);
  add("zero_size_between", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  add("unaligned", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"F32","shape":[1],"data_offsets":[1,5]}})", 5);
  add("names_unusual", R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"é":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"\u0062":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})", 3);
  add("subbyte", R"({"f4":{"dtype":"F4","shape":[4,3],"data_offsets":[0,6]},"f6":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[6,9]},"e8":{"dtype":"F8_E8M0","shape":[4],"data_offsets":[9,13]}})", 13);
  add("many_tensors_1000", many_tensors_header(1000, true), 1000);
  return out;
}

std::vector<CorpusCase> malformed_corpus() {
  Builder b;
  length_prefix_variants(b);
  truncations(b);
  bit_flips(b);
  offsets(b);
  shapes(b);
  dtypes(b);
  schema(b);
  duplicates(b);
  nesting(b);
  encodings(b);
  sharded(b);
  return b.take();
}

std::string materialize(const CorpusCase& c, const std::string& dir) {
  fs::path root = fs::path(dir) / c.name;
  fs::create_directories(root);
  for (const auto& [rel, bytes] : c.files) {
    if (!rel.empty() && rel.back() == '/') {
      fs::create_directories(root / rel);
      continue;
    }
    std::ofstream out(root / rel, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write corpus file " + (root / rel).string());
  }
  return (c.open.empty() ? root : root / c.open).string();
}

}  // namespace moepack::test::corpus
