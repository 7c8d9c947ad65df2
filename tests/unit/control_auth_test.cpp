// The control channel's secret file, job id, nonces and HMAC proofs.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "base/digest.h"
#include "control/auth.h"
#include "test_support.h"

namespace tfboot {
namespace {

struct SecretFile {
  std::string dir;
  std::string path;
  explicit SecretFile(const std::string& content) {
    std::string pattern = "/tmp/tfboot-auth-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    path = dir + "/secret";
    std::ofstream out(path, std::ios::binary);
    out << content;
    REQUIRE(out.good());
  }
  ~SecretFile() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

bool is_lower_hex(const std::string& text) { return text.find_first_not_of("0123456789abcdef") == std::string::npos; }

}  // namespace

TEST_CASE("control_auth::read_control_secret") {
  SUBCASE("trailing newlines are removed, inner ones kept") {
    for (const std::string ending : {"", "\n", "\n\n", "\r\n"}) {
      CAPTURE(ending);
      SecretFile file("s3cr\net" + ending);
      auto secret = read_control_secret(Setting{file.path, "--control-secret-file"});
      REQUIRE_MESSAGE(secret, error_of(secret));
      CHECK(*secret == "s3cr\net");
    }
  }
  SUBCASE("an empty secret is a usage error naming the option") {
    SecretFile file("\n\n");
    auto secret = read_control_secret(Setting{file.path, "TFBOOT_CONTROL_SECRET_FILE"});
    CHECK(code_of(secret) == exit_code::usage);
    CHECK(error_of(secret) == "TFBOOT_CONTROL_SECRET_FILE: '" + file.path + "' is empty; expected a shared secret");
  }
  SUBCASE("an unreadable file is a usage error naming the option and the reason") {
    auto secret = read_control_secret(Setting{"/nonexistent/secret", "--control-secret-file"});
    CHECK(code_of(secret) == exit_code::usage);
    CHECK(error_of(secret) == "--control-secret-file: cannot read '/nonexistent/secret': No such file or directory");
  }
  SUBCASE("a directory is not a secret") {
    auto secret = read_control_secret(Setting{"/tmp", "--control-secret-file"});
    CHECK(code_of(secret) == exit_code::usage);
    CHECK(error_of(secret) == "--control-secret-file: cannot read '/tmp': Is a directory");
  }
  SUBCASE("a FIFO is refused at once, not read (it could wait for a writer for ever)") {
    SecretFile file("");
    const std::string fifo = file.dir + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto secret = read_control_secret(Setting{fifo, "--control-secret-file"});
    CHECK(code_of(secret) == exit_code::usage);
    CHECK(error_of(secret) == "--control-secret-file: '" + fifo + "' is a FIFO or socket, not a file; expected a shared secret");
  }
  SUBCASE("a file over the limit is refused without reading it all") {
    SecretFile file(std::string(max_secret_size + 1, 'x'));
    CHECK(code_of(read_control_secret(Setting{file.path, "--control-secret-file"})) == exit_code::usage);
    CHECK(error_of(read_control_secret(Setting{"/dev/zero", "--control-secret-file"})) ==
          "--control-secret-file: '/dev/zero' is over 4096 bytes; expected a shared secret");
    SecretFile largest(std::string(max_secret_size, 'x'));
    CHECK(read_control_secret(Setting{largest.path, "--control-secret-file"}).value_or("").size() == max_secret_size);
  }
}

TEST_CASE("control_auth::job_id") {
  CHECK(job_id_of_cluster(R"({"worker":["a:1"]})") == "e652207b17ccac4f");  // sha256sum's first 16 digits

  TfConfig config;
  config.job(TaskType::chief) = {"c-0:2222"};
  config.job(TaskType::worker) = {"w-0:2222", "w-1:2222"};
  config.task_type = TaskType::worker;
  config.task_index = 1;
  CHECK(job_id(config) == job_id_of_cluster(R"({"chief":["c-0:2222"],"worker":["w-0:2222","w-1:2222"]})"));

  SUBCASE("from TF_CONFIG's text, in the order tfboot writes it: the one way production makes it") {
    config.job(TaskType::ps) = {"p-0:2222"};
    CHECK(job_id_of_tf_config(to_json(config)) == job_id(config));
    // worker before ps, as written; a sorted cluster (ps first) is another text and another id.
    CHECK(job_id(config) == job_id_of_cluster(R"({"chief":["c-0:2222"],"worker":["w-0:2222","w-1:2222"],"ps":["p-0:2222"]})"));
  }
  SUBCASE("every task of a job has the same id") {
    TfConfig chief = config;
    chief.task_type = TaskType::chief;
    chief.task_index = 0;
    CHECK(job_id(chief) == job_id(config));
  }
  SUBCASE("another cluster size is another job") {
    TfConfig larger = config;
    larger.job(TaskType::worker).push_back("w-2:2222");
    CHECK(job_id(larger) != job_id(config));
  }
}

TEST_CASE("control_auth::make_nonce") {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto nonce = make_nonce();
    REQUIRE(nonce);
    CHECK(nonce->size() == 32);
    CHECK(is_lower_hex(*nonce));
    seen.insert(*nonce);
  }
  CHECK(seen.size() == 100);
}

TEST_CASE("control_auth::hmac_hex") {
  // RFC 4231's HMAC-SHA-256 results, and keys at the 64-byte block size, just over it and at the
  // largest secret (from Python's hmac module): a key longer than a block is hashed first.
  struct Row {
    std::string behaviour;
    std::string key;
    std::string text;
    std::string expected;
  };
  const Row rows[] = {
      {"RFC 4231 case 1", std::string(20, '\x0b'), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"RFC 4231 case 2", "Jefe", "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {"RFC 4231 case 6: a key over the block size", std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {"RFC 4231 case 7: key and text over the block size", std::string(131, '\xaa'),
       "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before "
       "being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
      {"a key of exactly one block is used as it is", std::string(64, 'k'), "nonce",
       "9f3a07ab3aa2e52365c990a90d9e4c2f4cbdf717f91c58bbef4d1daebd37c808"},
      {"a key one byte over the block is hashed", std::string(65, 'k'), "nonce",
       "49ff2d52ddc88f2263f9afaa8ba7d95135ed4715a6c9f23ca77d27d3b283dcec"},
      {"the largest secret", std::string(max_secret_size, 'k'), "nonce", "ebf4e3189065dde40b01c2fed09d652d7f7efacf588e23811e635079d262c17c"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.behaviour);
    CHECK(hmac_hex(row.key, row.text) == row.expected);
  }
  CHECK(hmac_hex("Jeff", "what do ya want for nothing?") != hmac_hex("Jefe", "what do ya want for nothing?"));
}

TEST_CASE("control_auth::same_proof") {
  const std::string proof = hmac_hex("k", "t");
  CHECK(same_proof(proof, proof));
  std::string changed = proof;
  changed.back() = changed.back() == '0' ? '1' : '0';
  CHECK_FALSE(same_proof(proof, changed));
  CHECK_FALSE(same_proof(proof, proof.substr(1)));
  CHECK_FALSE(same_proof(proof, ""));
  CHECK_FALSE(same_proof("", ""));  // an empty expected proof (HMAC failed) never matches
}

}  // namespace tfboot
