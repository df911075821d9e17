// Parsing and printing of resource amounts and node labels.
#include "rayx/resources.h"

#include "common/text.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace rayx {
namespace {

// The user's text, cut short enough to quote in an error.
std::string Quote(std::string_view text) {
  constexpr size_t kMaxQuoted = 200;
  if (text.size() <= kMaxQuoted) return "'" + std::string(text) + "'";
  return "'" + Utf8Prefix(text, kMaxQuoted) + "...' (" + std::to_string(text.size()) + " bytes)";
}

// A strict reader for one flat JSON object whose values are numbers. Hand-written
// because the grammar needed is ten lines and a JSON library would be a new
// dependency for the daemons.
class FlatJsonReader {
 public:
  explicit FlatJsonReader(std::string_view text) : s_(text) {}

  Result<ResourceMap> Read() {
    ResourceMap out;
    if (s_.size() > kMaxResourceTextBytes) {
      return Error("the text is longer than " + std::to_string(kMaxResourceTextBytes) + " bytes");
    }
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    SkipSpace();
    if (Consume('}')) return Finish(std::move(out));
    while (true) {
      SkipSpace();
      auto name = ReadString();
      if (!name.ok()) return name.status();
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after \"" + *name + "\"");
      SkipSpace();
      auto amount = ReadNumber(*name);
      if (!amount.ok()) return amount.status();
      if (out.count(*name)) return Error("resource \"" + *name + "\" is given twice");
      if (out.size() == kMaxResourceEntries) {
        return Error("more than " + std::to_string(kMaxResourceEntries) + " resources");
      }
      out[*name] = *amount;
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume('}')) break;
      return Error("expected ',' or '}'");
    }
    return Finish(std::move(out));
  }

 private:
  Result<ResourceMap> Finish(ResourceMap out) {
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after '}'");
    return out;
  }

  Status Error(const std::string& what) const {
    return Status::InvalidArgument("invalid resources JSON " + Quote(s_) +
                                   " at offset " + std::to_string(pos_) + ": " + what +
                                   " (expected e.g. '{\"tpu\": 4, \"ssd\": 1}')");
  }

  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  Result<std::string> ReadString() {
    if (!Consume('"')) return Error("expected a quoted resource name");
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\' || static_cast<unsigned char>(c) < 0x20) {
        return Error("resource names may not contain escapes or control characters");
      }
      out += c;
      if (out.size() > kMaxResourceNameBytes) {
        return Error("a resource name is longer than " + std::to_string(kMaxResourceNameBytes) +
                     " bytes");
      }
    }
    if (!Consume('"')) return Error("unterminated string");
    if (out.empty()) return Error("empty resource name");
    return out;
  }

  Result<double> ReadNumber(const std::string& name) {
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) ||
                                s_[pos_] == '-' || s_[pos_] == '+' || s_[pos_] == '.' ||
                                s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
    }
    std::string token(s_.substr(start, pos_ - start));
    if (token.empty()) return Error("the amount of \"" + name + "\" must be a number");
    if (token.size() > 64) return Error("the amount of \"" + name + "\" is not a number");
    char* end = nullptr;
    double value = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size() || !std::isfinite(value)) {
      return Error("the amount of \"" + name + "\" is not a number: " + token);
    }
    if (value < 0) return Error("the amount of \"" + name + "\" is negative: " + token);
    if (value > kMaxResourceAmount) {
      return Error("the amount of \"" + name + "\" is " + token + ", over the limit of " +
                   FormatAmount(kMaxResourceAmount));
    }
    return value;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

bool IsLabelChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
         c == '/';
}

}  // namespace

Result<ResourceMap> ParseResourcesJson(std::string_view json) {
  auto parsed = FlatJsonReader(json).Read();
  if (!parsed.ok()) return parsed;
  for (const auto& [name, amount] : *parsed) {
    if (name == kCpu || name == kGpu || name == kMemory) {
      return Status::InvalidArgument("resource \"" + name +
                                     "\" cannot be set through --resources: use --num-cpus, "
                                     "--num-gpus or --memory");
    }
  }
  return parsed;
}

Result<LabelMap> ParseLabels(std::string_view text) {
  LabelMap out;
  if (text.size() > kMaxResourceTextBytes) {
    return Status::InvalidArgument("labels " + Quote(text) + " are longer than " +
                                   std::to_string(kMaxResourceTextBytes) + " bytes");
  }
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view pair = text.substr(pos, comma - pos);
    size_t eq = pair.find('=');
    auto bad = [&](const std::string& why) {
      return Status::InvalidArgument("invalid label " + Quote(pair) + " in " + Quote(text) +
                                     ": " + why +
                                     " (expected key=value,key2=value2)");
    };
    if (eq == std::string_view::npos) return bad("missing '='");
    std::string key(pair.substr(0, eq));
    std::string value(pair.substr(eq + 1));
    if (key.empty() || value.empty()) return bad("empty key or value");
    if (key.size() > kMaxResourceNameBytes || value.size() > kMaxResourceNameBytes) {
      return bad("a key or value is longer than " + std::to_string(kMaxResourceNameBytes) +
                 " bytes");
    }
    for (char c : key + value) {
      if (!IsLabelChar(c)) return bad("only letters, digits and _ - . / are allowed");
    }
    if (out.count(key)) return bad("key given twice");
    if (out.size() == kMaxResourceEntries) {
      return bad("more than " + std::to_string(kMaxResourceEntries) + " labels");
    }
    out[key] = value;
    pos = comma + 1;
    if (comma == text.size() - 1) return bad("trailing ','");
  }
  return out;
}

std::string FormatAmount(double amount) {
  char buf[64];
  if (amount == std::floor(amount) && std::fabs(amount) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", amount);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", amount);
  }
  return buf;
}

std::string FormatBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 5) {
    bytes /= 1024;
    ++unit;
  }
  char buf[64];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", bytes, kUnits[unit]);
  }
  return buf;
}

std::string FormatResourceShape(const ResourceMap& resources) {
  std::string out = "{";
  for (const auto& [name, amount] : resources) {
    if (!(amount > 0)) continue;
    out += (out.size() > 1 ? ", " : "") + name + ": " + FormatAmount(amount);
  }
  return out + "}";
}

}  // namespace rayx
