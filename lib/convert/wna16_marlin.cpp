#include "lib/convert/wna16_marlin.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "lib/core/error.h"
#include "lib/core/layout_ids.h"
#include "lib/oracle/oracle.h"
#include "packers/registry.h"

namespace moepack::convert {
namespace {

uint64_t element_bytes(const OwnedTensor& t) { return static_cast<uint64_t>(dtype_bits(t.dtype) / 8); }

// `units` storage units hold `total` intermediate elements; how many hold `part` of them.
uint64_t scaled(uint64_t part, uint64_t units, uint64_t total, const std::string& role) {
  if (total == 0 || (part * units) % total != 0)
    throw Error(ErrorKind::refused, role + ": " + std::to_string(part) + " of " + std::to_string(total) + " intermediate elements do not fill whole storage units (" +
                                        std::to_string(units) + " units); vLLM cannot load this split");
  return part * units / total;
}

struct Slice {
  uint64_t begin, size;
};
Slice rank_slice(uint64_t n, const RankGeometry& g) {
  const uint64_t per = n / g.tp_size, begin = per * g.tp_rank;
  if (begin >= n) return {0, 0};
  return {begin, std::min(per, n - begin)};
}

int32_t i32_at(const OwnedTensor& t, uint64_t i) {
  int32_t v;
  std::memcpy(&v, t.bytes.data() + 4 * i, 4);
  return v;
}

std::string prefix_of(const std::string& role) { return role.substr(0, role.find('_') + 1); }  // "w13_" / "w2_"

std::string pick(const std::set<std::string>& available, const std::string& prefix, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (available.count(prefix + n)) return prefix + n;
  return {};
}

// Rows of a param's canonical summary (the whole checkpoint tensor of one expert).
int64_t summary_rows(const ckpt::MoeLayer& layer, const std::string& role) {
  for (const auto& p : layer.params)
    if (p.name == role && !p.shape.empty()) return static_cast<int64_t>(p.shape[0]);
  return -1;
}

}  // namespace

bool wna16_loads_full_w2(const ckpt::LayerQuant& q) {
  // GPTQ keeps actorder empty and says desc_act; compressed-tensors' "dynamic" never loads whole.
  return q.act_order && q.group_size > 0 && (q.actorder.empty() || q.actorder == "group");
}

void set_wna16_geometry(RankGeometry& g, const ckpt::MoeLayer& layer, DType params_dtype) {
  g.int_transposed = true;
  g.wna16_full_w2 = wna16_loads_full_w2(layer.quant);
  g.wna16_group_size = layer.quant.group_size;
  g.wna16_compressed_tensors = layer.quant.method.quant_method == "compressed-tensors";
  g.params_dtype = params_dtype;
}

DType params_dtype_of_target(const std::string& target_dtype, const std::string& where) {
  if (target_dtype == "bf16") return DType::BF16;
  if (target_dtype == "fp16") return DType::F16;
  if (target_dtype == "fp32") return DType::F32;
  throw Error(ErrorKind::bad_input, where + ": unknown target dtype `" + target_dtype + "` (bf16, fp16 or fp32)");
}

namespace {

bool is_float_scale(const std::string& role, const OwnedTensor& t) {
  const bool scale = role.find("scales") != std::string::npos || role.find("weight_scale") != std::string::npos;
  return scale && (t.dtype == DType::BF16 || t.dtype == DType::F16 || t.dtype == DType::F32);
}

OwnedTensor load_wna16_uncast(const std::string& role, const OwnedTensor& in, const RankGeometry& g);

}  // namespace

void set_moe_wna16_geometry(RankGeometry& g) {
  const uint64_t per_rank = g.intermediate / g.tp_size;
  const auto factor = oracle::moe_wna16_group_size_div_factor(static_cast<int>(g.hidden), static_cast<int>(per_rank), static_cast<int>(g.wna16_group_size));
  if (!factor)
    throw Error(ErrorKind::refused, "MoeWNA16Method.create_weights raises for group size " + std::to_string(g.wna16_group_size) + " with hidden size " +
                                        std::to_string(g.hidden) + " and intermediate size per rank " + std::to_string(per_rank));
  g.wna16_group_repeat = static_cast<uint64_t>(*factor);
}

bool holds_moe_wna16_scales(const artifact::Layer& layer) {
  for (const auto& rank : layer.ranks)
    for (const auto& [role, t] : rank.tensors)
      if (layout_id::head_of(t.layout) == layout_id::head::moe_wna16_scales) return true;
  return false;
}

namespace {

// MoeWNA16's loader repeats each group (a row of a K-first scale or zero-point param)
// group_size_div_factor times (`repeat_interleave(group_size_div_factor, 1)` on the transposed
// tensor) before the rank's slice: the loaded param then has groups of group_size / factor.
bool groups_along_rows(const std::string& role, const OwnedTensor& in) {
  return in.shape.size() == 2 && (role.ends_with("_scales") || role.ends_with("_qzeros"));
}

OwnedTensor repeat_rows(const OwnedTensor& in, uint64_t times) {
  const uint64_t row_bytes = in.shape[1] * element_bytes(in);
  OwnedTensor out(in.dtype, {in.shape[0] * times, in.shape[1]});
  for (uint64_t r = 0; r < in.shape[0]; ++r)
    for (uint64_t t = 0; t < times; ++t)
      std::memcpy(out.bytes.data() + (r * times + t) * row_bytes, in.bytes.data() + r * row_bytes, static_cast<size_t>(row_bytes));
  return out;
}

}  // namespace

OwnedTensor load_wna16_param(const std::string& role, const OwnedTensor& in, const RankGeometry& g) {
  if (g.wna16_group_repeat > 1) {
    // Every param then loads with the smaller groups (the rank's slice takes whole ones).
    RankGeometry fine = g;
    fine.wna16_group_repeat = 1;
    fine.wna16_group_size = g.wna16_group_size / static_cast<int64_t>(g.wna16_group_repeat);
    return load_wna16_param(role, groups_along_rows(role, in) ? repeat_rows(in, g.wna16_group_repeat) : in, fine);
  }
  OwnedTensor loaded = load_wna16_uncast(role, in, g);
  if (!is_float_scale(role, loaded)) return loaded;
  if (g.params_dtype != DType::BF16 && g.params_dtype != DType::F16)
    throw Error(ErrorKind::refused, "WNA16 scales in " + std::string(dtype_name(g.params_dtype)) +
                                        " parameters: Marlin and the CPU INT4 kernel (fused_experts_cpu) take bf16 or fp16 models only");
  return cast_float_tensor(loaded, g.params_dtype);  // param.copy_(loaded) into the model dtype
}

namespace {

OwnedTensor load_wna16_uncast(const std::string& role, const OwnedTensor& in, const RankGeometry& g) {
  const bool w13 = role.rfind("w13_", 0) == 0;
  const uint64_t I = g.intermediate, P = g.padded_intermediate, per_rank = I / g.tp_size;
  const uint64_t eb = element_bytes(in);
  if (g.padded_hidden != g.hidden)
    throw Error(ErrorKind::refused, role + ": the hidden size is padded (" + std::to_string(g.hidden) + " -> " + std::to_string(g.padded_hidden) +
                                        ") and the WNA16 Marlin loader is not reproduced for a padded hidden size");
  // Group scales must split into whole groups per rank: compressed-tensors' create_weights raises
  // vLLM's ValueErrors; GPTQ / AWQ would allocate I/tp // group rows and load a shard of a group
  // (not reproduced). Act-order loads the w2 scales whole.
  if (g.wna16_group_size > 0 && !g.wna16_full_w2 && per_rank % static_cast<uint64_t>(g.wna16_group_size) != 0) {
    if (g.wna16_compressed_tensors)
      throw Error(ErrorKind::refused, role + ": vLLM raises ValueError: CompressedTensors WNA16 MoE with static group scales requires the MoE "
                                            "intermediate size per tensor-parallel partition (" + std::to_string(per_rank) +
                                            ") to be divisible by group_size (" + std::to_string(g.wna16_group_size) + ")");
    throw Error(ErrorKind::refused, role + ": the intermediate size per rank (" + std::to_string(per_rank) + ") splits a scale group of " +
                                        std::to_string(g.wna16_group_size) + "; vLLM's loading of such a shard is not reproduced");
  }
  if (g.wna16_full_w2 && P != per_rank)
    throw Error(ErrorKind::refused, role + ": act-order with the Marlin intermediate padding (" + std::to_string(per_rank) + " -> " + std::to_string(P) +
                                        "): vLLM asserts \"Marlin MoE thread-tile padding is unsupported with act-order\"");
  if (!w13 && g.wna16_full_w2 && g.tp_size > 1) {
    // load_full_w2: the w2 group scales (GPTQ: and qzeros) are loaded whole on every rank.
    if (role == "w2_scales" || role == "w2_qzeros" || role == "w2_weight_scale") return in;
    if (role == "w2_weight_zero_point")
      throw Error(ErrorKind::refused, role + ": compressed-tensors asymmetric act-order at TP > 1 allocates the w2 zero points for the full "
                                            "intermediate size but loads them sharded; this loader is not reproduced");
  }
  if (in.shape.size() == 1 && in.shape[0] <= 2 && role.find("weight_shape") != std::string::npos) return in;
  if (in.shape.size() == 1) {
    const uint64_t n = in.shape[0];
    if (role.find("g_idx") != std::string::npos) {
      if (w13) return in;  // [H], not sharded
      const Slice s = rank_slice(n, g);
      OwnedTensor out(in.dtype, {s.size});
      copy_param_elements(in, s.begin, out, 0, s.size, eb, role);
      return out;
    }
    if (!w13) return in;  // w2 bias [H]
    // w13 bias [2I]: each half sliced and padded.
    const uint64_t halves = g.gated ? 2 : 1, half = n / halves;
    OwnedTensor out(in.dtype, {halves * P});
    const Slice s = rank_slice(half, g);
    for (uint64_t h = 0; h < halves; ++h)
      copy_param_elements(in, h * half + s.begin, out, h * P, s.size, eb, role);
    return out;
  }
  if (in.shape.size() != 2) throw_internal("wna16 loader: " + role + " is not 1-D or 2-D");
  const uint64_t rows = in.shape[0], cols = in.shape[1];
  if (w13) {
    const uint64_t halves = g.gated ? 2 : 1, half = cols / halves;
    const uint64_t take = scaled(per_rank, half, I, role), padded = scaled(P, half, I, role);
    OwnedTensor out(in.dtype, {rows, halves * padded});
    const Slice s{take * g.tp_rank, take};
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t h = 0; h < halves; ++h)
        copy_param_elements(in, r * cols + h * half + s.begin, out, r * halves * padded + h * padded, s.size, eb, role);
    return out;
  }
  // w2: rows hold the intermediate dimension; a single row (channel-wise scales / zeros) is kept whole.
  if (rows == 1) return in;
  const uint64_t take = scaled(per_rank, rows, I, role), padded = scaled(P, rows, I, role);
  OwnedTensor out(in.dtype, {padded, cols});
  copy_param_elements(in, take * g.tp_rank * cols, out, 0, take * cols, eb, role);
  return out;
}

}  // namespace

