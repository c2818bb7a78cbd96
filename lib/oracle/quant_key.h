// Quantization keys: the (weight, activation) vocabulary every MoE kernel capability check speaks.
//
// A QuantKey says what a tensor is quantized to (element type), how its scales look (scale
// element type, static or computed at run time, group shape) and whether it is symmetric.
// Equality is structural, field by field, exactly like vLLM's frozen dataclasses
// (vllm/model_executor/layers/quantization/utils/quant_utils.py @ e9d1398d9), so two keys built
// independently from a checkpoint compare equal to the named constants below.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace moepack::oracle {

// Element types that appear in keys. vLLM mixes torch dtypes (torch.uint8, torch.int8, ...)
// and its own ScalarType objects (uint4b8 = 4-bit with bias 8, ...); the two worlds never
// compare equal even when they describe the same bits (torch.uint8 != scalar_types.uint8), so
// they are distinct members here too.
enum class ElemType {
  // torch dtypes
  f32,
  f16,
  bf16,
  u8,
  i8,
  fp8,  // the platform FP8 type: float8_e4m3fnuz on gfx94x, float8_e4m3fn elsewhere
  // vLLM ScalarTypes
  uint2b2,
  uint3b4,
  uint4b8,
  uint8b128,
  scalar_uint4,
  scalar_uint8,
  float6_e3m2f,
  float6_e2m3f,
};

// vLLM's short name of a type as it appears inside a QuantKey's text ("f32", "u8", "uint4b8").
// `fp8_is_fnuz` selects the platform FP8 spelling.
std::string elem_type_text(ElemType t, bool fp8_is_fnuz);

// Quantization group shape (rows, cols); -1 means "the whole extent".
struct GroupShape {
  int row = -1;
  int col = -1;
  friend bool operator==(const GroupShape&, const GroupShape&) = default;
  static GroupShape per_tensor() { return {-1, -1}; }
  static GroupShape per_token() { return {1, -1}; }
  static GroupShape per_channel() { return {-1, 1}; }
};

struct ScaleDesc {
  ElemType dtype = ElemType::f32;
  bool is_static = true;
  GroupShape group{};
  friend bool operator==(const ScaleDesc&, const ScaleDesc&) = default;
};

struct QuantKey {
  ElemType dtype = ElemType::u8;
  ScaleDesc scale{};
  std::optional<ScaleDesc> scale2{};
  bool symmetric = true;
  friend bool operator==(const QuantKey&, const QuantKey&) = default;
};

// A weight or activation key; nullopt is vLLM's None (unquantized BF16/FP16 tensor).
using OptKey = std::optional<QuantKey>;

// The text vLLM prints for a key (QuantKey.__str__), used in rejection reasons:
// "QuantKey(u8,scale(u8,static,GroupShape(row=1, col=32)),symmetric)"; "None" for nullopt.
std::string quant_key_text(const OptKey& key, bool fp8_is_fnuz = false);

// ---- The named constants (vLLM's module-level k* objects) ----
namespace keys {
extern const QuantKey kFp8StaticTensorSym;
extern const QuantKey kFp8DynamicTensorSym;
extern const QuantKey kFp8StaticTokenSym;
extern const QuantKey kFp8StaticChannelSym;
extern const QuantKey kFp8DynamicTokenSym;
extern const QuantKey kFp8Static128BlockSym;
extern const QuantKey kFp8Dynamic128Sym;
extern const QuantKey kFp8Dynamic64Sym;
extern const QuantKey kNvfp4Static;
extern const QuantKey kNvfp4Dynamic;
extern const QuantKey kMxfp4Static;
extern const QuantKey kMxfp4Dynamic;
extern const QuantKey kMxfp8Static;
extern const QuantKey kMxfp8Dynamic;
extern const QuantKey kMxfp6E3M2Static;
extern const QuantKey kMxfp6E3M2Dynamic;
extern const QuantKey kMxfp6E2M3Static;
extern const QuantKey kMxfp6E2M3Dynamic;
extern const QuantKey kInt4Static;
extern const QuantKey kInt4Static32;
extern const QuantKey kInt4StaticAsym;
extern const QuantKey kInt4Static32Asym;
extern const QuantKey kInt8Static;
extern const QuantKey kInt8StaticChannelSym;
extern const QuantKey kInt8DynamicTokenSym;
extern const QuantKey kInt8StaticTensorSym;
extern const QuantKey kInt8DynamicTensorSym;
extern const QuantKey kInt4W4A8StaticGroup128Sym;
extern const QuantKey kInt4W4A8StaticGroup64Sym;
extern const QuantKey kInt4W4A8StaticGroup32Sym;
extern const QuantKey kInt4W4A8StaticGroupSym;
extern const QuantKey kInt4W4A8StaticChannelSym;
}  // namespace keys

struct NamedQuantKey {
  const char* name;
  const QuantKey* key;
};
// Every named constant, in vLLM's declaration order.
const std::vector<NamedQuantKey>& named_quant_keys();

// Lookup by vLLM constant name ("kMxfp4Static"); nullopt when unknown.
std::optional<QuantKey> quant_key_by_name(const std::string& name);

// The constant name of a key, or nullopt for a key no constant equals (e.g. asymmetric int8).
// Where two constants are structurally identical the first declared name wins.
std::optional<std::string> quant_key_name(const QuantKey& key);

// A name for reports: the constant name when there is one, else the QuantKey text.
std::string quant_key_display(const OptKey& key);

// User-facing names of `quantization_config.moe.activation` (vllm/config/quantization.py
// QUANT_KEY_NAMES): "mxfp8" -> kMxfp8Dynamic, ... nullopt when unknown.
std::optional<QuantKey> quant_key_by_user_name(const std::string& name);
std::vector<std::string> user_quant_key_names();  // sorted, as vLLM lists them in its error

// Builders for keys that checkpoints produce without a named constant.
// Compressed-tensors integer WNA16 weight key (compressed_tensors_moe_wna16.py).
std::optional<QuantKey> wna16_weight_key(int num_bits, int group_size, bool symmetric);
// Compressed-tensors W4A8-int8 weight key: channel-wise (group_size <= 0) or (1, group) bf16 scales.
QuantKey w4a8_int8_weight_key(int group_size);

}  // namespace moepack::oracle
