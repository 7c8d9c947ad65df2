// Log dir and atomic file writes: exit code 4 on failure, no half-written file and no created directory left.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "base/files.h"
#include "test_support.h"

namespace tfboot {
namespace {

namespace fs = std::filesystem;

// A fresh directory under /tmp, removed with everything in it at the end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = "/tmp/tfboot-files-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

std::set<std::string> entries(const std::string& directory) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) names.insert(entry.path().filename().string());
  return names;
}

void write_plain(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  REQUIRE(out.good());
}

// The file's content, or "<cannot read>" when read_text_file gives nullopt.
std::string read_back(const std::string& path) { return read_text_file(path).value_or("<cannot read>"); }

// The temporary name the first version of tfboot used: predictable, so a link could be planted there.
std::string predictable_temporary_name(const std::string& directory, const std::string& base) {
  return directory + "/." + base + ".tmp." + std::to_string(::getpid());
}

}  // namespace

TEST_CASE("files::write_file_atomically") {
  TempDir dir;

  SUBCASE("round trip through read_text_file") {
    const std::string content = "{\"cluster\":{}}\nsecond line\n";
    auto written = write_file_atomically(dir / "tf_config.json", content);
    REQUIRE_MESSAGE(written, error_of(written));
    CHECK(read_back(dir / "tf_config.json") == std::string(content));
    CHECK(entries(dir.path) == std::set<std::string>{"tf_config.json"});
    CHECK((fs::status(dir / "tf_config.json").permissions() & fs::perms::all) ==
          (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read));
  }
  SUBCASE("binary content and an empty file survive unchanged") {
    const std::string binary("a\0b\xff\n", 5);
    REQUIRE(write_file_atomically(dir / "binary", binary));
    CHECK(read_back(dir / "binary") == std::string(binary));
    REQUIRE(write_file_atomically(dir / "empty", ""));
    CHECK(read_back(dir / "empty") == std::string(""));
    CHECK(entries(dir.path) == std::set<std::string>{"binary", "empty"});
  }
  SUBCASE("a large file is written whole") {
    const std::string big(3 * 1024 * 1024 + 7, 'x');
    REQUIRE(write_file_atomically(dir / "big", big));
    CHECK(fs::file_size(dir / "big") == big.size());
    CHECK(read_back(dir / "big") == std::string(big));
  }
  SUBCASE("overwriting replaces the whole content, also with a shorter one") {
    REQUIRE(write_file_atomically(dir / "startup.json", "a long first version of the file\n"));
    REQUIRE(write_file_atomically(dir / "startup.json", "short\n"));
    CHECK(read_back(dir / "startup.json") == std::string("short\n"));
    CHECK(entries(dir.path) == std::set<std::string>{"startup.json"});
  }
  SUBCASE("overwriting replaces the file rather than writing into it (a reader's open copy stays whole)") {
    REQUIRE(write_file_atomically(dir / "startup.json", "old\n"));
    std::ifstream reader(dir / "startup.json");
    REQUIRE(write_file_atomically(dir / "startup.json", "new\n"));
    std::string seen;
    std::getline(reader, seen);
    CHECK(seen == "old");
    CHECK(read_back(dir / "startup.json") == std::string("new\n"));
  }
  SUBCASE("a link planted at a predictable temporary name is neither followed nor touched") {
    write_plain(dir / "victim", "precious");
    fs::create_symlink(dir / "victim", predictable_temporary_name(dir.path, "tf_config.json"));
    REQUIRE(write_file_atomically(dir / "tf_config.json", "fresh\n"));
    CHECK(read_back(dir / "tf_config.json") == std::string("fresh\n"));
    CHECK(read_back(dir / "victim") == std::string("precious"));
    CHECK(fs::is_symlink(predictable_temporary_name(dir.path, "tf_config.json")));
    CHECK(entries(dir.path).size() == 3);
  }
  SUBCASE("a path without a directory is written in the current directory") {
    const fs::path previous = fs::current_path();
    fs::current_path(dir.path);
    auto written = write_file_atomically("relative.json", "x");
    fs::current_path(previous);
    REQUIRE_MESSAGE(written, error_of(written));
    CHECK(read_back(dir / "relative.json") == std::string("x"));
    CHECK(entries(dir.path) == std::set<std::string>{"relative.json"});
  }
  SUBCASE("target is a directory: exit code 4, no temporary file left, directory untouched") {
    fs::create_directory(dir / "startup.json");
    auto written = write_file_atomically(dir / "startup.json", "content");
    CHECK(code_of(written) == 4);
    CHECK(error_of(written) == "cannot rename to '" + (dir / "startup.json") + "': Is a directory");
    CHECK(entries(dir.path) == std::set<std::string>{"startup.json"});
    CHECK(fs::is_directory(dir / "startup.json"));
  }
  SUBCASE("parent is a regular file (ENOTDIR): exit code 4, nothing created") {
    write_plain(dir / "file", "I am a file");
    auto written = write_file_atomically(dir / "file/tf_config.json", "content");
    CHECK(code_of(written) == 4);
    CHECK(error_of(written) == "cannot write '" + (dir / "file/tf_config.json") + "': Not a directory");
    CHECK(entries(dir.path) == std::set<std::string>{"file"});
    CHECK(read_back(dir / "file") == std::string("I am a file"));
  }
  SUBCASE("missing directory: exit code 4") {
    auto written = write_file_atomically(dir / "missing/tf_config.json", "content");
    CHECK(code_of(written) == 4);
    CHECK(error_of(written) ==
          "cannot write '" + (dir / "missing/tf_config.json") + "': No such file or directory");
    CHECK(entries(dir.path).empty());
  }
  SUBCASE("a directory nobody can create files in (/proc): exit code 4") {
    auto written = write_file_atomically("/proc/tfboot-files-test.json", "content");
    CHECK(code_of(written) == 4);
    CHECK(error_of(written).starts_with("cannot write '/proc/tfboot-files-test.json': "));
    CHECK_FALSE(fs::exists("/proc/tfboot-files-test.json"));
  }
  SUBCASE("a write that fails halfway (file size limit): exit code 4, no temporary file, old content kept") {
    REQUIRE(write_file_atomically(dir / "startup.json", "old content\n"));
    struct rlimit saved {};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // the write then fails with EFBIG instead of killing us
    struct rlimit small = saved;
    small.rlim_cur = 16;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    auto written = write_file_atomically(dir / "startup.json", std::string(100, 'n'));
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    CHECK(code_of(written) == 4);
    CHECK(error_of(written) == "cannot write '" + (dir / "startup.json") + "': File too large");
    CHECK(entries(dir.path) == std::set<std::string>{"startup.json"});
    CHECK(read_back(dir / "startup.json") == std::string("old content\n"));
  }
}

