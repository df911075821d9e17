// Packing and unpacking directories with the system's tar: round trips keep
// links inside the tree; hostile archives (a gzip bomb, links out, set-id
// files) are refused before tar writes anything.
#include "common/directory_archive.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace rayx {
namespace directory_archive_test {  // this file's own (unit tests compile in batches)

namespace fs = std::filesystem;

class DirectoryArchiveTest : public ::testing::Test {
 protected:
  DirectoryArchiveTest() {
    char pattern[] = "/tmp/rayx-archive-test-XXXXXX";
    root_ = mkdtemp(pattern);
    fs::create_directories(root_ + "/src/sub");
  }
  ~DirectoryArchiveTest() override { fs::remove_all(root_); }

  // Runs a shell command in root_; asserts it worked.
  void Shell(const std::string& command) {
    std::string full = "cd '" + root_ + "' && " + command;
    ASSERT_EQ(std::system(full.c_str()), 0) << full;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string root_;
};

TEST_F(DirectoryArchiveTest, ARoundTripKeepsFilesAndLinksInsideTheTree) {
  std::ofstream(root_ + "/src/sub/data.txt") << "data";
  const std::string long_name(150, 'n');  // a GNU long-name entry
  std::ofstream(root_ + "/src/sub/" + long_name) << "long";
  fs::create_symlink("sub/data.txt", root_ + "/src/link");
  auto archive = PackDirectory(root_ + "/src", {}, 1 << 20);
  ASSERT_TRUE(archive.ok()) << archive.status();
  ASSERT_TRUE(UnpackArchive(*archive, root_ + "/out").ok());
  EXPECT_EQ(Read(root_ + "/out/sub/data.txt"), "data");
  EXPECT_EQ(Read(root_ + "/out/sub/" + long_name), "long");
  EXPECT_EQ(fs::read_symlink(root_ + "/out/link"), "sub/data.txt");
}

TEST_F(DirectoryArchiveTest, PackingRefusesWhatNodesWouldNotUnpack) {
  fs::create_symlink("/etc/hostname", root_ + "/src/out");
  auto archive = PackDirectory(root_ + "/src", {}, 1 << 20);
  ASSERT_FALSE(archive.ok());
  EXPECT_EQ(archive.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(archive.status().message().find("'./out'"), std::string::npos) << archive.status();
  EXPECT_NE(archive.status().message().find("exclude"), std::string::npos) << archive.status();
  EXPECT_TRUE(PackDirectory(root_ + "/src", {"./out"}, 1 << 20).ok());

  ASSERT_EQ(::mkfifo((root_ + "/src/fifo").c_str(), 0600), 0);
  EXPECT_NE(PackDirectory(root_ + "/src", {"./out"}, 1 << 20).status().message().find("FIFO"),
            std::string::npos);
}

// 50 MiB of zeros gzip to about 50 KB: the archive is refused as compressed,
// before tar could inflate it.
TEST_F(DirectoryArchiveTest, AGzipBombIsRefusedBeforeAnythingIsWritten) {
  Shell("head -c 52428800 /dev/zero > zeros && tar -czf bomb.tgz zeros && rm zeros");
  std::string bomb = Read(root_ + "/bomb.tgz");
  ASSERT_LT(bomb.size(), 200u * 1024);
  Status unpacked = UnpackArchive(bomb, root_ + "/out");
  EXPECT_EQ(unpacked.code(), StatusCode::kInvalidArgument) << unpacked;
  EXPECT_NE(unpacked.message().find("gzip-compressed"), std::string::npos) << unpacked;
  EXPECT_FALSE(fs::exists(root_ + "/out"));
  for (const auto& entry : fs::directory_iterator(root_)) {
    EXPECT_EQ(entry.path().filename().string().find("out.unpacking"), std::string::npos)
        << "a staging folder was left: " << entry.path();
  }
}

TEST_F(DirectoryArchiveTest, ArchivesWithLinksOutOrSetIdFilesAreRefused) {
  // Made with tar directly (PackDirectory would refuse them).
  fs::create_directories(root_ + "/evil");
  fs::create_symlink("/etc", root_ + "/evil/etc");
  Shell("tar -cf links.tar -C evil .");
  Status unpacked = UnpackArchive(Read(root_ + "/links.tar"), root_ + "/out");
  EXPECT_EQ(unpacked.code(), StatusCode::kInvalidArgument) << unpacked;
  EXPECT_NE(unpacked.message().find("absolute"), std::string::npos) << unpacked;

  fs::remove_all(root_ + "/evil");
  fs::create_directories(root_ + "/evil");
  std::ofstream(root_ + "/evil/tool") << "#!/bin/sh\n";
  ASSERT_EQ(::chmod((root_ + "/evil/tool").c_str(), 04755), 0);
  Shell("tar -cf suid.tar -C evil .");
  unpacked = UnpackArchive(Read(root_ + "/suid.tar"), root_ + "/out");
  EXPECT_NE(unpacked.message().find("set-user-id"), std::string::npos) << unpacked;
  EXPECT_FALSE(fs::exists(root_ + "/out"));
}

// Owners and permission bits come from the unpacking process, not the archive.
TEST_F(DirectoryArchiveTest, UnpackedFilesTakeTheUmaskNotTheArchivesModes) {
  std::ofstream(root_ + "/src/open") << "x";
  ASSERT_EQ(::chmod((root_ + "/src/open").c_str(), 0777), 0);
  auto archive = PackDirectory(root_ + "/src", {}, 1 << 20);
  ASSERT_TRUE(archive.ok()) << archive.status();
  mode_t old = ::umask(022);
  Status unpacked = UnpackArchive(*archive, root_ + "/out");
  ::umask(old);
  ASSERT_TRUE(unpacked.ok()) << unpacked;
  struct stat st {};
  ASSERT_EQ(::stat((root_ + "/out/open").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
}

}  // namespace
}  // namespace rayx