std::vector<int32_t> stable_g_idx_order(std::span<const int32_t> g_idx, int64_t groups, const std::string& what) {
  for (size_t i = 0; i < g_idx.size(); ++i)
    if (g_idx[i] < 0 || (groups > 0 && g_idx[i] >= groups))
      throw Error(ErrorKind::bad_input, what + ": element " + std::to_string(i) + " is " + std::to_string(g_idx[i]) + ", outside the " +
                                            std::to_string(groups) + " scale groups [0, " + std::to_string(groups) + ")");
  std::vector<int32_t> order(g_idx.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return g_idx[static_cast<size_t>(a)] < g_idx[static_cast<size_t>(b)]; });
  return order;
}

namespace {

const std::string kActOrderGather = layout_id::marlin_act_order_rows();
const std::string kActOrderGatherThen = kActOrderGather + std::string(layout_id::kPipelineSeparator);  // "gather | repack"
const std::string kSortedGIdx = layout_id::marlin_sort_g_idx(false);
const std::string kSortIndices = layout_id::marlin_sort_g_idx(true);
const std::string kEmptyInt32 = layout_id::empty_int32_per_expert();

std::span<const int32_t> as_i32(const OwnedTensor& t, const std::string& what) {
  if (t.dtype != DType::I32) throw Error(ErrorKind::bad_input, what + ": g_idx must be I32, got " + std::string(dtype_name(t.dtype)));
  return {reinterpret_cast<const int32_t*>(t.bytes.data()), t.bytes.size() / 4};
}

class EmptyInt32 final : public ExpertDerivation {
 public:
  std::string name() const override { return kEmptyInt32; }
  std::vector<std::string> inputs() const override { return {}; }
  DType dtype() const override { return DType::I32; }
  std::vector<uint64_t> slab_shape(std::span<const OwnedTensor>, const RankGeometry&) const override { return {0}; }
  void produce(std::span<const OwnedTensor>, const RankGeometry&, std::span<uint8_t>, const std::string&) const override {}
};

class SortGIdx final : public ExpertDerivation {
 public:
  SortGIdx(std::string g_idx_role, int64_t groups, bool indices) : g_idx_(std::move(g_idx_role)), groups_(groups), indices_(indices) {}
  std::string name() const override { return indices_ ? kSortIndices : kSortedGIdx; }
  std::vector<std::string> inputs() const override { return {g_idx_}; }
  DType dtype() const override { return DType::I32; }
  std::vector<uint64_t> slab_shape(std::span<const OwnedTensor> in, const RankGeometry&) const override { return {in[0].bytes.size() / 4}; }
  void produce(std::span<const OwnedTensor> in, const RankGeometry&, std::span<uint8_t> out, const std::string& what) const override {
    const std::span<const int32_t> g = as_i32(in[0], what + " " + g_idx_);
    const std::vector<int32_t> order = stable_g_idx_order(g, groups_, what + " " + g_idx_);
    for (size_t i = 0; i < order.size(); ++i) {
      const int32_t v = indices_ ? order[i] : g[static_cast<size_t>(order[i])];
      std::memcpy(out.data() + 4 * i, &v, 4);
    }
  }