TEST_CASE("files::read_text_file") {
  TempDir dir;
  SUBCASE("a missing file cannot be read") { CHECK(read_back(dir / "missing") == "<cannot read>"); }
  SUBCASE("a file under a regular file cannot be read") {
    write_plain(dir / "file", "x");
    CHECK(read_back(dir / "file/child") == "<cannot read>");
  }
  SUBCASE("a directory cannot be read as a file") { CHECK(read_back(dir.path) == "<cannot read>"); }
  SUBCASE("an empty file is an empty string") {
    write_plain(dir / "empty", "");
    CHECK(read_back(dir / "empty") == std::string(""));
  }
}

TEST_CASE("files::make_directories") {
  TempDir dir;

  SUBCASE("creates every missing parent") {
    auto made = make_directories(dir / "logs/run-1/worker_3");
    REQUIRE_MESSAGE(made, error_of(made));
    CHECK(fs::is_directory(dir / "logs/run-1/worker_3"));
    CHECK(entries(dir / "logs") == std::set<std::string>{"run-1"});
  }
  SUBCASE("is idempotent and keeps what is inside") {
    REQUIRE(make_directories(dir / "logs/worker_0"));
    write_plain(dir / "logs/worker_0/startup.json", "{}");
    auto again = make_directories(dir / "logs/worker_0");
    CHECK(code_of(again) == 0);
    CHECK(read_back(dir / "logs/worker_0/startup.json") == std::string("{}"));
    CHECK(make_directories(dir.path));
    CHECK(make_directories("/"));
  }
  SUBCASE("tolerates a trailing slash and doubled slashes") {
    CHECK(make_directories(dir / "a//b/"));
    CHECK(fs::is_directory(dir / "a/b"));
  }
  SUBCASE("relative paths, as for `tfboot local`'s ./logs") {
    const fs::path previous = fs::current_path();
    fs::current_path(dir.path);
    auto dotted = make_directories("./logs/worker_0");
    auto plain = make_directories("other/chief_0");
    fs::current_path(previous);
    CHECK(code_of(dotted) == 0);
    CHECK(code_of(plain) == 0);
    CHECK(fs::is_directory(dir / "logs/worker_0"));
    CHECK(fs::is_directory(dir / "other/chief_0"));
  }
  SUBCASE("under a regular file: exit code 4 naming the path") {
    write_plain(dir / "file", "x");
    auto made = make_directories(dir / "file/worker_0");
    CHECK(code_of(made) == 4);
    CHECK(error_of(made) == "cannot create directory '" + (dir / "file/worker_0") + "': Not a directory");
    auto deeper = make_directories(dir / "file/a/b");
    CHECK(code_of(deeper) == 4);
    CHECK(error_of(deeper) == "cannot create directory '" + (dir / "file/a") + "': Not a directory");
  }
  SUBCASE("the path itself is a regular file: exit code 4") {
    write_plain(dir / "worker_0", "x");
    auto made = make_directories(dir / "worker_0");
    CHECK(code_of(made) == 4);
    CHECK(error_of(made) == "cannot use as a directory '" + (dir / "worker_0") + "': Not a directory");
  }
  SUBCASE("under /proc: exit code 4") {
    auto made = make_directories("/proc/tfboot-files-test/worker_0");
    CHECK(code_of(made) == 4);
    CHECK(error_of(made).starts_with("cannot create directory '/proc/tfboot-files-test': "));
  }
  SUBCASE("an empty path: exit code 4") {
    auto made = make_directories("");
    CHECK(code_of(made) == 4);
    CHECK(error_of(made) == "cannot create an empty log directory path");
  }
}

