// How many CPUs this process may run on: the default thread count of everything that computes
// in parallel (convert's executor, verify and run's experts, bench). A container or `taskset`
// limits a process below the machine's core count in two ways, and both count:
//   - the affinity mask (sched_getaffinity: taskset, cpuset cgroups, numactl);
//   - the CPU bandwidth quota of its cgroups (v2 `cpu.max`, v1 `cpu.cfs_quota_us` over
//     `cpu.cfs_period_us`; Docker's --cpus, Kubernetes' CPU limits), rounded up, the smallest
//     over the process's cgroup and its ancestors.
// std::thread::hardware_concurrency() and oneTBB's default see neither the quota nor (depending
// on the version) the mask, so threads beyond the quota only take turns.
#pragma once

#include <optional>
#include <string>

namespace moepack {

// The CPUs this process may use (>= 1), worked out once per process.
int allowed_cpus();

// The parts, for tests and for messages.
int affinity_cpus();  // sched_getaffinity's count; hardware_concurrency() when it fails
// The quota in CPUs (ceil(quota / period)) of the cgroup `self_cgroup` (the text of
// /proc/self/cgroup) names, read under `cgroup_root` (/sys/fs/cgroup); none when unlimited or
// unreadable.
std::optional<int> cgroup_cpu_quota(const std::string& cgroup_root, const std::string& self_cgroup);

// The thread count a command uses: `requested` when it is positive (--threads wins, even above
// allowed_cpus()), otherwise allowed_cpus().
int thread_count(int requested);

}  // namespace moepack
