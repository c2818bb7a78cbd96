#include "lib/runtime/artifact_runtime.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "formats/safetensors/file.h"
#include "lib/runtime/artifact_validation.h"
#include "lib/convert/fp8_marlin.h"
#include "lib/convert/param_loader.h"
#include "lib/convert/reductions.h"
#include "lib/convert/derivation_registry.h"
#include "lib/convert/derivations.h"
#include "lib/convert/w4a8_cutlass.h"
#include "lib/convert/wna16_marlin.h"
#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/core/layout_ids.h"
#include "lib/experts/dequant.h"
#include "lib/experts/fp8_dequant.h"
#include "lib/experts/int_dequant.h"
#include "lib/experts/moe.h"
#include "packers/registry.h"

namespace moepack::runtime {

// From the conversion room: the loader geometry, derivations, reductions and stages with
// their read-backs, and the artifact's file naming.
using convert::DerivedKind;
using convert::DerivedLayout;
using convert::RankGeometry;
using convert::SwigluFacts;
using convert::ValueStage;
using convert::ComputationKind;
using convert::ComputationRow;
using convert::derived_layout;
using convert::find_computation;
using convert::find_value_stage;
using convert::fp8_marlin_scale_bias;
using convert::holds_fp8_fnuz;
using convert::load_expert_param;
using convert::params_dtype_of_target;
using convert::reduction_input;
using convert::set_family_geometry;

namespace fs = std::filesystem;
namespace ex = experts;
namespace {

// ---- the artifact's tensors ----------------------------------------------------------------

class ArtifactFiles {
 public:
  explicit ArtifactFiles(std::string dir) : dir_(std::move(dir)) {}
  const st::File& file(const std::string& name) {
    auto& slot = files_[name];
    if (!slot) slot = std::make_unique<st::File>((fs::path(dir_) / name).string());
    return *slot;
  }
  // Bytes of a packed tensor, checked against its header (the integrity check hashed them).
  std::vector<uint8_t> read(const artifact::PackedTensor& t) {
    const st::File& f = file(t.file);
    const st::TensorInfo* info = f.find(t.name);
    if (!info) throw_bad_input(dir_ + "/" + t.file, t.name, "missing from the file the manifest names");
    std::vector<uint8_t> bytes(static_cast<size_t>(info->num_bytes()));
    f.read(*info, 0, bytes);
    return bytes;
  }
  // The same bytes in place, in the file's mapping (valid while this object lives): the runtime
  // unpacks the routed experts' slabs from here, without copying a layer's tensors first.
  std::span<const uint8_t> view(const artifact::PackedTensor& t) {
    const st::File& f = file(t.file);
    const st::TensorInfo* info = f.find(t.name);
    if (!info) throw_bad_input(dir_ + "/" + t.file, t.name, "missing from the file the manifest names");
    return f.data(*info);
  }
  // A pass-through tensor (e.g. the router's correction bias) in whichever file holds it.
  std::optional<OwnedTensor> find_tensor(const artifact::Manifest& m, const std::string& name) {
    for (const auto& fe : m.files) {
      if (!fe.name.ends_with(".safetensors")) continue;
      const st::File& f = file(fe.name);
      if (const st::TensorInfo* info = f.find(name)) {
        OwnedTensor t(info->dtype, info->shape);
        f.read(*info, 0, t.bytes);
        return t;
      }
    }
    return std::nullopt;
  }

