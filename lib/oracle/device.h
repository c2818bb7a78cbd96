// The target device: everything vLLM's platform layer answers when a kernel asks "can I run
// here?" (vllm/platforms/{interface,cuda,rocm,cpu,xpu}.py @ e9d1398d9).
//
// CUDA devices are a compute capability. ROCm devices are a gfx arch name; vLLM derives a
// capability from it (gfx942 -> 9.4, gfx950 -> 9.5, gfx1250 -> 12.5), so capability predicates
// can be true on AMD parts too, which is why CUDA-only kernels check the platform first.
// CPU and XPU have no capability at all (every capability predicate is false).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace moepack::oracle {

enum class Platform { cuda, rocm, cpu, xpu };
enum class CpuArch { x86, arm, powerpc, other };

struct Capability {
  int major = 0;
  int minor = 0;
  int to_int() const { return major * 10 + minor; }
};

struct Device {
  std::string target_name;  // the --target spelling this device was made from
  Platform platform = Platform::cuda;
  Capability cuda_capability{};  // CUDA only
  std::string gfx_arch;          // ROCm only, e.g. "gfx950"
  CpuArch cpu_arch = CpuArch::x86;  // CPU only
  bool amx_tiles = false;           // CPU only: x86 AMX tile support (torch.cpu._is_amx_tile_supported)
  bool darwin = false;              // CPU only: macOS (sys.platform == "darwin"); only `host` on a Mac sets it

  bool is_cuda() const { return platform == Platform::cuda; }
  bool is_rocm() const { return platform == Platform::rocm; }
  bool is_cuda_alike() const { return is_cuda() || is_rocm(); }
  bool is_cpu() const { return platform == Platform::cpu; }
  bool is_xpu() const { return platform == Platform::xpu; }

  // vLLM's platform.device_name ("cuda", "rocm", "cpu", "xpu"), used in rejection reasons.
  std::string device_name() const;

  // get_device_capability(): CUDA capability, the gfx-derived one on ROCm, none on CPU/XPU.
  std::optional<Capability> capability() const;
  // capability >= cap (cap as <major><minor>, e.g. 89).
  bool has_device_capability(int cap) const;
  // capability == cap.
  bool is_device_capability(int cap) const;
  // Same major version: family(100) = SM100/SM101/SM103; SM110 is its own family(110).
  bool is_device_capability_family(int cap) const;

  // ROCm arch helpers (vllm/platforms/rocm.py); all false off ROCm.
  bool on_gfx9() const;     // gfx90a, gfx942, gfx950
  bool on_gfx942() const;
  bool on_gfx950() const;
  bool on_gfx1250() const;
  bool on_gfx1x() const;    // RDNA3/4 (gfx11xx/gfx12xx) but not the CDNA-classified gfx1250
  bool on_cdna() const;     // gfx9xx or gfx1250
  bool on_rdna4() const;    // gfx1200/gfx1201
  int cdna_version() const;  // gfx90a 2, gfx942 3, gfx950 4, gfx1250 5, else 0
  bool supports_mx() const;  // ROCm only: "gfx95" or "gfx1250" in the arch

  // current_platform.supports_fp8(): CUDA SM >= 8.9, ROCm CDNA or RDNA4, XPU always, CPU never.
  bool supports_fp8() const;
  // The platform FP8 type is float8_e4m3fnuz (MI300 class).
  bool fp8_is_fnuz() const;
};

// The --target names this build knows, in the order `moepack targets` lists them.
const std::vector<std::string>& known_target_names();

// Parses a --target name (sm70 ... sm121, gfx942, gfx950, gfx1250, cpu-amx, cpu-avx512, cpu-arm,
// xpu, host). `host` detects the machine this runs on. Throws moepack::Error(usage) when unknown.
Device parse_target(const std::string& name);

// The CPU this process runs on: x86 with or without AMX tiles, Arm, or other.
Device detect_host_cpu();

// One line describing the device, for `targets` and human `plan` output.
std::string describe_device(const Device& d);

}  // namespace moepack::oracle
