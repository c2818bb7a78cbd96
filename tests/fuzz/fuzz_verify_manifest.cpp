// `verify` of a small real artifact whose manifest a user or a transfer changed: structure-aware,
// the input is a list of edits to fields of a valid manifest (set a number to a small step, a
// boundary or a value from the input; give a string another value the manifest holds elsewhere,
// or bytes from the input; drop a key; duplicate or drop an array element; swap two values), so
// the mutations reach the checks behind the JSON structure. Properties: verify, with the source,
// either refuses the artifact as bad input naming the manifest, or fails it (exit 5), or passes
// it — and it passes only a manifest that is what convert writes for the deployment the manifest
// records (the fields verify cannot see, such as the version string or the source's file list,
// aside).
// fuzz-max-len: 512
// fuzz-max-runs: 3000
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/checkpoints/checkpoint.h"
#include "fuzz/byte_reader.h"
#include "fuzz/fuzz_scratch.h"
#include "fuzz/fuzz_target.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "lib/runtime/verify.h"

namespace {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace moepack;

// The base artifacts, converted once per process: a one-rank GPU layout with biases and a
// two-rank NVFP4 one with per-layer reductions.
struct Base {
  const char* sample;
  const char* target;
  int tp;
};
constexpr Base kBases[] = {{"gpt-oss-mxfp4", "sm90", 1}, {"ct-nvfp4", "sm100", 2}};

struct Prepared {
  std::string dir, source;
  json manifest;
};

const fuzz::ScratchDir& scratch() {
  static fuzz::ScratchDir dir;
  return dir;
}

const Prepared& prepared(size_t which) {
  static std::map<size_t, Prepared> cache;
  auto it = cache.find(which);
  if (it != cache.end()) return it->second;
  const Base& b = kBases[which];
  Prepared p;
  p.source = std::string(MOEPACK_SOURCE_DIR) + "/samples/" + b.sample;
  p.dir = scratch().file(std::string("base-") + std::to_string(which));
  ckpt::Checkpoint ck = ckpt::open_checkpoint(p.source);
  oracle::Deployment dep = oracle::default_deployment(oracle::parse_target(b.target));
  dep.parallel.tp = b.tp;
  convert::ConvertRequest req;
  req.target_json = convert::target_json(dep);
  fs::create_directories(p.dir);
  convert::execute_plan(convert::build_conversion_plan(ck, convert::decide_layers(ck, dep), req), p.dir, convert::ExecutorOptions{1});
  std::ifstream in(p.dir + "/moepack.json");
  p.manifest = json::parse(in);
  return cache.emplace(which, std::move(p)).first->second;
}

// Every value of the document with its parent and key, for picking edit targets.
struct Slot {
  json* parent;
  std::string key;  // object key, or "" for an array element
  size_t index = 0;
  json& value() const { return key.empty() ? (*parent)[index] : (*parent)[key]; }
};
void collect(json& v, std::vector<Slot>& out) {
  if (v.is_object())
    for (auto& [k, child] : v.items()) {
      out.push_back({&v, k});
      collect(child, out);
    }
  else if (v.is_array())
    for (size_t i = 0; i < v.size(); ++i) {
      out.push_back({&v, "", i});
      collect(v[i], out);
    }
}
void strings_of(const json& v, std::vector<std::string>& out) {
  if (v.is_string()) out.push_back(v.get<std::string>());
  if (!v.is_structured()) return;  // a primitive iterates over itself
  for (const auto& child : v) strings_of(child, out);
}

void apply_edit(json& m, fuzz::ByteReader& r, const std::vector<std::string>& strings) {
  std::vector<Slot> slots;
  collect(m, slots);
  if (slots.empty()) return;
  const Slot s = slots[static_cast<size_t>(r.in_range(0, slots.size() - 1))];
  json& v = s.value();
  switch (r.in_range(0, 5)) {
    case 0: {  // numbers: a step, a boundary, or raw bits
      static constexpr uint64_t kBoundaries[] = {0, 1, 2, 31, 32, 127, 128, 255, 256, uint64_t{1} << 31, uint64_t{1} << 32, uint64_t{1} << 40, ~uint64_t{0}};
      const uint64_t old = v.is_number_unsigned() ? v.get<uint64_t>() : 0;
      switch (r.in_range(0, 3)) {
        case 0: v = old + 1; break;
        case 1: v = old > 0 ? old - 1 : 0; break;
        case 2: v = kBoundaries[r.in_range(0, std::size(kBoundaries) - 1)]; break;
        default: v = old * 2; break;
      }
      break;
    }
    case 1: v = strings.empty() ? json("") : json(strings[static_cast<size_t>(r.in_range(0, strings.size() - 1))]); break;
    case 2: {  // text from the input, kept printable so the edited manifest stays valid JSON
      std::string text = r.string(24);
      for (char& ch : text) ch = static_cast<char>(' ' + static_cast<unsigned char>(ch) % 95);
      v = text;
      break;
    }
    case 3:
      if (!s.key.empty()) s.parent->erase(s.key);
      else s.parent->erase(s.index);
      break;
    case 4:
      if (v.is_array() && !v.empty()) v.push_back(v[static_cast<size_t>(r.in_range(0, v.size() - 1))]);
      else if (v.is_boolean()) v = !v.get<bool>();
      else if (v.is_number_float()) v = v.get<double>() * 2;
      break;
    default: {  // another value copied over this one (a misplaced field, a pasted entry)
      const Slot other = slots[static_cast<size_t>(r.in_range(0, slots.size() - 1))];
      json copy = other.value();  // copied first: `other` may lie inside `v`
      v = std::move(copy);
      break;
    }
  }
}

// What verify can be asked to prove: the manifest without the fields nothing reads (the version
// that wrote it, the source's description, fingerprint and file list) and with its file list in
// name order.
json provable(json m) {
  m.erase("moepack_version");
  if (m.contains("source") && m["source"].is_object()) {
    m["source"].erase("scheme_description");
    m["source"].erase("fingerprint");
    m["source"].erase("files");
  }
  if (m.contains("files") && m["files"].is_array()) {
    std::vector<json> files(m["files"].begin(), m["files"].end());
    std::sort(files.begin(), files.end(), [](const json& a, const json& b) { return a.dump() < b.dump(); });
    m["files"] = files;
  }
  return m;
}

}  // namespace

