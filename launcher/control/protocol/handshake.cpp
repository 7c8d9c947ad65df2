// The control channel's handshake: proofs and the checks of challenge, hello and accepted.
#include "control/protocol/handshake.h"

#include "base/digest.h"

namespace tfboot {

namespace {

std::string proof_text(std::string_view role, const Challenge& challenge, const Hello& hello) {
  return std::string(role) + "\n" + challenge.job + "\n" + hello.task.text() + "\n" + challenge.nonce + "\n" + hello.nonce;
}

}  // namespace

std::string task_proof(std::string_view secret, const Challenge& challenge, const Hello& hello) {
  return hmac_hex(secret, proof_text("tfboot task", challenge, hello));
}

std::string coordinator_proof(std::string_view secret, const Challenge& challenge, const Hello& hello) {
  return hmac_hex(secret, proof_text("tfboot coordinator", challenge, hello));
}

Result<void> check_challenge(const Challenge& challenge, std::string_view job, bool have_secret) {
  if (challenge.job != job) {
    return make_error(protocol_violation, "the coordinator serves job " + challenge.job + ", not ours (" + std::string(job) +
                                              "): another job, or a cluster of another size");
  }
  if (challenge.secret && !have_secret) {
    return make_error(protocol_violation, "the coordinator requires the shared secret; set --control-secret-file");
  }
  if (!challenge.secret && have_secret) {
    return make_error(protocol_violation, "the coordinator has no shared secret but we do; set --control-secret-file on every task");
  }
  return {};
}

std::string protocol_text(int protocol, std::string_view tfboot) {
  const std::string version = tfboot.empty() ? (protocol == unversioned_protocol ? "an older tfboot that does not say its version"
                                                                                 : "a tfboot that does not say its version")
                                             : "tfboot " + std::string(tfboot);
  return "control protocol " + std::to_string(protocol) + " (" + version + ")";
}

namespace {

constexpr std::string_view same_version_advice = "; run one tfboot version on every task of a job (CHANGELOG.md lists each version's protocol)";

}  // namespace

Result<void> check_coordinator_protocol(const Challenge& challenge, const Hello& own, std::string_view coordinator) {
  if (challenge.protocol == own.protocol) return {};
  return make_error(exit_code::environment_mismatch,
                    "tfboot versions differ in this job: the coordinator " + std::string(coordinator) + " speaks " +
                        protocol_text(challenge.protocol, challenge.tfboot) + ", this task " + own.task.text() + " speaks " +
                        protocol_text(own.protocol, own.tfboot) + std::string(same_version_advice));
}

std::optional<Abort> protocol_mismatch(const Hello& hello, std::string_view from, const Hello& own) {
  if (hello.protocol == own.protocol) return std::nullopt;
  return Abort{exit_code::environment_mismatch,
               "tfboot versions differ in this job: " + hello.task.text() + " (host '" + hello.host + "', " + std::string(from) +
                   ") speaks " + protocol_text(hello.protocol, hello.tfboot) + ", the coordinator " + own.task.text() + " speaks " +
                   protocol_text(own.protocol, own.tfboot) + std::string(same_version_advice)};
}

Result<void> check_hello_proof(const Hello& hello, const Challenge& challenge, const std::optional<std::string>& secret) {
  if (!secret) return {};
  if (hello.nonce.size() < 32) return make_error(protocol_violation, "no nonce in the hello although a secret is required");
  if (!same_proof(task_proof(*secret, challenge, hello), hello.proof)) {
    return make_error(protocol_violation, "wrong proof of the shared secret");
  }
  return {};
}

Result<void> check_accepted(const Accepted& accepted, const Challenge& challenge, const Hello& hello,
                            const std::optional<std::string>& secret) {
  if (!secret) return {};
  if (!same_proof(coordinator_proof(*secret, challenge, hello), accepted.proof)) {
    return make_error(protocol_violation, "the coordinator's proof of the shared secret is wrong");
  }
  return {};
}

}  // namespace tfboot
