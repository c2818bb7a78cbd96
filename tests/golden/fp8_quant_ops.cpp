// Tooling for tests/golden/make_w4a8_goldens.py, not part of the build.
//
// QuantFP8's CUDA path (vLLM e9d1398d9) calls torch.ops._C.dynamic_per_token_scaled_fp8_quant,
// whose kernel is in csrc/libtorch_stable/quantization/w8a8/fp8/common.cu, compiled unchanged
// beside this file. That file defines the function only; vLLM declares the schema and binds the
// function in csrc/libtorch_stable/torch_bindings.cpp, among several hundred other ops. This
// file does the same for this one op (a fragment of `_C`, beside w4a8_cutlass_ops.cpp's).
#include <optional>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

// Defined in common.cu; vLLM declares it in csrc/libtorch_stable/ops.h with this signature.
void dynamic_per_token_scaled_fp8_quant(torch::stable::Tensor& out, torch::stable::Tensor const& input,
                                        torch::stable::Tensor& scale,
                                        std::optional<torch::stable::Tensor> const& scale_ub);

STABLE_TORCH_LIBRARY_FRAGMENT(_C, m) {
  m.def("dynamic_per_token_scaled_fp8_quant(Tensor! result, Tensor input, Tensor! scale, Tensor? scale_ub) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(_C, CUDA, m) {
  m.impl("dynamic_per_token_scaled_fp8_quant", TORCH_BOX(&dynamic_per_token_scaled_fp8_quant));
}
