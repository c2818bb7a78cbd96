#include "lib/oracle/device.h"

#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "lib/core/error.h"

namespace moepack::oracle {

namespace {
bool arch_contains(const Device& d, std::string_view needle) {
  return d.is_rocm() && d.gfx_arch.find(needle) != std::string::npos;
}

// vLLM parses "gfx" + digits the way HIP fills major/minor: three digits (gfx942) are major,
// minor, stepping; four digits (gfx1250) are two-digit major, minor, stepping; "gfx90a" keeps
// the two leading digits.
std::optional<Capability> capability_from_gfx(const std::string& arch) {
  if (arch.rfind("gfx", 0) != 0) return std::nullopt;
  std::string digits;
  for (size_t i = 3; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i) digits += arch[i];
  if (digits.size() == 2 || digits.size() == 3) return Capability{digits[0] - '0', digits[1] - '0'};
  if (digits.size() == 4) return Capability{std::stoi(digits.substr(0, 2)), digits[2] - '0'};
  return std::nullopt;
}

Device cuda(const std::string& name, int major, int minor) {
  Device d;
  d.target_name = name;
  d.platform = Platform::cuda;
  d.cuda_capability = {major, minor};
  return d;
}
Device rocm(const std::string& name) {
  Device d;
  d.target_name = name;
  d.platform = Platform::rocm;
  d.gfx_arch = name;
  return d;
}
Device cpu(const std::string& name, CpuArch arch, bool amx) {
  Device d;
  d.target_name = name;
  d.platform = Platform::cpu;
  d.cpu_arch = arch;
  d.amx_tiles = amx;
  return d;
}

#if defined(__x86_64__) || defined(__i386__)
// AMX needs the CPU to report the tile unit (CPUID.7.0:EDX[24]) and the OS to have enabled the
// tile state components in XCR0 (bits 17 and 18), the two conditions torch's check rests on.
bool host_has_amx_tiles() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  if (!(edx & (1u << 24))) return false;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  if (!(ecx & (1u << 27))) return false;  // OSXSAVE: xgetbv is usable
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const unsigned tile_bits = (1u << 17) | (1u << 18);
  return (xcr0_lo & tile_bits) == tile_bits;
}
#endif
}  // namespace

std::string Device::device_name() const {
  switch (platform) {
    case Platform::cuda: return "cuda";
    case Platform::rocm: return "rocm";
    case Platform::cpu: return "cpu";
    case Platform::xpu: return "xpu";
  }
  return "cuda";
}

std::optional<Capability> Device::capability() const {
  if (is_cuda()) return cuda_capability;
  if (is_rocm()) return capability_from_gfx(gfx_arch);
  return std::nullopt;
}

bool Device::has_device_capability(int cap) const {
  auto c = capability();
  return c && c->to_int() >= cap;
}
bool Device::is_device_capability(int cap) const {
  auto c = capability();
  return c && c->to_int() == cap;
}
bool Device::is_device_capability_family(int cap) const {
  auto c = capability();
  return c && c->to_int() / 10 == cap / 10;
}

bool Device::on_gfx9() const { return arch_contains(*this, "gfx90a") || arch_contains(*this, "gfx942") || arch_contains(*this, "gfx950"); }
bool Device::on_gfx942() const { return arch_contains(*this, "gfx942"); }
bool Device::on_gfx950() const { return arch_contains(*this, "gfx950"); }
bool Device::on_gfx1250() const { return arch_contains(*this, "gfx1250"); }
bool Device::on_cdna() const { return arch_contains(*this, "gfx9") || arch_contains(*this, "gfx1250"); }
bool Device::on_gfx1x() const { return (arch_contains(*this, "gfx11") || arch_contains(*this, "gfx12")) && !on_cdna(); }
bool Device::on_rdna4() const { return arch_contains(*this, "gfx1200") || arch_contains(*this, "gfx1201"); }
int Device::cdna_version() const {
  if (arch_contains(*this, "gfx90a")) return 2;
  if (on_gfx942()) return 3;
  if (on_gfx950()) return 4;
  if (on_gfx1250()) return 5;
  return 0;
}
bool Device::supports_mx() const { return arch_contains(*this, "gfx95") || arch_contains(*this, "gfx1250"); }

