// The control channel's handshake, pure: HMAC proofs over both sides' nonces when the job has a
// shared secret, and the checks each side makes of the other's first messages.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "control/protocol/messages.h"

namespace tfboot {

// Proofs over both nonces; the role in the text keeps a proof from being reflected.
std::string task_proof(std::string_view secret, const Challenge& challenge, const Hello& hello);
std::string coordinator_proof(std::string_view secret, const Challenge& challenge, const Hello& hello);
// Task side, on the challenge: is this our job's coordinator, and do we agree about the secret?
Result<void> check_challenge(const Challenge& challenge, std::string_view job, bool have_secret);
// "control protocol 2 (tfboot 0.1.0 (3f2a9c1))": a peer's version as the mismatch messages name it.
std::string protocol_text(int protocol, std::string_view tfboot);
// Task side, on the challenge: does the coordinator speak our protocol? Else
// exit_code::environment_mismatch naming both sides' versions; `coordinator` says who and where.
Result<void> check_coordinator_protocol(const Challenge& challenge, const Hello& own, std::string_view coordinator);
// Coordinator side, on an accepted hello: the abort for every task when it speaks another protocol
// than `own` (the coordinator's hello); `from` says where it came from.
std::optional<Abort> protocol_mismatch(const Hello& hello, std::string_view from, const Hello& own);
// Coordinator side: the hello's proof, when a secret is set.
Result<void> check_hello_proof(const Hello& hello, const Challenge& challenge, const std::optional<std::string>& secret);
// Task side: the coordinator's proof in `accepted`, when a secret is set.
Result<void> check_accepted(const Accepted& accepted, const Challenge& challenge, const Hello& hello,
                            const std::optional<std::string>& secret);

}  // namespace tfboot
