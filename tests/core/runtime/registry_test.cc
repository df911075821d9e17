// The remote function registry: RAYX_REMOTE name splitting, lookup by name and
// by pointer, and invoking with msgpack-encoded arguments.
#include "rayx/detail/registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace registry_test {

int Plus(int a, int b) { return a + b; }
std::string Greet(const std::string& name) { return "hello " + name; }
std::vector<int> Twice(std::vector<int> values) {
  for (int& v : values) v *= 2;
  return values;
}
int last_touched = 0;
void Touch(int value) { last_touched = value; }
int Answer() { return 42; }

template <typename A, typename B>
double Sum(A a, B b) {
  return static_cast<double>(a) + static_cast<double>(b);
}

int live_counters = 0;

class Tally {
 public:
  explicit Tally(int start) : value_(start) { ++live_counters; }
  ~Tally() { --live_counters; }
  static Tally* Create(int start) { return new Tally(start); }
  int Add(int by) { return value_ += by; }
  int Get() const { return value_; }
  void Reset() { value_ = 0; }
  std::string Describe(const std::string& prefix) const {
    return prefix + std::to_string(value_);
  }

 private:
  int value_;
};

RAYX_REMOTE(Plus, Greet,
            Twice, Touch);
RAYX_REMOTE(Answer, Sum<int, long>);

// A user type whose decoding recurses once per level of its value.
struct Tree {
  int value = 0;
  std::vector<Tree> children;
  MSGPACK_DEFINE(value, children)
};
int TreeDepth(const Tree& t) {
  int deepest = 0;
  for (const auto& c : t.children) deepest = std::max(deepest, TreeDepth(c));
  return deepest + 1;
}
RAYX_REMOTE(TreeDepth);
RAYX_REMOTE(Tally::Create, &Tally::Add, &Tally::Get, &Tally::Reset,
            &Tally::Describe);

}  // namespace registry_test

namespace rayx::detail {
namespace registry_unit {  // this file's own (unit tests compile in batches)

using registry_test::Tally;

// Encoded arguments and views of them, as a worker holds them.
class Args {
 public:
  template <typename... Ts>
  explicit Args(const Ts&... values) : bytes_{Pack(values)...} {}
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;
  // Valid while this Args lives.
  ArgViews views() const { return ArgViews(bytes_.begin(), bytes_.end()); }