 private:
  std::string dir_;
  std::map<std::string, std::unique_ptr<st::File>> files_;
};

DType dtype_of(const std::string& name, const std::string& where) {
  auto d = dtype_from_name(name);
  if (!d) throw_bad_input(where, "", "unknown dtype `" + name + "`");
  return *d;
}

// One rank of one layer as the runtime reads it: every per-expert tensor's bytes and layout.
struct RankTensorsRead {
  struct Role {
    std::span<const uint8_t> bytes;  // in the artifact file's mapping
    std::shared_ptr<const packers::Layout> layout;  // null: the slab is the canonical tensor (a sorted g_idx)
    OwnedTensor canonical_template;  // dtype and shape of one expert's canonical tensor
    uint64_t slab = 0;
  };
  std::map<std::string, Role> roles;
  // Per-layer F32 tensors (reductions: NVFP4 global and input scales), with their layout.
  struct Scalars {
    std::string layout;
    std::vector<float> values;
  };
  std::map<std::string, Scalars> scalars;
  uint64_t first_expert = 0, local_experts = 0;
};

RankTensorsRead read_rank(ArtifactFiles& files, const artifact::RankTensors& rank, uint64_t first_expert, uint64_t local, const std::string& manifest_path) {
  RankTensorsRead r;
  r.first_expert = first_expert;
  r.local_experts = local;
  for (const auto& [role, t] : rank.tensors) {
    if (!t.per_expert) {
      // Per-layer reductions: F32 scalars some families' dequantization reads (NVFP4).
      if (t.dtype == "F32") {
        const std::vector<uint8_t> bytes = files.read(t);
        RankTensorsRead::Scalars s{t.layout, std::vector<float>(bytes.size() / 4)};
        std::memcpy(s.values.data(), bytes.data(), s.values.size() * 4);
        r.scalars.emplace(role, std::move(s));
      }
      continue;
    }
    if (t.canonical_dtype.empty())
      throw_bad_input(manifest_path, t.name, "the manifest does not record the canonical form of the packed tensors (written by an older moepack): convert again to verify");
    // WNA16 outputs computed from several params (wna16_marlin.h): vLLM's empty placeholders
    // carry nothing; the sorted g_idx and sort indices are read as they are; the act-order weight
    // unpacks through its Marlin repack to the gathered rows (restore_act_order undoes the gather).
    const DerivedLayout derived = derived_layout(t.layout);
    if (derived.kind == DerivedKind::empty) continue;
    RankTensorsRead::Role rr;
    rr.bytes = files.view(t);
    if (local == 0 || rr.bytes.size() % local) throw_bad_input(manifest_path, t.name, std::to_string(rr.bytes.size()) + " bytes do not split into " + std::to_string(local) + " expert slabs");
    rr.slab = rr.bytes.size() / local;
    if (derived.kind == DerivedKind::act_order_weight || derived.kind == DerivedKind::through_inner)
      rr.layout = std::shared_ptr<const packers::Layout>(packers::make_layout(derived.inner));
    else if (derived.kind == DerivedKind::none) rr.layout = std::shared_ptr<const packers::Layout>(packers::make_layout(t.layout));
    rr.canonical_template = OwnedTensor(dtype_of(t.canonical_dtype, manifest_path), t.canonical_shape);
    if (byte_size(rr.canonical_template.dtype, t.canonical_shape) == 0) throw_bad_input(manifest_path, t.name, "empty canonical shape");
    r.roles.emplace(role, std::move(rr));
  }
  return r;
}

OwnedTensor unpack_expert(const RankTensorsRead::Role& role, uint64_t local_index, const std::string& where) {
  OwnedTensor out = role.canonical_template;
  const auto slab = role.bytes.subspan(static_cast<size_t>(local_index * role.slab), static_cast<size_t>(role.slab));
  if (role.layout) {
    role.layout->unpack(slab, out);
  } else {
    if (slab.size() != out.bytes.size()) throw_bad_input(where, "", "a slab of " + std::to_string(slab.size()) + " bytes for a canonical " + shape_string(out.shape));
    std::copy(slab.begin(), slab.end(), out.bytes.begin());
  }
  return out;
}

// NVFP4's second-level multiplier of one expert's projection ("w13_" or "w2_") in the artifact,
// undoing what vLLM folded into the stored weight_scale_2 (its layout says what): the input scale
// (W4A4 FlashInfer and CUTLASS backends), Marlin's exponent bias (the power-of-two factor is in
// the canonical block scales already), or nothing left (b12x baked it into the block scales).
float nvfp4_artifact_multiplier(const RankTensorsRead& rt, const std::string& proj, uint64_t local, const std::string& where) {
  auto ws = rt.scalars.find(proj + "weight_scale_2");
  if (ws == rt.scalars.end()) throw_bad_input(where, proj + "weight_scale_2", "an NVFP4 layer needs its per-expert weight_scale_2");
  if (local >= ws->second.values.size()) throw_bad_input(where, proj + "weight_scale_2", "holds fewer values than the rank's experts");
  const std::string& layout = ws->second.layout;
  const float v = ws->second.values[local];
  if (layout_id::head_of(layout) == layout_id::head::nvfp4_ones) return 1.0f;
  if (layout_id::head_of(layout) == layout_id::head::nvfp4_marlin_global_scale)
    return v / std::ldexp(1.0f, layout.find("params_dtype=bf16") != std::string::npos ? 119 : 7);
  if (layout.find("times=none") != std::string::npos) return v;
  if (layout.find("times=input_") != std::string::npos) {
    auto in = rt.scalars.find(proj + "input_scale");
    if (in == rt.scalars.end() || local >= in->second.values.size())
      throw_bad_input(where, proj + "input_scale", "weight_scale_2 holds the input scale folded in, but the per-expert input scale is missing");
    return v / in->second.values[local];
  }
  throw_bad_input(where, proj + "weight_scale_2", "unknown NVFP4 weight_scale_2 layout `" + layout + "`");
}

// The same multiplier read from a source checkpoint's canonical params: the gate half's
// weight_scale_2 for w13 (vLLM's rule, ERRATA 2), compressed-tensors' divisors inverted in fp32.
float nvfp4_source_multiplier(const std::map<std::string, OwnedTensor>& t, const std::string& proj) {
  auto first = [](const OwnedTensor& x) {
    float v = 0;
    if (x.dtype != DType::F32 || x.bytes.size() < 4) throw_internal("NVFP4 global scales are F32");
    std::memcpy(&v, x.bytes.data(), 4);
    return v;
  };
  if (auto it = t.find(proj + "weight_scale_2"); it != t.end()) return first(it->second);
  if (auto it = t.find(proj + "weight_global_scale"); it != t.end()) return 1.0f / first(it->second);
  throw_internal("NVFP4 source without " + proj + "weight_scale_2 or weight_global_scale");
}

// One projection ("w13_" / "w2_") of a WNA16 expert as floats [n, k], from its loaded params
// under either method's names: GPTQ / AWQ (qweight, scales, qzeros, g_idx) or compressed-tensors
// (weight_packed, weight_scale, weight_zero_point, weight_g_idx). AWQ is told from GPTQ by the
// packing the shape implies; GPTQ's qzeros are not read (vLLM runs GPTQ symmetric only), except
// where the artifact holds the zero points unpacked (I8 [G, N], the CPU INT4 layout of
// lib/convert/cpu_int4.h): those are what that kernel subtracts, whatever the method.
std::vector<float> int_weight_values(const std::map<std::string, OwnedTensor>& t, const std::string& proj, uint64_t n, uint64_t k, const std::string& where) {
  auto get = [&](std::initializer_list<const char*> names) -> const OwnedTensor* {
    for (const char* name : names)
      if (auto it = t.find(proj + name); it != t.end() && !it->second.bytes.empty()) return &it->second;
    return nullptr;
  };
  ex::IntWeight w;
  const OwnedTensor* gptq_like = get({"qweight"});
  w.codes = gptq_like ? gptq_like : get({"weight_packed", "weight"});
  w.scales = get({"scales", "weight_scale"});
  if (!w.codes || !w.scales) throw_bad_input(where, proj + "qweight", "integer experts need their codes and scales");
  const bool awq = gptq_like && gptq_like->shape.size() == 2 && gptq_like->shape[0] == k;
  w.packing = awq ? ex::IntPacking::awq : ex::IntPacking::k_packed;
  const OwnedTensor* zeros = get({"qzeros", "weight_zero_point"});
  if (zeros && zeros->dtype == DType::I8) w.zero_values = zeros;
  else w.zeros = awq ? get({"qzeros"}) : gptq_like ? nullptr : get({"weight_zero_point"});
  w.g_idx = get({"g_idx", "weight_g_idx"});
  return ex::dequantize_int(w, n, k, where + " " + proj);
}

// One projection ("w13_" / "w2_") of a CUTLASS W4A8 expert as floats [n, k]: the uint4b8 codes
// as loaded and, under weight_scale, the per-group value table (w4a8_fp8_value_table from the
// artifact, the reference's value stage from the source).
std::vector<float> w4a8_weight_values(const std::map<std::string, OwnedTensor>& t, const std::string& proj, uint64_t n, uint64_t k, const std::string& where) {
  auto codes = t.find(proj + "weight_packed");
  auto table = t.find(proj + "weight_scale");
  if (codes == t.end() || table == t.end()) throw_bad_input(where, proj + "weight_packed", "W4A8 experts need their int4 codes and group scales");
  return ex::dequantize_int4_table(codes->second, table->second, n, k, where + " " + proj);
}

// The block of a block-scaled FP8 layer from its weight key (vLLM's FP8 block keys are 128 x
// 128: kFp8Static128BlockSym); 0 for per-tensor and per-channel keys.
uint64_t fp8_block_of(const std::string& weight_key) { return weight_key.find("128Block") != std::string::npos ? 128 : 0; }

// One projection ("w13_" / "w2_") of an FP8 expert as floats [n, k]. The scale is the param
// beside the weight (weight_scale, or Fp8MoEMethod's weight_scale_inv for blocks): one value
// (per tensor), one per w13 shard ([2]: the checkpoint's w1 and w3 scales), [n, 1] per channel,
// or 2-D blocks of `block` x `block`; none when the rank holds it per layer, as the
// `multiplier` (vLLM's requantized per-tensor w13 scale).
// With `marlin_scales`, the scale is Marlin's [G, n] channel- or group-wise grid in the params
// dtype with the exponent bias fused in (lib/convert/fp8_marlin.h): G groups along k.
std::vector<float> fp8_weight_values(const std::map<std::string, OwnedTensor>& t, const std::string& proj, uint64_t n, uint64_t k, uint64_t block,
                                     float multiplier, const std::string& where, bool marlin_scales = false) {
  auto it = t.find(proj + "weight");
  if (it == t.end()) throw_bad_input(where, proj + "weight", "FP8 experts need their weights");
  const OwnedTensor& w = it->second;
  auto s = t.find(proj + "weight_scale");
  if (s == t.end()) s = t.find(proj + "weight_scale_inv");
  if (s == t.end()) return ex::dequantize_fp8(w, std::vector<float>{1.0f}, n, k, n, k, multiplier, where + " " + proj);
  const std::vector<uint64_t>& shape = s->second.shape;
  if (s->second.dtype == DType::U8 || s->second.dtype == DType::F8_E8M0) {
    // DeepGEMM SM100's UE8M0 bytes, one row per output row: [n, ceil(k / block)].
    if (!block || shape.size() != 2 || shape[0] != n || shape[1] != (k + block - 1) / block)
      throw_bad_input(where, proj + "weight_scale", "UE8M0 scales " + shape_string(shape) + " are no per-row grid of " + std::to_string(block) + "-wide groups");
    std::vector<float> grid(s->second.bytes.size());
    for (size_t i = 0; i < grid.size(); ++i) grid[i] = e8m0_to_float(s->second.bytes[i]);
    return ex::dequantize_fp8(w, grid, n, k, 1, block, multiplier, where + " " + proj);
  }
  const std::vector<float> scales = ex::float_values(s->second);
  if (marlin_scales) {
    if (shape.size() != 2 || shape[1] != n || shape[0] == 0 || k % shape[0])
      throw_bad_input(where, proj + "weight_scale", "Marlin FP8 scales " + shape_string(shape) + " are no [groups, " + std::to_string(n) + "] grid");
    const uint64_t groups = shape[0];
    std::vector<float> by_row(scales.size());  // [n, G]
    for (uint64_t g = 0; g < groups; ++g)
      for (uint64_t r = 0; r < n; ++r) by_row[r * groups + g] = scales[g * n + r];
    return ex::dequantize_fp8(w, by_row, n, k, 1, k / groups, multiplier / fp8_marlin_scale_bias(s->second.dtype), where + " " + proj);
  }
  uint64_t block_rows = n, block_cols = k;
  if (scales.size() == 2 && shape.size() == 1) block_rows = n / 2;                  // per shard
  else if (shape.size() == 2 && shape[1] == 1 && shape[0] == n) block_rows = 1;     // per channel
  else if (shape.size() == 2 && block) block_rows = block_cols = block;               // 2-D blocks
  else if (scales.size() != 1) throw_bad_input(where, proj + "weight_scale", "FP8 scale " + shape_string(shape) + " fits no FP8 scheme for a [" + std::to_string(n) + ", " + std::to_string(k) + "] weight");
  return ex::dequantize_fp8(w, scales, n, k, block_rows, block_cols, multiplier, where + " " + proj);
}

// The float weights of one expert from its canonical tensors (keyed by role); `g13`, `g2`
// multiply every value (NVFP4's second level). Weights decoded by rows (MX, NVFP4, floats) take
// their weight and block-scale tensors out of `t` instead of copying them.
ex::ExpertMatrices matrices_from(std::map<std::string, OwnedTensor>& t, ex::WeightFormat format, uint64_t n13, uint64_t hidden, uint64_t inter,
                                 const std::string& where, float g13 = 1.0f, float g2 = 1.0f, uint64_t fp8_block = 0, bool marlin_scales = false) {
  auto get = [&](const std::string& role) -> OwnedTensor* {
    auto it = t.find(role);
    if (it == t.end()) it = t.find(role + "_packed");  // compressed-tensors' name before vLLM renames it
    return it == t.end() ? nullptr : &it->second;
  };
  ex::ExpertMatrices m;
  if (const OwnedTensor* b = get("w13_bias")) m.w13_bias = ex::float_values(*b);
  if (const OwnedTensor* b = get("w2_bias")) m.w2_bias = ex::float_values(*b);
  if (format == ex::WeightFormat::fp8_e4m3 || format == ex::WeightFormat::int8) {
    m.w13 = fp8_weight_values(t, "w13_", n13, hidden, fp8_block, g13, where, marlin_scales);
    m.w2 = fp8_weight_values(t, "w2_", hidden, inter, fp8_block, g2, where, marlin_scales);
    return m;
  }
  if (format == ex::WeightFormat::int_wna16) {
    m.w13 = int_weight_values(t, "w13_", n13, hidden, where);
    m.w2 = int_weight_values(t, "w2_", hidden, inter, where);
    return m;
  }
  if (format == ex::WeightFormat::w4a8_fp8) {
    m.w13 = w4a8_weight_values(t, "w13_", n13, hidden, where);
    m.w2 = w4a8_weight_values(t, "w2_", hidden, inter, where);
    return m;
  }
  OwnedTensor* w13 = get("w13_weight");
  OwnedTensor* w2 = get("w2_weight");
  if (!w13 || !w2) throw_bad_input(where, "", "w13_weight and w2_weight are needed to run the experts");
  const bool scaled = ex::format_info(format).block != 0;
  OwnedTensor* s13 = scaled ? get("w13_weight_scale") : nullptr;
  OwnedTensor* s2 = scaled ? get("w2_weight_scale") : nullptr;
  if (scaled && (!s13 || !s2)) throw_bad_input(where, "", "block scales are needed to run " + std::string(ex::format_info(format).name) + " experts");
  // Decoded a block of rows at a time by the experts' dot products (never whole in float).
  auto scale_of = [](OwnedTensor* s) { return s ? std::optional<OwnedTensor>(std::move(*s)) : std::nullopt; };
  m.w13_rows = std::make_shared<const ex::RowDequantizer>(format, std::move(*w13), scale_of(s13), n13, hidden, g13);
  m.w2_rows = std::make_shared<const ex::RowDequantizer>(format, std::move(*w2), scale_of(s2), hidden, inter, g2);
  return m;
}

ex::ActivationSpec activation_of(const artifact::Layer& l) {
  ex::ActivationSpec a;
  a.name = l.activation;
  a.swiglu_limit = l.swiglu_limit;
  a.swiglu_alpha = l.swiglu_alpha;
  a.swiglu_beta = l.swiglu_beta;
  return a;
}

}  // namespace

// One rank of a CPU-layout layer as the fast experts read it: pointers to every expert's packed
// slabs in the artifact's mapping, biases copied to aligned floats. Built once per layer and
// kept, so a forward pass (and every benchmark repetition) only computes.
struct FastCpuRank {
  std::vector<std::vector<float>> biases;      // owns the aligned bias copies
  std::vector<ex::CpuExpert> experts;          // this rank's experts
  std::vector<const ex::CpuExpert*> by_id;     // global expert id -> expert, null when not held
};

struct ArtifactRuntime::Impl {
  std::string dir, manifest_path;
  artifact::Manifest manifest;
  ArtifactFiles files;
  std::map<size_t, std::vector<FastCpuRank>> fast_cpu;  // layer index -> its ranks, prepared once
  std::map<size_t, std::pair<uint64_t, std::vector<int64_t>>> hash_tables;  // layer index -> (vocab, tid2eid), read once
  ex::CpuExpertsWorkspace fast_cpu_workspace;           // reused by every fast forward pass
  Impl(const std::string& d, const std::string& mp) : dir(d), manifest_path(mp), manifest(artifact::read_manifest(mp)), files(d) {
    validate_artifact(manifest, dir, manifest_path);  // nothing below trusts a number it has not checked
  }
};

ArtifactRuntime::ArtifactRuntime(const std::string& artifact_dir) {
  const std::string mp = (fs::path(artifact_dir) / artifact::kManifestFileName).string();
  if (!fs::is_regular_file(mp)) throw_bad_input(artifact_dir, "", std::string("not a moepack artifact: there is no ") + artifact::kManifestFileName + " (convert writes one)");
  impl_ = std::make_unique<Impl>(artifact_dir, mp);
}
ArtifactRuntime::~ArtifactRuntime() = default;

const artifact::Manifest& ArtifactRuntime::manifest() const { return impl_->manifest; }
const std::string& ArtifactRuntime::manifest_path() const { return impl_->manifest_path; }

size_t ArtifactRuntime::layer_index(const std::string& prefix) const {
  const auto& layers = impl_->manifest.layers;
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].prefix == prefix) return i;
  std::string known;
  for (const auto& l : layers) known += (known.empty() ? "" : ", ") + l.prefix;
  throw Error(ErrorKind::usage, "the artifact has no MoE layer `" + prefix + "` (its layers: " + known + ")");
}