MOEPACK_FUZZ_TARGET(verify_manifest) {
  if (size == 0) return;
  fuzz::ByteReader r(data, size);
  const Prepared& base = prepared(static_cast<size_t>(r.in_range(0, std::size(kBases) - 1)));
  json m = base.manifest;
  std::vector<std::string> strings;
  strings_of(m, strings);
  const uint64_t edits = r.in_range(1, 4);
  for (uint64_t i = 0; i < edits && r.remaining() > 0; ++i) apply_edit(m, r, strings);

  // The tampered artifact: the base's files linked, the edited manifest beside them.
  static int counter = 0;
  const std::string dir = scratch().file("t" + std::to_string(counter++));
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(base.dir))
    if (e.path().filename() != "moepack.json") fs::create_symlink(e.path(), fs::path(dir) / e.path().filename());
  std::ofstream(dir + "/moepack.json") << m.dump(2) << "\n";

  runtime::VerifyOptions o;
  o.artifact = dir;
  o.source = base.source;
  o.tokens = 2;
  runtime::VerifyReport report;
  std::string error;
  const bool ran = fuzz::expect_input_error([&] { report = runtime::verify_artifact(o); }, &error);
  fs::remove_all(dir);
  if (!ran) {
    MOEPACK_FUZZ_CHECK(error.find("moepack.json") != std::string::npos || error.find(dir) != std::string::npos,
                       "a refusal that names neither the manifest nor the artifact: " + error);
    return;
  }
  if (!report.ok()) return;  // verify failed it: exit 5
  // Passed: the manifest must be what convert writes for the deployment it records (an edit
  // that changes nothing convert does, such as --ep on one rank, is the truth).
  const oracle::Deployment recorded = convert::deployment_from_target_json(m["target"], base.dir + "/moepack.json");
  const std::string again = scratch().file("again" + std::to_string(counter));
  fs::create_directories(again);
  json written;
  {
    ckpt::Checkpoint ck = ckpt::open_checkpoint(base.source);
    convert::ConvertRequest req;
    req.target_json = convert::target_json(recorded);
    convert::execute_plan(convert::build_conversion_plan(ck, convert::decide_layers(ck, recorded), req), again, convert::ExecutorOptions{1});
    std::ifstream in(again + "/moepack.json");
    written = json::parse(in);
  }
  fs::remove_all(again);
  MOEPACK_FUZZ_CHECK(provable(m) == provable(written), "verify passed a manifest that is not what convert writes for its target:\n" + m.dump(1));
}
