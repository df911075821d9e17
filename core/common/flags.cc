// Command-line flag parsing.
#include "common/flags.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "common/text.h"

namespace rayx {
namespace {

// A value the user typed, quoted and cut short enough for an error message.
std::string Quoted(const std::string& v) {
  constexpr size_t kMaxQuoted = 100;
  if (v.size() <= kMaxQuoted) return "'" + v + "'";
  return "'" + Utf8Prefix(v, kMaxQuoted) + "...'";
}

}  // namespace

FlagsAndCommand SplitAtDoubleDash(const std::vector<std::string>& args) {
  FlagsAndCommand out;
  bool after = false;
  for (const auto& a : args) {
    if (!after && a == "--") {
      after = true;
      continue;
    }
    (after ? out.command : out.flags).push_back(a);
  }
  return out;
}

void FlagParser::AddString(const std::string& name, std::string* out, const std::string& help) {
  order_.push_back(name);
  flags_[name] = {true, help, [out](const std::string& v) {
                    *out = v;
                    return Status::OK();
                  }};
}

void FlagParser::AddStringList(const std::string& name, std::vector<std::string>* out,
                               const std::string& help) {
  order_.push_back(name);
  flags_[name] = {true, help, [out](const std::string& v) {
                    out->push_back(v);
                    return Status::OK();
                  }};
}

void FlagParser::AddInt(const std::string& name, int64_t* out, int64_t min, int64_t max,
                        const std::string& help) {
  order_.push_back(name);
  flags_[name] = {true, help, [=, this](const std::string& v) {
                    int64_t value = 0;
                    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
                    if (ec != std::errc() || ptr != v.data() + v.size()) {
                      return Status::InvalidArgument(command_ + ": --" + name +
                                                     " expects an integer, got " + Quoted(v));
                    }
                    if (value < min || value > max) {
                      return Status::InvalidArgument(
                          command_ + ": --" + name + " must be between " + std::to_string(min) +
                          " and " + std::to_string(max) + ", got " + v);
                    }
                    *out = value;
                    return Status::OK();
                  }};
}

void FlagParser::AddDouble(const std::string& name, double* out, const std::string& help) {
  order_.push_back(name);
  flags_[name] = {true, help, [=, this](const std::string& v) {
                    char* end = nullptr;
                    double value = std::strtod(v.c_str(), &end);
                    // strtod would also skip leading spaces.
                    if (v.empty() || std::isspace(static_cast<unsigned char>(v[0])) ||
                        end != v.c_str() + v.size() || !std::isfinite(value)) {
                      return Status::InvalidArgument(command_ + ": --" + name +
                                                     " expects a number, got " + Quoted(v));
                    }
                    if (value < 0) {
                      return Status::InvalidArgument(command_ + ": --" + name +
                                                     " cannot be negative, got " + Quoted(v));
                    }
                    *out = value;
                    return Status::OK();
                  }};
}

void FlagParser::AddBool(const std::string& name, bool* out, const std::string& help) {
  order_.push_back(name);
  flags_[name] = {false, help, [out](const std::string&) {
                    *out = true;
                    return Status::OK();
                  }};
}

bool FlagParser::WasSet(const std::string& name) const { return set_.count(name) > 0; }

Status FlagParser::Parse(const std::vector<std::string>& args,
                         std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      for (size_t j = i + 1; j < args.size(); ++j) {
        if (!positional) {
          return Status::InvalidArgument(command_ + ": unexpected argument " + Quoted(args[j]));
        }
        positional->push_back(args[j]);
      }
      break;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      if (!positional) {
        return Status::InvalidArgument(command_ + ": unexpected argument " + Quoted(arg) +
                                       " (see --help)");
      }
      positional->push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_inline = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline = true;
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) {
      return Status::InvalidArgument(command_ + ": unknown flag --" + Utf8Prefix(name, 100) +
                                     " (see " + command_ + " --help)");
    }
    if (it->second.takes_value && !has_inline) {
      if (i + 1 >= args.size()) {
        return Status::InvalidArgument(command_ + ": --" + name + " needs a value");
      }
      value = args[++i];
    } else if (!it->second.takes_value && has_inline) {
      return Status::InvalidArgument(command_ + ": --" + name + " takes no value");
    }
    RAYX_RETURN_IF_ERROR(it->second.set(value));
    set_[name] = true;
  }
  return Status::OK();
}

std::string FlagParser::Usage() const {
  std::string out;
  for (const auto& name : order_) {
    const Flag& flag = flags_.at(name);
    std::string left = "  --" + name + (flag.takes_value ? " VALUE" : "");
    if (left.size() < 30) left.resize(30, ' ');
    out += left + " " + flag.help + "\n";
  }
  return out;
}

}  // namespace rayx