std::optional<std::string> ArtifactRuntime::cannot_run(size_t i) const {
  const artifact::Layer& l = impl_->manifest.layers.at(i);
  if (!l.routing) return "the manifest does not record how the layer routes (written by an older moepack): convert again to run it";
  if (!ex::weight_format_of(l.family, l.weight_key.value_or(""))) return "the runtime experts cannot run family " + l.family + " yet";
  for (const auto& r : l.ranks)
    for (const auto& [role, t] : r.tensors)
      if (t.canonical_dtype.empty()) return "the manifest does not record the canonical form of " + t.name + " (written by an older moepack): convert again to run it";
  return std::nullopt;
}

// A hash layer's tid2eid table, read and widened once per layer; nullptr for logit-routed layers.
const std::pair<uint64_t, std::vector<int64_t>>* ArtifactRuntime::hash_table(size_t i) const {
  const artifact::Layer& L = impl_->manifest.layers.at(i);
  if (!L.routing || !L.routing->hash_table) return nullptr;
  auto cached = impl_->hash_tables.find(i);
  if (cached != impl_->hash_tables.end()) return &cached->second;
  auto table = impl_->files.find_tensor(impl_->manifest, *L.routing->hash_table);
  if (!table || (table->dtype != DType::I32 && table->dtype != DType::I64) || table->shape.size() != 2 || table->shape[1] != L.top_k)
    throw_bad_input(impl_->manifest_path, *L.routing->hash_table, "the router's tid2eid table is not in the artifact as I32/I64 [vocab, " + std::to_string(L.top_k) + "]");
  return &impl_->hash_tables.emplace(i, std::make_pair(table->shape[0], integer_values(*table))).first->second;
}

