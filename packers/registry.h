// Layout registry: the manifest/oracle layout string -> a factory for that packer.
//
// The oracle's TransformPlan names each tensor's transform by the same string the packer
// reports as name() and the manifest records as `layout` (docs/ARTIFACT.md), for example
// "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)". The converter looks that string up here;
// the emulation experts look up the manifest's string to get the inverse (unpack).
//
// The table is an explicit list in registry.cpp (not self-registration from static
// initialisers: moepack_packers is a static library and the linker would drop packer objects
// nobody references). Adding a layout = one row there: its factory and summary; the row's id is
// the packer's own name(). Invariants, checked by tests/packers/registry_test.cpp: ids are
// unique and none looks like a pipeline; tests/packers/layout_contract_test.cpp checks every
// row's packer against its own index map on awkward sizes.
//
// Transforms that vLLM applies one after the other to the same tensor (e.g. the generic
// converter's `shuffle_weight` and then triton_kernels' HopperMXValue swizzle) are named by
// joining the registered ids with " | " in application order; make_layout builds a
// PipelineLayout for such a string, whose name() is the same string.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/layout_ids.h"
#include "packers/layout.h"

namespace moepack::packers {

using LayoutFactory = std::unique_ptr<Layout> (*)();

struct LayoutRow {
  std::string id;            // make()->name(), taken from the packer when the table is built
  LayoutFactory make;
  std::string_view summary;  // one line for `moepack plan` / docs
};

// Every registered layout, in table order.
std::span<const LayoutRow> layout_table();

// nullptr when `id` is not registered.
const LayoutRow* find_layout(std::string_view id);

// Builds the layout named `id` (a registered id or a " | " pipeline of them); an unknown id is a bug in whoever produced it (the oracle
// emits only registered ids), so it throws moepack::Error(internal) naming the id.
std::unique_ptr<Layout> make_layout(std::string_view id);

// Separator of a pipeline id: "first | second | ...".
inline constexpr std::string_view kPipelineSeparator = layout_id::kPipelineSeparator;

// Several layouts applied in order to one tensor: pack runs stage 0 first; unpack undoes the
// last stage first. Intermediate tensors take each stage's packed dtype and shape.
class PipelineLayout final : public Layout {
 public:
  explicit PipelineLayout(std::vector<std::unique_ptr<Layout>> stages);

  std::string name() const override;
  DType packed_dtype(DType canonical) const override;
  std::vector<uint64_t> packed_shape(std::span<const uint64_t> canonical_shape) const override;
  std::vector<uint64_t> parameter_shape(uint64_t num_experts, std::span<const uint64_t> canonical_shape) const override;
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;
  void unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const override;

 private:
  std::vector<std::unique_ptr<Layout>> stages_;
};

// All ids, in table order (for error messages and `moepack plan --list-layouts`).
std::vector<std::string> layout_ids();

}  // namespace moepack::packers
