#include "lib/oracle/hazards.h"

namespace moepack::oracle {
namespace {

// The K granularity of the measured defect: at hidden 352 exactly K 320-351 (past the last
// multiple of 64) were lost, and hidden 192 and 2880 (multiples of 64) were exact.
constexpr int kHopperMxfp4BlockK = 64;

bool runs_oai_triton_mxfp4_on_sm90(const Decision& d, const Deployment& dep) {
  return d.ok() && d.family == Family::mxfp4 && d.backend == "TRITON" && d.experts_class &&
         d.experts_class->rfind("OAITritonMxfp4Experts", 0) == 0 && dep.device.is_cuda() && dep.device.is_device_capability(90);
}

}  // namespace

const std::vector<HazardRow>& hazard_table() {
  static const std::vector<HazardRow> rows = {
      // Measured with real bytes on an H200 (OAITritonMxfp4Experts, sm90 layouts). The w13 GEMM's
      // K is the hidden size after the method's round-up (padded_hidden_size), so a deployment
      // whose round-up reaches a multiple of 64 is not affected.
      {"triton_kernels-3.5.1-sm90-partial-k-tile",
       [](const Decision& d, const Deployment& dep) {
         return runs_oai_triton_mxfp4_on_sm90(d, dep) && d.padded_hidden_size % kHopperMxfp4BlockK != 0;
       },
       [](const Decision& d) {
         const int hidden = d.padded_hidden_size;
         const int full_tiles_end = hidden / kHopperMxfp4BlockK * kHopperMxfp4BlockK;
         return "triton_kernels v3.5.1 matmul_ogs reads the weights of a partial last K tile as zero: the w13 GEMM (K = hidden " +
                std::to_string(hidden) + ", not a multiple of " + std::to_string(kHopperMxfp4BlockK) + ") ignores K " +
                std::to_string(full_tiles_end) + "-" + std::to_string(hidden - 1) +
                " of every expert, so the layer's outputs are wrong without any error; vLLM neither pads nor refuses";
       },
       "H200, hidden 352, moepack session measurements, 2026-11"},
  };
  return rows;
}

std::vector<Hazard> find_hazards(const Decision& decision, const Deployment& deployment) {
  std::vector<Hazard> found;
  for (const HazardRow& row : hazard_table())
    if (row.applies(decision, deployment)) found.push_back({row.id, row.effect(decision), row.seen});
  return found;
}

}  // namespace moepack::oracle