uint64_t ArtifactRuntime::hash_vocab(size_t i) const {
  const auto* table = hash_table(i);
  return table ? table->first : 0;
}

ex::Routing ArtifactRuntime::route(size_t i, const std::vector<float>& logits, uint64_t tokens, const std::vector<int64_t>* token_ids) {
  const artifact::Layer& L = impl_->manifest.layers.at(i);
  if (auto why = cannot_run(i)) throw Error(ErrorKind::bad_input, L.prefix + ": " + *why);
  ex::RoutingSpec rs;
  rs.method = L.routing->method;
  rs.top_k = L.top_k;
  rs.n_group = L.routing->n_group;
  rs.topk_group = L.routing->topk_group;
  rs.renormalize = L.routing->renormalize;
  rs.routed_scaling_factor = L.routing->routed_scaling_factor.value_or(1.0);
  if (L.routing->correction_bias) {
    auto bias = impl_->files.find_tensor(impl_->manifest, *L.routing->correction_bias);
    if (!bias) throw_bad_input(impl_->manifest_path, *L.routing->correction_bias, "the router's correction bias is not in the artifact");
    rs.correction_bias = ex::float_values(*bias);
  }
  if (const auto* table = hash_table(i)) rs.hash_table = table->second;
  return ex::route(logits, tokens, L.num_experts, rs, token_ids);
}

ex::Routing ArtifactRuntime::routing_from(size_t i, const std::vector<int64_t>& ids, const std::vector<float>& weights, uint64_t tokens, uint64_t k,
                                          const std::string& where, const std::string& ids_name, const std::string& weights_name) const {
  const artifact::Layer& L = impl_->manifest.layers.at(i);
  const uint64_t E = L.num_experts;
  if (k == 0) throw_bad_input(where, ids_name, "k (the experts per token) is 0");
  if (k > E) throw_bad_input(where, ids_name, std::to_string(k) + " experts per token, but layer " + L.prefix + " has " + std::to_string(E) + " experts");
  if (ids.size() != tokens * k) throw_bad_input(where, ids_name, "holds " + std::to_string(ids.size()) + " ids, expected " + std::to_string(tokens) + " x " + std::to_string(k));
  if (weights.size() != tokens * k)
    throw_bad_input(where, weights_name, "holds " + std::to_string(weights.size()) + " weights, expected " + std::to_string(tokens) + " x " + std::to_string(k));
  ex::Routing r;
  r.tokens = tokens;
  r.top_k = k;
  r.ids.resize(ids.size());
  r.weights = weights;
  for (uint64_t t = 0; t < tokens; ++t)
    for (uint64_t j = 0; j < k; ++j) {
      const int64_t id = ids[t * k + j];
      const std::string at = "[" + std::to_string(t) + ", " + std::to_string(j) + "]";
      if (id < 0 || static_cast<uint64_t>(id) >= E)
        throw_bad_input(where, ids_name, "id " + std::to_string(id) + " at " + at + " is not an expert of layer " + L.prefix + " (0 to " + std::to_string(E - 1) + ")");
      for (uint64_t p = 0; p < j; ++p)
        if (ids[t * k + p] == id) throw_bad_input(where, ids_name, "expert " + std::to_string(id) + " appears twice for token " + std::to_string(t));
      if (!std::isfinite(weights[t * k + j])) throw_bad_input(where, weights_name, "the weight at " + at + " is not finite");
      r.ids[t * k + j] = static_cast<uint32_t>(id);
    }
  return r;
}

