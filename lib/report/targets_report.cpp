#include "lib/report/targets_report.h"

#include <string>

#include "lib/oracle/deployment.h"
#include "lib/oracle/device.h"
#include "lib/oracle/oracle.h"

namespace moepack::report {
namespace {

using json = nlohmann::ordered_json;
namespace orc = oracle;

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

}  // namespace

json targets_json() {
  return {{"reference", orc::oracle_reference()},
          {"devices", devices_json()},
          {"moe_backend_names", orc::moe_backend_literals()},
          {"packages", orc::package_names()},
          {"backends", backends_json()},
          {"experts_classes", classes_json()},
          {"layouts", layouts_json()}};
}

}  // namespace moepack::report
