// Fused 3-D expert tensors (ERRATA 16): gpt-oss BF16 and Llama-4 checkpoints keep all experts of
// a layer in two input-major tensors, expert index first, as their PyTorch modules hold them,
// e.g. `language_model.model.layers.0.feed_forward.experts.gate_up_proj`:
//   <prefix>.gate_up_proj   [E, H, 2I]   BF16/F16/F32, or F8_E4M3 (ModelOpt FP8)
//   <prefix>.down_proj      [E, I, H]
//   <prefix>.gate_up_proj_bias [E, 2I], <prefix>.down_proj_bias [E, H]       (gpt-oss BF16)
//   <prefix>.{gate_up_proj,down_proj}_{weight_scale,input_scale}  per-tensor scalars that vLLM
//   broadcasts to every expert (Llama-4 ModelOpt FP8, mllama4.py)
// vLLM transposes each expert to [out, in] when loading (llama4.py `load_moe_expert_weights`,
// gpt_oss.py `_load_weights_other`), so one expert's canonical w13_weight is the transpose of
// its [H, 2I] slice. The 2I columns are gate then up by halves (Llama-4 chunks them in two), or
// interleaved gate/up pairs for gpt-oss, whose activation reads them that way (the recipe's
// w13_order says which, gpt_oss.cpp).
//
//   gate_up_proj[e]  (H rows x 2I cols)        canonical w13_weight (2I rows x H cols)
//   h0: g0 g1 .. gI-1 u0 .. uI-1      ->        g0: h0 h1 .. hH-1
//   h1: ...                                      ...  (row j = column j of the slice)
#include <cstring>

#include "formats/checkpoints/expert_storage.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {
namespace {

enum class Kind { weight, bias, weight_scale, input_scale };

struct FusedTensor {
  const char* suffix;  // after the prefix
  bool w13;
  Kind kind;
  bool required;
};
constexpr FusedTensor kTensors[] = {
    {".gate_up_proj", true, Kind::weight, true},
    {".down_proj", false, Kind::weight, true},
    {".gate_up_proj_bias", true, Kind::bias, false},
    {".down_proj_bias", false, Kind::bias, false},
    {".gate_up_proj_weight_scale", true, Kind::weight_scale, false},
    {".down_proj_weight_scale", false, Kind::weight_scale, false},
    {".gate_up_proj_input_scale", true, Kind::input_scale, false},
    {".down_proj_input_scale", false, Kind::input_scale, false},
};

std::string param_name(const FusedTensor& t) {
  const char* base = t.kind == Kind::weight ? "weight" : t.kind == Kind::bias ? "bias" : t.kind == Kind::weight_scale ? "weight_scale" : "input_scale";
  return std::string(t.w13 ? "w13_" : "w2_") + base;
}

// One expert's canonical shape. Scales follow vLLM's ModelOpt FP8 parameters: w13_weight_scale
// keeps one entry per shard ([2]), the others are per-expert scalars.
std::vector<uint64_t> canonical_shape(const FusedTensor& t, uint64_t H, uint64_t I) {
  switch (t.kind) {
    case Kind::weight: return t.w13 ? std::vector<uint64_t>{2 * I, H} : std::vector<uint64_t>{H, I};
    case Kind::bias: return {t.w13 ? 2 * I : H};
    case Kind::weight_scale: return t.w13 ? std::vector<uint64_t>{2} : std::vector<uint64_t>{};
    case Kind::input_scale: return {};
  }
  return {};
}

bool is_float16_or_32(DType d) { return d == DType::BF16 || d == DType::F16 || d == DType::F32; }

class Fused3dStorage final : public ExpertStorage {
 public:
  void validate(const st::ShardSet& shards, const LayerScan&, MoeLayer& layer, const ModelFacts& facts) const override {
    const uint64_t H = layer.hidden_size, I = layer.intermediate_size;
    for (const auto& name : layer.tensors) {
      bool known = false;
      for (const auto& t : kTensors) known |= name == layer.prefix + t.suffix;
      if (!known)
        throw_bad_input(shards.find(name)->file->path(), name,
                        "unexpected tensor in a fused 3-D expert layer (expected gate_up_proj/down_proj, their _bias, _weight_scale and _input_scale)");
    }
    const bool fp8 = layer.quant.method.oracle_family == "fp8";
    if (layer.quant.quantized() && !fp8)
      throw_bad_input(shards.root(), layer.prefix + ".gate_up_proj",
                      "fused 3-D experts hold 16-bit or per-tensor FP8 weights; scheme `" + layer.quant.scheme + "` is not stored this way by any producer vLLM loads");
    uint64_t experts = 0;
    for (const auto& t : kTensors) {
      const std::string name = layer.prefix + t.suffix;
      auto ref = shards.find(name);
      const bool needed = t.required || (fp8 && t.kind == Kind::weight_scale) || (fp8 && t.kind == Kind::input_scale && layer.quant.input_scales == "static");
      if (!ref) {
        if (needed) throw_bad_input(shards.root(), name, "missing tensor: a fused 3-D expert layer with scheme `" + layer.quant.scheme + "` needs it");
        continue;
      }
      const auto& info = *ref->info;
      const std::string& file = ref->file->path();
      if (t.kind == Kind::weight_scale || t.kind == Kind::input_scale) {
        if (!fp8) throw_bad_input(file, name, "a per-tensor scale in an unquantized layer (the config declares no FP8 quantization for `" + layer.prefix + "`)");
        if (!(info.shape.empty() || (info.shape.size() == 1 && info.shape[0] == 1)))
          throw_bad_input(file, name, "shape " + shape_string(info.shape) + ": expected a per-tensor scalar ([] or [1]) broadcast to every expert");
        if (!is_float16_or_32(info.dtype)) throw_bad_input(file, name, "dtype " + std::string(dtype_name(info.dtype)) + ": expected F32/BF16/F16");
      } else {
        if (info.shape.empty()) throw_bad_input(file, name, "scalar where a per-expert tensor was expected");
        if (experts == 0) experts = info.shape[0];
        std::vector<uint64_t> want = t.kind == Kind::bias ? std::vector<uint64_t>{experts, t.w13 ? 2 * I : H}
                                                          : (t.w13 ? std::vector<uint64_t>{experts, H, 2 * I} : std::vector<uint64_t>{experts, I, H});
        const bool dtype_ok = t.kind == Kind::bias ? is_float16_or_32(info.dtype) : (fp8 ? info.dtype == DType::F8_E4M3 : is_float16_or_32(info.dtype));
        if (!dtype_ok)
          throw_bad_input(file, name, "dtype " + std::string(dtype_name(info.dtype)) + " does not match scheme `" + layer.quant.scheme + "` (expected " +
                                          (t.kind == Kind::bias ? "BF16/F16/F32" : fp8 ? "F8_E4M3" : "BF16/F16/F32") + ")");
        if (info.shape != want)
          throw_bad_input(file, name, "shape " + shape_string(info.shape) + " does not match config.json: expected " + shape_string(want) + " (hidden_size " + std::to_string(H) +
                                          ", intermediate_size " + std::to_string(I) + ", input-major [E, in, out])");
        if (t.kind == Kind::bias) layer.has_bias = true;
      }
      DType canonical = info.dtype;
      layer.params.push_back({param_name(t), canonical, canonical_shape(t, H, I)});
    }
    if (facts.num_experts && facts.num_experts != experts)
      throw_bad_input(shards.find(layer.prefix + ".gate_up_proj")->file->path(), layer.prefix + ".gate_up_proj",
                      "holds " + std::to_string(experts) + " experts but config.json declares " + std::to_string(facts.num_experts));
    layer.num_experts = experts;
  }

