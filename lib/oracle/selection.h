// Shared machinery of the family selectors (internal to lib/oracle): the context a selector
// runs in, what it settles on, and vLLM's exceptions. The family rows and the walk over them
// are in family.h.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "lib/oracle/experts_table.h"
#include "lib/oracle/oracle.h"

namespace moepack::oracle {

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

// Python's repr of a list of strings: ['a', 'b'].
std::string py_list(const std::vector<std::string>& items);

// "<Prefix> MoE backend '<value>' does not support the deployment configuration[ since <reason>]."
// with the quoting each vLLM oracle uses (some quote the value only when there is no reason).
std::string unsupported_message(const std::string& prefix, const std::string& value, const std::string& reason,
                                bool quote_with_reason);

}  // namespace moepack::oracle
