// Golden tests: every MXFP4 and NVFP4 packer against bytes produced by the REAL upstream Python code.
//
// The other packer tests check each layout against a re-implementation written from reading
// upstream. These files instead hold what upstream itself computed:
// tests/golden/make_mxfp4_goldens.py ran vLLM e9d1398d9's `_swizzle_mxfp4` and its two MXFP4
// kernel-format converters, over triton_kernels v3.5.1's layout classes and FlashInfer 0.6.17's
// pure-Python helpers, for simulated SM90 / SM100 / gfx950 devices, on seeded random inputs
// (tests/packers/golden/README.md says how they were made, and what was stood in for where a
// compiled op could not run). tests/golden/make_nvfp4_goldens.py likewise ran vLLM's NVFP4
// helpers (swizzle_blockscale, the [w3; w1] and CuteDSL row reorders, the TRT-LLM static-weight
// shuffles, the Marlin NVFP4 scale processing) into golden_nvfp4.safetensors, and
// tests/golden/make_fi_sm90_interleave_golden.py ran FlashInfer's compiled SM90 mixed-GEMM FP4
// weight interleave kernel, alone and inside vLLM's SM90 FlashInfer CUTLASS BF16 conversion, into
// golden_fi_sm90_interleave.safetensors, and tests/golden/make_deepgemm_mxfp4_golden.py vLLM's
// DeepGEMM MXFP4 scale packing over DeepGEMM's compiled kernel into golden_deepgemm_scales.safetensors.
//
// The files are the rows of the table of upstream golden files (support/upstream_goldens.h)
// that hold layout cases. Each holds inputs as [E, ...] tensors (one expert's canonical tensor
// per slab, as vLLM's loader holds it) and each upstream output as the flat bytes of its storage
// (data_ptr order). The metadata key "golden_cases" lists, per output, the input it came from, the
// registered layout id of the vLLM path that produced it, and the shape/stride/dtype of the
// tensor vLLM keeps. For every case the test packs each expert with
// packers::make_layout(id), concatenates the slabs and compares byte for byte; it also checks
// the manifest shape (the contiguous storage shape, docs/ARTIFACT.md) and dtype, and unpack -> input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "formats/safetensors/file.h"
#include "packers/registry.h"
#include "support/upstream_goldens.h"
#include "tests/support/test_support.h"

