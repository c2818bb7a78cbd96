// Tooling for tests/golden/make_w4a8_goldens.py, not part of the build.

// vLLM e9d1398d9 declares its op schemas in csrc/libtorch_stable/torch_bindings.cpp, a file of
// several hundred ops. The W4A8 entry files compiled beside this one, unchanged
// (csrc/libtorch_stable/quantization/cutlass_w4a8/w4a8_mm_entry.cu and
// w4a8_grouped_mm_entry.cu), register CUDA implementations of five ops under the library name
// `_C`; their schemas are declared here with vLLM's signatures, so that the ops load into a
// library of their own and vLLM's Python wrappers (_custom_ops.py) reach them through
// torch.ops._C.

#include <torch/csrc/stable/library.h>

STABLE_TORCH_LIBRARY_FRAGMENT(_C, m) {
  m.def(
      "cutlass_w4a8_mm(Tensor A, Tensor B, Tensor group_scales, int group_size, Tensor channel_scales, "
      "Tensor token_scales, ScalarType? out_type, str? maybe_schedule) -> Tensor");
  m.def("cutlass_pack_scale_fp8(Tensor scales) -> Tensor");
  m.def("cutlass_encode_and_reorder_int4b(Tensor B) -> Tensor");
  m.def(
      "cutlass_w4a8_moe_mm(Tensor! out_tensors, Tensor a_tensors, Tensor b_tensors, Tensor a_scales, "
      "Tensor b_scales, Tensor b_group_scales, int b_group_size, Tensor expert_offsets, Tensor problem_sizes, "
      "Tensor a_strides, Tensor b_strides, Tensor c_strides, Tensor group_scale_strides, str? maybe_schedule) -> ()");
  m.def("cutlass_encode_and_reorder_int4b_grouped(Tensor b_tensors) -> (Tensor, Tensor)");
}