TEST_CASE("files::write_files_atomically") {
  TempDir dir;
  SUBCASE("all files appear together") {
    REQUIRE(write_files_atomically({{dir / "tf_config.json", "a\n"}, {dir / "startup.json", "b\n"}}));
    CHECK(read_back(dir / "tf_config.json") == std::string("a\n"));
    CHECK(read_back(dir / "startup.json") == std::string("b\n"));
    CHECK(entries(dir.path) == std::set<std::string>{"startup.json", "tf_config.json"});
  }
  SUBCASE("the second one failing (full disk) leaves neither new file nor a temporary, old ones kept") {
    REQUIRE(write_files_atomically({{dir / "tf_config.json", "old\n"}, {dir / "startup.json", "old\n"}}));
    struct rlimit saved {};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = saved;
    small.rlim_cur = 16;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    auto written = write_files_atomically({{dir / "tf_config.json", "new\n"}, {dir / "startup.json", std::string(100, 'n')}});
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    CHECK(code_of(written) == 4);
    CHECK(read_back(dir / "tf_config.json") == std::string("old\n"));
    CHECK(read_back(dir / "startup.json") == std::string("old\n"));
    CHECK(entries(dir.path) == std::set<std::string>{"startup.json", "tf_config.json"});
  }
}

TEST_CASE("files::read_text_file limits") {
  TempDir dir;
  SUBCASE("a file over the limit is not read") {
    write_plain(dir / "big", std::string(100, 'x'));
    CHECK(read_text_file(dir / "big", 99) == std::nullopt);
    CHECK(read_text_file(dir / "big", 100) == std::string(100, 'x'));
  }
  SUBCASE("a FIFO is refused at once instead of blocking") {
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    CHECK(read_text_file(dir / "fifo") == std::nullopt);
  }
}

TEST_CASE("files::make_directories rollback") {
  TempDir dir;
  auto made = make_directories(dir / "a/b/c");
  REQUIRE(made);
  CHECK(*made == std::vector<std::string>{dir / "a", dir / "a/b", dir / "a/b/c"});
  write_plain(dir / "a/keep", "x");
  remove_created_directories(*made);
  CHECK(entries(dir / "a") == std::set<std::string>{"keep"});  // not empty: kept, with what is inside
  SUBCASE("a failure halfway (a name too long) removes what it created") {
    auto failed = make_directories(dir / ("new/deeper/" + std::string(300, 'n') + "/worker_0"));
    CHECK(code_of(failed) == 4);
    CHECK_FALSE(fs::exists(dir / "new"));
  }
}

}  // namespace tfboot
