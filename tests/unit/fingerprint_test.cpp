// The environment fingerprint: read from a fake file tree, compared across tasks, sent as JSON.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "fingerprint/fingerprint.h"

namespace tfboot {
namespace {

namespace fs = std::filesystem;

// A fake image under a fresh directory in /tmp, removed at the end of the test.
struct FakeTree {
  std::string root;
  FakeTree() {
    std::string pattern = "/tmp/tfboot-fingerprint-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    root = pattern;
  }
  ~FakeTree() {
    std::error_code ignored;
    fs::remove_all(root, ignored);
  }
  void file(const std::string& path, const std::string& content = "") const {
    fs::create_directories(fs::path(root + path).parent_path());
    std::ofstream out(root + path, std::ios::binary);
    out << content;
    REQUIRE(out.good());
  }
  void link(const std::string& path, const std::string& target) const {
    fs::create_directories(fs::path(root + path).parent_path());
    fs::create_symlink(target, root + path);
  }
  void distribution(const std::string& dir, const std::string& entry, const std::string& name, const std::string& version) const {
    file(dir + "/" + entry + "/METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\nSummary: x\n\nName: not-a-header\n");
  }
  // Debian's Python 3.11 as in the TensorFlow images: /usr/bin/python -> python3.11.
  void debian_python() const {
    file("/usr/bin/python3.11");
    link("/usr/bin/python", "python3.11");
    file("/usr/lib/python3.11/os.py");
  }
  // A command that names no Python (a shell script, a binary): `python` on PATH is read.
  Fingerprint read(const Environment& env = {{"PATH", "/usr/local/bin:/usr/bin"}}, const std::vector<std::string>& command = {}) const {
    return read_fingerprint(env, command, root);
  }
};

const std::string site = "/usr/local/lib/python3.11/dist-packages";

}  // namespace

TEST_CASE("fingerprint::read_fingerprint") {
  FakeTree tree;

  SUBCASE("an empty tree is absent everywhere, never an error") {
    Fingerprint fingerprint = tree.read();
    CHECK(fingerprint.interpreter.empty());
    CHECK(to_json(fingerprint) ==
          R"({"tensorflow":"absent","torch":"absent","jax":"absent","jaxlib":"absent","python":"absent","cuda":"absent","cudnn":"absent","nccl":"absent","nvidia_driver":"absent",)"
          R"("gpus":"absent","gpu_count":"absent","visible_devices":"absent","distributions":"absent"})");
  }

  SUBCASE("torch, jax and jaxlib by their exact names: torchvision is not torch") {
    tree.debian_python();
    tree.distribution(site, "torchvision-0.30.0.dist-info", "torchvision", "0.30.0");
    tree.distribution(site, "jax-0.10.2.dist-info", "jax", "0.10.2");
    tree.distribution(site, "jaxlib-0.10.1.dist-info", "jaxlib", "0.10.1");
    Fingerprint without_torch = tree.read();
    CHECK(without_torch.torch == "absent");
    CHECK(without_torch.jax == "0.10.2");
    CHECK(without_torch.jaxlib == "0.10.1");
    tree.distribution(site, "torch-2.15.0.dist-info", "torch", "2.15.0");
    CHECK(tree.read().torch == "2.15.0");
  }

  SUBCASE("system Python: version from the real executable, TensorFlow from its dist-packages") {
    tree.debian_python();
    tree.distribution(site, "tensorflow-2.16.1.dist-info", "tensorflow", "2.16.1");
    tree.distribution(site, "tensorflow_io_gcs_filesystem-0.37.0.dist-info", "tensorflow-io-gcs-filesystem", "0.37.0");
    Fingerprint fingerprint = tree.read();
    CHECK(fingerprint.python == "3.11");
    CHECK(fingerprint.tensorflow == "2.16.1");
    // The first 16 hex digits of sha256sum over "tensorflow-io-gcs-filesystem==0.37.0\ntensorflow==2.16.1\n"
    // (sorted bytewise: "-" before "=").
    CHECK(fingerprint.distributions == "2 distributions, sha256 a52c45615b5cb0b6");

    SUBCASE("another installed distribution changes the hash, not the TensorFlow version") {
      tree.distribution(site, "numpy-1.26.4.dist-info", "numpy", "1.26.4");
      Fingerprint more = tree.read();
      CHECK(more.tensorflow == "2.16.1");
      CHECK(more.distributions.starts_with("3 distributions, sha256 "));
    }
    SUBCASE("PYTHONPATH comes first, as for import") {
      tree.distribution("/extra", "tensorflow-2.17.0.dist-info", "tensorflow", "2.17.0");
      CHECK(tree.read({{"PATH", "/usr/bin"}, {"PYTHONPATH", "/missing::/extra"}}).tensorflow == "2.17.0");
    }
    SUBCASE("python not on PATH: nothing from its site directories") {
      Fingerprint none = tree.read({{"PATH", "/opt/bin"}});
      CHECK(none.python == "absent");
      CHECK(none.tensorflow == "absent");
    }
  }

  SUBCASE("an absolute symlink is followed inside the tree, python3 when there is no python") {
    tree.file("/usr/local/bin/python3.12");
    tree.link("/usr/local/bin/python3", "/usr/local/bin/python3.12");
    tree.file("/usr/local/lib/python3.12/os.py");
    tree.distribution("/usr/local/lib/python3.12/site-packages", "tensorflow_cpu-2.18.0.dist-info", "tensorflow-cpu", "2.18.0");
    Fingerprint fingerprint = tree.read();
    CHECK(fingerprint.python == "3.12");
    CHECK(fingerprint.tensorflow == "2.18.0 (tensorflow-cpu)");
  }

  SUBCASE("a venv: its own site-packages; the system's only with include-system-site-packages") {
    tree.debian_python();
    tree.distribution(site, "tensorflow-2.16.1.dist-info", "tensorflow", "2.16.1");
    tree.link("/opt/venv/bin/python", "/usr/bin/python3.11");
    tree.file("/opt/venv/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n");
    tree.file("/opt/venv/lib/python3.11/site-packages/keras/__init__.py");
    Environment env{{"PATH", "/opt/venv/bin:/usr/bin"}};
    CHECK(tree.read(env).python == "3.11");
    CHECK(tree.read(env).tensorflow == "absent");
    tree.file("/opt/venv/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = true\nversion = 3.11.2\n");
    CHECK(tree.read(env).tensorflow == "2.16.1");
    tree.distribution("/opt/venv/lib/python3.11/site-packages", "tensorflow-2.15.0.dist-info", "tensorflow", "2.15.0");
    CHECK(tree.read(env).tensorflow == "2.15.0");
  }

  SUBCASE("CUDA from version.json, else from the nvidia-cuda-runtime distribution") {
    tree.debian_python();
    tree.file(site + "/nvidia_cuda_runtime_cu12-12.3.101.dist-info/METADATA");
    CHECK(tree.read().cuda == "12.3.101");
    tree.file("/usr/local/cuda/version.json", R"({"cuda":{"name":"CUDA SDK","version":"12.2.2"},"cuda_cudart":{"version":"12.2.140"}})");
    CHECK(tree.read().cuda == "12.2.2");
  }

  SUBCASE("cuDNN and NCCL from the real library file, else from their distributions") {
    tree.debian_python();
    tree.file(site + "/nvidia_nccl_cu12-2.19.3.dist-info/METADATA");
    tree.file(site + "/nvidia_cudnn_cu12-8.9.2.26.dist-info/METADATA");
    CHECK(tree.read().nccl == "2.19.3");
    CHECK(tree.read().cudnn == "8.9.2.26");
    tree.file("/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7");
    tree.link("/usr/lib/x86_64-linux-gnu/libcudnn.so.8", "libcudnn.so.8.9.7");
    tree.file("/usr/lib/x86_64-linux-gnu/libcudnn_ops_infer.so.8.9.7");
    tree.file("/opt/nccl/libnccl.so.2.18.3");
    tree.link("/opt/nccl/libnccl.so.2", "libnccl.so.2.18.3");
    CHECK(tree.read().cudnn == "8.9.7");
    CHECK(tree.read({{"PATH", "/usr/bin"}, {"LD_LIBRARY_PATH", "/opt/nccl"}}).nccl == "2.18.3");
  }

  SUBCASE("driver and GPUs from /proc/driver/nvidia, devices from the environment") {
    tree.file("/proc/driver/nvidia/version",
              "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\nGCC version:  gcc 12\n");
    tree.file("/proc/driver/nvidia/gpus/0000:00:04.0/information", "Model: \t\t Tesla T4\nIRQ:   35\n");
    tree.file("/proc/driver/nvidia/gpus/0000:00:05.0/information", "Model: \t\t Tesla T4\nIRQ:   36\n");
    Fingerprint fingerprint = tree.read({{"NVIDIA_VISIBLE_DEVICES", "all"}, {"CUDA_VISIBLE_DEVICES", "0,1"}});
    CHECK(fingerprint.nvidia_driver == "535.104.05");
    CHECK(fingerprint.gpus == "Tesla T4");
    CHECK(fingerprint.gpu_count == "2");
    CHECK(fingerprint.visible_devices == "NVIDIA_VISIBLE_DEVICES=all CUDA_VISIBLE_DEVICES=0,1");
  }

  SUBCASE("a few milliseconds for an image with a thousand distributions") {
    tree.debian_python();
    for (int i = 0; i < 1000; ++i) tree.distribution(site, "package" + std::to_string(i) + "-1.0.dist-info", "package" + std::to_string(i), "1.0");
    auto start = std::chrono::steady_clock::now();
    Fingerprint fingerprint = tree.read();
    auto elapsed = std::chrono::steady_clock::now() - start;
    CHECK(fingerprint.distributions.starts_with("1000 distributions, "));
    CHECK(elapsed < std::chrono::milliseconds(500));  // generous: sanitizer builds on a busy machine
  }
}

TEST_CASE("fingerprint::read_fingerprint reads the Python the command names") {
  FakeTree tree;
  // On PATH: Debian's Python with TensorFlow 2.16.1. Off PATH: a venv with 2.15.0 of its own.
  tree.debian_python();
  tree.distribution(site, "tensorflow-2.16.1.dist-info", "tensorflow", "2.16.1");
  tree.link("/opt/venv/bin/python", "/usr/bin/python3.11");
  tree.link("/opt/venv/bin/python3", "python");
  tree.file("/opt/venv/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n");
  tree.distribution("/opt/venv/lib/python3.11/site-packages", "tensorflow-2.15.0.dist-info", "tensorflow", "2.15.0");
  const Environment env{{"PATH", "/usr/local/bin:/usr/bin"}};
  using Command = std::vector<std::string>;

  SUBCASE("a venv's python by its path, not the python on PATH") {
    Fingerprint fingerprint = tree.read(env, {"/opt/venv/bin/python", "train.py"});
    CHECK(fingerprint.tensorflow == "2.15.0");
    CHECK(fingerprint.python == "3.11");
    CHECK(fingerprint.interpreter == "/opt/venv/bin/python");
  }
  SUBCASE("python3 and python as named, on PATH") {
    CHECK(tree.read(env, {"python", "train.py"}).interpreter == "/usr/bin/python");
    CHECK(tree.read(env, {"python", "train.py"}).tensorflow == "2.16.1");
    CHECK(tree.read({{"PATH", "/opt/venv/bin:/usr/bin"}}, {"python3", "-m", "trainer"}).tensorflow == "2.15.0");
  }
  SUBCASE("through env, its options and assignments skipped") {
    for (const Command& command : {Command{"/usr/bin/env", "/opt/venv/bin/python3", "train.py"},
                                   Command{"env", "-i", "HOME=/root", "-u", "LANG", "/opt/venv/bin/python3"},
                                   Command{"/usr/bin/env", "-S", "/opt/venv/bin/python -u", "train.py"}}) {
      CAPTURE(command[1]);
      CHECK(tree.read(env, command).tensorflow == "2.15.0");
    }
  }
  SUBCASE("a script whose #! line names Python: torchrun as a venv installs it") {
    tree.file("/opt/venv/bin/torchrun", "#!/opt/venv/bin/python3\n# -*- coding: utf-8 -*-\nimport sys\n");
    tree.file("/usr/local/bin/launch", "#!/usr/bin/env -S /opt/venv/bin/python -u\nimport sys\n");
    CHECK(tree.read(env, {"/opt/venv/bin/torchrun", "--nproc-per-node=2", "train.py"}).tensorflow == "2.15.0");
    CHECK(tree.read(env, {"launch"}).tensorflow == "2.15.0");
  }
  SUBCASE("a pyenv shim stands for the version pyenv picks") {
    tree.file("/root/.pyenv/shims/python", "#!/usr/bin/env bash\nexec \"/root/.pyenv/libexec/pyenv\" exec \"$program\" \"$@\"\n");
    tree.file("/root/.pyenv/versions/3.12.4/bin/python3.12");
    tree.link("/root/.pyenv/versions/3.12.4/bin/python", "python3.12");
    tree.file("/root/.pyenv/versions/3.12.4/lib/python3.12/os.py");
    tree.distribution("/root/.pyenv/versions/3.12.4/lib/python3.12/site-packages", "tensorflow-2.18.0.dist-info", "tensorflow", "2.18.0");
    tree.file("/root/.pyenv/version", "3.12.4\n");
    const Environment pyenv{{"PATH", "/root/.pyenv/shims:/usr/bin"}};
    Fingerprint fingerprint = tree.read(pyenv, {"python", "train.py"});
    CHECK(fingerprint.python == "3.12");
    CHECK(fingerprint.tensorflow == "2.18.0");
    CHECK(fingerprint.interpreter == "/root/.pyenv/versions/3.12.4/bin/python");
    CHECK(tree.read({{"PATH", "/root/.pyenv/shims:/usr/bin"}, {"PYENV_VERSION", "system"}}, {"python"}).tensorflow == "2.16.1");
    CHECK(tree.read({{"PATH", "/root/.pyenv/shims:/usr/bin"}, {"PYENV_VERSION", "3.9.0"}}, {"python"}).interpreter.empty());
  }
  SUBCASE("a command that names no Python reads python on PATH") {
    CHECK(tree.read(env, {"sh", "-c", "exec python train.py"}).tensorflow == "2.16.1");
    CHECK(tree.read(env, {"/usr/local/bin/trainer"}).interpreter == "/usr/bin/python");
  }
  SUBCASE("a Python the command names but that is missing is none, not the one on PATH") {
    Fingerprint fingerprint = tree.read(env, {"/opt/other/bin/python", "train.py"});
    CHECK(fingerprint.interpreter.empty());
    CHECK(fingerprint.python == "absent");
    CHECK(fingerprint.tensorflow == "absent");
    CHECK(tree.read({{"PATH", "/opt/bin"}}, {"python3", "train.py"}).interpreter.empty());
  }
}

TEST_CASE("fingerprint::read_fingerprint is bounded") {
  FakeTree image;
  for (int i = 0; i < 30; ++i) image.file("/site/pkg" + std::to_string(i) + "-1.0.dist-info/METADATA");
  std::string repeated;
  for (int i = 0; i < 40; ++i) repeated += (i ? ":" : "") + std::string("/site");
  const Environment env{{"PATH", "/usr/bin"}, {"PYTHONPATH", repeated}};
  SUBCASE("a directory named many times counts once, and within the limits nothing is cut") {
    Fingerprint once = read_fingerprint({{"PATH", "/usr/bin"}, {"PYTHONPATH", "/site"}}, {}, image.root);
    Fingerprint many = read_fingerprint(env, {}, image.root, FingerprintLimits{.entries = 40});
    CHECK(many.distributions == once.distributions);
    CHECK(many.distributions.starts_with("30 distributions, sha256 "));
    CHECK(many.cut_short.empty());
  }
  SUBCASE("past the entry limit it stops, keeps what it read, and says why") {
    Fingerprint cut = read_fingerprint(env, {}, image.root, FingerprintLimits{.entries = 10});
    CHECK(cut.cut_short == "stopped after listing 10 directory entries");
    CHECK(cut.distributions.starts_with("10 distributions, sha256 "));
  }
}

TEST_CASE("fingerprint::to_json and fingerprint_from_json") {
  Fingerprint fingerprint;
  fingerprint.tensorflow = "2.16.1";
  fingerprint.python = "3.11";
  fingerprint.gpus = "Tesla T4, NVIDIA A100";
  CHECK(to_json(fingerprint_from_json(to_json(fingerprint))) == to_json(fingerprint));

  SUBCASE("lenient with what a peer sends") {
    Fingerprint read = fingerprint_from_json(R"({"tensorflow":"2.16.1\u0000\n","python":3,"cuda":"","future_field":"x"})");
    CHECK(read.tensorflow == "2.16.1");
    CHECK(read.python == "absent");
    CHECK(read.cuda == "absent");
    CHECK(fingerprint_from_json("not json").tensorflow == "absent");
    CHECK(fingerprint_from_json(R"({"tensorflow":")" + std::string(1000, 'x') + "\"}").tensorflow.size() == max_fingerprint_value);
  }
}