std::vector<float> ArtifactRuntime::run(size_t i, const std::vector<float>& x, const ex::Routing& routing, uint64_t tokens, int threads) {
  const artifact::Layer& L = impl_->manifest.layers.at(i);
  if (auto why = cannot_run(i)) throw Error(ErrorKind::bad_input, L.prefix + ": " + *why);
  const uint64_t T = tokens, H = L.hidden_size, E = L.num_experts, Hp = L.padded_hidden_size, P = L.padded_intermediate_size;
  if (x.size() != T * H) throw Error(ErrorKind::bad_input, L.prefix + ": hidden states hold " + std::to_string(x.size()) + " values, expected " + std::to_string(T) + " x " + std::to_string(H));
  if (routing.tokens != T || routing.ids.size() != T * routing.top_k || routing.weights.size() != T * routing.top_k)
    throw Error(ErrorKind::bad_input, L.prefix + ": the routing is for " + std::to_string(routing.tokens) + " tokens x " + std::to_string(routing.top_k) +
                                          " experts, with " + std::to_string(routing.ids.size()) + " ids and " + std::to_string(routing.weights.size()) +
                                          " weights; the hidden states have " + std::to_string(T) + " tokens");
  for (uint32_t id : routing.ids)
    if (id >= E) throw Error(ErrorKind::bad_input, L.prefix + ": the routing names expert " + std::to_string(id) + "; the layer has " + std::to_string(E));
  const ex::WeightFormat format = *ex::weight_format_of(L.family, L.weight_key.value_or(""));
  const auto rows = ex::parse_w13_rows(L.w13_rows);
  if (!rows) throw_bad_input(impl_->manifest_path, L.prefix, "unknown w13_rows `" + L.w13_rows + "`");
  const ex::ActivationSpec act = activation_of(L);
  const bool expert_parallel = impl_->manifest.target.value("ep", false);
  std::vector<float> xp(static_cast<size_t>(T * Hp), 0.0f);
  for (uint64_t t = 0; t < T; ++t) std::copy_n(x.data() + t * H, H, xp.data() + t * Hp);
  std::vector<double> total(static_cast<size_t>(T * H), 0.0);
  const uint64_t local = expert_parallel ? E / std::max<uint64_t>(1, L.ranks.size()) : E;
  const ex::MoeShape rank_shape{Hp, P, L.gated, *rows};
  const uint64_t n13 = L.gated ? 2 * P : P;
  for (const auto& rank : L.ranks) {
    const uint64_t first = expert_parallel ? local * static_cast<uint64_t>(rank.rank) : 0;
    RankTensorsRead rt = read_rank(impl_->files, rank, first, local, impl_->manifest_path);
    const std::string where = impl_->manifest_path + " (" + L.prefix + ", rank " + std::to_string(rank.rank) + ")";
    bool marlin_scales = false;  // FP8 on Marlin: scales are the biased [G, N] grid
    // What the registry's rows undo or complete on the unpacked params (act-order, W4A8 value
    // tables, the CPU INT4 kernel's unread g_idx), in role order.
    std::vector<std::pair<std::string, const ComputationRow*>> read_backs;
    for (const auto& [role, t] : rank.tensors) {
      const ComputationRow* row = find_computation(ComputationKind::derivation, t.layout);
      if (row && row->head == layout_id::head::fp8_marlin_scales) marlin_scales = true;
      if (row && row->read_back_params) read_backs.emplace_back(role, row);
    }
    ex::ExpertSource source = [&](uint64_t e) -> std::optional<ex::ExpertMatrices> {
      if (e < rt.first_expert || e >= rt.first_expert + rt.local_experts) return std::nullopt;
      std::map<std::string, OwnedTensor> canonical;
      for (const auto& [role, rr] : rt.roles) canonical.emplace(role, unpack_expert(rr, e - rt.first_expert, where));
      for (const auto& [role, row] : read_backs) row->read_back_params(role, canonical, where);
      if (format == ex::WeightFormat::nvfp4)
        return matrices_from(canonical, format, n13, Hp, P, where, nvfp4_artifact_multiplier(rt, "w13_", e - rt.first_expert, where),
                             nvfp4_artifact_multiplier(rt, "w2_", e - rt.first_expert, where));
      if (format == ex::WeightFormat::fp8_e4m3 || format == ex::WeightFormat::int8) {
        // A per-tensor w13 scale is one F32 per expert of the rank (vLLM's requantized maximum).
        float g13 = 1.0f;
        if (auto sc = rt.scalars.find("w13_weight_scale"); sc != rt.scalars.end()) {
          if (e - rt.first_expert >= sc->second.values.size()) throw_bad_input(where, "w13_weight_scale", "holds fewer values than the rank's experts");
          g13 = sc->second.values[e - rt.first_expert];
        }
        return matrices_from(canonical, format, n13, Hp, P, where, g13, 1.0f, fp8_block_of(L.weight_key.value_or("")), marlin_scales);
      }
      return matrices_from(canonical, format, n13, Hp, P, where);
    };
    std::vector<double> out(static_cast<size_t>(T * Hp), 0.0);
    ex::accumulate_experts(xp, T, routing, source, rank_shape, act, out, threads);
    for (uint64_t t = 0; t < T; ++t)
      for (uint64_t h = 0; h < H; ++h) total[t * H + h] += out[t * Hp + h];
  }
  return std::vector<float>(total.begin(), total.end());
}

