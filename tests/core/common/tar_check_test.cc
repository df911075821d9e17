// CheckTarArchive on archives made by hand (every header field under the
// test's control) and by GNU tar: what may be unpacked, and what is refused
// with which reason.
#include "common/tar_check.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace rayx {
namespace tar_check_test {  // this file's own (unit tests compile in batches)

// Writes ustar (GNU or POSIX) headers with valid checksums.
class TarBuilder {
 public:
  explicit TarBuilder(bool posix = false) : posix_(posix) {}

  TarBuilder& File(const std::string& name, const std::string& data, unsigned mode = 0644) {
    return Entry(name, '0', data, "", mode, data.size());
  }
  TarBuilder& Dir(const std::string& name) { return Entry(name, '5', "", "", 0755, 0); }
  TarBuilder& Symlink(const std::string& name, const std::string& target) {
    return Entry(name, '2', "", target, 0777, 0);
  }
  TarBuilder& Hardlink(const std::string& name, const std::string& target) {
    return Entry(name, '1', "", target, 0644, 0);
  }
  TarBuilder& Pax(const std::string& key, const std::string& value) {
    std::string record = " " + key + "=" + value + "\n";
    size_t length = record.size() + 1;
    while (std::to_string(length).size() + record.size() != length) ++length;
    return Entry("PaxHeader", 'x', std::to_string(length) + record, "", 0644, 0, true);
  }
  // A header declaring `size` bytes of data, with `data` after it (padded).
  TarBuilder& Entry(const std::string& name, char type, const std::string& data,
                    const std::string& link, unsigned mode, uint64_t size,
                    bool size_from_data = false) {
    std::string header(512, '\0');
    std::memcpy(&header[0], name.data(), std::min<size_t>(name.size(), 100));
    Octal(&header, 100, 8, mode);
    Octal(&header, 108, 8, 0);
    Octal(&header, 116, 8, 0);
    Octal(&header, 124, 12, size_from_data ? data.size() : size);
    Octal(&header, 136, 12, 0);
    header[156] = type;
    std::memcpy(&header[157], link.data(), std::min<size_t>(link.size(), 100));
    if (posix_) {
      std::memcpy(&header[257], "ustar\0" "00", 8);
    } else {
      std::memcpy(&header[257], "ustar  \0", 8);
    }
    std::memset(&header[148], ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : header) sum += c;
    char checksum[8];
    std::snprintf(checksum, sizeof checksum, "%06o", sum);
    std::memcpy(&header[148], checksum, 7);
    out_ += header;
    out_ += data;
    out_.append((512 - data.size() % 512) % 512, '\0');
    return *this;
  }
  std::string Finish() { return out_ + std::string(1024, '\0'); }
  std::string Unterminated() const { return out_; }

 private:
  static void Octal(std::string* header, size_t offset, size_t width, uint64_t value) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%0*llo", static_cast<int>(width - 1),
                  static_cast<unsigned long long>(value));
    std::memcpy(&(*header)[offset], buf, width - 1);
  }
  bool posix_;
  std::string out_;
};

void ExpectRefused(const std::string& archive, const std::string& reason,
                   TarLimits limits = TarLimits()) {
  auto checked = CheckTarArchive(archive, limits);
  ASSERT_FALSE(checked.ok()) << "accepted; expected: " << reason;
  EXPECT_EQ(checked.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(checked.status().message().find(reason), std::string::npos) << checked.status();
}

TEST(TarCheck, APlainArchiveWithLinksInsideIsAccepted) {
  std::string archive = TarBuilder()
                            .Dir("./")
                            .Dir("./lib/")
                            .File("./lib/a.so.1", "elf")
                            .Symlink("./lib/a.so", "a.so.1")
                            .Symlink("./lib/up", "../bin/tool")
                            .Symlink("./here", ".")
                            .Dir("./bin/")
                            .File("./bin/tool", "#!/bin/sh\n", 0755)
                            .Hardlink("./bin/tool2", "./bin/tool")
                            .Finish();
  auto checked = CheckTarArchive(archive, TarLimits());
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->entries, 9u);
  EXPECT_EQ(checked->unpacked_bytes, 13u);
}

TEST(TarCheck, PosixPrefixAndPaxPathsAreReadAsTarReadsThem) {
  std::string archive = TarBuilder(/*posix=*/true)
                            .Pax("path", "long/" + std::string(150, 'n'))
                            .File("ignored", "x")
                            .Finish();
  ASSERT_TRUE(CheckTarArchive(archive, TarLimits()).ok());
  ExpectRefused(TarBuilder(true).Pax("path", "../escape").File("fine", "x").Finish(),
                "'..'");
  ExpectRefused(TarBuilder(true).Pax("linkpath", "/etc").Symlink("l", "fine").Finish(),
                "absolute");
}

TEST(TarCheck, CompressedInputIsRefusedNotDetected) {
  ExpectRefused(std::string("\x1f\x8b\x08\x00", 4) + std::string(600, 'z'), "gzip-compressed");
  ExpectRefused(std::string("\xfd" "7zXZ\0", 6) + std::string(600, 'z'), "xz-compressed");
  ExpectRefused(std::string("\x28\xb5\x2f\xfd", 4) + std::string(600, 'z'), "zstd-compressed");
  ExpectRefused("\x1f\x8b", "gzip-compressed");
  ExpectRefused(std::string(2048, 'a'), "not a tar archive");
}

