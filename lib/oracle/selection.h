// Shared machinery of the family selectors (internal to lib/oracle): the context a selector
// runs in, vLLM's exceptions, and "try this backend's classes in order" with every attempt
// recorded as a Candidate.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "lib/oracle/experts_table.h"
#include "lib/oracle/oracle.h"

namespace moepack::oracle {

// A backend of one family: its vLLM enum member name, the enum value string vLLM prints in
// messages (differs from the name only for the unquantized oracle), and its experts classes
// in the order vLLM tries them (Monolithic before Modular).
struct BackendRow {
  std::string name;
  std::string value;
  std::vector<std::string> classes;
};

// The row of a family's backend table named `name` (an enum member). A name missing from the
// table is a bug in the selector that asked: "Unknown <family> MoE backend: NAME" (ValueError).
const BackendRow& find_backend_row(const std::vector<BackendRow>& rows, const std::string& name, const std::string& family);

// The backend member a `--moe-backend` string maps to in a family's map_*_backend table; a string
// not in it is vLLM's ValueError "moe_backend='X' is not supported for <family> MoE. Expected one
// of [...]" (the table's keys, in order).
std::string map_moe_backend(const std::vector<std::pair<std::string, std::string>>& map, const std::string& runner, const std::string& family);

// How `moepack targets` lists one backend row: its classes by display name and every
// --moe-backend string that `moe_backend_map` (string -> backend member) sends to it.
BackendListing listing_of(const std::string& family, const BackendRow& row,
                          const std::vector<std::pair<std::string, std::string>>& moe_backend_map);

// A raised vLLM exception (ValueError / NotImplementedError), carried to decide().
class OracleRaise : public std::exception {
 public:
  OracleRaise(std::string type, std::string message) : type_(std::move(type)), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& type() const { return type_; }
  const std::string& message() const { return message_; }

 private:
  std::string type_;
  std::string message_;
};
[[noreturn]] void raise_value_error(const std::string& message);
[[noreturn]] void raise_not_implemented(const std::string& message);

// What a selector settles on.
struct Selection {
  std::string backend;        // enum member name
  std::string experts_class;  // table id (display with experts_class_display_name)
  OptKey weight_key;
  OptKey activation_key;
  // How the method rounds the per-rank sizes up after selection (maybe_roundup_sizes).
  enum class RoundUp { none, mxfp4, mxfp4_with_activation } round_up = RoundUp::none;
};

struct SelectionContext {
  const MoeLayerQuery& query;
  const Deployment& deployment;
  MoeConfig moe;
  KernelEnv env;
  std::vector<Candidate>& candidates;
  std::vector<std::string>& notes;

  ActivationFormat activation_format() const { return moe.activation_format(); }
  bool fp8_is_fnuz() const { return deployment.device.fp8_is_fnuz(); }
  std::string key_text(const OptKey& k) const { return quant_key_text(k, fp8_is_fnuz()); }
};

// Tries `row`'s classes in order, recording each attempt. Returns the first passing class id;
// `last_reason` receives the last rejection reason (empty when the row has no class).
std::optional<std::string> try_backend(SelectionContext& ctx, const BackendRow& row, const OptKey& w, const OptKey& a,
                                       ActivationFormat format, std::string& last_reason);

// Records a backend rejected before any class was checked.
void record_rejection(SelectionContext& ctx, const std::string& backend, const std::string& reason);

// Python's repr of a list of strings: ['a', 'b'].
std::string py_list(const std::vector<std::string>& items);

// "<Prefix> MoE backend '<value>' does not support the deployment configuration[ since <reason>]."
// with the quoting each vLLM oracle uses (some quote the value only when there is no reason).
std::string unsupported_message(const std::string& prefix, const std::string& value, const std::string& reason,
                                bool quote_with_reason);

// ---- The family selectors (family_*.cpp) ----
Selection select_mxfp4_family(SelectionContext& ctx);
Selection select_nvfp4_family(SelectionContext& ctx);
Selection select_fp8_family(SelectionContext& ctx);
Selection select_mxfp8_family(SelectionContext& ctx);
Selection select_wna16_family(SelectionContext& ctx);
Selection select_int8_family(SelectionContext& ctx);
Selection select_w4a8_family(SelectionContext& ctx);
Selection select_w4a8_int8_family(SelectionContext& ctx);
Selection select_unquantized_family(SelectionContext& ctx);

// Catalog rows per family, for `moepack targets` (BackendListing is declared in oracle.h).
std::vector<BackendListing> mxfp4_backend_listing();
std::vector<BackendListing> nvfp4_backend_listing();
std::vector<BackendListing> fp8_backend_listing();
std::vector<BackendListing> mxfp8_backend_listing();
std::vector<BackendListing> wna16_backend_listing();
std::vector<BackendListing> int8_backend_listing();
std::vector<BackendListing> w4a8_backend_listing();
std::vector<BackendListing> unquantized_backend_listing();

}  // namespace moepack::oracle