namespace {

// The packed CPU layouts the fast experts read (lib/experts/cpu_experts.h), by the layout names
// convert writes for the weights; the other per-expert tensors each must hold. The INT4 weight's
// name carries its zero-point source, packing and block_k (lib/convert/cpu_int4.h), so it is
// matched by its two stages' heads.
struct FastCpuLayout {
  ex::CpuLayout layout;
  std::string weight;  // w13_weight and w2_weight (int4: the head of its first stage)
  std::string_view weight_dtype;
  std::string scale;  // w13_/w2_ weight_scale (or _inv); empty when the layout has none
  std::string zeros;  // int4: the head of the zero points' first stage; empty otherwise
};
const std::vector<FastCpuLayout>& fast_cpu_layouts() {
  namespace id = layout_id;
  static const std::vector<FastCpuLayout> table = {
      {ex::CpuLayout::mxfp4, std::string(id::cpu_sgl_mxfp4_weight), "U8", std::string(id::cpu_sgl_e8m0_scale), ""},
      {ex::CpuLayout::bf16_amx, id::cpu_prepack_moe_weight("amx"), "BF16", "", ""},
      // FP16 and F32 models in the vec layout run by the emulation only: their weights are not BF16.
      {ex::CpuLayout::bf16_vec, id::cpu_prepack_moe_weight("vec"), "BF16", "", ""},
      {ex::CpuLayout::fp8_block, std::string(id::cpu_sgl_fp8_weight), "F8_E4M3", std::string(id::unchanged), ""},
      {ex::CpuLayout::int8_vnni4, id::pipeline({id::cpu_sgl_s8s8_compensation(), id::cpu_sgl_int8_weight}), "I8", std::string(id::unchanged), ""},
      {ex::CpuLayout::int4_vnni4, std::string(id::head::cpu_sgl_int4_compensation), "U8", id::cpu_sgl_int4_blocked_scales(),
       std::string(id::head::cpu_sgl_int4_zero_points)},
  };
  return table;
}
// The INT4 weight's and zero points' second stages: " | cpu.sgl_int4_weight_packed(...)" (its
// packing and block_k vary) and exactly " | cpu.sgl_int4_blocked_zero_points(...)".
const std::string kInt4WeightStage = std::string(layout_id::kPipelineSeparator) + std::string(layout_id::head::cpu_sgl_int4_weight_packed) + "(";
const std::string kInt4ZeroStage = std::string(layout_id::kPipelineSeparator) + layout_id::cpu_sgl_int4_blocked_zero_points();

bool weight_layout_is(const FastCpuLayout& f, const std::string& layout) {
  if (f.layout != ex::CpuLayout::int4_vnni4) return layout == f.weight;
  return layout_id::head_of(layout) == f.weight && layout.find(kInt4WeightStage) != std::string::npos;
}

// What a per-expert tensor is to the fast experts, under either naming of its parameter
// (GPTQ / AWQ qweight, scales, qzeros; compressed-tensors weight_packed, weight_scale,
// weight_zero_point; FP8 block weight_scale_inv): "weight", "weight_scale", "zeros" or "bias"
// after the projection's prefix, "" for a tensor the CPU kernels never read (static input
// scales: they take BF16 activations; g_idx without act-order and the compressed-tensors
// weight_shape), nullopt for one they do not know.
std::optional<std::string> fast_cpu_role(const std::string& role) {
  const size_t cut = role.find('_');
  if (cut == std::string::npos) return std::nullopt;
  const std::string proj = role.substr(0, cut + 1), what = role.substr(cut + 1);
  if (proj != "w13_" && proj != "w2_") return std::nullopt;
  if (what == "input_scale" || what == "g_idx" || what == "weight_g_idx" || what == "weight_shape") return "";
  if (what == "weight" || what == "qweight" || what == "weight_packed") return proj + "weight";
  if (what == "weight_scale" || what == "weight_scale_inv" || what == "scales") return proj + "weight_scale";
  if (what == "qzeros" || what == "weight_zero_point") return proj + "zeros";
  if (what == "bias") return proj + "bias";
  return std::nullopt;
}

// Bytes one expert's slab of a fast-CPU tensor must hold, for a projection of n rows and k
// columns (int4: in `groups` scale groups); 0 for a role the layout does not read.
uint64_t fast_cpu_slab_bytes(ex::CpuLayout layout, const std::string& what, uint64_t n, uint64_t k, uint64_t groups) {
  const uint64_t blocks = (k + ex::kCpuFp8Block - 1) / ex::kCpuFp8Block, row_blocks = (n + ex::kCpuFp8Block - 1) / ex::kCpuFp8Block;
  const bool scale = what == "weight_scale";
  switch (layout) {
    case ex::CpuLayout::mxfp4: return scale ? n * (k / 32) : n * k / 2;
    case ex::CpuLayout::bf16_amx:
    case ex::CpuLayout::bf16_vec: return scale ? 0 : 2 * n * k;
    case ex::CpuLayout::fp8_block: return scale ? 4 * row_blocks * blocks : n * k;
    case ex::CpuLayout::int8_vnni4: return scale ? 4 * n : n * (k + 4);
    case ex::CpuLayout::int4_vnni4: {
      if (what == "zeros") return n * groups;
      if (scale) return 4 * n * groups;
      const uint64_t block_k = std::min<uint64_t>(k / std::max<uint64_t>(groups, 1), 128);
      return (n / 32) * (k / block_k) * (16 * block_k + 128);
    }
  }
  return 0;
}

}  // namespace

std::optional<ex::CpuLayout> ArtifactRuntime::fast_cpu_layout(size_t i) const {
  const artifact::Layer& L = impl_->manifest.layers.at(i);
  if (cannot_run(i) || L.ranks.empty()) return std::nullopt;
  const auto format = ex::weight_format_of(L.family, L.weight_key.value_or(""));
  const FastCpuLayout* match = nullptr;
  for (const auto& [role, t] : L.ranks.front().tensors)
    if (fast_cpu_role(role) == "w13_weight")
      for (const auto& f : fast_cpu_layouts())
        if (weight_layout_is(f, t.layout)) match = &f;
  if (!match) return std::nullopt;
  // The format the layout's bytes mean: MXFP4, unquantized BF16, 128 x 128 FP8 blocks, W8A8
  // int8, W4A16 int4.
  switch (match->layout) {
    case ex::CpuLayout::mxfp4: if (format != ex::WeightFormat::mxfp4) return std::nullopt; break;
    case ex::CpuLayout::bf16_amx:
    case ex::CpuLayout::bf16_vec: if (format != ex::WeightFormat::float16or32) return std::nullopt; break;
    case ex::CpuLayout::fp8_block: if (format != ex::WeightFormat::fp8_e4m3 || fp8_block_of(L.weight_key.value_or("")) != ex::kCpuFp8Block) return std::nullopt; break;
    case ex::CpuLayout::int8_vnni4: if (format != ex::WeightFormat::int8) return std::nullopt; break;
    case ex::CpuLayout::int4_vnni4: if (format != ex::WeightFormat::int_wna16) return std::nullopt; break;
  }
  for (const auto& r : L.ranks) {
    std::set<std::string> seen;
    for (const auto& [role, t] : r.tensors) {
      const auto what = fast_cpu_role(role);
      if (!what) return std::nullopt;
      if (what->empty()) continue;
      if (!t.per_expert) return std::nullopt;  // per-layer values (a requantized scale) are not read
      if (!seen.insert(*what).second) return std::nullopt;  // two tensors for one role (qzeros and weight_zero_point)
      const bool weight = what->ends_with("_weight"), scale = what->ends_with("_weight_scale"), zeros = what->ends_with("_zeros");
      if (weight && (!weight_layout_is(*match, t.layout) || t.dtype != match->weight_dtype)) return std::nullopt;
      if (scale && (match->scale.empty() || t.layout != match->scale || (match->layout != ex::CpuLayout::mxfp4 && t.dtype != "F32"))) return std::nullopt;
      if (zeros && (match->zeros.empty() || layout_id::head_of(t.layout) != match->zeros || !t.layout.ends_with(kInt4ZeroStage) || t.dtype != "I8"))
        return std::nullopt;
      if (what->ends_with("_bias") && ((t.layout != layout_id::bias_f32 && t.layout != layout_id::unchanged) || !(t.dtype == "F32" || t.dtype == "BF16" || t.dtype == "F16")))
        return std::nullopt;
    }
    for (const std::string proj : {"w13_", "w2_"}) {
      if (!seen.count(proj + "weight")) return std::nullopt;
      if (seen.count(proj + "weight_scale") != !match->scale.empty()) return std::nullopt;
      if (seen.count(proj + "zeros") != !match->zeros.empty()) return std::nullopt;
    }
  }
  return match->layout;
}

bool ArtifactRuntime::has_fast_cpu(size_t i) const { return fast_cpu_layout(i).has_value(); }

void ArtifactRuntime::release_layer(size_t i) {
  impl_->fast_cpu.erase(i);
  for (const auto& rank : impl_->manifest.layers.at(i).ranks)
    for (const auto& [role, t] : rank.tensors) {
      const st::File& f = impl_->files.file(t.file);
      if (const st::TensorInfo* info = f.find(t.name)) f.drop_resident_pages(f.data(*info));
    }
}

