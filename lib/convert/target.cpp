#include "lib/convert/target.h"

namespace moepack::convert {

nlohmann::ordered_json target_json(const oracle::Deployment& d) {
  nlohmann::ordered_json packages = nlohmann::ordered_json::object();
  for (const auto& name : oracle::package_names()) packages[name] = oracle::package_present(d.packages, name);
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  for (const auto& [k, v] : d.env.all()) env[k] = v;
  const auto moe_parallel = oracle::make_moe_parallel_config(d.parallel);
  return {
      {"device", d.device.target_name},
      {"platform", d.device.device_name()},
      {"description", oracle::describe_device(d.device)},
      {"tp_size", d.parallel.tp},
      {"dp_size", d.parallel.dp},
      {"ep", d.parallel.enable_expert_parallel},
      {"enable_eplb", d.parallel.enable_eplb},
      {"all2all", d.parallel.all2all_backend},
      {"moe_tp_size", moe_parallel.tp_size},
      {"moe_ep_size", moe_parallel.ep_size},
      {"moe_backend", d.moe_backend},
      {"activation", d.moe_activation ? nlohmann::ordered_json(*d.moe_activation) : nlohmann::ordered_json(nullptr)},
      {"lora", d.lora},
      {"quantization", d.quantization ? nlohmann::ordered_json(*d.quantization) : nlohmann::ordered_json(nullptr)},
      {"dtype", oracle::float_type_short_name(d.model_dtype)},
      {"env", env},
      {"packages", packages},
  };
}

}  // namespace moepack::convert
