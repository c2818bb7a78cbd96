// NVFP4 reductions and value stages; what each computes and where vLLM does it is in
// nvfp4_prepare.h.
#include "lib/convert/nvfp4_prepare.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/core/layout_ids.h"

namespace moepack::convert {
namespace {

// ---- ids --------------------------------------------------------------------------------------------

struct ParsedId {
  std::string name;
  std::vector<std::string> args;
};

std::optional<ParsedId> parse_id(std::string_view id) {
  const size_t open = id.find('(');
  if (open == std::string_view::npos || id.back() != ')') return std::nullopt;
  ParsedId p;
  p.name = std::string(id.substr(0, open));
  std::string_view rest = id.substr(open + 1, id.size() - open - 2);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    p.args.emplace_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return p;
}

// "key=value" -> value, or nullopt.
std::optional<std::string> arg_value(const std::vector<std::string>& args, const std::string& key) {
  for (const auto& a : args)
    if (a.rfind(key + "=", 0) == 0) return a.substr(key.size() + 1);
  return std::nullopt;
}

// ---- the scales of one projection, in the ModelOpt convention ----------------------------------------

enum class Proj { w13, w2 };

std::string prefix_of(Proj p) { return p == Proj::w13 ? "w13_" : "w2_"; }

std::optional<Proj> parse_proj(const std::string& s) {
  if (s == "w13") return Proj::w13;
  if (s == "w2") return Proj::w2;
  return std::nullopt;
}

std::string number(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

std::vector<float> floats_of(const OwnedTensor& t) {
  if (t.dtype != DType::F32) throw_internal("NVFP4 global scales are F32, got " + std::string(dtype_name(t.dtype)));
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), v.size() * 4);
  return v;
}

// One global scale as a multiplier, refused where vLLM would compute garbage from it.
float multiplier(float stored, bool divisor, bool is_input, const ReductionInput& in, const std::string& role, uint64_t expert, size_t element) {
  const std::string at = in.where(role, expert) + (element ? " (element " + std::to_string(element) + ")" : "");
  if (!std::isfinite(stored) || stored < 0.0f)
    throw_bad_input(at, role, "NVFP4 global scales must be finite and not negative, got " + number(stored));
  if (stored == 0.0f && (divisor || is_input))
    throw_bad_input(at, role,
                    std::string("an NVFP4 ") + (divisor ? "global scale stored as a divisor" : "input scale") +
                        " of 0 makes vLLM's " + (is_input ? "activation global scale" : "weight scale") + " infinite");
  return divisor ? 1.0f / stored : stored;
}

struct ScaleRoles {
  std::string weight;
  bool weight_divisor = false;
  std::string input;
  bool input_divisor = false;
};

ScaleRoles roles_of(const ReductionInput& in, Proj p) {
  const std::string pre = prefix_of(p);
  ScaleRoles r;
  if (in.has(pre + "weight_scale_2")) r.weight = pre + "weight_scale_2";
  else if (in.has(pre + "weight_global_scale")) r.weight = pre + "weight_global_scale", r.weight_divisor = true;
  else throw_internal("NVFP4 layer without " + pre + "weight_scale_2 or " + pre + "weight_global_scale");
  if (in.has(pre + "input_scale")) r.input = pre + "input_scale";
  else if (in.has(pre + "input_global_scale")) r.input = pre + "input_global_scale", r.input_divisor = true;
  return r;
}

// s13 (gate half) or s2 per expert of the rank.
std::vector<float> weight_scale_2(const ReductionInput& in, Proj p) {
  const ScaleRoles r = roles_of(in, p);
  std::vector<float> out;
  in.each(r.weight, false, [&](uint64_t e, const OwnedTensor& t) {
    const std::vector<float> v = floats_of(t);
    if (v.empty()) throw_internal("empty " + r.weight);
    out.push_back(multiplier(v[0], r.weight_divisor, false, in, r.weight, e, 0));
  });
  return out;
}

// Every input scale element per expert (w13: gate, up; w2: one), as multipliers.
std::vector<std::vector<float>> input_scales(const ReductionInput& in, Proj p, bool whole_layer) {
  const ScaleRoles r = roles_of(in, p);
  if (r.input.empty()) throw_internal("NVFP4 layer without input scales reached a reduction of them");
  std::vector<std::vector<float>> out;
  in.each(r.input, whole_layer, [&](uint64_t e, const OwnedTensor& t) {
    std::vector<float> v = floats_of(t);
    for (size_t i = 0; i < v.size(); ++i) v[i] = multiplier(v[i], r.input_divisor, true, in, r.input, e, i);
    out.push_back(std::move(v));
  });
  return out;
}

float global_max(const std::vector<std::vector<float>>& a) {
  float best = -INFINITY;
  for (const auto& e : a)
    for (float v : e) best = std::max(best, v);
  return best;
}

float expert_max(const std::vector<float>& a) {
  float best = -INFINITY;
  for (float v : a) best = std::max(best, v);
  return best;
}

void write_f32(std::span<uint8_t> out, const std::vector<float>& values) {
  if (out.size() != values.size() * 4) throw_internal("NVFP4 reduction: " + std::to_string(out.size()) + " output bytes for " + std::to_string(values.size()) + " values");
  std::memcpy(out.data(), values.data(), out.size());
}

// How the input scales are reduced: one maximum over every expert of the layer or of the rank,
// or one per expert over its gate and up halves.
enum class InputReduction { none, global_max_all, global_max_rank, expert_max };

std::optional<InputReduction> parse_input(const std::string& s) {
  if (s == "none") return InputReduction::none;
  if (s == "input_global_max_all" || s == "global_max_all") return InputReduction::global_max_all;
  if (s == "input_global_max_rank" || s == "global_max_rank") return InputReduction::global_max_rank;
  if (s == "input_expert_max" || s == "expert_max") return InputReduction::expert_max;
  return std::nullopt;
}

// The reduced input scale of each of the rank's experts.
std::vector<float> reduced_inputs(const ReductionInput& in, Proj p, InputReduction how) {
  switch (how) {
    case InputReduction::none: break;
    case InputReduction::global_max_all:
    case InputReduction::global_max_rank:
      return std::vector<float>(in.local_experts, global_max(input_scales(in, p, how == InputReduction::global_max_all)));
    case InputReduction::expert_max: {
      std::vector<float> out;
      for (const auto& e : input_scales(in, p, false)) out.push_back(expert_max(e));
      return out;
    }
  }
  throw_internal("no input reduction");
}

// ---- reductions -------------------------------------------------------------------------------------

enum class Kind { weight_scale_2, input_scale, inverse_input_max, ones, marlin_global, g1_scale_c, gemm1_value };

class Nvfp4Reduction final : public LayerReduction {
 public:
  Nvfp4Reduction(std::string id, Kind kind) : id_(std::move(id)), kind_(kind) {}
  Proj proj = Proj::w13;
  InputReduction input = InputReduction::none;
  bool bf16 = true;   // marlin_global
  bool gated = true;  // g1_scale_c
  bool clamp = true;  // gemm1_value: the clamp limit (else beta)

