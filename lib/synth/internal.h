// Pieces shared by the generator's files: the tensor sink, the family definitions and the
// per-linear emitters. Not part of the public API (synth.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/core/dtype.h"
#include "lib/synth/quantize.h"
#include "lib/synth/synth.h"

namespace moepack::synth {

// Collects the tensors of a checkpoint in the order a loader's state dict would hold them.
// A sparse sink records names, dtypes and shapes only: nothing is generated or quantized.
class Sink {
 public:
  struct Tensor {
    std::string name;
    DType dtype = DType::U8;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> bytes;  // empty in a sparse sink
  };
  explicit Sink(bool with_data) : with_data_(with_data) {}
  bool with_data() const { return with_data_; }
  void add(std::string name, DType dtype, std::vector<uint64_t> shape, std::vector<uint8_t> bytes = {});
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  bool with_data_;
  std::vector<Tensor> tensors_;
};

// How each family stores one nn.Linear.
enum class Scheme {
  bf16,
  ct_nvfp4, ct_nvfp4a16, ct_mxfp4,
  ct_w4a16, ct_w4a16_asym, ct_w4a16_actorder, ct_w8a16, ct_w4a8_fp8,
  ct_fp8_tensor, ct_fp8_channel, ct_fp8_block, ct_w8a8_int8,
  mo_nvfp4, mo_w4a16_nvfp4, mo_fp8, mo_mxfp8,
  quark_w_mxfp4, quark_w_mxfp4_a_fp8, quark_w_mxfp4_a_mxfp4, quark_w_mxfp6_e3m2,
  gptq_int4, gptq_int4_desc_act, gptq_int8,
  awq_int4,
  deepseek_fp8_block,
  deepseek_v4_fp4, deepseek_v4_nvfp4, deepseek_v4_fp8,
  gpt_oss_mxfp4,
  ct_w4a8_int8,
};

struct FamilyDef {
  FamilyInfo info;
  Scheme scheme;
  uint64_t k_multiple;  // hidden and intermediate must be multiples of this
  int default_shards;
};
const FamilyDef& find_family(const std::string& name);  // throws usage

enum class LinearRole { routed_expert, shared_expert, dense_mlp, attention };

struct LinearJob {
  std::string module;  // tensor-name prefix, e.g. "model.layers.0.mlp.experts.3.gate_proj"
  std::string key;     // linear_source key
  uint64_t out = 0, in = 0;
  LinearRole role = LinearRole::routed_expert;
};

// Emits one linear's tensors. `w` is null in a sparse sink. `pair_amax` (> 0) is the amax shared
// by a gate/up pair for the families whose calibration ties their global scales.
void emit_linear(Sink& sink, Scheme scheme, const LinearJob& job, const Matrix* w, float pair_amax, uint64_t seed);
// Emits gate, up and down of one expert (the pair amax is computed here when needed).
void emit_mlp(Sink& sink, Scheme scheme, const LinearJob& gate, const LinearJob& up, const LinearJob& down, uint64_t seed);
// Whether a family quantizes attention projections (else they stay BF16).
bool scheme_quantizes_attention(Scheme scheme);
// A per-linear activation range standing in for calibration statistics (static input scales).
float activation_amax(uint64_t seed, const std::string& key);

// The modules a family leaves unquantized, for its ignore/exclude list: the routers (listed
// explicitly, and as the module-name suffix every router shares, e.g. "mlp.gate") and lm_head.
struct Unquantized {
  std::vector<std::string> routers;
  std::string router_suffix;
  std::string layers_glob = "model.layers.*.";  // every decoder layer's name prefix, as an fnmatch pattern
  std::string lm_head = "lm_head";              // Llama-4 nests it: language_model.lm_head
  std::vector<std::string> patterns;  // further excluded modules as fnmatch patterns (Quark's exclude)
};
// Config pieces: `quantization_config` (null for unquantized), extra JSON files by name.
nlohmann::json quantization_config(Scheme scheme, const Unquantized& unquantized);
std::map<std::string, std::string> extra_quant_files(Scheme scheme, const Unquantized& unquantized);

// Builds every tensor of the model and its config.json.
struct ModelBuild {
  nlohmann::json config;
  std::map<std::string, std::string> extra_files;  // name -> contents
};
ModelBuild build_model(const FamilyDef& family, const SampleDims& dims, uint64_t seed, Sink& sink);

std::string json_text(const nlohmann::json& j, int indent = 2);  // with a trailing newline

}  // namespace moepack::synth