uint64_t ArtifactRuntime::routed_weight_bytes(size_t i, const ex::Routing& routing) const {
  const artifact::Layer& L = impl_->manifest.layers.at(i);
  std::vector<bool> routed(static_cast<size_t>(L.num_experts), false);
  for (uint32_t e : routing.ids)
    if (e < routed.size()) routed[e] = true;
  const bool expert_parallel = impl_->manifest.target.value("ep", false);
  const uint64_t local = expert_parallel ? L.num_experts / std::max<uint64_t>(1, L.ranks.size()) : L.num_experts;
  uint64_t total = 0;
  for (const auto& r : L.ranks) {
    const uint64_t first = expert_parallel ? local * static_cast<uint64_t>(r.rank) : 0;
    for (const auto& [role, t] : r.tensors) {
      if (!t.per_expert || local == 0) continue;
      const uint64_t slab = byte_size(*dtype_from_name(t.dtype), t.shape) / local;
      for (uint64_t e = first; e < first + local; ++e)
        if (routed[e]) total += slab;
    }
  }
  return total;
}

const std::vector<FastCpuRank>& ArtifactRuntime::fast_cpu_layer(size_t i) {
  auto cached = impl_->fast_cpu.find(i);
  if (cached != impl_->fast_cpu.end()) return cached->second;
  const artifact::Layer& L = impl_->manifest.layers.at(i);
  const ex::CpuLayout layout = *fast_cpu_layout(i);
  const uint64_t E = L.num_experts, Hp = L.padded_hidden_size, P = L.padded_intermediate_size, n13 = L.gated ? 2 * P : P;
  const bool expert_parallel = impl_->manifest.target.value("ep", false);
  const uint64_t local = expert_parallel ? E / std::max<uint64_t>(1, L.ranks.size()) : E;
  if (!ex::cpu_layout_fits(layout, n13, Hp) || !ex::cpu_layout_fits(layout, Hp, P))
    throw_bad_input(impl_->manifest_path, L.prefix, "padded sizes " + std::to_string(Hp) + " x " + std::to_string(P) + " do not fit the CPU " +
                                                        std::string(ex::cpu_layout_name(layout)) + " layout (multiples of 32)");
  std::vector<FastCpuRank> ranks;
  for (const auto& rank : L.ranks) {
    const uint64_t first = expert_parallel ? local * static_cast<uint64_t>(rank.rank) : 0;
    // Every per-expert tensor mapped, and its slab checked against what the kernels will read.
    struct Mapped {
      std::span<const uint8_t> bytes;
      DType dtype;
    };
    std::map<std::string, Mapped> tensors;
    // int4: each projection's scale groups, from its scales' shape [E, n/32, groups, 32].
    std::map<std::string, uint64_t> groups;
    for (const auto& [role, t] : rank.tensors)
      if (layout == ex::CpuLayout::int4_vnni4 && fast_cpu_role(role).value_or("").ends_with("_weight_scale")) {
        const uint64_t g = t.shape.size() == 4 ? t.shape[2] : 0;
        const std::string proj = role.rfind("w13_", 0) == 0 ? "w13_" : "w2_";
        const uint64_t k = proj == "w13_" ? Hp : P;
        if (const std::string why = ex::cpu_int4_groups_unfit(k, g); !why.empty())
          throw_bad_input(impl_->manifest_path, t.name, "shape " + shape_string(t.shape) + ": " + why);
        groups[proj] = g;
      }
    for (const auto& [role, t] : rank.tensors) {
      const std::string what = fast_cpu_role(role).value_or("");
      if (what.empty()) continue;
      const st::File& f = impl_->files.file(t.file);
      const st::TensorInfo* info = f.find(t.name);
      if (!info) throw_bad_input(impl_->manifest_path, t.name, "missing from the file the manifest names");
      const std::string proj = role.rfind("w13_", 0) == 0 ? "w13_" : "w2_";
      const uint64_t n = proj == "w13_" ? n13 : Hp, k = proj == "w13_" ? Hp : P;
      const bool bias = what.ends_with("_bias");
      const DType dt = info->dtype;
      const uint64_t expected = bias ? n * static_cast<uint64_t>(dtype_bits(dt) / 8) : fast_cpu_slab_bytes(layout, what.substr(proj.size()), n, k, groups[proj]);
      if (info->num_bytes() != expected * local)
        throw_bad_input(impl_->manifest_path, t.name, std::to_string(info->num_bytes()) + " bytes, but " + std::to_string(local) + " experts of the CPU " +
                                                          std::string(ex::cpu_layout_name(layout)) + " layout at " + std::to_string(n) + " x " + std::to_string(k) +
                                                          " hold " + std::to_string(expected * local));
      const std::span<const uint8_t> bytes = f.data(*info);
      if (what.ends_with("_zeros"))
        // The kernels subtract a zero point from a 4-bit code by one 32-entry table: 0..16 is
        // every value convert writes (a code, plus 1 for GPTQ's).
        for (size_t b = 0; b < bytes.size(); ++b)
          if (static_cast<int8_t>(bytes[b]) < 0 || static_cast<int8_t>(bytes[b]) > 16)
            throw_bad_input(impl_->manifest_path, t.name, "zero point " + std::to_string(static_cast<int8_t>(bytes[b])) + " at element " + std::to_string(b) +
                                                              " is outside 0..16, the zero points of 4-bit codes");
      tensors[what] = {bytes, dt};
    }
    auto slab = [&](const std::string& role, uint64_t e) -> std::span<const uint8_t> {
      auto it = tensors.find(role);
      if (it == tensors.end()) return {};
      const uint64_t per = it->second.bytes.size() / local;
      return it->second.bytes.subspan(static_cast<size_t>(e * per), static_cast<size_t>(per));
    };
    FastCpuRank r;
    r.biases.resize(static_cast<size_t>(2 * local));
    r.experts.resize(static_cast<size_t>(local));
    r.by_id.assign(static_cast<size_t>(E), nullptr);
    for (uint64_t e = 0; e < local; ++e) {
      ex::CpuExpert& c = r.experts[e];
      for (auto [proj, w] : {std::pair{"w13_", &c.w13}, std::pair{"w2_", &c.w2}}) {
        w->weight = slab(std::string(proj) + "weight", e).data();
        w->scale = slab(std::string(proj) + "weight_scale", e).data();
        w->zeros = reinterpret_cast<const int8_t*>(slab(std::string(proj) + "zeros", e).data());
        w->groups = groups[proj];
      }
      // Biases as floats (F32 in the MXFP4 artifact, the model dtype in the unquantized one),
      // copied so they are aligned.
      for (auto [role, dst, ptr] : {std::tuple{"w13_bias", &r.biases[2 * e], &c.w13.bias}, std::tuple{"w2_bias", &r.biases[2 * e + 1], &c.w2.bias}}) {
        auto b = slab(role, e);
        if (b.empty()) continue;
        OwnedTensor t(tensors.at(role).dtype, {b.size() * 8 / dtype_bits(tensors.at(role).dtype)});
        std::copy(b.begin(), b.end(), t.bytes.begin());
        *dst = ex::float_values(t);
        *ptr = dst->data();
      }
      r.by_id[first + e] = &c;
    }
    ranks.push_back(std::move(r));  // moving keeps the vectors' buffers, so the pointers stay valid
  }
  return impl_->fast_cpu.emplace(i, std::move(ranks)).first->second;
}