  std::string name() const override { return id_; }
  bool reads_other_roles() const override { return true; }
  DType dtype() const override { return DType::F32; }
  std::vector<uint64_t> shape(uint64_t local_experts) const override {
    if (kind_ == Kind::inverse_input_max) return {};
    return {local_experts};
  }

  void reduce(const ReductionInput& in, std::span<uint8_t> out) const override {
    const uint64_t E = in.local_experts;
    switch (kind_) {
      case Kind::ones: return write_f32(out, std::vector<float>(E, 1.0f));
      case Kind::input_scale: return write_f32(out, reduced_inputs(in, proj, input));
      case Kind::inverse_input_max: {
        const float m = global_max(input_scales(in, proj, false));
        return write_f32(out, {1.0f / m});
      }
      case Kind::weight_scale_2: {
        std::vector<float> s = weight_scale_2(in, proj);
        if (input != InputReduction::none) {
          const std::vector<float> a = reduced_inputs(in, proj, input);
          for (uint64_t e = 0; e < E; ++e) s[e] = s[e] * a[e];
        }
        return write_f32(out, s);
      }
      case Kind::marlin_global: {
        std::vector<float> s = weight_scale_2(in, proj);
        const float factor = marlin_factor(in);
        const float exponent_bias = std::ldexp(1.0f, bf16 ? 119 : 7);  // 2^(bias - 7): bf16 bias 126, fp16 14
        for (uint64_t e = 0; e < E; ++e) {
          const float scaled = s[e] * exponent_bias;
          if (!std::isfinite(scaled))
            throw_bad_input(in.where(roles_of(in, proj).weight, in.first_expert + e), roles_of(in, proj).weight,
                            "the Marlin NVFP4 global scale " + number(s[e]) + " x 2^119 overflows fp32");
          s[e] = scaled / factor;
        }
        return write_f32(out, s);
      }
      case Kind::g1_scale_c: {
        const float inv_a2 = 1.0f / reduced_inputs(in, Proj::w2, input).at(0);
        if (!gated) return write_f32(out, std::vector<float>(E, inv_a2));
        std::vector<float> s = weight_scale_2(in, Proj::w13);
        const std::vector<float> a = reduced_inputs(in, Proj::w13, input);
        for (uint64_t e = 0; e < E; ++e) s[e] = (s[e] * a[e]) * inv_a2;
        return write_f32(out, s);
      }
      case Kind::gemm1_value: {
        const std::optional<double> configured = clamp ? in.swiglu_limit : in.swiglu_beta;
        if (!configured) throw_internal(id_ + " without the model's " + (clamp ? "swiglu_limit" : "swiglu_beta"));
        const float value = static_cast<float>(*configured);  // torch.full(..., float(v), dtype=float32)
        std::vector<float> s = weight_scale_2(in, Proj::w13);
        const std::vector<float> a = reduced_inputs(in, Proj::w13, input);
        for (uint64_t e = 0; e < E; ++e) s[e] = value / (s[e] * a[e]);
        return write_f32(out, s);
      }
    }
  }

