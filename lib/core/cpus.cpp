#include "lib/core/cpus.h"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace moepack {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

// ceil(quota / period) for a positive quota and period, else none.
std::optional<int> quota_cpus(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  return static_cast<int>(std::max<long long>(1, (quota + period - 1) / period));
}

// v2: "max PERIOD" (no limit) or "QUOTA PERIOD".
std::optional<int> read_cpu_max(const fs::path& file) {
  const auto line = read_first_line(file);
  if (!line) return std::nullopt;
  std::istringstream in(*line);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || quota == "max") return std::nullopt;
  try {
    return quota_cpus(std::stoll(quota), period);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// v1: cpu.cfs_quota_us (-1: no limit) over cpu.cfs_period_us.
std::optional<int> read_cfs(const fs::path& dir) {
  const auto quota = read_first_line(dir / "cpu.cfs_quota_us"), period = read_first_line(dir / "cpu.cfs_period_us");
  if (!quota || !period) return std::nullopt;
  try {
    return quota_cpus(std::stoll(*quota), std::stoll(*period));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The smallest quota of `path` and its ancestors under `mount`: every level's limit applies.
template <class Read>
std::optional<int> smallest_up_the_tree(const fs::path& mount, const std::string& path, Read read) {
  std::optional<int> best;
  fs::path p = fs::path(path).relative_path();
  while (true) {
    if (const auto q = read(mount / p); q && (!best || *q < *best)) best = q;
    if (p.empty()) break;
    p = p.parent_path();
  }
  return best;
}

}  // namespace

std::optional<int> cgroup_cpu_quota(const std::string& cgroup_root, const std::string& self_cgroup) {
  std::optional<int> best;
  auto keep = [&](std::optional<int> q) {
    if (q && (!best || *q < *best)) best = q;
  };
  std::istringstream lines(self_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // "hierarchy-ID:controller-list:cgroup-path"
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    const fs::path root(cgroup_root);
    if (id == "0" && controllers.empty()) {
      // v2, mounted at the root (unified) or, on hybrid systems, at unified/.
      for (const fs::path& mount : {root, root / "unified"})
        keep(smallest_up_the_tree(mount, path, [](const fs::path& dir) { return read_cpu_max(dir / "cpu.max"); }));
      continue;
    }
    std::vector<std::string> names;
    std::istringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) names.push_back(c);
    if (std::find(names.begin(), names.end(), "cpu") == names.end()) continue;
    // v1: the cpu controller's mount is named after its co-mounted controllers.
    for (const char* mount : {"cpu", "cpu,cpuacct", "cpuacct,cpu"}) keep(smallest_up_the_tree(root / mount, path, read_cfs));
  }
  return best;
}

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int allowed_cpus() {
  static const int cpus = [] {
    int n = affinity_cpus();
    std::ifstream in("/proc/self/cgroup");
    std::stringstream text;
    text << in.rdbuf();
    if (const auto quota = cgroup_cpu_quota("/sys/fs/cgroup", text.str())) n = std::min(n, *quota);
    return std::max(1, n);
  }();
  return cpus;
}

int thread_count(int requested) { return requested > 0 ? requested : allowed_cpus(); }

}  // namespace moepack