TEST(TarCheck, NamesOutsideTheTargetAreRefused) {
  ExpectRefused(TarBuilder().File("/etc/cron.d/x", "x").Finish(), "absolute name or '..'");
  ExpectRefused(TarBuilder().File("a/../../x", "x").Finish(), "absolute name or '..'");
  ExpectRefused(TarBuilder().File("a", "x").File("./a", "y").Finish(), "second entry");
  ExpectRefused(TarBuilder().File(".", "x").Finish(), "names the target itself");
}

TEST(TarCheck, SymlinksThatEscapeOrAreWrittenThroughAreRefused) {
  ExpectRefused(TarBuilder().Symlink("l", "/etc").Finish(), "absolute");
  ExpectRefused(TarBuilder().Symlink("l", "..").Finish(), "points outside");
  ExpectRefused(TarBuilder().Symlink("a/b/l", "../../..").Finish(), "points outside");
  ExpectRefused(TarBuilder().Symlink("l", "a/../../x").Finish(), "'..' inside its target");
  ExpectRefused(TarBuilder().Symlink("l", "").Finish(), "empty");
  // A link made inside, then written through: the file would land where it points.
  ExpectRefused(TarBuilder().Symlink("l", "d").File("l/x", "x").Finish(), "below the symbolic link");
  ExpectRefused(TarBuilder().File("l/x", "x").Symlink("l", "d").Finish(), "over entries");
  // Leading ".." no higher than the link's directory is fine.
  EXPECT_TRUE(CheckTarArchive(TarBuilder().Symlink("a/b/l", "../../x").Finish(), TarLimits()).ok());
}

TEST(TarCheck, HardLinksOnlyToEarlierRegularFiles) {
  ExpectRefused(TarBuilder().Hardlink("h", "/etc/passwd").Finish(), "hard link");
  ExpectRefused(TarBuilder().Hardlink("h", "later").File("later", "x").Finish(), "hard link");
  ExpectRefused(TarBuilder().Symlink("s", "x").Hardlink("h", "s").Finish(), "hard link");
}

TEST(TarCheck, DevicesFifosSparseFilesAndSetIdBitsAreRefused) {
  ExpectRefused(TarBuilder().Entry("dev", '3', "", "", 0600, 0).Finish(), "character device");
  ExpectRefused(TarBuilder().Entry("dev", '4', "", "", 0600, 0).Finish(), "block device");
  ExpectRefused(TarBuilder().Entry("fifo", '6', "", "", 0600, 0).Finish(), "FIFO");
  ExpectRefused(TarBuilder().Entry("s", 'S', "", "", 0600, 0).Finish(), "sparse file");
  ExpectRefused(TarBuilder().Entry("g", 'g', "", "", 0600, 0).Finish(), "global pax");
  ExpectRefused(TarBuilder().Entry("c", '7', "", "", 0600, 0).Finish(), "type '7'");
  ExpectRefused(TarBuilder().Pax("GNU.sparse.size", "1099511627776").File("s", "").Finish(),
                "GNU.sparse.size");
  ExpectRefused(TarBuilder().File("suid", "x", 04755).Finish(), "set-user-id");
  ExpectRefused(TarBuilder().File("sgid", "x", 02755).Finish(), "set-user-id");
}

TEST(TarCheck, SizeAndCountAreBoundedBeforeAnythingIsUnpacked) {
  TarLimits limits;
  limits.max_unpacked_bytes = 1000;
  limits.max_entries = 3;
  ExpectRefused(TarBuilder().File("a", std::string(600, 'a')).File("b", std::string(600, 'b')).Finish(),
                "more than 1000 bytes", limits);
  // A header declaring a huge entry, with no data behind it.
  ExpectRefused(TarBuilder().Entry("huge", '0', "", "", 0644, uint64_t{1} << 32).Unterminated(),
                "declares 4294967296", limits);
  ExpectRefused(TarBuilder().File("a", "").File("b", "").File("c", "").File("d", "").Finish(),
                "more than 3 entries", limits);
  auto fits = CheckTarArchive(TarBuilder().File("a", std::string(1000, 'a')).Finish(), limits);
  EXPECT_TRUE(fits.ok()) << fits.status();
}

TEST(TarCheck, TruncatedOrTrailingDataAndBadChecksumsAreRefused) {
  std::string archive = TarBuilder().File("a", std::string(2000, 'a')).Finish();
  ExpectRefused(archive.substr(0, 1024), "truncated");
  ExpectRefused(archive.substr(0, 300), "ends inside a header");
  ExpectRefused(archive + "hidden" + std::string(506, '\0'), "after its end-of-archive");
  std::string bad = archive;
  bad[10] ^= 1;  // the name changes, the checksum does not
  ExpectRefused(bad, "checksum");
  EXPECT_TRUE(CheckTarArchive(TarBuilder().File("a", "x").Unterminated(), TarLimits()).ok());
  ExpectRefused(TarBuilder().Pax("path", "p").Unterminated(), "ends after");
}

}  // namespace
}  // namespace rayx