 private:
  float marlin_factor(const ReductionInput& in) const {
    if (!bf16) return 1.0f;
    return marlin_nvfp4_scale_factor(in.gather(prefix_of(proj) + "weight_scale"));
  }

  std::string id_;
  Kind kind_;
};

std::unique_ptr<Nvfp4Reduction> make_reduction(std::string_view id) {
  auto p = parse_id(id);
  if (!p) return nullptr;
  const auto& a = p->args;
  auto make = [&](Kind k) { return std::make_unique<Nvfp4Reduction>(std::string(id), k); };
  if (p->name == layout_id::head::nvfp4_ones && a.size() == 1 && a[0] == "f32") return make(Kind::ones);
  if ((p->name == layout_id::head::nvfp4_weight_scale_2 || p->name == layout_id::head::nvfp4_input_scale) && a.size() == 2) {
    auto proj = parse_proj(a[0]);
    auto how = parse_input(p->name == layout_id::head::nvfp4_weight_scale_2 ? arg_value(a, "times").value_or("") : a[1]);
    if (!proj || !how) return nullptr;
    if (p->name == layout_id::head::nvfp4_input_scale && *how == InputReduction::none) return nullptr;
    auto r = make(p->name == layout_id::head::nvfp4_weight_scale_2 ? Kind::weight_scale_2 : Kind::input_scale);
    r->proj = *proj;
    r->input = *how;
    return r;
  }
  if (p->name == layout_id::head::nvfp4_inverse_input_scale_max && a.size() == 1) {
    auto proj = parse_proj(a[0]);
    if (!proj) return nullptr;
    auto r = make(Kind::inverse_input_max);
    r->proj = *proj;
    return r;
  }
  if (p->name == layout_id::head::nvfp4_marlin_global_scale && a.size() == 2) {
    auto proj = parse_proj(a[0]);
    auto dt = arg_value(a, "params_dtype");
    if (!proj || !dt || (*dt != "bf16" && *dt != "f16")) return nullptr;
    auto r = make(Kind::marlin_global);
    r->proj = *proj;
    r->bf16 = *dt == "bf16";
    return r;
  }
  if (p->name == layout_id::head::trtllm_nvfp4_g1_scale_c && a.size() == 2) {
    auto how = parse_input(arg_value(a, "input").value_or(""));
    auto gated = arg_value(a, "gated");
    if (!how || *how == InputReduction::none || *how == InputReduction::expert_max || !gated || (*gated != "0" && *gated != "1")) return nullptr;
    auto r = make(Kind::g1_scale_c);
    r->input = *how;
    r->gated = *gated == "1";
    return r;
  }
  if (p->name == layout_id::head::trtllm_nvfp4_gemm1 && a.size() == 2 && (a[0] == "clamp_limit" || a[0] == "beta")) {
    auto how = parse_input(arg_value(a, "input").value_or(""));
    if (!how || *how == InputReduction::none || *how == InputReduction::expert_max) return nullptr;
    auto r = make(Kind::gemm1_value);
    r->input = *how;
    r->clamp = a[0] == "clamp_limit";
    return r;
  }
  return nullptr;
}

// ---- value stages -----------------------------------------------------------------------------------

class BakeWeightScale2 final : public ValueStage {
 public:
  BakeWeightScale2(std::string id, Proj p) : id_(std::move(id)), proj_(p) {}
  std::string name() const override { return id_; }
  Prepared prepare(const ReductionInput& in) const override {
    const std::vector<float> s = weight_scale_2(in, proj_);
    const std::string role = in.role;
    const uint64_t first = in.first_expert;
    auto where = [w = in.where, first](const std::string& r, uint64_t local) { return w(r, first + local); };
    Prepared out;
    out.multiplier = [](uint64_t, float) { return 1.0f; };
    out.change = [s, role, where](uint64_t e, OwnedTensor& t) {
      if (t.dtype != DType::F8_E4M3) throw_internal("b12x bake-in of " + role + ": expected F8_E4M3, got " + std::string(dtype_name(t.dtype)));
      for (size_t i = 0; i < t.bytes.size(); ++i) {
        const uint8_t b = t.bytes[i];
        if (e4m3_is_nan(b)) throw_bad_input(where(role, e), role, "E4M3 block scale element " + std::to_string(i) + " is NaN");
        const float product = e4m3_to_float(b) * s.at(e);
        const uint8_t baked = float_to_e4m3(product);
        if (e4m3_is_nan(baked))
          throw_bad_input(where(role, e), role,
                          "baking weight_scale_2 " + number(s.at(e)) + " into block scale element " + std::to_string(i) + " (" +
                              number(e4m3_to_float(b)) + ") gives " + number(product) + ", beyond E4M3 (torch's cast would write NaN)");
        t.bytes[i] = baked;
      }
    };
    return out;
  }

