// Fuzzes how a C++ worker decodes a call's arguments (rayx/detail/registry.h):
// the first byte picks a registered function, the second how many arguments
// follow, each a u16-length part. Any bytes must give the result or a clean
// std::invalid_argument or msgpack::type_error (ArgumentTypeError), never a
// crash, a deep recursion or an allocation the input did not pay for.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "fuzz_util.h"
#include "rayx/detail/registry.h"

namespace fuzz_functions {

struct Point {
  double x = 0;
  double y = 0;
  std::string label;
  MSGPACK_DEFINE_MAP(x, y, label)
};

// A user type that nests as deep as its value: its conversion recurses once
// per level.
struct Tree {
  int64_t value = 0;
  std::vector<Tree> children;
  MSGPACK_DEFINE(value, children)
};

int64_t Depth(const Tree& t) {
  int64_t deepest = 0;
  for (const auto& c : t.children) deepest = std::max(deepest, Depth(c));
  return deepest + 1;
}

int64_t Add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + b); }
std::string Concat(std::string head, const std::vector<std::string>& tail) {
  for (const auto& t : tail) head += t.substr(0, 16);
  return head;
}
double Norm(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x * x;
  return std::sqrt(sum);
}
size_t CountKeys(const std::map<std::string, std::vector<int32_t>>& m) { return m.size(); }
std::string Describe(const Point& p, std::optional<int> precision) {
  return p.label + std::to_string(p.x + p.y) + std::to_string(precision.value_or(-1));
}
size_t Size(const rayx::Bytes& b) { return b.data.size(); }
std::tuple<int, std::string, bool> Echo(std::tuple<int, std::string, bool> t) { return t; }
float Scale(float f, bool twice) { return twice ? f * 2 : f; }
size_t Points(const std::unordered_map<int64_t, Point>& points, std::array<uint8_t, 3> tag) {
  return points.size() + tag[0];
}
std::vector<rayx::Bytes> Split(const std::vector<rayx::Bytes>& parts) { return parts; }

class Box {
 public:
  explicit Box(std::string s) : s_(std::move(s)) {}
  static Box* Make(std::string s) { return new Box(std::move(s)); }
  std::string Get() const { return s_; }
  void Set(const std::vector<uint8_t>& bytes) { s_.assign(bytes.begin(), bytes.end()); }
  int64_t Grow(const Tree& t) { return Depth(t) + static_cast<int64_t>(s_.size()); }

 private:
  std::string s_;
};

RAYX_REMOTE(Depth, Add, Concat, Norm, CountKeys, Describe, Size, Echo, Scale, Points, Split);
RAYX_REMOTE(Box::Make, &Box::Get, &Box::Set, &Box::Grow);

}  // namespace fuzz_functions

namespace rayx::fuzz {
namespace {

// In the order of the selector byte.
const char* const kFunctions[] = {"Depth", "Add",    "Concat", "Norm",  "CountKeys", "Describe",
                                  "Size",  "Echo",   "Scale",  "Points", "Split",    "Box::Make",
                                  "Box::Get", "Box::Set", "Box::Grow"};

void Call(const detail::RemoteFunction& fn, const detail::ArgViews& args) {
  try {
    if (fn.create) {
      std::shared_ptr<void> box = fn.create(args);
      // Methods run on what the factory made.
      auto* get = detail::FunctionRegistry::Instance().FindByName("Box::Get");
      Check(get != nullptr, "Box::Get is registered");
      Touch(get->invoke(box.get(), {}));
    } else if (fn.name.rfind("Box::", 0) == 0) {
      fuzz_functions::Box box("seed");
      Touch(fn.invoke(&box, args));
    } else {
      std::string result = fn.invoke(nullptr, args);
      Touch(result);
      if (fn.name == "Depth") {
        int64_t depth = detail::Unpack<int64_t>(result);
        Check(depth >= 1 && static_cast<size_t>(depth) <= detail::kMaxValueDepth,
              "a Tree deeper than the value depth bound was decoded");
      }
    }
  } catch (const msgpack::type_error&) {
    // The value is not of the parameter's type (ArgumentTypeError and msgpack's own).
  } catch (const std::invalid_argument& e) {
    // Arity, or bytes that are not one msgpack value within the limits.
    Touch(e.what());
  }
  // Anything else (std::bad_alloc, std::length_error, ...) escapes: a finding.
}

}  // namespace
}  // namespace rayx::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rayx::fuzz;  // NOLINT
  FuzzInput in(data, size);
  const size_t n = sizeof(kFunctions) / sizeof(kFunctions[0]);
  const char* name = kFunctions[in.Byte() % n];
  const rayx::detail::RemoteFunction* fn =
      rayx::detail::FunctionRegistry::Instance().FindByName(name);
  Check(fn != nullptr, std::string(name) + " is registered");
  const size_t count = in.Byte() % 5;
  // Each argument in a heap block of exactly its size, as a worker's frames are.
  std::vector<std::vector<char>> owned;
  for (size_t i = 0; i < count; ++i) {
    std::string_view part = i + 1 == count ? in.Rest() : in.Part();
    owned.emplace_back(part.begin(), part.end());
  }
  rayx::detail::ArgViews args;
  for (const auto& a : owned) args.emplace_back(a.data(), a.size());
  Call(*fn, args);
  return 0;
}
