// Fuzzes the parsers of what users type on command lines: --resources JSON,
// --labels, HOST:PORT addresses and flags. The first byte picks the parser;
// for flags the rest is split at NUL bytes into arguments. Garbage must give
// an InvalidArgument error; what is accepted must be within the documented
// bounds.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/address.h"
#include "common/flags.h"
#include "fuzz_util.h"
#include "rayx/resources.h"

namespace rayx::fuzz {
namespace {

void CheckRefusal(const Status& s) {
  Check(s.code() == StatusCode::kInvalidArgument, "a refusal must be InvalidArgument: " +
                                                      s.ToString());
  // Errors quote the input cut short: a message stays readable.
  Check(s.message().size() < 2048, "an error message of " + std::to_string(s.message().size()) +
                                       " bytes");
}

void FuzzResources(std::string_view text) {
  auto r = ParseResourcesJson(text);
  if (!r.ok()) return CheckRefusal(r.status());
  Check(r->size() <= kMaxResourceEntries, "too many resources accepted");
  for (const auto& [name, amount] : *r) {
    Check(!name.empty() && name.size() <= kMaxResourceNameBytes, "a bad resource name accepted");
    Check(name != kCpu && name != kGpu && name != kMemory, "a reserved resource name accepted");
    Check(std::isfinite(amount) && amount >= 0 && amount <= kMaxResourceAmount,
          "a resource amount out of range accepted");
  }
  (void)FormatResourceShape(*r);
}

void FuzzLabels(std::string_view text) {
  auto r = ParseLabels(text);
  if (!r.ok()) return CheckRefusal(r.status());
  Check(r->size() <= kMaxResourceEntries, "too many labels accepted");
  for (const auto& [key, value] : *r) {
    Check(!key.empty() && key.size() <= kMaxResourceNameBytes && !value.empty() &&
              value.size() <= kMaxResourceNameBytes,
          "a bad label accepted");
  }
}

void FuzzHostPort(std::string_view text, uint16_t default_port) {
  auto r = ParseHostPort(text, default_port);
  if (!r.ok()) return CheckRefusal(r.status());
  Check(!r->host.empty() && r->port != 0, "an address without host or port accepted");
}

void FuzzFlags(std::string_view text) {
  std::vector<std::string> args;
  size_t start = 0;
  while (start <= text.size() && args.size() < 64) {
    size_t end = text.find('\0', start);
    if (end == std::string_view::npos) end = text.size();
    args.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::string address, resources;
  int64_t port = 0;
  double cpus = 0;
  bool head = false;
  std::vector<std::string> envs;
  FlagParser flags("rayx fuzz");
  flags.AddString("address", &address, "HOST:PORT");
  flags.AddString("resources", &resources, "JSON");
  flags.AddInt("port", &port, 1, 65535, "port");
  flags.AddDouble("num-cpus", &cpus, "CPUs");
  flags.AddBool("head", &head, "head");
  flags.AddStringList("env", &envs, "K=V");
  std::vector<std::string> positional;
  FlagsAndCommand split = SplitAtDoubleDash(args);
  Status s = flags.Parse(split.flags, (args.size() % 2) ? &positional : nullptr);
  if (!s.ok()) return CheckRefusal(s);
  Check(port >= 0 && port <= 65535, "--port out of range accepted");
  Check(std::isfinite(cpus) && cpus >= 0, "--num-cpus out of range accepted");
  (void)flags.Usage();
}

}  // namespace
}  // namespace rayx::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rayx::fuzz;  // NOLINT
  FuzzInput in(data, size);
  uint8_t selector = in.Byte();
  std::string_view text = in.Rest();
  switch (selector % 4) {
    case 0: FuzzResources(text); break;
    case 1: FuzzLabels(text); break;
    case 2: FuzzFlags(text); break;
    case 3: FuzzHostPort(text, selector & 0x80 ? 6380 : 0); break;
  }
  return 0;
}
