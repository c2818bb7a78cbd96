// Tooling for tests/golden/make_wna16_goldens.py, not part of the build.
//
// vLLM builds its Marlin weight repacks (csrc/libtorch_stable/quantization/marlin/
// {gptq,awq}_marlin_repack.cu) into one big extension whose op schemas live in
// csrc/libtorch_stable/torch_bindings.cpp, a file that declares a hundred other ops. The two
// .cu files only register CUDA implementations (STABLE_TORCH_LIBRARY_IMPL under the library
// name `_C`). This file declares just the two schemas, with the same signatures, so that the
// upstream .cu files compiled beside it (unchanged) register into a library of their own and
// vLLM's Python wrappers (torch.ops._C.gptq_marlin_repack / awq_marlin_repack) reach them.
#include <torch/csrc/stable/library.h>

STABLE_TORCH_LIBRARY(_C, m) {
  m.def("gptq_marlin_repack(Tensor b_q_weight, Tensor perm, SymInt size_k, SymInt size_n, int num_bits, bool is_a_8bit) -> Tensor");
  m.def("awq_marlin_repack(Tensor b_q_weight, SymInt size_k, SymInt size_n, int num_bits, bool is_a_8bit) -> Tensor");
}