  ExpertParams read(const st::ShardSet& shards, const MoeLayer& layer, uint64_t expert, std::string_view only_param) const override {
    ExpertParams out;
    out.w13_order = layer.recipe.w13_order;
    const uint64_t H = layer.hidden_size, I = layer.intermediate_size;
    for (const auto& t : kTensors) {
      const std::string param = param_name(t);
      if (!only_param.empty() && only_param != param) continue;
      auto ref = shards.find(layer.prefix + t.suffix);
      if (!ref) continue;  // optional, validated at open
      const DType dtype = ref->info->dtype;
      const uint64_t eb = static_cast<uint64_t>(dtype_bits(dtype) / 8);
      if (t.kind == Kind::weight_scale || t.kind == Kind::input_scale) {
        std::vector<uint8_t> scalar(static_cast<size_t>(eb));
        ref->read(0, scalar);
        OwnedTensor o(dtype, canonical_shape(t, H, I));
        for (size_t i = 0; i < o.bytes.size(); i += scalar.size()) std::memcpy(o.bytes.data() + i, scalar.data(), scalar.size());
        out.tensors.emplace(param, std::move(o));
        continue;
      }
      std::vector<uint8_t> slice = read_expert_slice(*ref, expert, layer.num_experts);
      OwnedTensor o(dtype, canonical_shape(t, H, I));
      if (t.kind == Kind::bias) {
        o.bytes = std::move(slice);
      } else {
        // [in, out] -> [out, in]
        const uint64_t in = t.w13 ? H : I, outn = t.w13 ? 2 * I : H;
        for (uint64_t r = 0; r < in; ++r)
          for (uint64_t c = 0; c < outn; ++c) std::memcpy(&o.bytes[(c * in + r) * eb], &slice[(r * outn + c) * eb], static_cast<size_t>(eb));
      }
      out.tensors.emplace(param, std::move(o));
    }
    return out;
  }
};

}  // namespace

const ExpertStorage& fused_3d_storage() {
  static const Fused3dStorage storage;
  return storage;
}

}  // namespace moepack::ckpt::detail
