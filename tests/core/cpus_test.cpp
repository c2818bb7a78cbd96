// The CPUs a process may use: the cgroup quota read from v1 and v2 trees laid out in a scratch
// directory as the kernel mounts them, and the affinity mask through the real call.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "lib/core/cpus.h"
#include "support/test_support.h"

namespace moepack {
namespace {

namespace fs = std::filesystem;

void put(const test::TempDir& root, const std::string& file, const std::string& text) {
  fs::create_directories(fs::path(root.file(file)).parent_path());
  test::write_text(root.file(file), text + "\n");
}

TEST(CgroupCpuQuota, V2ReadsCpuMaxRoundedUpAndTakesTheSmallestAncestor) {
  test::TempDir root;
  put(root, "cpu.max", "max 100000");
  put(root, "a/cpu.max", "350000 100000");  // 3.5 CPUs: 4 threads
  put(root, "a/b/cpu.max", "max 100000");
  EXPECT_EQ(cgroup_cpu_quota(root.path(), "0::/a/b\n"), 4);
  put(root, "a/b/cpu.max", "150000 100000");
  EXPECT_EQ(cgroup_cpu_quota(root.path(), "0::/a/b\n"), 2);
  put(root, "a/b/cpu.max", "5000 100000");  // a twentieth of a CPU is still one thread
  EXPECT_EQ(cgroup_cpu_quota(root.path(), "0::/a/b\n"), 1);
}

TEST(CgroupCpuQuota, V2WithoutALimitIsNone) {
  test::TempDir root;
  put(root, "a/cpu.max", "max 100000");
  EXPECT_EQ(cgroup_cpu_quota(root.path(), "0::/a\n"), std::nullopt);
  EXPECT_EQ(cgroup_cpu_quota(root.path(), "0::/missing\n"), std::nullopt);
  EXPECT_EQ(cgroup_cpu_quota(root.path(), ""), std::nullopt);
  put(root, "a/cpu.max", "garbage");
  EXPECT_EQ(cgroup_cpu_quota(root.path(), "0::/a\n"), std::nullopt);
}

TEST(CgroupCpuQuota, V1ReadsTheCfsQuotaOfTheCpuController) {
  test::TempDir root;
  put(root, "cpu,cpuacct/docker/x/cpu.cfs_quota_us", "200000");
  put(root, "cpu,cpuacct/docker/x/cpu.cfs_period_us", "100000");
  put(root, "cpu,cpuacct/cpu.cfs_quota_us", "-1");
  put(root, "cpu,cpuacct/cpu.cfs_period_us", "100000");
  const std::string self = "12:memory:/docker/x\n4:cpu,cpuacct:/docker/x\n0::/\n";
  EXPECT_EQ(cgroup_cpu_quota(root.path(), self), 2);
  // Inside the container's namespace its own cgroup is the mount's root.
  put(root, "cpu,cpuacct/cpu.cfs_quota_us", "300000");
  EXPECT_EQ(cgroup_cpu_quota(root.path(), "4:cpu,cpuacct:/\n"), 3);
  // Another controller's quota does not count.
  EXPECT_EQ(cgroup_cpu_quota(root.path(), "4:cpuacct:/docker/x\n"), std::nullopt);
}

TEST(AllowedCpus, AtMostTheAffinityMaskAndAtLeastOne) {
  EXPECT_GE(allowed_cpus(), 1);
  EXPECT_LE(allowed_cpus(), affinity_cpus());
  EXPECT_LE(affinity_cpus(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_EQ(thread_count(0), allowed_cpus());
  EXPECT_EQ(thread_count(7), 7) << "an explicit count wins";
}

}  // namespace
}  // namespace moepack