TEST_CASE("fingerprint::clean_fingerprint_value") {
  CHECK(clean_fingerprint_value("2.16.1") == "2.16.1");
  CHECK(clean_fingerprint_value("  Tesla T4 \n") == "Tesla T4");          // a newline dropped, spaces trimmed
  CHECK(clean_fingerprint_value("2.\x01" "16\t.1\x7f\xc3\xa9") == "2.16.1");  // control, DEL and non-ASCII bytes dropped
  CHECK(clean_fingerprint_value("") == "absent");
  CHECK(clean_fingerprint_value(" \n\t ") == "absent");
  CHECK(clean_fingerprint_value(std::string(300, 'x')) == std::string(max_fingerprint_value, 'x'));
}

TEST_CASE("fingerprint::compare_fingerprints") {
  auto with = [](std::string tensorflow, std::string driver = "absent", std::string count = "absent") {
    Fingerprint fingerprint;
    fingerprint.tensorflow = std::move(tensorflow);
    fingerprint.nvidia_driver = std::move(driver);
    fingerprint.gpu_count = std::move(count);
    return fingerprint;
  };

  SUBCASE("all equal: no line") {
    CHECK(compare_fingerprints({{"chief:0", with("2.16.1")}, {"worker:0", with("2.16.1")}}).empty());
  }
  SUBCASE("one line per differing field, values grouped by task in first-seen order") {
    auto lines = compare_fingerprints({{"worker:0", with("2.16.1")}, {"worker:1", with("2.16.1")}, {"worker:2", with("2.17.0")}});
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] == "tensorflow: 2.16.1 on worker:0,worker:1; 2.17.0 on worker:2");
  }
  SUBCASE("runs of three or more tasks are written as a range") {
    std::vector<std::pair<std::string, Fingerprint>> tasks{{"chief:0", with("2.17.0")}};
    for (int i = 0; i < 5; ++i) tasks.emplace_back("worker:" + std::to_string(i), with(i == 3 ? "2.17.0" : "2.16.1"));
    tasks.emplace_back("ps:0", with("2.16.1"));
    CHECK(compare_fingerprints(tasks) == std::vector<std::string>{"tensorflow: 2.17.0 on chief:0,worker:3; 2.16.1 on worker:0..2,worker:4,ps:0"});
  }
  SUBCASE("no driver on a CPU-only task is no difference; two drivers are; GPU counts are not compared") {
    CHECK(compare_fingerprints({{"worker:0", with("2.16.1", "535.104.05", "8")}, {"ps:0", with("2.16.1", "absent", "absent")}}).empty());
    CHECK(compare_fingerprints({{"worker:0", with("2.16.1", "535.104.05")}, {"worker:1", with("2.16.1", "550.54.15")}}) ==
          std::vector<std::string>{"nvidia_driver: 535.104.05 on worker:0; 550.54.15 on worker:1"});
  }
  SUBCASE("a line stays short however many tasks differ: 8 values, 16 runs each, then counts") {
    std::vector<std::pair<std::string, Fingerprint>> tasks;
    for (int i = 0; i < 10000; ++i) tasks.emplace_back("worker:" + std::to_string(i), with(i % 2 ? "2.16.1" : "2.17." + std::to_string(i % 20)));
    const auto lines = compare_fingerprints(tasks);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].starts_with("tensorflow: 2.17.0 on worker:0,worker:20,worker:40,"));
    CHECK(lines[0].find("worker:300 and 484 more; 2.16.1 on worker:1,worker:3,") != std::string::npos);
    CHECK(lines[0].ends_with("; 3 other values on 1500 tasks"));
    CHECK(lines[0].size() < 2000);
  }
  SUBCASE("TensorFlow absent on one task is a difference") {
    CHECK(compare_fingerprints({{"worker:0", with("2.16.1")}, {"worker:1", with("absent")}}) ==
          std::vector<std::string>{"tensorflow: 2.16.1 on worker:0; absent on worker:1"});
  }
}

}  // namespace tfboot