namespace moepack::packers {
namespace {

// From the table, not the folder: a missing file must fail, not shrink the test set.
const std::vector<std::string>& golden_files() {
  static const std::vector<std::string> files = [] {
    std::vector<std::string> with_layout_cases;
    for (const test::golden::UpstreamGolden& golden : test::golden::kUpstreamGoldens)
      if (golden.layout_cases) with_layout_cases.emplace_back(golden.file);
    return with_layout_cases;
  }();
  return files;
}

bool is_mxfp4_file(const std::string& file) { return file.find("_mxfp4") != std::string::npos; }

std::string golden_path(const std::string& file) {
  return test::source_dir() + "/" + std::string(test::golden::kUpstreamGoldenDir) + "/" + file;
}

struct GoldenCase {
  std::string file;    // golden file name
  std::string output;  // tensor holding upstream's storage bytes
  std::string input;   // tensor holding the canonical [E, ...] input
  std::string layout;  // registered layout id (or " | " pipeline)
  std::vector<uint64_t> shape;   // the tensor vLLM keeps: shape, strides (elements), torch dtype name
  std::vector<uint64_t> stride;
  std::string dtype;
  std::string note;  // e.g. which compiled op was stood in for upstream
};

// GoogleTest prints a failing parameter with this instead of its raw bytes.
void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.file << " : " << c.output << " via `" << c.layout << "`"; }

// Readable test names: "triton__n96_k160_sm90_w", "nvfp4__sf_m130_c5_swizzle_blockscale".
std::string case_name(const GoldenCase& c) {
  std::string name = c.file.substr(std::string("golden_").size());
  name = name.substr(0, name.find(is_mxfp4_file(c.file) ? "_mxfp4" : ".safetensors")) + "__" + c.output;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

std::vector<GoldenCase> load_cases() {
  std::vector<GoldenCase> cases;
  for (const std::string& file : golden_files()) {
    const std::string path = golden_path(file);
    std::unique_ptr<st::File> st;
    try {
      st = std::make_unique<st::File>(path);
    } catch (const std::exception&) {
      continue;  // GoldenFiles.AllPresentWithProvenance reports it
    }
    const auto it = st->header().metadata.find("golden_cases");
    if (it == st->header().metadata.end()) continue;
    for (const auto& j : nlohmann::json::parse(it->second)) {
      GoldenCase c;
      c.file = file;
      c.output = j.at("output").get<std::string>();
      c.input = j.at("input").get<std::string>();
      c.layout = j.at("layout").get<std::string>();
      c.shape = j.at("shape").get<std::vector<uint64_t>>();
      c.stride = j.at("stride").get<std::vector<uint64_t>>();
      c.dtype = j.at("dtype").get<std::string>();
      c.note = j.value("note", "");
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

const std::vector<GoldenCase>& all_cases() {
  static const std::vector<GoldenCase> cases = load_cases();
  return cases;
}

// torch dtype names as the generator records them.
DType dtype_from_torch(const std::string& name) {
  static const std::map<std::string, DType> map = {
      {"uint8", DType::U8},          {"int32", DType::I32},           {"float32", DType::F32},
      {"bfloat16", DType::BF16},     {"float8_e4m3fn", DType::F8_E4M3}, {"float8_e8m0fnu", DType::F8_E8M0}};
  const auto it = map.find(name);
  if (it == map.end()) throw std::runtime_error("golden case with unknown torch dtype " + name);
  return it->second;
}

// The contiguous storage shape under a strided view: dimensions ordered by decreasing stride
// (stable, so size-1 dimensions with equal strides keep their order).
std::vector<uint64_t> storage_shape(const GoldenCase& c) {
  std::vector<size_t> order(c.shape.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return c.stride[a] > c.stride[b]; });
  std::vector<uint64_t> shape;
  for (size_t d : order) shape.push_back(c.shape[d]);
  return shape;
}

std::string first_mismatch(std::span<const uint8_t> got, std::span<const uint8_t> want) {
  uint64_t count = 0, first = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (got[i] != want[i] && count++ == 0) first = i;
  if (count == 0) return "sizes differ: " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  std::ostringstream s;
  s << count << " of " << want.size() << " bytes differ; first at byte " << first << ": packer 0x" << std::hex
    << int{got[first]} << ", upstream 0x" << int{want[first]};
  return s.str();
}

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, PackerMatchesUpstreamBytes) {
  const GoldenCase& c = GetParam();
  SCOPED_TRACE(c.file + " : " + c.output + " <- " + c.input + " via `" + c.layout + "`" +
               (c.note.empty() ? "" : " (" + c.note + ")"));
  const st::File file(golden_path(c.file));
  const st::TensorInfo* in = file.find(c.input);
  const st::TensorInfo* out = file.find(c.output);
  ASSERT_NE(in, nullptr);
  ASSERT_NE(out, nullptr);
  ASSERT_GE(in->shape.size(), 2u);

  // Per expert: the canonical slab [shape[1:]] and what the packer makes of it.
  const uint64_t experts = in->shape[0];
  const std::vector<uint64_t> canonical(in->shape.begin() + 1, in->shape.end());
  const std::unique_ptr<Layout> layout = make_layout(c.layout);
  EXPECT_EQ(layout->name(), c.layout);
  const DType packed_dtype = layout->packed_dtype(in->dtype);
  const std::vector<uint64_t> packed_shape = layout->packed_shape(canonical);
  const uint64_t in_slab = byte_size(in->dtype, canonical);
  const uint64_t out_slab = byte_size(packed_dtype, packed_shape);
  const std::span<const uint8_t> in_bytes = file.data(*in);
  const std::span<const uint8_t> upstream = file.data(*out);
  ASSERT_EQ(in_bytes.size(), experts * in_slab);

  std::vector<uint8_t> packed(experts * out_slab);
  for (uint64_t e = 0; e < experts; ++e) {
    const TensorView slab{in->dtype, canonical, in_bytes.subspan(e * in_slab, in_slab)};
    layout->pack(slab, std::span<uint8_t>(packed).subspan(e * out_slab, out_slab));
  }
  ASSERT_TRUE(std::equal(packed.begin(), packed.end(), upstream.begin(), upstream.end()))
      << first_mismatch(packed, upstream);

  // What the manifest records must be what vLLM keeps: its dtype and contiguous storage shape.
  EXPECT_EQ(dtype_name(packed_dtype), dtype_name(dtype_from_torch(c.dtype)));
  EXPECT_EQ(shape_string(layout->parameter_shape(experts, canonical)), shape_string(storage_shape(c)));

  // And the emulation experts' inverse gives the input back.
  for (uint64_t e = 0; e < experts; ++e) {
    OwnedTensor back(in->dtype, canonical);
    layout->unpack(upstream.subspan(e * out_slab, out_slab), back);
    const std::span<const uint8_t> want = in_bytes.subspan(e * in_slab, in_slab);
    EXPECT_TRUE(std::equal(back.bytes.begin(), back.bytes.end(), want.begin(), want.end()))
        << "unpack of expert " << e << ": " << first_mismatch(back.bytes, want);
  }
}

INSTANTIATE_TEST_SUITE_P(Upstream, Golden, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) { return case_name(info.param); });

TEST(GoldenFiles, AllPresentWithProvenance) {
  for (const std::string& file : golden_files()) {
    SCOPED_TRACE(file);
    const st::File st(golden_path(file));
    const auto& meta = st.header().metadata;
    ASSERT_TRUE(meta.count("golden_cases"));
    ASSERT_TRUE(meta.count("provenance"));
    const auto provenance = nlohmann::json::parse(meta.at("provenance"));
    EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
    if (is_mxfp4_file(file)) {
      EXPECT_EQ(provenance.at("triton_kernels"), "v3.5.1");
    }
    if (provenance.contains("deep_gemm") && !provenance.contains("flashinfer")) {
      // DeepGEMM's packing alone (golden_deepgemm_scales): the headers read, and vLLM's pin.
      EXPECT_EQ(provenance.at("deep_gemm"), "54e2261 (vLLM pins 8b1392b9)");
    } else {
      EXPECT_EQ(provenance.at("flashinfer"), "v0.6.17");
    }
    // Made with torch 2.x, not a local dry run that shimmed missing dtypes.
    EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();
    EXPECT_FALSE(nlohmann::json::parse(meta.at("golden_cases")).empty());
  }
}

// The layouts the goldens pin, by family, so a new vLLM path that lacks one shows up here.
TEST(GoldenFiles, CoverTheUpstreamRunnableLayouts) {
  std::set<std::string> covered;
  for (const GoldenCase& c : all_cases()) {
    size_t start = 0;
    while (true) {  // each stage of a pipeline id counts
      const size_t sep = c.layout.find(std::string(kPipelineSeparator), start);
      covered.insert(c.layout.substr(start, sep == std::string::npos ? std::string::npos : sep - start));
      if (sep == std::string::npos) break;
      start = sep + kPipelineSeparator.size();
    }
  }
  const std::vector<std::string> required = {
      "triton_kernels.Strided(v3.5.1)",
      "triton_kernels.Strided(k_groups_pad=4,v3.5.1)",
      "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)",
      "triton_kernels.HopperMXScale(mx_axis=1,num_warps=8,k_groups_pad=4,v3.5.1)",
      "triton_kernels.HopperMXScale(mx_axis=1,num_warps=4,k_groups_pad=4,v3.5.1)",
      "triton_kernels.BlackwellMXValue(v3.5.1)",
      "triton_kernels.BlackwellMXScale(v3.5.1)",
      "triton_kernels.CDNA4MXScale(v3.5.1)",
      "vllm.mxfp4_triton_shuffle_weight(e9d1398d9)",
      "vllm.bias_f32",
      "vllm.cutlass_moe.swizzle_mxfp4_scales(sf=128x4,e9d1398d9)",
      // NVFP4 (golden_nvfp4.safetensors; its layer cases are checked end to end by
      // tests/convert/upstream_goldens_test.cpp).
      "vllm.swizzle_blockscale(rows=identity,sf=128x4,e9d1398d9)",
      "vllm.swizzle_blockscale(rows=swap_halves,sf=128x4,e9d1398d9)",
      "vllm.swizzle_blockscale(rows=cutedsl_w31_interleave64,sf=128x4,e9d1398d9)",
      "vllm.swizzle_blockscale(rows=cutedsl_deinterleave_interleave64,sf=128x4,e9d1398d9)",
      "vllm.reorder_w13_rows(rows=swap_halves,e9d1398d9)",
      "vllm.reorder_w13_rows(rows=cutedsl_w31_interleave64,e9d1398d9)",
      "vllm.reorder_w13_rows(rows=cutedsl_deinterleave_interleave64,e9d1398d9)",
      "flashinfer.trtllm_shuffle_matrix_a(rows=w3w1_interleave,epilogue_tile_m=128,v0.6.17)",
      "flashinfer.trtllm_shuffle_matrix_sf_a(rows=w3w1_interleave,epilogue_tile_m=128,sf=128x4,v0.6.17)",
      "vllm.nvfp4_marlin_process_scales(group_size=16,e9d1398d9)",
      // FlashInfer's compiled SM90 mixed-GEMM FP4 weight interleave (golden_fi_sm90_interleave).
      "flashinfer.interleave_moe_weights_for_sm90_mixed_gemm(rows=identity,fp4,v0.6.17)",
      // ... and inside vLLM's whole SM90 FlashInfer CUTLASS BF16 conversion (the w13 row reorder first).
      "flashinfer.interleave_moe_weights_for_sm90_mixed_gemm(rows=deinterleave_up_first,fp4,v0.6.17)",
      // DeepGEMM's MXFP4 scale packing (golden_deepgemm_scales), on SM100 and SM120.
      "deep_gemm.transform_sf_into_required_layout(recipe=1x1x32,sm100,packed_ue8m0,mn_major,8b1392b9)",
  };
  for (const std::string& id : required) EXPECT_TRUE(covered.count(id)) << id << " has no golden case";
  std::string list;
  for (const std::string& id : covered) list += "\n  " + id;
  std::cout << "[ golden  ] " << all_cases().size() << " cases over " << covered.size() << " layouts:" << list << "\n";
}

}  // namespace
}  // namespace moepack::packers
