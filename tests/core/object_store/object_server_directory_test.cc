// ObjectServerDirectory on a manual clock: known addresses cost nothing, an
// unknown one asks the head at most once per refresh period.
#include "object_store/object_server_directory.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/clock.h"

namespace rayx {
namespace object_server_directory_test {  // this file's own (unit tests compile in batches)

class ObjectServerDirectoryTest : public ::testing::Test {
 protected:
  ObjectServerDirectory Make(ObjectServerDirectory::Options options = {}) {
    return ObjectServerDirectory(
        [this]() -> Result<std::vector<std::string>> {
          ++asked_;
          if (!error_.ok()) return error_;
          return listed_;
        },
        clock_, options, {"tcp://10.0.0.1:1"});
  }

  ManualClock clock_;
  std::vector<std::string> listed_;
  Status error_;
  int asked_ = 0;
};

TEST_F(ObjectServerDirectoryTest, AKnownAddressIsCheckedWithoutAskingTheHead) {
  auto servers = Make();
  EXPECT_TRUE(servers.Check("tcp://10.0.0.1:1").ok());
  EXPECT_EQ(asked_, 0);
}

TEST_F(ObjectServerDirectoryTest, AnUnknownAddressAsksOncePerRefreshPeriod) {
  auto servers = Make();
  listed_ = {"tcp://10.0.0.2:1"};
  EXPECT_TRUE(servers.Check("tcp://10.0.0.2:1").ok()) << "a node that joined";
  EXPECT_EQ(asked_, 1);
  Status scan = servers.Check("tcp://192.0.2.1:22");
  EXPECT_EQ(scan.code(), StatusCode::kInvalidArgument) << scan;
  EXPECT_NE(scan.message().find("tcp://192.0.2.1:22"), std::string::npos) << scan;
  EXPECT_EQ(asked_, 1) << "asked again within the refresh period";
  for (int port = 1; port < 100; ++port) {
    EXPECT_FALSE(servers.Check("tcp://192.0.2.1:" + std::to_string(port)).ok());
  }
  EXPECT_EQ(asked_, 1) << "a scan costs the head nothing more";
  clock_.Advance(1000);
  listed_ = {"tcp://10.0.0.2:1", "tcp://10.0.0.3:1"};
  EXPECT_TRUE(servers.Check("tcp://10.0.0.3:1").ok());
  EXPECT_EQ(asked_, 2);
  EXPECT_TRUE(servers.Check("tcp://10.0.0.1:1").ok()) << "the ones given at start stay";
  EXPECT_FALSE(servers.IsKnown("tcp://192.0.2.1:22"));
  EXPECT_TRUE(servers.IsKnown("tcp://10.0.0.2:1"));
}

TEST_F(ObjectServerDirectoryTest, ANodeThatLeftIsForgottenAtTheNextFetch) {
  auto servers = Make();
  servers.Set({"tcp://10.0.0.2:1"});
  EXPECT_TRUE(servers.Check("tcp://10.0.0.2:1").ok());
  clock_.Advance(1000);
  listed_ = {"tcp://10.0.0.4:1"};
  EXPECT_TRUE(servers.Check("tcp://10.0.0.4:1").ok());
  EXPECT_FALSE(servers.IsKnown("tcp://10.0.0.2:1"));
}

TEST_F(ObjectServerDirectoryTest, AFailedFetchSaysWhy) {
  auto servers = Make();
  error_ = Status::Unavailable("the head did not answer");
  Status checked = servers.Check("tcp://10.0.0.2:1");
  EXPECT_EQ(checked.code(), StatusCode::kUnavailable);
  EXPECT_NE(checked.message().find("the head did not answer"), std::string::npos) << checked;
}

TEST_F(ObjectServerDirectoryTest, TheListIsBounded) {
  ObjectServerDirectory::Options options;
  options.max_servers = 10;
  auto servers = Make(options);
  for (int i = 0; i < 100; ++i) listed_.push_back("tcp://10.1.0." + std::to_string(i) + ":1");
  (void)servers.Check("tcp://10.1.0.0:1");
  size_t known = 0;
  for (const auto& address : listed_) known += servers.IsKnown(address) ? 1 : 0;
  EXPECT_LE(known, 10u);
}

}  // namespace
}  // namespace rayx
