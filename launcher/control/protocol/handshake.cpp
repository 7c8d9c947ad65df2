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
