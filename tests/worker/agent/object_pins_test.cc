// ObjectPins: holds on stored objects for ObjectRefs inside values, over a
// fake store (a set of paths).
#include "agent/object_pins.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace rayx::worker {
namespace {

struct FakeStore {
  std::set<std::string> files;
  std::vector<std::string> removed;
  ObjectPins::Ops ops() {
    return {[this](const std::string& p) { return files.count(p) > 0; },
            [this](const std::string& p) {
              files.erase(p);
              removed.push_back(p);
            }};
  }
};

TEST(ObjectPinsTest, TheOwnersDeleteAndEveryHoldMustGoBeforeTheFileDoes) {
  FakeStore store;
  store.files = {"/s/a"};
  ObjectPins pins(store.ops());
  ASSERT_TRUE(pins.Hold("/s/a", /*fresh=*/false).ok());  // a borrower; the owner holds too
  EXPECT_EQ(pins.count("/s/a"), 2u);
  ASSERT_TRUE(pins.Hold("/s/a", false).ok());  // another borrower
  EXPECT_TRUE(pins.Release("/s/a"));           // the owner's delete
  EXPECT_TRUE(pins.Release("/s/a"));
  EXPECT_EQ(store.files.count("/s/a"), 1u) << "one borrower still holds it";
  EXPECT_TRUE(pins.Release("/s/a"));
  EXPECT_EQ(store.files.count("/s/a"), 0u);
  EXPECT_EQ(pins.size(), 0u);
  // Unpinned now: a delete is the caller's to do, as before.
  EXPECT_FALSE(pins.Release("/s/a"));
}

TEST(ObjectPinsTest, AFreshCopyIsHeldByItsHolderOnly) {
  FakeStore store;
  store.files = {"/s/copy"};
  ObjectPins pins(store.ops());
  ASSERT_TRUE(pins.Hold("/s/copy", /*fresh=*/true).ok());
  EXPECT_EQ(pins.count("/s/copy"), 1u);
  EXPECT_TRUE(pins.Release("/s/copy"));
  EXPECT_TRUE(store.files.empty());
}

TEST(ObjectPinsTest, AHoldOnAGoneObjectIsNotFound) {
  FakeStore store;
  ObjectPins pins(store.ops());
  Status held = pins.Hold("/s/gone", false);
  EXPECT_EQ(held.code(), StatusCode::kNotFound);
  EXPECT_NE(held.message().find("/s/gone"), std::string::npos) << held.message();
  EXPECT_EQ(pins.size(), 0u);
}

TEST(ObjectPinsTest, AContainerLetsGoOfWhatItHoldsWhenItGoesAndChainsCascade) {
  FakeStore store;
  store.files = {"/s/inner", "/s/middle", "/s/outer"};
  ObjectPins pins(store.ops());
  // inner is held for a ref put inside middle; middle's for a ref inside outer.
  ASSERT_TRUE(pins.Hold("/s/inner", false).ok());
  pins.Contain("/s/middle", {"/s/inner"});
  ASSERT_TRUE(pins.Hold("/s/middle", false).ok());
  pins.Contain("/s/outer", {"/s/middle"});
  // The owners of inner and middle let go; outer's owner still holds outer.
  EXPECT_TRUE(pins.Release("/s/inner"));
  EXPECT_TRUE(pins.Release("/s/middle"));
  EXPECT_EQ(store.files.size(), 3u);
  EXPECT_TRUE(pins.Release("/s/outer"));  // outer's owner: everything goes
  EXPECT_TRUE(store.files.empty());
  EXPECT_EQ(store.removed, (std::vector<std::string>{"/s/outer", "/s/middle", "/s/inner"}));
  EXPECT_EQ(pins.size(), 0u);
}

TEST(ObjectPinsTest, ContentsOfAContainerThatIsGoneAlreadyAreLetGoAtOnce) {
  // The caller deleted the result before the worker's Contain arrived.
  FakeStore store;
  store.files = {"/s/inner"};
  ObjectPins pins(store.ops());
  ASSERT_TRUE(pins.Hold("/s/inner", false).ok());
  EXPECT_TRUE(pins.Release("/s/inner"));  // its owner
  pins.Contain("/s/result", {"/s/inner", "/s/never-held"});
  EXPECT_TRUE(store.files.empty());
  EXPECT_EQ(pins.size(), 0u);
}

TEST(ObjectPinsTest, AContainerHeldBeforeItsContentsCameKeepsItsCount) {
  FakeStore store;
  store.files = {"/s/inner", "/s/result"};
  ObjectPins pins(store.ops());
  ASSERT_TRUE(pins.Hold("/s/inner", false).ok());
  EXPECT_TRUE(pins.Release("/s/inner"));            // owner gone: held by the export only
  ASSERT_TRUE(pins.Hold("/s/result", false).ok());  // a borrower of the result, first
  pins.Contain("/s/result", {"/s/inner"});
  EXPECT_EQ(pins.count("/s/result"), 2u);
  EXPECT_TRUE(pins.Release("/s/result"));
  EXPECT_EQ(store.files.count("/s/inner"), 1u);
  EXPECT_TRUE(pins.Release("/s/result"));
  EXPECT_TRUE(store.files.empty());
}

TEST(ObjectPinsTest, TheLimitRefusesNewPinsAndCountsContents) {
  FakeStore store;
  store.files = {"/s/a", "/s/b", "/s/c"};
  ObjectPins pins(store.ops(), /*max_pins=*/2);
  ASSERT_TRUE(pins.Hold("/s/a", false).ok());
  ASSERT_TRUE(pins.Hold("/s/b", false).ok());
  Status over = pins.Hold("/s/c", false);
  EXPECT_EQ(over.code(), StatusCode::kUnavailable) << over.message();
  EXPECT_TRUE(pins.Hold("/s/a", false).ok()) << "more holds of a pinned file cost nothing";
}

TEST(ObjectPinsTest, AJobsEndForgetsItsPinsOnly) {
  FakeStore store;
  store.files = {"/s/j1-a", "/s/j2-b"};
  ObjectPins pins(store.ops());
  ASSERT_TRUE(pins.Hold("/s/j1-a", false).ok());
  ASSERT_TRUE(pins.Hold("/s/j2-b", false).ok());
  EXPECT_EQ(pins.ForgetPrefix("/s/j1-"), 1u);
  EXPECT_EQ(pins.count("/s/j1-a"), 0u);
  EXPECT_EQ(pins.count("/s/j2-b"), 2u);
}

}  // namespace
}  // namespace rayx::worker