 private:
  std::string id_;
  Proj proj_;
};

class MarlinScaleFactor final : public ValueStage {
 public:
  MarlinScaleFactor(std::string id, bool bf16) : id_(std::move(id)), bf16_(bf16) {}
  std::string name() const override { return id_; }
  Prepared prepare(const ReductionInput& in) const override {
    const float factor = bf16_ ? marlin_nvfp4_scale_factor(in.gather(in.role)) : 1.0f;
    const std::string role = in.role;
    const uint64_t first = in.first_expert;
    auto where = [w = in.where, first](const std::string& r, uint64_t local) { return w(r, first + local); };
    constexpr float kSmallestKept = 1.0f / 64;  // 2 after Marlin's 2^7
    Prepared out;
    out.multiplier = [factor](uint64_t, float m) { return m / factor; };
    out.change = [factor, role, where](uint64_t e, OwnedTensor& t) {
      if (t.dtype != DType::F8_E4M3) throw_internal("Marlin NVFP4 factor of " + role + ": expected F8_E4M3, got " + std::string(dtype_name(t.dtype)));
      for (size_t i = 0; i < t.bytes.size(); ++i) {
        const uint8_t b = t.bytes[i];
        if (e4m3_is_nan(b)) throw_bad_input(where(role, e), role, "E4M3 block scale element " + std::to_string(i) + " is NaN");
        const float v = e4m3_to_float(b) * factor;  // exact: a power of two keeping the largest at or below 448
        t.bytes[i] = v < kSmallestKept ? 0 : float_to_e4m3(v);
      }
    };
    return out;
  }

 private:
  std::string id_;
  bool bf16_;
};

std::unique_ptr<ValueStage> make_stage(std::string_view id) {
  auto p = parse_id(id);
  if (!p) return nullptr;
  if (p->name == layout_id::head::nvfp4_bake_weight_scale_2 && p->args.size() == 1) {
    auto proj = parse_proj(p->args[0]);
    if (!proj) return nullptr;
    return std::make_unique<BakeWeightScale2>(std::string(id), *proj);
  }
  if (p->name == layout_id::head::nvfp4_marlin_scale_factor && p->args.size() == 2 && parse_proj(p->args[0])) {
    auto dt = arg_value(p->args, "params_dtype");
    if (!dt || (*dt != "bf16" && *dt != "f16")) return nullptr;
    return std::make_unique<MarlinScaleFactor>(std::string(id), *dt == "bf16");
  }
  return nullptr;
}

// Instances live for the process, one per id, as the static reductions do.
template <class T, class Make>
const T* cached(std::string_view id, Make make) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<T>, std::less<>> made;
  std::lock_guard lock(mutex);
  if (auto it = made.find(id); it != made.end()) return it->second.get();
  std::unique_ptr<T> r = make(id);
  if (!r) return nullptr;
  return made.emplace(std::string(id), std::move(r)).first->second.get();
}

}  // namespace

float marlin_nvfp4_scale_factor(const std::vector<OwnedTensor>& scales) {
  float largest = 0.0f;
  for (const auto& t : scales)
    for (uint8_t b : t.bytes)
      if (!e4m3_is_nan(b)) largest = std::max(largest, e4m3_to_float(b));
  if (largest <= 0.0f || largest >= 448.0f) return 1.0f;
  // The largest k with largest * 2^k <= 448: torch's floor(log2(448*128 / (largest*128))),
  // exact because both are E4M3 values (their ratio is never within an ulp of a power of two
  // without being one).
  int k = 0;
  while (largest * std::ldexp(1.0f, k + 1) <= 448.0f) ++k;
  return std::ldexp(1.0f, k);
}

const LayerReduction* find_nvfp4_reduction(std::string_view id) {
  return cached<LayerReduction>(id, [](std::string_view i) -> std::unique_ptr<LayerReduction> { return make_reduction(i); });
}

const ValueStage* find_nvfp4_value_stage(std::string_view id) { return cached<ValueStage>(id, make_stage); }

}  // namespace moepack::convert
