// The remote function table.
#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "rayx/detail/registry.h"

namespace rayx::detail {

struct FunctionRegistry::Impl {
  std::mutex mu;
  std::map<std::string, RemoteFunction> by_key;
  std::map<std::string, std::string> key_by_name;
  // Set by RAYX_ACTOR_CONCURRENCY, maybe before the factory is added (static
  // initialization runs in no set order across files).
  std::map<std::string, int> max_concurrency_by_key;
};

FunctionRegistry::FunctionRegistry() : impl_(std::make_unique<Impl>()) {}

FunctionRegistry& FunctionRegistry::Instance() {
  static FunctionRegistry* registry = new FunctionRegistry();  // never destroyed
  return *registry;
}

void FunctionRegistry::Add(const std::string& key, RemoteFunction fn) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->key_by_name[fn.name] = key;
  auto concurrency = impl_->max_concurrency_by_key.find(key);
  if (concurrency != impl_->max_concurrency_by_key.end()) fn.max_concurrency = concurrency->second;
  impl_->by_key[key] = std::move(fn);
}

void FunctionRegistry::SetMaxConcurrency(const std::string& key, int n) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->max_concurrency_by_key[key] = n;
  auto it = impl_->by_key.find(key);
  if (it != impl_->by_key.end()) it->second.max_concurrency = n;
}

const RemoteFunction* FunctionRegistry::FindByName(const std::string& name) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto key = impl_->key_by_name.find(name);
  if (key == impl_->key_by_name.end()) return nullptr;
  return &impl_->by_key.at(key->second);
}

const RemoteFunction* FunctionRegistry::FindByKey(const std::string& key) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->by_key.find(key);
  return it == impl_->by_key.end() ? nullptr : &it->second;
}

std::string DescribePointer(const void* address) {
  if (address == nullptr) return "(a member function)";
  Dl_info info{};
  if (dladdr(address, &info) != 0 && info.dli_sname != nullptr) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string name = status == 0 && demangled ? demangled : info.dli_sname;
    std::free(demangled);
    return "'" + name + "'";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "at %p", address);
  return buf;
}

std::string TypeName(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : type.name();
  std::free(demangled);
  // libstdc++'s spelling of std::string, which says nothing to a reader.
  const std::string kString =
      "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >";
  for (size_t at = name.find(kString); at != std::string::npos; at = name.find(kString, at)) {
    name.replace(at, kString.size(), "std::string");
  }
  return name;
}

std::vector<std::string> SplitNames(const char* names) {
  std::vector<std::string> out;
  std::string current;
  int depth = 0;  // commas inside <...> or (...) do not split
  for (const char* p = names;; ++p) {
    char c = *p;
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (c == '\0' || (c == ',' && depth == 0)) {
      std::string name;
      for (char ch : current) {
        if (ch != ' ' && ch != '&' && ch != '\n' && ch != '\t') name += ch;
      }
      out.push_back(name);
      current.clear();
      if (c == '\0') break;
      continue;
    }
    current += c;
  }
  return out;
}

}  // namespace rayx::detail
