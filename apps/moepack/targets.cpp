// `moepack targets`: the devices, backends, experts classes and layouts this build knows, with
// the reference they follow. Printing only: the --json document is lib/report's.
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>

#include "apps/moepack/command.h"
#include "lib/core/json_output.h"
#include "lib/oracle/deployment.h"
#include "lib/oracle/device.h"
#include "lib/oracle/oracle.h"
#include "lib/report/targets_report.h"

namespace moepack::cli {
namespace {

namespace orc = oracle;

struct TargetsOptions {
  bool json = false;
};

int run_targets(const TargetsOptions& o) {
  if (o.json) {
    std::cout << safe_json_text(report::targets_json()) << std::endl;
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
