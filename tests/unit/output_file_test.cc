// A command's output file (`trace -o`, `plot -o`) is written whole or not at
// all, and harms nothing else on the way: a pipe or a device is written into,
// never replaced; a link is written through; a file of the user's that
// happens to be named like a temporary one is left alone; the mode stays.
#include "core/base/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

namespace tpuemu {
namespace {

namespace fs = std::filesystem;

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("output-file-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
  }
  static void Write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }
  void WriteThrough(const fs::path& path, const std::string& text) {
    auto file = OutputFile::Open("-o", path.string());
    ASSERT_TRUE(file.ok()) << file.status();
    (*file)->stream() << text;
    ASSERT_TRUE((*file)->Commit().ok());
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

TEST_F(OutputFileTest, ANewFileIsWrittenWholeWithNothingLeftBeside) {
  WriteThrough(dir_ / "trace.json", "{}");
  EXPECT_EQ(Read(dir_ / "trace.json"), "{}");
  EXPECT_EQ(Names(), std::vector<std::string>{"trace.json"});
}

TEST_F(OutputFileTest, AnExistingFileIsReplacedKeepingItsMode) {
  Write(dir_ / "trace.json", "old");
  chmod((dir_ / "trace.json").c_str(), 0600);
  WriteThrough(dir_ / "trace.json", "new");
  EXPECT_EQ(Read(dir_ / "trace.json"), "new");
  struct stat st;
  ASSERT_EQ(stat((dir_ / "trace.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(OutputFileTest, WithoutACommitTheOldFileStaysAndNothingIsLeft) {
  Write(dir_ / "trace.json", "old");
  {
    auto file = OutputFile::Open("-o", (dir_ / "trace.json").string());
    ASSERT_TRUE(file.ok()) << file.status();
    (*file)->stream() << "half of a tr";
  }
  EXPECT_EQ(Read(dir_ / "trace.json"), "old");
  EXPECT_EQ(Names(), std::vector<std::string>{"trace.json"});
}

TEST_F(OutputFileTest, AFileNamedLikeATemporaryOneIsLeftAlone) {
  Write(dir_ / "trace.json.tmp", "the user's notes");
  WriteThrough(dir_ / "trace.json", "{}");
  EXPECT_EQ(Read(dir_ / "trace.json.tmp"), "the user's notes");
}

TEST_F(OutputFileTest, ALinkIsWrittenThroughAndStaysALink) {
  Write(dir_ / "kept.json", "old");
  fs::create_symlink("kept.json", dir_ / "link.json");
  WriteThrough(dir_ / "link.json", "new");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));
  EXPECT_EQ(Read(dir_ / "kept.json"), "new");
}

TEST_F(OutputFileTest, APipeIsWrittenIntoNotReplaced) {
  const fs::path pipe = dir_ / "pipe.json";
  ASSERT_EQ(mkfifo(pipe.c_str(), 0600), 0);
  std::string read;
  std::thread reader([&] { read = Read(pipe); });
  WriteThrough(pipe, "{\"through\": \"the pipe\"}");
  reader.join();
  EXPECT_EQ(read, "{\"through\": \"the pipe\"}");
  EXPECT_TRUE(fs::is_fifo(pipe)) << "the pipe was replaced by a file";
}

TEST_F(OutputFileTest, ADirectoryOrAMissingDirectoryIsAUsageError) {
  auto file = OutputFile::Open("-o", dir_.string());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(file.status().message().find("is a directory"), std::string::npos) << file.status();
  file = OutputFile::Open("-o", (dir_ / "no" / "trace.json").string());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(file.status().message().find("there is no directory"), std::string::npos) << file.status();
}

}  // namespace
}  // namespace tpuemu
