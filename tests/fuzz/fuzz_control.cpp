// libFuzzer target: bytes from a control-channel peer -> framed, parsed, validated, fed to the
// coordinator's barrier and the watches after the start.
// Input: byte 0 chooses the sender (bit 0) and the frame limit, byte 1 the read chunk size; the
// rest is the stream as a socket would deliver it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "control/protocol/protocol.h"

namespace {

using namespace std::chrono_literals;
using tfboot::JobMember;
using tfboot::TaskType;

void check_error(const tfboot::Error& error) {
  if (error.code != tfboot::protocol_violation || error.message.empty() || error.message.find('\n') != std::string::npos) __builtin_trap();
}

tfboot::BarrierSettings small_job() {
  tfboot::Hello own;
  own.job = "0123456789abcdef";
  own.task = JobMember{TaskType::chief, 0};
  own.instance = "00000000";
  return {"0123456789abcdef", {{TaskType::chief, 0}, {TaskType::worker, 0}, {TaskType::worker, 1}}, own, tfboot::EnvCheck::fail, 10s};
}

struct Machines {
  tfboot::StartBarrier barrier{small_job()};
  tfboot::JobMonitor monitor{JobMember{TaskType::chief, 0}, {{{TaskType::worker, 0}, true}, {{TaskType::worker, 1}, false}}, 10s,
                             tfboot::Instant{}};
  tfboot::CoordinatorWatch watch{JobMember{TaskType::chief, 0}, true, 10s, tfboot::Instant{}};
  tfboot::ConnectionId next_connection = 1;
  tfboot::Instant now{};

  // Whatever arrives, the machines stay within their invariants.
  void feed(const tfboot::Message& message) {
    now += 3s;
    if (const auto* hello = std::get_if<tfboot::Hello>(&message)) {
      auto verdict = barrier.on_hello(next_connection++, *hello, "peer", now);
      if (!verdict.accepted && verdict.reason.empty()) __builtin_trap();
    }
    auto progress = barrier.progress();
    if (progress.present < 1 || progress.present > progress.total || barrier.complete() != (progress.present == progress.total)) {
      __builtin_trap();
    }
    if (barrier.complete()) (void)barrier.decide(true);
    for (const auto& [task, _] : std::map<std::string, int>{{"worker:0", 0}, {"worker:1", 1}}) {
      auto decision = monitor.on_message(*tfboot::parse_member(task), message, now);
      if (decision.events.size() > 1) __builtin_trap();
    }
    (void)monitor.on_tick(now);
    (void)watch.on_message(message, now);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const auto sender = (data[0] & 1) ? tfboot::Sender::coordinator : tfboot::Sender::task;
  const std::size_t max_line = 16 + (data[0] >> 1) * 32;
  const std::size_t chunk = 1 + data[1];
  const std::string stream(reinterpret_cast<const char*>(data) + 2, size - 2);

  tfboot::FrameReader reader(max_line);
  Machines machines;
  for (std::size_t offset = 0; offset < stream.size(); offset += chunk) {
    auto appended = reader.append(std::string_view(stream).substr(offset, chunk));
    if (!appended) {
      check_error(appended.error());
      break;  // the connection would be closed here
    }
    while (auto line = reader.next()) {
      if (line->size() > max_line || line->find('\n') != std::string::npos) __builtin_trap();
      auto message = tfboot::parse_message(*line, sender);
      if (!message) {
        check_error(message.error());
        continue;
      }
      // What we accept, we write as one line that we accept again, unchanged.
      std::string encoded = tfboot::encode(*message);
      if (encoded.back() != '\n' || encoded.find('\n') != encoded.size() - 1) __builtin_trap();
      encoded.pop_back();
      auto again = tfboot::parse_message(encoded, sender);
      if (!again || tfboot::encode(*again) != encoded + "\n") __builtin_trap();
      machines.feed(*message);
    }
  }
  return 0;
}