 private:
  std::string g_idx_;
  int64_t groups_;
  bool indices_;
};

// Act-order weight: codes of K-packed rows gathered by the sort, then the Marlin repack.
class ActOrderWeight final : public ExpertDerivation {
 public:
  ActOrderWeight(std::string weight_role, std::string g_idx_role, int64_t groups, std::string inner)
      : weight_(std::move(weight_role)), g_idx_(std::move(g_idx_role)), groups_(groups), inner_id_(std::move(inner)), inner_(packers::make_layout(inner_id_)) {}
  std::string name() const override { return kActOrderGatherThen + inner_id_; }
  std::vector<std::string> inputs() const override { return {weight_, g_idx_}; }
  DType dtype() const override { return DType::I32; }
  std::vector<uint64_t> slab_shape(std::span<const OwnedTensor> in, const RankGeometry&) const override { return inner_->packed_shape(in[0].shape); }
  void produce(std::span<const OwnedTensor> in, const RankGeometry&, std::span<uint8_t> out, const std::string& what) const override {
    const OwnedTensor& w = in[0];
    const std::span<const int32_t> g = as_i32(in[1], what + " " + g_idx_);
    const uint64_t rows = w.shape[0], n = w.shape[1];
    if (g.size() % rows != 0 || 32 % (g.size() / rows) != 0)
      throw Error(ErrorKind::bad_input, what + " " + weight_ + ": " + std::to_string(rows) + " packed rows do not match the " + std::to_string(g.size()) +
                                            " input rows of " + g_idx_);
    const uint64_t pf = g.size() / rows, bits = 32 / pf, mask = (uint64_t{1} << bits) - 1;
    const std::vector<int32_t> order = stable_g_idx_order(g, groups_, what + " " + g_idx_);
    OwnedTensor gathered(DType::I32, w.shape);
    for (uint64_t k = 0; k < g.size(); ++k) {
      const uint64_t src = static_cast<uint64_t>(order[k]);
      for (uint64_t c = 0; c < n; ++c) {
        const uint32_t code = static_cast<uint32_t>((static_cast<uint32_t>(i32_at(w, (src / pf) * n + c)) >> (bits * (src % pf))) & mask);
        uint32_t word;
        std::memcpy(&word, gathered.bytes.data() + 4 * ((k / pf) * n + c), 4);
        word |= code << (bits * (k % pf));
        std::memcpy(gathered.bytes.data() + 4 * ((k / pf) * n + c), &word, 4);
      }
    }
    inner_->pack(gathered.view(), out);
  }

