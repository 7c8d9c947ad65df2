// The control channel's shared secret, job id and nonces (the proofs themselves are in
// base/digest.h, below the protocol). Pure apart from reading the secret file and the nonces.
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"
#include "base/choices.h"
#include "base/setting.h"
#include "plan/tf_config.h"

namespace tfboot {

// A Kubernetes Secret mounted as a file; larger files are refused as not being a secret.
inline constexpr std::size_t max_secret_size = 4096;

// The secret from --control-secret-file (or its env twin, as `path.source` says), trailing
// newlines removed. Empty, too large or unreadable: a usage error naming the option.
Result<std::string> read_control_secret(const Setting& path);

// First 16 hex characters of SHA-256 of the cluster section of TF_CONFIG, exactly as tfboot
// writes it: tasks of another job, or of the same job with another size, get another id.
std::string job_id_of_cluster(std::string_view cluster_json);
std::string job_id(const TfConfig& config);
// The same from TF_CONFIG's text as tfboot writes it (to_json): the one way a job id is made.
std::string job_id_of_tf_config(const std::string& text);

// 16 fresh random bytes as 32 hex characters; an error only when libsodium cannot start. (With no
// randomness at all, neither getrandom(2) nor /dev/urandom, libsodium aborts the process.)
Result<std::string> make_nonce();

}  // namespace tfboot
