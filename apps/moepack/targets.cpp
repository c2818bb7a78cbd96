// `moepack targets`: the devices, backends, experts classes and layouts this build knows, with
// the reference they follow.
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/moepack/command.h"
#include "lib/core/json_output.h"
#include "lib/oracle/deployment.h"
#include "lib/oracle/device.h"
#include "lib/oracle/oracle.h"

namespace moepack::cli {
namespace {

using json = nlohmann::ordered_json;
namespace orc = oracle;

struct TargetsOptions {
  bool json = false;
};

json devices_json() {
  json out = json::array();
  for (const auto& name : orc::known_target_names()) {
    const orc::Device d = orc::parse_target(name);
    json packages = json::array();
    const orc::Packages p = orc::default_packages(d);
    for (const auto& pkg : orc::package_names())
      if (orc::package_present(p, pkg)) packages.push_back(pkg);
    const auto cap = d.capability();
    out.push_back({{"name", name},
                   {"resolves_to", d.target_name},
                   {"platform", d.device_name()},
                   {"description", orc::describe_device(d)},
                   {"capability", cap ? json(std::to_string(cap->major) + "." + std::to_string(cap->minor)) : json(nullptr)},
                   {"default_packages", packages}});
  }
  return out;
}

json backends_json() {
  json out = json::array();
  for (const auto& b : orc::backend_catalog())
    out.push_back({{"family", b.family}, {"backend", b.backend}, {"experts_classes", b.classes}, {"moe_backend_names", b.moe_backend_names},
                   {"auto_selectable", b.auto_selectable}});
  return out;
}

json classes_json() {
  json out = json::array();
  for (const auto& c : orc::experts_class_catalog())
    out.push_back({{"name", c.name}, {"summary", c.summary}, {"monolithic", c.monolithic}, {"batched_format", c.batched_format}});
  return out;
}

json layouts_json() {
  json out = json::array();
  for (const auto& l : orc::layout_catalog()) {
    json roles = json::object();
    for (const auto& [role, layout] : l.roles) roles[role] = layout;
    out.push_back({{"family", l.family}, {"backend", l.backend}, {"condition", l.condition}, {"roles", roles}});
  }
  return out;
}

int run_targets(const TargetsOptions& o) {
  if (o.json) {
    json out = {{"reference", orc::oracle_reference()},
                {"devices", devices_json()},
                {"moe_backend_names", orc::moe_backend_literals()},
                {"packages", orc::package_names()},
                {"backends", backends_json()},
                {"experts_classes", classes_json()},
                {"layouts", layouts_json()}};
    std::cout << safe_json_text(out) << std::endl;
    return 0;
  }
  std::cout << "reference: " << orc::oracle_reference() << "\n\ndevices (--target):\n";
  for (const auto& name : orc::known_target_names()) {
    const orc::Device d = orc::parse_target(name);
    std::cout << "  " << name << "  " << (name == "host" ? d.target_name + ", " : std::string()) << orc::describe_device(d) << "\n";
  }
  std::cout << "\n--moe-backend names:";
  for (const auto& n : orc::moe_backend_literals()) std::cout << " " << n;
  std::cout << "\n--with/--without packages:";
  for (const auto& n : orc::package_names()) std::cout << " " << n;
  std::cout << "\n\nbackends (family  backend  [--moe-backend names]  experts classes in try order):\n";
  for (const auto& b : orc::backend_catalog()) {
    std::cout << "  " << b.family << "  " << b.backend << "  [";
    for (size_t i = 0; i < b.moe_backend_names.size(); ++i) std::cout << (i ? ", " : "") << b.moe_backend_names[i];
    std::cout << "]" << (b.auto_selectable ? "" : " (explicit only)") << "  ";
    for (size_t i = 0; i < b.classes.size(); ++i) std::cout << (i ? ", " : "") << b.classes[i];
    std::cout << "\n";
  }
  std::cout << "\nexperts classes:\n";
  for (const auto& c : orc::experts_class_catalog()) std::cout << "  " << c.name << "  " << c.summary << "\n";
  std::cout << "\nlayouts (family backend [condition]: role = layout):\n";
  for (const auto& l : orc::layout_catalog()) {
    std::cout << "  " << l.family << " " << l.backend;
    if (!l.condition.empty()) std::cout << " [" << l.condition << "]";
    std::cout << ":\n";
    for (const auto& [role, layout] : l.roles) std::cout << "    " << role << " = " << layout << "\n";
  }
  return 0;
}

CommandRegistration reg(80, [](CLI::App& app) {
  auto opts = std::make_shared<TargetsOptions>();
  auto* sub = app.add_subcommand("targets", "List the devices, backends, experts classes and layouts this build knows");
  sub->add_flag("--json", opts->json, "Print as JSON");
  sub->callback([opts] {
    global_flags().json = opts->json;
    set_exit_code(run_targets(*opts));
  });
});

}  // namespace
}  // namespace moepack::cli
