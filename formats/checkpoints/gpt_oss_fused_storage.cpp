// gpt-oss fused MXFP4 experts (checkpoint-formats.md 3.2, layouts-fp4.md 2.1): openai's own
// gpt-oss checkpoints keep every expert of a layer in one tensor per param, expert index first,
// e.g. `model.layers.0.mlp.experts.gate_up_proj_blocks`:
//   <prefix>.gate_up_proj_blocks  U8   [E, 2I, H/32, 16]   FP4 codes, low nibble = even element
//   <prefix>.gate_up_proj_scales  U8   [E, 2I, H/32]       E8M0
//   <prefix>.gate_up_proj_bias    BF16 [E, 2I]
//   <prefix>.down_proj_{blocks,scales,bias}  [E, H, I/32, 16], [E, H, I/32], [E, H]
// Rows of gate_up are interleaved (row 2j = gate j, 2j+1 = up j) and vLLM keeps that order.
// vLLM's loader (`gpt_oss.py` `_load_weights_mxfp4`) reshapes blocks [E, N, K/32, 16] to
// [E, N, K/2] without moving a byte, so one expert's canonical w13_weight is a contiguous slice.
#include "formats/checkpoints/expert_storage.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {
namespace {

struct FusedTensor {
  const char* suffix;  // after the prefix
  const char* param;   // vLLM name
  bool w13;
  int kind;            // 0 blocks, 1 scales, 2 bias
};
constexpr FusedTensor kFused[] = {
    {".gate_up_proj_blocks", "w13_weight", true, 0}, {".gate_up_proj_scales", "w13_weight_scale", true, 1}, {".gate_up_proj_bias", "w13_bias", true, 2},
    {".down_proj_blocks", "w2_weight", false, 0},    {".down_proj_scales", "w2_weight_scale", false, 1},    {".down_proj_bias", "w2_bias", false, 2},
};

// Per-expert canonical shape: blocks flatten their last two dims (K/32 x 16 bytes = K/2).
std::vector<uint64_t> canonical_shape(const FusedTensor& t, uint64_t rows, uint64_t k) {
  if (t.kind == 0) return {rows, k / 2};
  if (t.kind == 1) return {rows, k / 32};
  return {rows};
}

class GptOssFusedStorage final : public ExpertStorage {
 public:
  void validate(const st::ShardSet& shards, const LayerScan&, MoeLayer& layer, const ModelFacts& facts) const override {
    const uint64_t H = layer.hidden_size, I = layer.intermediate_size;
    if (H % 32 || I % 32) throw_bad_input(shards.root(), layer.prefix, "MXFP4 needs hidden_size and intermediate_size divisible by 32 (config: " + std::to_string(H) + ", " + std::to_string(I) + ")");
    for (const auto& name : layer.tensors) {
      bool known = false;
      for (const auto& t : kFused) known |= name == layer.prefix + t.suffix;
      if (!known) throw_bad_input(shards.find(name)->file->path(), name, "unexpected tensor in a gpt-oss MXFP4 expert layer (expected gate_up_proj/down_proj _blocks, _scales, _bias)");
    }
    uint64_t experts = 0;
    for (const auto& t : kFused) {
      std::string name = layer.prefix + t.suffix;
      auto ref = shards.find(name);
      if (!ref) throw_bad_input(shards.root(), name, "missing tensor: a gpt-oss MXFP4 layer needs gate_up_proj/down_proj _blocks, _scales and _bias");
      const auto& info = *ref->info;
      const std::string& file = ref->file->path();
      if (info.shape.empty()) throw_bad_input(file, name, "scalar where a per-expert tensor was expected");
      if (experts == 0) experts = info.shape[0];
      const uint64_t rows = t.w13 ? 2 * I : H, k = t.w13 ? H : I;
      std::vector<uint64_t> want = {experts, rows};
      if (t.kind == 0) want.insert(want.end(), {k / 32, 16});
      if (t.kind == 1) want.push_back(k / 32);
      bool dtype_ok = t.kind == 2 ? (info.dtype == DType::BF16 || info.dtype == DType::F32 || info.dtype == DType::F16) : info.dtype == DType::U8;
      if (!dtype_ok) throw_bad_input(file, name, "dtype " + std::string(dtype_name(info.dtype)) + " does not match gpt-oss MXFP4 (expected " + (t.kind == 2 ? "BF16/F32" : "U8") + ")");
      if (info.shape != want)
        throw_bad_input(file, name, "shape " + shape_string(info.shape) + " does not match config.json: expected " + shape_string(want) + " (hidden_size " + std::to_string(H) +
                                        ", intermediate_size " + std::to_string(I) + ")");
      ParamSummary s{t.param, info.dtype, canonical_shape(t, rows, k)};
      layer.params.push_back(s);
    }
    if (facts.num_experts && facts.num_experts != experts)
      throw_bad_input(shards.find(layer.prefix + kFused[0].suffix)->file->path(), layer.prefix + kFused[0].suffix,
                      "holds " + std::to_string(experts) + " experts but config.json declares " + std::to_string(facts.num_experts));
    layer.num_experts = experts;
    layer.has_bias = true;
  }

  ExpertParams read(const st::ShardSet& shards, const MoeLayer& layer, uint64_t expert, std::string_view only_param) const override {
    ExpertParams out;
    out.w13_order = W13Order::interleaved;
    const uint64_t H = layer.hidden_size, I = layer.intermediate_size;
    for (const auto& t : kFused) {
      if (!only_param.empty() && only_param != t.param) continue;
      auto ref = shards.find(layer.prefix + t.suffix);
      OwnedTensor o;
      o.dtype = ref->info->dtype;
      o.shape = canonical_shape(t, t.w13 ? 2 * I : H, t.w13 ? H : I);
      o.bytes = read_expert_slice(*ref, expert, layer.num_experts);
      out.tensors.emplace(t.param, std::move(o));
    }
    return out;
  }
};

}  // namespace

const ExpertStorage& gpt_oss_fused_storage() {
  static const GptOssFusedStorage storage;
  return storage;
}

}  // namespace moepack::ckpt::detail