std::vector<float> ArtifactRuntime::run_fast_cpu(size_t i, const std::vector<float>& x, const ex::Routing& routing, uint64_t tokens,
                                                 const ex::CpuExpertsOptions& options) {
  const artifact::Layer& L = impl_->manifest.layers.at(i);
  const auto layout = fast_cpu_layout(i);
  if (!layout) throw Error(ErrorKind::usage, L.prefix + ": not in a CPU layout the fast CPU experts read (backend " + L.backend + ")");
  const ex::MoeShape shape{L.padded_hidden_size, L.padded_intermediate_size, L.gated, *ex::parse_w13_rows(L.w13_rows)};
  std::vector<float> total(static_cast<size_t>(tokens * L.hidden_size), 0.0f);
  for (const FastCpuRank& rank : fast_cpu_layer(i)) {
    const std::vector<float> out =
        ex::cpu_experts_moe(*layout, x, tokens, L.hidden_size, routing, rank.by_id, shape, activation_of(L), options, &impl_->fast_cpu_workspace);
    for (size_t k = 0; k < total.size(); ++k) total[k] += out[k];
  }
  return total;
}

std::vector<float> run_reference(const ckpt::Checkpoint& source, const std::string& source_path, const artifact::Layer& L, const std::vector<float>& x,
                                 const ex::Routing& routing, uint64_t tokens, const std::string& target_dtype, int threads) {
  const ckpt::MoeLayer* sl = source.find_layer(L.prefix);
  if (!sl) throw_bad_input(source_path, L.prefix, "the source has no such MoE layer");
  const auto format = ex::weight_format_of(L.family, L.weight_key.value_or(""));
  if (!format) throw Error(ErrorKind::bad_input, L.prefix + ": the runtime experts cannot run family " + L.family + " yet");
  const uint64_t I = sl->intermediate_size, H = sl->hidden_size;
  const uint64_t n13 = sl->gated ? 2 * I : I;
  const ex::MoeShape shape{H, I, sl->gated, sl->recipe.w13_order == ckpt::W13Order::interleaved ? ex::W13Rows::interleaved : ex::W13Rows::gate_up_halves};
  // Value stages (the b12x bake-in, Marlin's power-of-two factor) are vLLM's own rounding of
  // the source: the reference applies them too, so the comparison proves the artifact computes
  // what vLLM computes from this checkpoint (the stage itself is proven byte-exact by the
  // integrity check's unpack against the staged source).
  std::map<std::string, ValueStage::Prepared> stages;
  bool per_tensor_requant = false;  // w13's stage folds the two shard scales into one (DeepGEMM's keeps its block scales)
  if (!L.ranks.empty()) {
    RankGeometry g;
    g.hidden = g.padded_hidden = H;
    g.intermediate = g.padded_intermediate = I;
    g.gpt_oss_interleaved = sl->recipe.w13_order == ckpt::W13Order::interleaved;
    g.gated = sl->gated;
    set_family_geometry(g, *sl, L.family, params_dtype_of_target(target_dtype, source_path), holds_fp8_fnuz(L));
    for (const auto& [role, t] : L.ranks.front().tensors) {
      if (t.value_stage.empty()) continue;
      const ValueStage* stage = find_value_stage(t.value_stage);
      if (!stage) throw_bad_input(source_path, t.name, "unknown value stage `" + t.value_stage + "`");
      stages[role] = stage->prepare(reduction_input(source, *sl, role, g, 0, sl->num_experts, SwigluFacts{L.swiglu_limit, L.swiglu_beta}));
      if (role == "w13_weight" && t.value_stage == layout_id::fp8_requant_w13_max_scale()) per_tensor_requant = true;
    }
  }
  // WNA16: vLLM loads float scales into parameters of the model dtype, and ignores g_idx
  // without act-order; the reference reads the source the same way (one rank, nothing padded).
  // FP8: scales in fp32 parameters. W4A8: the value stage turns the group scales into the
  // kernel's per-group values.
  std::optional<RankGeometry> loaded_as_vllm;
  if (*format == ex::WeightFormat::int_wna16 || *format == ex::WeightFormat::fp8_e4m3 || *format == ex::WeightFormat::int8 ||
      *format == ex::WeightFormat::w4a8_fp8) {
    RankGeometry g;
    g.hidden = g.padded_hidden = H;
    g.intermediate = g.padded_intermediate = I;
    g.gated = sl->gated;
    set_family_geometry(g, *sl, L.family, params_dtype_of_target(target_dtype, source_path), holds_fp8_fnuz(L));
    loaded_as_vllm = g;
  }
  ex::ExpertSource reference = [&](uint64_t e) -> std::optional<ex::ExpertMatrices> {
    ckpt::ExpertParams p = ckpt::read_expert_params(source, *sl, e);
    if (loaded_as_vllm) {
      for (auto& [role, tensor] : p.tensors) tensor = load_expert_param(role, tensor, *loaded_as_vllm);
      if (*format == ex::WeightFormat::int_wna16 && !sl->quant.act_order)
        std::erase_if(p.tensors, [](const auto& kv) { return kv.first.find("g_idx") != std::string::npos; });
    }
    for (auto& [role, stage] : stages)
      if (auto it = p.tensors.find(role); it != p.tensors.end()) stage.change(e, it->second);
    if (*format == ex::WeightFormat::nvfp4) {
      auto multiplier = [&](const std::string& proj) {
        const float m = nvfp4_source_multiplier(p.tensors, proj);
        auto it = stages.find(proj + "weight_scale");
        return it == stages.end() ? m : it->second.multiplier(e, m);
      };
      return matrices_from(p.tensors, *format, n13, H, I, source_path + " (" + L.prefix + ")", multiplier("w13_"), multiplier("w2_"));
    }
    if (*format == ex::WeightFormat::fp8_e4m3 || *format == ex::WeightFormat::int8) {
      // vLLM's requantization to the larger w13 scale: the codes changed above, the scale is the maximum.
      float g13 = 1.0f;
      if (auto it = stages.find("w13_weight"); it != stages.end() && per_tensor_requant) {
        g13 = it->second.multiplier(e, 1.0f);
        p.tensors.erase("w13_weight_scale");
        // Marlin holds that maximum in the params dtype.
        if (auto sc = stages.find("w13_weight_scale"); sc != stages.end()) g13 = sc->second.multiplier(e, g13);
      }
      return matrices_from(p.tensors, *format, n13, H, I, source_path + " (" + L.prefix + ")", g13, 1.0f, fp8_block_of(L.weight_key.value_or("")));
    }
    return matrices_from(p.tensors, *format, n13, H, I, source_path + " (" + L.prefix + ")");
  };
  std::vector<double> out(static_cast<size_t>(tokens * H), 0.0);
  ex::accumulate_experts(x, tokens, routing, reference, shape, activation_of(L), out, threads);
  return std::vector<float>(out.begin(), out.end());
}

}  // namespace moepack::runtime
