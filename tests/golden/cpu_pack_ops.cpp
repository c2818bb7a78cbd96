// Tooling for tests/golden/make_cpu_goldens.py, not part of the build.
//
// vLLM's x86 CPU extension compiles its MoE weight packs into one library whose op schemas and
// registrations all live in csrc/cpu/torch_bindings.cpp, beside some hundred other ops (and
// oneDNN, NUMA and attention code this harness does not need). The packs themselves are plain
// C++ functions at global scope in csrc/cpu/sgl-kernels/gemm.cpp (convert_weight_packed,
// convert_scale_packed), csrc/cpu/sgl-kernels/gemm_int4.cpp (convert_weight_packed_scale_zp)
// and csrc/cpu/cpu_fused_moe.cpp (prepack_moe_weight). This file declares those four functions
// with the signatures the upstream files define, and registers them under vLLM's library name
// `_C` with the schemas vLLM gives them, so that the upstream .cpp files compiled beside it
// (unchanged) are reached as torch.ops._C.* by vLLM's own Python (cpu_moe.py, _custom_ops.py).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>
#include <tuple>

at::Tensor convert_weight_packed(at::Tensor& weight);
at::Tensor convert_scale_packed(at::Tensor& scale);
std::tuple<at::Tensor, at::Tensor, at::Tensor> convert_weight_packed_scale_zp(at::Tensor qweight, at::Tensor qzeros,
                                                                              at::Tensor scales, int64_t quant_method_4bit);
void prepack_moe_weight(const at::Tensor& weight, at::Tensor& packed_weight, const std::string& isa);  // torch::Tensor there

TORCH_LIBRARY(_C, m) {
  m.def("convert_weight_packed(Tensor! weight) -> Tensor");
  m.impl("convert_weight_packed", c10::kCPU, &convert_weight_packed);
  m.def("convert_scale_packed(Tensor! scale) -> Tensor");
  m.impl("convert_scale_packed", c10::kCPU, &convert_scale_packed);
  m.def("convert_weight_packed_scale_zp(Tensor weight, Tensor qzeros, Tensor scales, int quant_method_4bit) -> (Tensor, Tensor, Tensor)");
  m.impl("convert_weight_packed_scale_zp", c10::kCPU, &convert_weight_packed_scale_zp);
  m.def("prepack_moe_weight(Tensor weight, Tensor(a1!) packed_weight, str isa) -> ()");
  m.impl("prepack_moe_weight", c10::kCPU, &prepack_moe_weight);
}
