#include "lib/oracle/quant_key.h"

#include <algorithm>

namespace moepack::oracle {

std::string elem_type_text(ElemType t, bool fp8_is_fnuz) {
  switch (t) {
    case ElemType::f32: return "f32";
    case ElemType::f16: return "f16";
    case ElemType::bf16: return "bf16";
    case ElemType::u8: return "u8";
    case ElemType::i8: return "i8";
    case ElemType::fp8: return fp8_is_fnuz ? "f8e4m3fnuz" : "f8e4m3fn";
    case ElemType::uint2b2: return "uint2b2";
    case ElemType::uint3b4: return "uint3b4";
    case ElemType::uint4b8: return "uint4b8";
    case ElemType::uint8b128: return "uint8b128";
    case ElemType::scalar_uint4: return "uint4";
    case ElemType::scalar_uint8: return "uint8";
    case ElemType::float6_e3m2f: return "float6_e3m2f";
    case ElemType::float6_e2m3f: return "float6_e2m3f";
  }
  return "?";
}

namespace {

std::string group_text(const GroupShape& g) {
  // vLLM names the three common shapes and prints the NamedTuple repr for the rest.
  if (g == GroupShape::per_tensor()) return "per_tensor";
  if (g == GroupShape::per_token()) return "per_token";
  if (g == GroupShape::per_channel()) return "per_channel";
  return "GroupShape(row=" + std::to_string(g.row) + ", col=" + std::to_string(g.col) + ")";
}

std::string scale_text(const ScaleDesc& s, bool fnuz) {
  return elem_type_text(s.dtype, fnuz) + "," + (s.is_static ? "static" : "dynamic") + "," + group_text(s.group);
}

constexpr ScaleDesc scale(ElemType t, bool is_static, int row, int col) { return ScaleDesc{t, is_static, GroupShape{row, col}}; }

}  // namespace

std::string quant_key_text(const OptKey& key, bool fp8_is_fnuz) {
  if (!key) return "None";
  std::string s = "QuantKey(" + elem_type_text(key->dtype, fp8_is_fnuz) + ",scale(" + scale_text(key->scale, fp8_is_fnuz) + "),";
  if (key->scale2) s += "scale2(" + scale_text(*key->scale2, fp8_is_fnuz) + "),";
  s += key->symmetric ? "symmetric)" : "asymmetric)";
  return s;
}

namespace keys {
using E = ElemType;
// Scale descriptors shared by several constants (names follow quant_utils.py).
static const ScaleDesc kStaticTensorScale = scale(E::f32, true, -1, -1);
static const ScaleDesc kDynamicTensorScale = scale(E::f32, false, -1, -1);
static const ScaleDesc kStaticTokenScale = scale(E::f32, true, 1, -1);
static const ScaleDesc kStaticChannelScale = scale(E::f32, true, -1, 1);
static const ScaleDesc kDynamicTokenScale = scale(E::f32, false, 1, -1);
static const ScaleDesc kInt4StaticGroupScale = scale(E::f16, true, 1, -1);
static const ScaleDesc kInt4Static32GroupScale = scale(E::f16, true, 1, 32);

const QuantKey kFp8StaticTensorSym{E::fp8, kStaticTensorScale, std::nullopt, true};
const QuantKey kFp8DynamicTensorSym{E::fp8, kDynamicTensorScale, std::nullopt, true};
const QuantKey kFp8StaticTokenSym{E::fp8, kStaticTokenScale, std::nullopt, true};
const QuantKey kFp8StaticChannelSym{E::fp8, kStaticChannelScale, std::nullopt, true};
const QuantKey kFp8DynamicTokenSym{E::fp8, kDynamicTokenScale, std::nullopt, true};
const QuantKey kFp8Static128BlockSym{E::fp8, scale(E::f32, true, 128, 128), std::nullopt, true};
const QuantKey kFp8Dynamic128Sym{E::fp8, scale(E::f32, false, 1, 128), std::nullopt, true};
const QuantKey kFp8Dynamic64Sym{E::fp8, scale(E::f32, false, 1, 64), std::nullopt, true};
const QuantKey kNvfp4Static{E::u8, scale(E::fp8, true, 1, 16), kStaticTensorScale, true};
const QuantKey kNvfp4Dynamic{E::u8, scale(E::fp8, false, 1, 16), kStaticTensorScale, true};
const QuantKey kMxfp4Static{E::u8, scale(E::u8, true, 1, 32), std::nullopt, true};
const QuantKey kMxfp4Dynamic{E::u8, scale(E::u8, false, 1, 32), std::nullopt, true};
const QuantKey kMxfp8Static{E::fp8, scale(E::u8, true, 1, 32), std::nullopt, true};
const QuantKey kMxfp8Dynamic{E::fp8, scale(E::u8, false, 1, 32), std::nullopt, true};
const QuantKey kMxfp6E3M2Static{E::float6_e3m2f, scale(E::u8, true, 1, 32), std::nullopt, true};
const QuantKey kMxfp6E3M2Dynamic{E::float6_e3m2f, scale(E::u8, false, 1, 32), std::nullopt, true};
const QuantKey kMxfp6E2M3Static{E::float6_e2m3f, scale(E::u8, true, 1, 32), std::nullopt, true};
const QuantKey kMxfp6E2M3Dynamic{E::float6_e2m3f, scale(E::u8, false, 1, 32), std::nullopt, true};
const QuantKey kInt4Static{E::uint4b8, kInt4StaticGroupScale, std::nullopt, true};
const QuantKey kInt4Static32{E::uint4b8, kInt4Static32GroupScale, std::nullopt, true};
const QuantKey kInt4StaticAsym{E::scalar_uint4, kInt4StaticGroupScale, std::nullopt, false};
const QuantKey kInt4Static32Asym{E::scalar_uint4, kInt4Static32GroupScale, std::nullopt, false};
const QuantKey kInt8Static{E::uint8b128, scale(E::f16, true, 1, -1), std::nullopt, true};
const QuantKey kInt8StaticChannelSym{E::i8, kStaticChannelScale, std::nullopt, true};
const QuantKey kInt8DynamicTokenSym{E::i8, kDynamicTokenScale, std::nullopt, true};
const QuantKey kInt8StaticTensorSym{E::i8, kStaticTensorScale, std::nullopt, true};
const QuantKey kInt8DynamicTensorSym{E::i8, kDynamicTensorScale, std::nullopt, true};
const QuantKey kInt4W4A8StaticGroup128Sym{E::i8, scale(E::bf16, true, 1, 128), std::nullopt, true};
const QuantKey kInt4W4A8StaticGroup64Sym{E::i8, scale(E::bf16, true, 1, 64), std::nullopt, true};
const QuantKey kInt4W4A8StaticGroup32Sym{E::i8, scale(E::bf16, true, 1, 32), std::nullopt, true};
const QuantKey kInt4W4A8StaticGroupSym{E::i8, scale(E::bf16, true, 1, -1), std::nullopt, true};
const QuantKey kInt4W4A8StaticChannelSym{E::i8, scale(E::f32, true, -1, 1), std::nullopt, true};
}  // namespace keys

const std::vector<NamedQuantKey>& named_quant_keys() {
  using namespace keys;
  static const std::vector<NamedQuantKey> table = {
      {"kFp8StaticTensorSym", &kFp8StaticTensorSym},
      {"kFp8DynamicTensorSym", &kFp8DynamicTensorSym},
      {"kFp8StaticTokenSym", &kFp8StaticTokenSym},
      {"kFp8StaticChannelSym", &kFp8StaticChannelSym},
      {"kFp8DynamicTokenSym", &kFp8DynamicTokenSym},
      {"kNvfp4Dynamic", &kNvfp4Dynamic},
      {"kNvfp4Static", &kNvfp4Static},
      {"kFp8Dynamic128Sym", &kFp8Dynamic128Sym},
      {"kFp8Static128BlockSym", &kFp8Static128BlockSym},
      {"kMxfp8Static", &kMxfp8Static},
      {"kMxfp8Dynamic", &kMxfp8Dynamic},
      {"kFp8Dynamic64Sym", &kFp8Dynamic64Sym},
      {"kMxfp4Dynamic", &kMxfp4Dynamic},
      {"kMxfp4Static", &kMxfp4Static},
      {"kMxfp6E3M2Static", &kMxfp6E3M2Static},
      {"kMxfp6E3M2Dynamic", &kMxfp6E3M2Dynamic},
      {"kMxfp6E2M3Static", &kMxfp6E2M3Static},
      {"kMxfp6E2M3Dynamic", &kMxfp6E2M3Dynamic},
      {"kInt4Static", &kInt4Static},
      {"kInt8Static", &kInt8Static},
      {"kInt4Static32", &kInt4Static32},
      {"kInt4StaticAsym", &kInt4StaticAsym},
      {"kInt4Static32Asym", &kInt4Static32Asym},
      {"kInt8StaticChannelSym", &kInt8StaticChannelSym},
      {"kInt8DynamicTokenSym", &kInt8DynamicTokenSym},
      {"kInt8StaticTensorSym", &kInt8StaticTensorSym},
      {"kInt8DynamicTensorSym", &kInt8DynamicTensorSym},
      {"kInt4W4A8StaticGroup128Sym", &kInt4W4A8StaticGroup128Sym},
      {"kInt4W4A8StaticGroup64Sym", &kInt4W4A8StaticGroup64Sym},
      {"kInt4W4A8StaticGroup32Sym", &kInt4W4A8StaticGroup32Sym},
      {"kInt4W4A8StaticGroupSym", &kInt4W4A8StaticGroupSym},
      {"kInt4W4A8StaticChannelSym", &kInt4W4A8StaticChannelSym},
  };
  return table;
}

std::optional<QuantKey> quant_key_by_name(const std::string& name) {
  for (const auto& nk : named_quant_keys())
    if (name == nk.name) return *nk.key;
  return std::nullopt;
}

std::optional<std::string> quant_key_name(const QuantKey& key) {
  for (const auto& nk : named_quant_keys())
    if (*nk.key == key) return std::string(nk.name);
  return std::nullopt;
}

std::string quant_key_display(const OptKey& key) {
  if (!key) return "None";
  if (auto n = quant_key_name(*key)) return *n;
  return quant_key_text(key);
}

namespace {
struct UserKeyName {
  const char* name;
  const QuantKey* key;
};
const std::vector<UserKeyName>& user_key_names() {
  using namespace keys;
  static const std::vector<UserKeyName> table = {
      {"fp8_per_tensor_static", &kFp8StaticTensorSym},   {"fp8_per_tensor_dynamic", &kFp8DynamicTensorSym},
      {"fp8_per_token", &kFp8DynamicTokenSym},           {"fp8_per_channel_static", &kFp8StaticChannelSym},
      {"fp8_per_block_static", &kFp8Static128BlockSym},  {"fp8_per_block_dynamic", &kFp8Dynamic128Sym},
      {"mxfp8", &kMxfp8Dynamic},                         {"mxfp4", &kMxfp4Dynamic},
      {"int8_per_channel_static", &kInt8StaticChannelSym},
  };
  return table;
}
}  // namespace

std::optional<QuantKey> quant_key_by_user_name(const std::string& name) {
  for (const auto& u : user_key_names())
    if (name == u.name) return *u.key;
  return std::nullopt;
}

std::vector<std::string> user_quant_key_names() {
  std::vector<std::string> names;
  for (const auto& u : user_key_names()) names.emplace_back(u.name);
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<QuantKey> wna16_weight_key(int num_bits, int group_size, bool symmetric) {
  ElemType type;
  if (symmetric) {
    switch (num_bits) {
      case 2: type = ElemType::uint2b2; break;
      case 3: type = ElemType::uint3b4; break;
      case 4: type = ElemType::uint4b8; break;
      case 8: type = ElemType::uint8b128; break;
      default: return std::nullopt;
    }
  } else {
    // Zero-point types exist only for 4 and 8 bits.
    if (num_bits == 4) type = ElemType::scalar_uint4;
    else if (num_bits == 8) type = ElemType::scalar_uint8;
    else return std::nullopt;
  }
  ScaleDesc s;
  if (num_bits == 4) s = group_size == 32 ? scale(ElemType::f16, true, 1, 32) : scale(ElemType::f16, true, 1, -1);
  else if (num_bits == 8) s = scale(ElemType::f16, true, 1, -1);
  else s = group_size <= 0 ? scale(ElemType::f16, true, -1, 1) : scale(ElemType::f16, true, 1, group_size);
  return QuantKey{type, s, std::nullopt, symmetric};
}

QuantKey w4a8_int8_weight_key(int group_size) {
  if (group_size <= 0) return QuantKey{ElemType::i8, scale(ElemType::f32, true, -1, 1), std::nullopt, true};
  return QuantKey{ElemType::i8, scale(ElemType::bf16, true, 1, group_size), std::nullopt, true};
}

}  // namespace moepack::oracle
