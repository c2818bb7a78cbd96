// The upstream golden files: what vLLM's (and FlashInfer's, triton_kernels', CUTLASS') own code
// produced on a GPU or AMX machine, one row per file of tests/packers/golden/, with the script
// that made it and the checks its cases get. tests/packers/golden/README.md says how each was
// made and what was stood in for.
//
//   layout cases  ("golden_cases": one upstream layout function on seeded inputs) are packed
//                 expert by expert through the packer registry by tests/packers/golden_test.cpp;
//   layer cases   ("golden_layer_cases": a quantization method's process_weights_after_loading
//                 over one layer per rank) are converted end to end by
//                 tests/convert/upstream_goldens_test.cpp, which also checks that every golden
//                 file has exactly one row here and every row's generator exists.
//
// The coverage table (tests/convert/coverage_table_test.cpp) credits a tensor to the first row
// that proves it, so the order of the rows is the order tests/convert/golden/coverage.txt was
// made in: reordering them may rename the golden a tensor is credited to there.
#pragma once

#include <array>
#include <string_view>

namespace moepack::test::golden {

// What a converted layer may hold beyond the tensors upstream's layer holds after
// process_weights_after_loading.
enum class LayerCases {
  none,  // the file has no layer cases
  // Anything: kernel scalars vLLM keeps on the experts object, which its layer does not hold,
  // are recorded (property not_compared), not compared.
  others_recorded,
  // Nothing, unless the case is partial (only some of the layer's tensors were made upstream).
  nothing_else_unless_partial,
  // Only CompressedTensors' weight_shape (kept by vLLM as an unread copy outside the recorded
  // parameters), unless the case is partial.
  only_weight_shape_unless_partial,
};

struct UpstreamGolden {
  std::string_view file;       // in tests/packers/golden/
  std::string_view generator;  // the script that made it, from the repository root
  std::string_view covers;     // what upstream ran over
  bool layout_cases = false;
  LayerCases layer_cases = LayerCases::none;
};

inline constexpr std::string_view kUpstreamGoldenDir = "tests/packers/golden";

inline constexpr std::array kUpstreamGoldens = {
    UpstreamGolden{"golden_wna16.safetensors", "tests/golden/make_wna16_goldens.py",
                   "GPTQ, AWQ and compressed-tensors checkpoints (samples and stored synthetic ones) through vLLM's compiled "
                   "Marlin repack on SM90, and on TRITON and XPU, TP 1 and 2; compressed-tensors FP8 through the Marlin "
                   "preparation (partial); CompressedTensorsW8A8Int8 on TRITON",
                   false, LayerCases::only_weight_shape_unless_partial},
    UpstreamGolden{"golden_moe_wna16.safetensors", "tests/golden/make_moe_wna16_goldens.py",
                   "GPTQ and AWQ checkpoints, 4 and 8 bits, with --quantization moe_wna16 on TRITON, TP 1, 2 and 4",
                   false, LayerCases::only_weight_shape_unless_partial},
    UpstreamGolden{"golden_cpu.safetensors", "tests/golden/make_cpu_goldens.py",
                   "INT4 W4A16, BF16, FP8 block (partial), INT8 W8A8 and MXFP4 checkpoints through vLLM's compiled x86 CPU "
                   "packs on cpu-amx and cpu-avx512, TP 1 and 2",
                   false, LayerCases::nothing_else_unless_partial},
    UpstreamGolden{"golden_fp8_bf16.safetensors", "tests/golden/make_fp8_goldens.py",
                   "the FP8 and unquantized samples, some with adversarial scales patched in, on every FP8 and unquantized "
                   "backend, TP 1 and 2 and EP 2",
                   false, LayerCases::others_recorded},
    UpstreamGolden{"golden_triton_mxfp4.safetensors", "tests/golden/make_mxfp4_goldens.py",
                   "triton_kernels' MXFP4 value and scale layouts and vLLM's _swizzle_mxfp4 for SM90, SM100 and gfx950 on "
                   "seeded inputs",
                   true, LayerCases::none},
    UpstreamGolden{"golden_flashinfer_mxfp4.safetensors", "tests/golden/make_mxfp4_goldens.py",
                   "vLLM's FlashInfer MXFP4 kernel-format conversions (FlashInfer's shuffles, the CUTLASS scale swizzle) on "
                   "seeded inputs",
                   true, LayerCases::none},
    UpstreamGolden{"golden_marlin_mxfp4.safetensors", "tests/golden/make_mxfp4_goldens.py",
                   "vLLM's Marlin MXFP4 preparation (compiled repack, scale processing, bias permute) on seeded inputs",
                   true, LayerCases::none},
    UpstreamGolden{"golden_nvfp4.safetensors", "tests/golden/make_nvfp4_goldens.py",
                   "vLLM's NVFP4 helpers on seeded inputs (layout cases); the NVFP4 samples, some with adversarial scales "
                   "patched in, on every NVFP4 backend, TP 1 and 2 and EP 2 (layer cases)",
                   true, LayerCases::others_recorded},
    UpstreamGolden{"golden_w4a8.safetensors", "tests/golden/make_w4a8_goldens.py",
                   "samples/ct-w4a8-fp8, as shipped and with adversarial group scales patched in, through vLLM's compiled "
                   "CUTLASS W4A8 ops on SM90, TP 1 and TP 2 with expert parallelism",
                   false, LayerCases::others_recorded},
    UpstreamGolden{"golden_fi_sm90_interleave.safetensors", "tests/golden/make_fi_sm90_interleave_golden.py",
                   "FlashInfer's compiled SM90 mixed-GEMM FP4 weight interleave on seeded inputs, alone and inside vLLM's "
                   "whole FlashInfer CUTLASS BF16 MXFP4 conversion",
                   true, LayerCases::none},
    UpstreamGolden{"golden_mxfp4_layers.safetensors", "tests/golden/make_mxfp4_layer_goldens.py",
                   "gpt-oss MXFP4 and Quark MXFP4 checkpoints on XPU and EMULATION (the backends that keep the loaded "
                   "bytes), TP 1 and 2",
                   false, LayerCases::nothing_else_unless_partial},
    UpstreamGolden{"golden_deepgemm_scales.safetensors", "tests/golden/make_deepgemm_mxfp4_golden.py",
                   "vLLM's DeepGEMM MXFP4 weight-scale packing (_pack_deepgemm_mxfp4_scales over DeepGEMM's compiled packing "
                   "kernel) on seeded inputs for SM100 and SM120",
                   true, LayerCases::none},
};

}  // namespace moepack::test::golden