 private:
  std::string weight_, g_idx_;
  int64_t groups_;
  std::string inner_id_;
  std::unique_ptr<packers::Layout> inner_;
};

}  // namespace

std::shared_ptr<const ExpertDerivation> make_wna16_derivation(const std::string& role, const std::string& layout_id,
                                                              const std::set<std::string>& available, const ckpt::MoeLayer& layer) {
  if (layout_id == kEmptyInt32) return std::make_shared<EmptyInt32>();
  const bool sorted = layout_id == kSortedGIdx, indices = layout_id == kSortIndices;
  const bool gather = layout_id.starts_with(kActOrderGatherThen);
  if (!sorted && !indices && !gather) return nullptr;
  const std::string prefix = prefix_of(role);
  const std::string g_idx = pick(available, prefix, {"g_idx", "weight_g_idx"});
  const std::string scales = pick(available, prefix, {"scales", "weight_scale"});
  if (g_idx.empty()) throw Error(ErrorKind::bad_input, "layer " + layer.prefix + ": act-order needs " + prefix + "g_idx, which the checkpoint does not have");
  const int64_t groups = scales.empty() ? -1 : summary_rows(layer, scales);
  if (gather) return std::make_shared<ActOrderWeight>(role, g_idx, groups, layout_id.substr(kActOrderGatherThen.size()));
  return std::make_shared<SortGIdx>(g_idx, groups, indices);
}