bool Device::supports_fp8() const {
  switch (platform) {
    case Platform::cuda: return has_device_capability(89);
    case Platform::rocm: return on_cdna() || on_rdna4();
    case Platform::xpu: return true;
    case Platform::cpu: return false;
  }
  return false;
}

bool Device::fp8_is_fnuz() const { return arch_contains(*this, "gfx94"); }

const std::vector<std::string>& known_target_names() {
  static const std::vector<std::string> names = {"sm70",   "sm75",   "sm80",    "sm86",    "sm89",       "sm90",
                                                 "sm100",  "sm103",  "sm110",   "sm120",   "sm121",      "gfx942",
                                                 "gfx950", "gfx1250", "cpu-amx", "cpu-avx512", "cpu-arm", "xpu",
                                                 "host"};
  return names;
}

Device parse_target(const std::string& name) {
  if (name.size() >= 4 && name.rfind("sm", 0) == 0) {
    static const std::pair<const char*, Capability> kCuda[] = {
        {"sm70", {7, 0}},   {"sm75", {7, 5}},   {"sm80", {8, 0}},   {"sm86", {8, 6}},   {"sm89", {8, 9}},   {"sm90", {9, 0}},
        {"sm100", {10, 0}}, {"sm103", {10, 3}}, {"sm110", {11, 0}}, {"sm120", {12, 0}}, {"sm121", {12, 1}},
    };
    for (const auto& [n, cap] : kCuda)
      if (name == n) return cuda(name, cap.major, cap.minor);
  }
  if (name == "gfx942" || name == "gfx950" || name == "gfx1250") return rocm(name);
  if (name == "cpu-amx") return cpu(name, CpuArch::x86, true);
  if (name == "cpu-avx512") return cpu(name, CpuArch::x86, false);
  if (name == "cpu-arm") return cpu(name, CpuArch::arm, false);
  if (name == "xpu") {
    Device d;
    d.target_name = name;
    d.platform = Platform::xpu;
    return d;
  }
  if (name == "host") return detect_host_cpu();
  std::string known;
  for (const auto& n : known_target_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error(ErrorKind::usage, "unknown --target '" + name + "'; expected one of: " + known);
}

Device detect_host_cpu() {
#if defined(__x86_64__) || defined(__i386__)
  const bool amx = host_has_amx_tiles();
  Device d = cpu(amx ? "cpu-amx" : "cpu-avx512", CpuArch::x86, amx);
#elif defined(__aarch64__) || defined(__arm__)
  Device d = cpu("cpu-arm", CpuArch::arm, false);
#elif defined(__powerpc64__) || defined(__powerpc__)
  Device d = cpu("host", CpuArch::powerpc, false);
#else
  Device d = cpu("host", CpuArch::other, false);
#endif
#if defined(__APPLE__)
  d.darwin = true;
#endif
  d.target_name = "host (" + d.target_name + ")";
  return d;
}

std::string describe_device(const Device& d) {
  switch (d.platform) {
    case Platform::cuda: {
      const auto c = d.cuda_capability;
      return "NVIDIA CUDA, compute capability " + std::to_string(c.major) + "." + std::to_string(c.minor);
    }
    case Platform::rocm: {
      const auto c = d.capability();
      std::string s = "AMD ROCm " + d.gfx_arch;
      if (c) s += " (capability " + std::to_string(c->major) + "." + std::to_string(c->minor) + ", CDNA " + std::to_string(d.cdna_version()) + ")";
      return s;
    }
    case Platform::cpu: {
      // macOS changes what vLLM's CPU platform picks, so it is part of the description a
      // manifest records (and reads back: convert::deployment_from_target_json).
      const std::string os = d.darwin ? " (macOS)" : "";
      if (d.cpu_arch == CpuArch::x86) return (d.amx_tiles ? "x86 CPU with AMX tiles" : "x86 CPU without AMX tiles") + os;
      if (d.cpu_arch == CpuArch::arm) return "Arm CPU" + os;
      if (d.cpu_arch == CpuArch::powerpc) return "POWER CPU" + os;
      return "CPU" + os;
    }
    case Platform::xpu: return "Intel XPU";
  }
  return "";
}

}  // namespace moepack::oracle
