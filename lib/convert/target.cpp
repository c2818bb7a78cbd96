#include "lib/convert/target.h"

#include <algorithm>

#include "lib/core/error.h"

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

namespace moepack::convert {
namespace {

using ojson = nlohmann::ordered_json;

// Strict readers of `$.target.KEY`, naming the manifest on failure.
class TargetReader {
 public:
  TargetReader(const ojson& target, const std::string& path) : target_(target), path_(path) {}
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw_bad_input(path_, "", "manifest: `$.target." + key + "` " + what);
  }
  const ojson& at(const std::string& key) const {
    auto it = target_.find(key);
    if (it == target_.end()) fail(key, "is missing");
    return *it;
  }
  std::string string(const std::string& key) const {
    const ojson& v = at(key);
    if (!v.is_string()) fail(key, "is not a string");
    return v.get<std::string>();
  }
  std::optional<std::string> optional_string(const std::string& key) const {
    const ojson& v = at(key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_string()) fail(key, "is neither a string nor null");
    return v.get<std::string>();
  }
  bool boolean(const std::string& key) const {
    const ojson& v = at(key);
    if (!v.is_boolean()) fail(key, "is not true or false");
    return v.get<bool>();
  }
  // Parallel sizes: vLLM's world sizes are small; a bound keeps rank loops and products sane.
  int size(const std::string& key) const {
    const ojson& v = at(key);
    // Parsed documents hold positive integers as unsigned, target_json's own as signed.
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<uint64_t>() > kMaxParallelSize)
      fail(key, "is not an integer from 1 to " + std::to_string(kMaxParallelSize));
    return static_cast<int>(v.get<uint64_t>());
  }
  static constexpr uint64_t kMaxParallelSize = 4096;

 private:
  const ojson& target_;
  const std::string& path_;
};

// The device a recorded `device` names. `host` conversions record the CPU they detected, as
// "host (cpu-amx)": the inner name is that device class. The CPU's architecture and operating
// system, which a `host` conversion on a POWER machine or a Mac records only in `description`,
// are read back from it: the one combination whose description is the recorded one.
oracle::Device device_named(const std::string& name, const std::string& description, const TargetReader& r) {
  oracle::Device d;
  try {
    const std::string prefix = "host (";
    if (name == "host") r.fail("device", "is `host`; a conversion records the device it detected");
    if (name.rfind(prefix, 0) == 0 && name.ends_with(")")) {
      const std::string inner = name.substr(prefix.size(), name.size() - prefix.size() - 1);
      d = inner == "host" ? oracle::parse_target("cpu-avx512") : oracle::parse_target(inner);
      d.target_name = name;
    } else {
      d = oracle::parse_target(name);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::usage) throw;
    r.fail("device", "is `" + name + "`, no target this moepack knows");
  }
  if (d.platform != oracle::Platform::cpu) return d;
  for (auto arch : {oracle::CpuArch::x86, oracle::CpuArch::arm, oracle::CpuArch::powerpc, oracle::CpuArch::other})
    for (bool darwin : {false, true}) {
      oracle::Device candidate = d;
      candidate.cpu_arch = arch;
      candidate.darwin = darwin;
      if (oracle::describe_device(candidate) == description) return candidate;
    }
  r.fail("description", "is `" + description + "`, which describes no CPU of device " + name);
}

}  // namespace

oracle::Deployment deployment_from_target_json(const ojson& target, const std::string& manifest_path) {
  if (!target.is_object()) throw_bad_input(manifest_path, "", "manifest: `$.target` is not an object");
  const TargetReader r(target, manifest_path);
  oracle::Deployment d = oracle::default_deployment(device_named(r.string("device"), r.string("description"), r));
  d.parallel.tp = r.size("tp_size");
  d.parallel.dp = r.size("dp_size");
  d.parallel.enable_expert_parallel = r.boolean("ep");
  d.parallel.enable_eplb = r.boolean("enable_eplb");
  d.parallel.all2all_backend = r.string("all2all");
  d.moe_backend = r.string("moe_backend");
  d.moe_activation = r.optional_string("activation");
  if (d.moe_activation && !oracle::quant_key_by_user_name(*d.moe_activation)) r.fail("activation", "is `" + *d.moe_activation + "`, no activation key vLLM knows");
  d.lora = r.boolean("lora");
  d.quantization = r.optional_string("quantization");
  const std::string dtype = r.string("dtype");
  const auto model_dtype = oracle::parse_float_type(dtype);
  if (!model_dtype || *model_dtype == oracle::FloatType::float32) r.fail("dtype", "is `" + dtype + "`, expected bf16 or fp16");
  d.model_dtype = *model_dtype;
  const ojson& env = r.at("env");
  if (!env.is_object()) r.fail("env", "is not an object");
  for (auto it = env.begin(); it != env.end(); ++it) {
    if (!it.value().is_string()) r.fail("env." + it.key(), "is not a string");
    d.env.set(it.key(), it.value().get<std::string>());
  }
  const ojson& packages = r.at("packages");
  if (!packages.is_object()) r.fail("packages", "is not an object");
  for (auto it = packages.begin(); it != packages.end(); ++it) {
    const auto& names = oracle::package_names();
    if (std::find(names.begin(), names.end(), it.key()) == names.end()) r.fail("packages." + it.key(), "is no package this moepack knows");
    if (!it.value().is_boolean()) r.fail("packages." + it.key(), "is not true or false");
    oracle::set_package(d.packages, it.key(), it.value().get<bool>());
  }
  // Every derived key (platform, description, moe_tp_size, ...) and every key's spelling must be
  // what the deployment implies: the first difference is named.
  const ojson implied = target_json(d);
  for (auto it = implied.begin(); it != implied.end(); ++it) {
    auto got = target.find(it.key());
    if (got == target.end()) r.fail(it.key(), "is missing");
    // Compared as plain JSON: a parsed manifest keeps its objects' keys sorted, not in the written order.
    if (nlohmann::json(*got) != nlohmann::json(it.value())) r.fail(it.key(), "is " + got->dump() + ", but the deployment the target describes has " + it.value().dump());
  }
  for (auto it = target.begin(); it != target.end(); ++it)
    if (!implied.contains(it.key())) r.fail(it.key(), "is not a key of a moepack target");
  return d;
}

}  // namespace moepack::convert