 private:
  std::vector<std::string> bytes_;
};

const RemoteFunction& Find(const std::string& name) {
  const RemoteFunction* fn = FunctionRegistry::Instance().FindByName(name);
  if (fn == nullptr) throw std::runtime_error("not registered: " + name);
  return *fn;
}

// ---- SplitNames -------------------------------------------------------------------------

TEST(SplitNamesTest, DropsSpacesAndAmpersands) {
  EXPECT_EQ(SplitNames("a, &B::c ,D::e"), (std::vector<std::string>{"a", "B::c", "D::e"}));
  EXPECT_EQ(SplitNames("Plus"), std::vector<std::string>{"Plus"});
  EXPECT_EQ(SplitNames("  & Tally :: Add  "), std::vector<std::string>{"Tally::Add"});
}

TEST(SplitNamesTest, DropsNewlinesAndTabsOfMultiLineMacros) {
  EXPECT_EQ(SplitNames("Plus,\n            Tally::Create,\n\t&Tally::Add"),
            (std::vector<std::string>{"Plus", "Tally::Create", "Tally::Add"}));
}

TEST(SplitNamesTest, CommasInsideTemplateBracketsDoNotSplit) {
  EXPECT_EQ(SplitNames("Sum<int, long>, Plus"),
            (std::vector<std::string>{"Sum<int,long>", "Plus"}));
  EXPECT_EQ(SplitNames("Get<std::map<int, int>, Foo<a, b>>, &C<x, y>::M"),
            (std::vector<std::string>{"Get<std::map<int,int>,Foo<a,b>>", "C<x,y>::M"}));
}

TEST(SplitNamesTest, CommasInsideParenthesesDoNotSplit) {
  EXPECT_EQ(SplitNames("static_cast<int (*)(int, int)>(&Plus), Greet"),
            (std::vector<std::string>{"static_cast<int(*)(int,int)>(Plus)", "Greet"}));
  EXPECT_EQ(SplitNames("(Pick)(a, b), decltype(F(x, y))::G, H"),
            (std::vector<std::string>{"(Pick)(a,b)", "decltype(F(x,y))::G", "H"}));
}

TEST(SplitNamesTest, RegisteredNamesAreTheSplitNames) {
  // The macro above spans two lines and has a template with a comma.
  EXPECT_NE(FunctionRegistry::Instance().FindByName("Twice"), nullptr);
  EXPECT_NE(FunctionRegistry::Instance().FindByName("Touch"), nullptr);
  EXPECT_NE(FunctionRegistry::Instance().FindByName("Sum<int,long>"), nullptr);
  EXPECT_NE(FunctionRegistry::Instance().FindByName("Tally::Describe"), nullptr);
  EXPECT_EQ(FunctionRegistry::Instance().FindByName("&Tally::Add"), nullptr);
  EXPECT_EQ(FunctionRegistry::Instance().FindByName(" Greet"), nullptr);
}

// ---- Lookup -----------------------------------------------------------------------------

TEST(FunctionRegistryTest, FreeFunctionIsFoundByNameAndByPointer) {
  const RemoteFunction* by_name = FunctionRegistry::Instance().FindByName("Plus");
  const RemoteFunction* by_key = FunctionRegistry::Instance().FindByKey(
      PointerKey(&registry_test::Plus));
  ASSERT_NE(by_name, nullptr);
  EXPECT_EQ(by_name, by_key);
  EXPECT_EQ(by_name->name, "Plus");
  EXPECT_EQ(by_name->arity, 2u);
  EXPECT_TRUE(static_cast<bool>(by_name->invoke));
  EXPECT_FALSE(static_cast<bool>(by_name->create));
}

TEST(FunctionRegistryTest, FunctionsAndMethodsHaveDistinctKeys) {
  auto& registry = FunctionRegistry::Instance();
  const RemoteFunction* plus = registry.FindByKey(PointerKey(&registry_test::Plus));
  const RemoteFunction* greet = registry.FindByKey(PointerKey(&registry_test::Greet));
  const RemoteFunction* add = registry.FindByKey(PointerKey(&Tally::Add));
  const RemoteFunction* get = registry.FindByKey(PointerKey(&Tally::Get));
  ASSERT_NE(plus, nullptr);
  ASSERT_NE(greet, nullptr);
  ASSERT_NE(add, nullptr);
  ASSERT_NE(get, nullptr);
  EXPECT_EQ(greet->name, "Greet");
  EXPECT_EQ(add->name, "Tally::Add");
  EXPECT_EQ(get->name, "Tally::Get");
  EXPECT_NE(add, get);
}

TEST(FunctionRegistryTest, UnknownNameOrPointerIsNull) {
  auto& registry = FunctionRegistry::Instance();
  EXPECT_EQ(registry.FindByName("NoSuchFunction"), nullptr);
  EXPECT_EQ(registry.FindByName(""), nullptr);
  int (*unregistered)(int, int) = [](int a, int b) { return a * b; };
  EXPECT_EQ(registry.FindByKey(PointerKey(unregistered)), nullptr);
  EXPECT_EQ(registry.FindByKey(""), nullptr);
}

TEST(FunctionRegistryTest, FactoryCreatesAnInstanceAndCannotBeInvoked) {
  const RemoteFunction& factory = Find("Tally::Create");
  EXPECT_EQ(FunctionRegistry::Instance().FindByKey(PointerKey(&Tally::Create)), &factory);
  EXPECT_EQ(factory.arity, 1u);
  EXPECT_FALSE(static_cast<bool>(factory.invoke));
  ASSERT_TRUE(static_cast<bool>(factory.create));

  int before = registry_test::live_counters;
  {
    std::shared_ptr<void> instance = factory.create(Args(10).views());
    ASSERT_NE(instance, nullptr);
    EXPECT_EQ(registry_test::live_counters, before + 1);
    EXPECT_EQ(static_cast<Tally*>(instance.get())->Get(), 10);
  }
  // The instance is owned: releasing it destroys the object.
  EXPECT_EQ(registry_test::live_counters, before);
}

TEST(FunctionRegistryTest, FactoryWithWrongArgumentCountThrowsNamingIt) {
  const RemoteFunction& factory = Find("Tally::Create");
  int before = registry_test::live_counters;
  try {
    factory.create(Args().views());
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Tally::Create"), std::string::npos) << e.what();
  }
  EXPECT_EQ(registry_test::live_counters, before);
}

// ---- Invoking ---------------------------------------------------------------------------

TEST(FunctionRegistryTest, InvokeDecodesArgumentsAndEncodesTheResult) {
  std::string out = Find("Plus").invoke(nullptr, Args(2, 40).views());
  EXPECT_EQ(Unpack<int>(out), 42);
  out = Find("Greet").invoke(nullptr, Args(std::string("rayx")).views());
  EXPECT_EQ(Unpack<std::string>(out), "hello rayx");
  out = Find("Twice").invoke(nullptr, Args(std::vector<int>{1, 2, 3}).views());
  EXPECT_EQ(Unpack<std::vector<int>>(out), (std::vector<int>{2, 4, 6}));
  out = Find("Answer").invoke(nullptr, Args().views());
  EXPECT_EQ(Unpack<int>(out), 42);
  out = Find("Sum<int,long>").invoke(nullptr, Args(1, 2L).views());
  EXPECT_DOUBLE_EQ(Unpack<double>(out), 3.0);
}

TEST(FunctionRegistryTest, VoidFunctionRunsAndReturnsPackedNil) {
  registry_test::last_touched = 0;
  std::string out = Find("Touch").invoke(nullptr, Args(7).views());
  EXPECT_EQ(registry_test::last_touched, 7);
  EXPECT_EQ(out, Pack(msgpack::type::nil_t()));
  msgpack::object_handle handle = msgpack::unpack(out.data(), out.size());
  EXPECT_EQ(handle.get().type, msgpack::type::NIL);
}

TEST(FunctionRegistryTest, WrongArgumentCountThrowsInvalidArgumentNamingTheFunction) {
  const RemoteFunction& plus = Find("Plus");
  auto expect_refused = [&](const Args& args, const std::string& got) {
    try {
      plus.invoke(nullptr, args.views());
      ADD_FAILURE() << "expected std::invalid_argument for " << got << " args";
    } catch (const std::invalid_argument& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("Plus"), std::string::npos) << what;
      EXPECT_NE(what.find("takes 2 arguments, got " + got), std::string::npos) << what;
    }
  };
  expect_refused(Args(1), "1");
  expect_refused(Args(1, 2, 3), "3");
  expect_refused(Args(), "0");
}

TEST(FunctionRegistryTest, WronglyTypedArgumentThrowsTypeError) {
  EXPECT_THROW(Find("Plus").invoke(nullptr, Args(std::string("two"), 2).views()),
               msgpack::type_error);
  EXPECT_THROW(Find("Greet").invoke(nullptr, Args(5).views()), msgpack::type_error);
  registry_test::last_touched = -1;
  EXPECT_THROW(Find("Touch").invoke(nullptr, Args(std::vector<int>{1}).views()),
               msgpack::type_error);
  EXPECT_EQ(registry_test::last_touched, -1);  // not called
}

TEST(FunctionRegistryTest, MethodsRunOnTheGivenInstance) {
  Tally counter(5);
  const RemoteFunction& add = Find("Tally::Add");
  EXPECT_EQ(add.arity, 1u);
  EXPECT_FALSE(static_cast<bool>(add.create));
  EXPECT_EQ(Unpack<int>(add.invoke(&counter, Args(3).views())), 8);
  EXPECT_EQ(Unpack<int>(add.invoke(&counter, Args(2).views())), 10);
  EXPECT_EQ(counter.Get(), 10);

  const RemoteFunction& get = Find("Tally::Get");  // const method
  EXPECT_EQ(get.arity, 0u);
  EXPECT_EQ(Unpack<int>(get.invoke(&counter, Args().views())), 10);

  const RemoteFunction& describe = Find("Tally::Describe");  // const, with an argument
  EXPECT_EQ(Unpack<std::string>(describe.invoke(&counter, Args(std::string("n=")).views())),
            "n=10");

  const RemoteFunction& reset = Find("Tally::Reset");  // void method
  EXPECT_EQ(reset.invoke(&counter, Args().views()), Pack(msgpack::type::nil_t()));
  EXPECT_EQ(counter.Get(), 0);
}

TEST(FunctionRegistryTest, MethodsFoundByPointerRunOnAFactoryInstance) {
  std::shared_ptr<void> instance =
      FunctionRegistry::Instance().FindByKey(PointerKey(&Tally::Create))->create(Args(1).views());
  const RemoteFunction* add = FunctionRegistry::Instance().FindByKey(PointerKey(&Tally::Add));
  const RemoteFunction* get = FunctionRegistry::Instance().FindByKey(PointerKey(&Tally::Get));
  ASSERT_NE(add, nullptr);
  ASSERT_NE(get, nullptr);
  add->invoke(instance.get(), Args(41).views());
  EXPECT_EQ(Unpack<int>(get->invoke(instance.get(), Args().views())), 42);
}

TEST(FunctionRegistryTest, MethodWithWrongArgumentsThrows) {
  Tally counter(1);
  try {
    Find("Tally::Add").invoke(&counter, Args(1, 2).views());
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Tally::Add"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Find("Tally::Describe").invoke(&counter, Args(3).views()), msgpack::type_error);
  EXPECT_EQ(counter.Get(), 1);
}

TEST(FunctionRegistryTest, PackAndUnpackRoundTrip) {
  EXPECT_EQ(Unpack<int>(Pack(-7)), -7);
  EXPECT_EQ(Unpack<std::string>(Pack(std::string("a\0b", 3))), std::string("a\0b", 3));
  EXPECT_EQ(Unpack<std::vector<std::string>>(Pack(std::vector<std::string>{"x", "y"})),
            (std::vector<std::string>{"x", "y"}));
}

// ---- Hostile argument bytes ---------------------------------------------------------------

// Calls `fn` with raw argument bytes; returns what it threw, or "" when it did not.
template <typename Exception>
std::string Thrown(const std::string& fn, const std::vector<std::string>& raw) {
  ArgViews views(raw.begin(), raw.end());
  try {
    Find(fn).invoke(nullptr, views);
  } catch (const Exception& e) {
    return e.what();
  }
  return "";
}

// `depth` one-element arrays around a nil.
std::string Nested(size_t depth) {
  return std::string(depth, static_cast<char>(0x91)) + static_cast<char>(0xc0);
}

// A Tree `levels` deep, as Pack writes it: [value, [children...]] per level,
// two arrays per level.
std::string TreeBytes(size_t levels) {
  std::string out;
  for (size_t i = 1; i < levels; ++i) out += std::string("\x92\x01\x91", 3);
  return out + Pack(registry_test::Tree{});
}

TEST(ArgumentBoundsTest, AMillionNestedArraysFailCleanlyNamingFunctionAndArgument) {
  // The 1 MB argument that killed a worker: now refused at the depth bound.
  std::string what = Thrown<std::invalid_argument>("Twice", {Nested(1'000'000)});
  EXPECT_NE(what.find("argument 0 of Twice"), std::string::npos) << what;
  EXPECT_NE(what.find("nested deeper than 128"), std::string::npos) << what;
}

TEST(ArgumentBoundsTest, RecursiveUserTypesDecodeUpToTheDepthBoundAndFailPastIt) {
  ArgViews args;
  std::string at_limit = TreeBytes(kMaxValueDepth / 2);  // 128 arrays deep
  args = {at_limit};
  EXPECT_EQ(Unpack<int>(Find("TreeDepth").invoke(nullptr, args)),
            static_cast<int>(kMaxValueDepth / 2));
  std::string what =
      Thrown<std::invalid_argument>("TreeDepth", {TreeBytes(kMaxValueDepth / 2 + 1)});
  EXPECT_NE(what.find("argument 0 of TreeDepth"), std::string::npos) << what;
  EXPECT_NE(what.find("nested deeper"), std::string::npos) << what;
}

// With plain msgpack::unpack, this 300 kB Tree nested 100,000 levels
// overflowed the stack while converting, one frame per level (run through
// fuzz_call_args' harness under AddressSanitizer).
TEST(ArgumentBoundsTest, ARecursiveTypeNestedAHundredThousandLevelsFailsCleanly) {
  std::string what = Thrown<std::invalid_argument>("TreeDepth", {TreeBytes(100'000)});
  EXPECT_NE(what.find("argument 0 of TreeDepth"), std::string::npos) << what;
  EXPECT_NE(what.find("nested deeper than 128"), std::string::npos) << what;
}

TEST(ArgumentBoundsTest, HugeDeclaredCountsWithFewBytesAreRefused) {
  // An array32 header declaring 2^31 - 1 ints, followed by one.
  std::string what =
      Thrown<std::invalid_argument>("Twice", {std::string("\xdd\x7f\xff\xff\xff\x01", 6)});
  EXPECT_NE(what.find("argument 0 of Twice"), std::string::npos) << what;
  EXPECT_NE(what.find("more than its bytes can hold"), std::string::npos) << what;
  // A str header declaring 4 GiB.
  what = Thrown<std::invalid_argument>("Greet", {std::string("\xdb\xff\xff\xff\xff" "ab", 7)});
  EXPECT_NE(what.find("argument 0 of Greet"), std::string::npos) << what;
  EXPECT_NE(what.find("truncated"), std::string::npos) << what;
}

TEST(ArgumentBoundsTest, TruncatedEmptyAndTrailingBytesAreRefusedNamingTheArgument) {
  std::string two = Pack(2);
  std::string hello = Pack(std::string("hello"));
  EXPECT_NE(Thrown<std::invalid_argument>("Plus", {two, hello.substr(0, 3)})
                .find("argument 1 of Plus is not a msgpack value rayx accepts: truncated"),
            std::string::npos);
  EXPECT_NE(Thrown<std::invalid_argument>("Plus", {"", two}).find("argument 0 of Plus"),
            std::string::npos);
  EXPECT_NE(Thrown<std::invalid_argument>("Plus", {two, two + "x"})
                .find("1 unexpected byte after the msgpack value"),
            std::string::npos);
}

TEST(ArgumentBoundsTest, AWrongTypeNamesFunctionArgumentAndType) {
  std::string what = Thrown<ArgumentTypeError>("Plus", {Pack(1), Pack(std::string("two"))});
  EXPECT_EQ(what, "argument 1 of Plus does not convert to int");
  what = Thrown<msgpack::type_error>("Greet", {Pack(5)});
  EXPECT_EQ(what, "argument 0 of Greet does not convert to std::string");
}

TEST(ArgumentBoundsTest, UnpackOfAResultIsBoundedToo) {
  EXPECT_THROW(Unpack<std::vector<int>>(Nested(kMaxValueDepth + 1)), UnpackError);
  EXPECT_THROW(Unpack<int>(Pack(1) + "x"), UnpackError);
  EXPECT_THROW(Unpack<int>(""), UnpackError);
}

// ---- DescribePointer --------------------------------------------------------------------

TEST(DescribePointerTest, NullMeansAMemberFunction) {
  EXPECT_NE(DescribePointer(nullptr).find("member function"), std::string::npos)
      << DescribePointer(nullptr);
}

TEST(DescribePointerTest, RealFunctionGetsANameOrAnAddress) {
  std::string own = DescribePointer(reinterpret_cast<const void*>(&registry_test::Plus));
  ASSERT_FALSE(own.empty());
  // Quoted symbol name when the symbol table has it, else "at 0x...".
  EXPECT_TRUE(own.front() == '\'' || own.rfind("at 0x", 0) == 0) << own;
  if (own.front() == '\'') {
    EXPECT_NE(own.find("Plus"), std::string::npos) << own;
  }

  // A function of a shared library always has a dynamic symbol.
  std::string libc = DescribePointer(reinterpret_cast<const void*>(&::getppid));
  EXPECT_NE(libc.find("getppid"), std::string::npos) << libc;
}

// ---- Known production bug ---------------------------------------------------------------

struct VirtualA {
  virtual ~VirtualA() = default;
  virtual int Which() const { return 1; }
};
struct VirtualB {
  virtual ~VirtualB() = default;
  virtual int Other() const { return 2; }
};

// Production bug (core/include/rayx/detail/registry.h:46, PointerKey): the key of
// a virtual member function pointer is its vtable offset (Itanium ABI), the same
// bytes for the same slot of any class. Registering VirtualB::Other replaces
// VirtualA::Which, so a caller asking for &VirtualA::Which sends "VirtualB::Other"
// and a worker would run B's method on an A.
TEST(FunctionRegistryTest, VirtualMethodsOfDifferentClassesHaveDistinctEntries) {
  RegisterRemote("VirtualA::Which, &VirtualB::Other", &VirtualA::Which, &VirtualB::Other);
  EXPECT_NE(PointerKey(&VirtualA::Which), PointerKey(&VirtualB::Other));
  const RemoteFunction* which = FunctionRegistry::Instance().FindByName("VirtualA::Which");
  ASSERT_NE(which, nullptr);
  EXPECT_EQ(which->name, "VirtualA::Which");
  const RemoteFunction* by_key = FunctionRegistry::Instance().FindByKey(PointerKey(&VirtualA::Which));
  ASSERT_NE(by_key, nullptr);
  EXPECT_EQ(by_key->name, "VirtualA::Which");
}

}  // namespace
}  // namespace rayx::detail