DerivedLayout wna16_derived_layout(const std::string& layout_id) {
  if (layout_id == kEmptyInt32) return {DerivedKind::empty, ""};
  if (layout_id == kSortedGIdx) return {DerivedKind::sorted_g_idx, ""};
  if (layout_id == kSortIndices) return {DerivedKind::sort_indices, ""};
  if (layout_id.starts_with(kActOrderGatherThen)) return {DerivedKind::act_order_weight, layout_id.substr(kActOrderGatherThen.size())};
  return {};
}

void restore_act_order(std::map<std::string, OwnedTensor>& params, const std::string& proj, const std::string& where) {
  {
    auto perm_it = params.find(proj + "g_idx_sort_indices");
    if (perm_it == params.end() || perm_it->second.bytes.empty()) return;
    const std::span<const int32_t> perm = as_i32(perm_it->second, where + " " + perm_it->first);
    const uint64_t k = perm.size();
    std::vector<bool> seen(static_cast<size_t>(k), false);
    for (int32_t p : perm) {
      if (p < 0 || static_cast<uint64_t>(p) >= k || seen[static_cast<size_t>(p)])
        throw Error(ErrorKind::bad_input, where + " " + perm_it->first + ": not a permutation of " + std::to_string(k) + " rows");
      seen[static_cast<size_t>(p)] = true;
    }
    // The sorted g_idx goes back to checkpoint order.
    for (const char* name : {"g_idx", "weight_g_idx"}) {
      auto it = params.find(proj + name);
      if (it == params.end()) continue;
      const std::span<const int32_t> sorted = as_i32(it->second, where + " " + it->first);
      if (sorted.size() != k) throw Error(ErrorKind::bad_input, where + " " + it->first + ": " + std::to_string(sorted.size()) + " entries for " + std::to_string(k) + " sort indices");
      OwnedTensor restored(DType::I32, {k});
      for (uint64_t j = 0; j < k; ++j) std::memcpy(restored.bytes.data() + 4 * static_cast<uint64_t>(perm[j]), &sorted[j], 4);
      it->second = std::move(restored);
    }
    // The gathered K-packed codes go back to checkpoint order.
    for (const char* name : {"qweight", "weight_packed"}) {
      auto it = params.find(proj + name);
      if (it == params.end()) continue;
      const OwnedTensor& w = it->second;
      if (w.dtype != DType::I32 || w.shape.size() != 2 || w.shape[0] == 0 || k % w.shape[0] || 32 % (k / w.shape[0]))
        throw Error(ErrorKind::bad_input, where + " " + it->first + ": " + shape_string(w.shape) + " is no K-packed weight of " + std::to_string(k) + " rows");
      const uint64_t n = w.shape[1], pf = k / w.shape[0], bits = 32 / pf, mask = (uint64_t{1} << bits) - 1;
      OwnedTensor restored(DType::I32, w.shape);
      for (uint64_t j = 0; j < k; ++j) {
        const uint64_t dst = static_cast<uint64_t>(perm[j]);
        for (uint64_t c = 0; c < n; ++c) {
          const uint32_t code = static_cast<uint32_t>((static_cast<uint32_t>(i32_at(w, (j / pf) * n + c)) >> (bits * (j % pf))) & mask);
          uint32_t word;
          std::memcpy(&word, restored.bytes.data() + 4 * ((dst / pf) * n + c), 4);
          word |= code << (bits * (dst % pf));
          std::memcpy(restored.bytes.data() + 4 * ((dst / pf) * n + c), &word, 4);
        }
      }
      it->second = std::move(restored);
    }
  }
}

}  // namespace moepack::convert
