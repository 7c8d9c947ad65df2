// A task's environment fingerprint, read from files only (never by running Python): the image's
// Python and its distributions, CUDA libraries, the NVIDIA driver and GPUs.
#include "fingerprint/fingerprint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/digest.h"
#include "base/text.h"
#include "base/unique_fd.h"

namespace tfboot {
namespace {

namespace fs = std::filesystem;

// Library directories where CUDA images and distributions put libcudnn and libnccl.
constexpr std::string_view library_dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                                             "/usr/local/lib", "/usr/local/cuda/lib64", "/usr/local/cuda/lib"};
constexpr std::string_view default_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// TensorFlow's own distributions; tensorflow-io, tensorflow-estimator and friends are not it.
constexpr std::string_view tensorflow_names[] = {"tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
                                                 "tensorflow-rocm", "tensorflow-aarch64", "tensorflow-cpu-aws", "tensorflow-macos"};

std::string env_value(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

// The paths read are the image's own (`logical`); `root` is only where that tree is mounted.
// Each directory is listed once, and all listings together are bounded in entries and time
// (FingerprintLimits): a PYTHONPATH that names one huge site directory forty times, or a slow
// network file system, costs the start a bounded moment, and cut_short() says why it stopped.
class Tree {
 public:
  Tree(std::string root, const FingerprintLimits& limits)
      : root_(std::move(root)), limits_(limits), deadline_(SteadyClock::now() + limits.time) {}
  std::string real(const std::string& logical) const { return root_ + logical; }

  // The first `limit` bytes: enough for every header we look for, and bounded on odd files.
  std::optional<std::string> read_head(const std::string& logical, std::size_t limit = 16384) const {
    // read(2), not an ifstream: iostreams would bring libstdc++'s locales into the static binary.
    std::error_code error;
    if (!fs::is_regular_file(real(logical), error)) return std::nullopt;
    UniqueFd fd(::open(real(logical).c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) return std::nullopt;
    std::string content(limit, '\0');
    std::size_t size = 0;
    while (size < limit) {
      ssize_t got = ::read(fd.get(), content.data() + size, limit - size);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;  // a read error keeps what came before it
      size += static_cast<std::size_t>(got);
    }
    content.resize(size);  // fd closes on return: read-only, a failing close loses nothing
    return content;
  }

  const std::vector<std::string>& list(const std::string& logical) const {
    auto [cached, fresh] = listings_.try_emplace(logical);
    if (!fresh || !cut_short_.empty()) return cached->second;
    std::vector<std::string>& names = cached->second;
    std::error_code error;
    for (fs::directory_iterator it(real(logical), error), end; !error && it != end; it.increment(error)) {
      if (++entries_listed_ > limits_.entries) {
        cut_short_ = "stopped after listing " + std::to_string(limits_.entries) + " directory entries";
        break;
      }
      if (entries_listed_ % 1024 == 0 && SteadyClock::now() > deadline_) {
        cut_short_ = "stopped after " + seconds_text(limits_.time) + " of listing directories";
        break;
      }
      names.push_back(it->path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  // Empty, or why the listings stopped early (what they found so far is still used).
  const std::string& cut_short() const { return cut_short_; }

  bool exists(const std::string& logical) const {
    std::error_code error;
    return fs::exists(real(logical), error);
  }

  bool is_regular_not_symlink(const std::string& logical) const {
    std::error_code error;
    return fs::symlink_status(real(logical), error).type() == fs::file_type::regular;
  }

  // Follows symlinks of the last component inside the tree: an absolute target is taken from
  // the tree's root, not the host's. At most 40 hops, as the kernel allows.
  std::string resolve(std::string logical) const {
    for (int hop = 0; hop < 40; ++hop) {
      std::error_code error;
      fs::path target = fs::read_symlink(real(logical), error);
      if (error) break;
      logical = target.is_absolute() ? target.lexically_normal().string()
                                     : (fs::path(logical).parent_path() / target).lexically_normal().string();
    }
    return logical;
  }

 private:
  std::string root_;
  FingerprintLimits limits_;
  Instant deadline_;
  mutable std::map<std::string, std::vector<std::string>> listings_;
  mutable std::size_t entries_listed_ = 0;
  mutable std::string cut_short_;
};

// Each directory once, in its first place: a directory named again adds nothing to a search.
std::vector<std::string> without_repeats(std::vector<std::string> dirs) {
  std::set<std::string> seen;
  std::erase_if(dirs, [&](const std::string& dir) { return !seen.insert(dir).second; });
  return dirs;
}

std::string parent(const std::string& path) { return fs::path(path).parent_path().string(); }

// "python3.11" -> "3.11"; anything else -> "".
std::string version_from_name(std::string_view name) {
  if (!name.starts_with("python3.")) return "";
  std::string_view rest = name.substr(6);
  bool digits = rest.size() > 2 && std::all_of(rest.begin(), rest.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; });
  return digits ? std::string(rest) : "";
}

std::string major_minor(std::string_view version) {
  auto parts = split_non_empty(version, '.');
  return parts.size() >= 2 ? std::string(parts[0]) + "." + std::string(parts[1]) : std::string(version);
}

struct PythonInstall {
  std::string version{fingerprint_absent};
  std::vector<std::string> site_dirs;
};

void add_system_site_dirs(PythonInstall& install, const std::string& prefix, const Environment& env) {
  const std::string lib = "/lib/python" + install.version;
  for (const std::string& dir : {prefix + lib + "/site-packages", prefix + lib + "/dist-packages",
                                 prefix + "/local" + lib + "/dist-packages", prefix + "/lib/python3/dist-packages"}) {
    install.site_dirs.push_back(dir);
  }
  if (std::string home = env_value(env, "HOME"); !home.empty()) {
    install.site_dirs.push_back(home + "/.local" + lib + "/site-packages");
  }
}

// The stdlib directory "<prefix>/lib/python3.X" (it holds os.py) names the version.
std::string version_from_prefix(const Tree& tree, const std::string& prefix) {
  for (const auto& name : tree.list(prefix + "/lib")) {
    if (auto version = version_from_name(name); !version.empty() && tree.exists(prefix + "/lib/" + name + "/os.py")) return version;
  }
  return "";
}

// A venv: "<venv>/bin/python" beside "<venv>/pyvenv.cfg"; its symlink leads to the base Python,
// whose packages count only with include-system-site-packages.
PythonInstall venv_install(const Tree& tree, const std::string& venv, const Environment& env) {
  PythonInstall install;
  std::map<std::string, std::string> config;
  const std::string venv_config = tree.read_head(venv + "/pyvenv.cfg").value_or("");
  for (std::string_view line : split_non_empty(venv_config, '\n')) {
    auto equals = line.find('=');
    if (equals != std::string::npos) config[clean_fingerprint_value(line.substr(0, equals))] = clean_fingerprint_value(line.substr(equals + 1));
  }
  std::string version = config.contains("version_info") ? config["version_info"] : config["version"];
  if (!version.empty() && version != fingerprint_absent) install.version = major_minor(version);
  for (const auto& name : tree.list(venv + "/lib")) {
    if (install.version != fingerprint_absent) break;
    if (auto from_lib = version_from_name(name); !from_lib.empty()) install.version = from_lib;
  }
  install.site_dirs.push_back(venv + "/lib/python" + install.version + "/site-packages");
  if (config["include-system-site-packages"] == "true" && config.contains("home")) {
    add_system_site_dirs(install, parent(config["home"]), env);
  }
  return install;
}

PythonInstall system_install(const Tree& tree, const std::string& executable, const Environment& env) {
  std::string real = tree.resolve(executable);
  std::string prefix = parent(parent(real));
  PythonInstall install;
  std::string version = version_from_name(fs::path(real).filename().string());
  if (version.empty()) version = version_from_prefix(tree, prefix);
  if (version.empty()) return install;
  install.version = version;
  add_system_site_dirs(install, prefix, env);
  return install;
}

struct FoundPython {
  std::string executable;  // "" when none was found
  PythonInstall install;
};

std::string file_name(const std::string& path) { return fs::path(path).filename().string(); }

bool is_python_name(std::string_view name) { return name.starts_with("python"); }

// Where `program` runs from: a path as given (relative ones from our working directory, which is
// the command's), a bare name from the first PATH directory that has it.
std::optional<std::string> find_program(const Tree& tree, const std::vector<std::string>& path_dirs, const std::string& program) {
  if (program.empty()) return std::nullopt;
  if (program.find('/') != std::string::npos) {
    std::error_code error;
    std::string logical = program.starts_with('/') ? program : fs::absolute(program, error).lexically_normal().string();
    if (error || !tree.exists(tree.resolve(logical))) return std::nullopt;
    return logical;
  }
  for (const auto& dir : path_dirs) {
    // A symlink is judged by its target in the tree.
    if (tree.exists(tree.resolve(dir + "/" + program))) return dir + "/" + program;
  }
  return std::nullopt;
}

// "env -i PATH=/x python3 a.py" -> {"python3", "a.py"}: env's options and assignments dropped
// (-u and -C take a value; -S splits its value into words).
std::vector<std::string> after_env(std::vector<std::string> words) {
  if (words.empty() || file_name(words[0]) != "env") return words;
  std::size_t at = 1;
  while (at < words.size()) {
    const std::string& word = words[at];
    if (word == "-S" || word == "--split-string") {
      if (at + 1 >= words.size()) return {};
      std::vector<std::string> split;
      for (std::string_view part : split_non_empty(words[at + 1], ' ')) split.emplace_back(part);
      split.insert(split.end(), words.begin() + static_cast<std::ptrdiff_t>(at + 2), words.end());
      split.insert(split.begin(), "env");
      return after_env(std::move(split));
    }
    if (word == "-u" || word == "--unset" || word == "-C" || word == "--chdir") at += 2;
    else if (word.starts_with('-') || word.find('=') != std::string::npos) at += 1;
    else break;
  }
  return std::vector<std::string>(words.begin() + static_cast<std::ptrdiff_t>(std::min(at, words.size())), words.end());
}

// The Python a command names, as written: argv[0] itself, the program after env, or the
// interpreter on the "#!" line of the script it runs. nullopt: it names none (a shell, a binary).
std::optional<std::string> named_python(const Tree& tree, const std::vector<std::string>& path_dirs,
                                        const std::vector<std::string>& command) {
  const std::vector<std::string> words = after_env(command);
  if (words.empty()) return std::nullopt;
  if (is_python_name(file_name(words[0]))) return words[0];
  auto program = find_program(tree, path_dirs, words[0]);
  if (!program) return std::nullopt;
  const std::string head = tree.read_head(tree.resolve(*program), 512).value_or("");
  if (!head.starts_with("#!")) return std::nullopt;
  std::string line = head.substr(2, head.find('\n') - 2);
  std::replace(line.begin(), line.end(), '\t', ' ');
  std::erase(line, '\r');
  std::vector<std::string> interpreter;
  for (std::string_view part : split_non_empty(line, ' ')) interpreter.emplace_back(part);
  interpreter = after_env(std::move(interpreter));
  if (interpreter.empty() || !is_python_name(file_name(interpreter[0]))) return std::nullopt;
  return interpreter[0];
}

// A pyenv shim ("<pyenv root>/shims/python3", a shell script) runs the version that PYENV_VERSION
// or pyenv's global version file names; "system" is the next one on PATH. nullopt: not a shim.
std::optional<std::string> through_pyenv_shim(const Tree& tree, const Environment& env, const std::vector<std::string>& path_dirs,
                                              const std::string& executable) {
  const std::string shims = parent(executable);
  const std::string pyenv_root = parent(shims);
  if (file_name(shims) != "shims" || !tree.exists(pyenv_root + "/versions")) return std::nullopt;
  std::string version = env_value(env, "PYENV_VERSION");
  if (version.empty()) version = tree.read_head(pyenv_root + "/version", 4096).value_or("");
  const auto versions = split_non_empty(version, version.find(':') != std::string::npos ? ':' : '\n');
  version = versions.empty() ? "system" : clean_fingerprint_value(versions.front());
  if (version == "system" || version == fingerprint_absent) {
    std::vector<std::string> others;
    std::copy_if(path_dirs.begin(), path_dirs.end(), std::back_inserter(others), [&](const std::string& dir) { return dir != shims; });
    return find_program(tree, others, file_name(executable)).value_or("");
  }
  const std::string real = pyenv_root + "/versions/" + version + "/bin/" + file_name(executable);
  return tree.exists(tree.resolve(real)) ? real : "";
}

FoundPython python_at(const Tree& tree, const Environment& env, const std::vector<std::string>& path_dirs, std::string executable) {
  if (auto shimmed = through_pyenv_shim(tree, env, path_dirs, executable)) executable = *shimmed;
  if (executable.empty()) return {};
  const std::string dir = parent(executable);
  if (tree.exists(parent(dir) + "/pyvenv.cfg")) return {executable, venv_install(tree, parent(dir), env)};
  return {executable, system_install(tree, executable, env)};
}

// The command's own Python when it names one, else `python` on PATH as the default command finds
// it, `python3` when there is no `python`. A Python the command names but that is missing is none.
FoundPython find_python(const Tree& tree, const Environment& env, const std::vector<std::string>& command) {
  std::string path = env_value(env, "PATH");
  const auto parts = split_non_empty(path.empty() ? default_path : path, ':');
  const std::vector<std::string> dirs(parts.begin(), parts.end());
  if (auto named = named_python(tree, dirs, command)) {
    auto executable = find_program(tree, dirs, *named);
    return executable ? python_at(tree, env, dirs, *executable) : FoundPython{};
  }
  for (const char* program : {"python", "python3"}) {
    if (auto executable = find_program(tree, dirs, program)) return python_at(tree, env, dirs, *executable);
  }
  return {};
}

std::string normalized_name(std::string_view name) {
  std::string text;
  for (char c : name) text += (c == '_' || c == '.') ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// "tensorflow_cpu-2.16.1.dist-info" -> {"tensorflow-cpu", "2.16.1"}.
struct DistributionName {
  std::string name;
  std::string version;
};
std::optional<DistributionName> split_distribution(std::string_view entry) {
  std::string_view stem;
  if (entry.ends_with(".dist-info")) stem = entry.substr(0, entry.size() - 10);
  else if (entry.ends_with(".egg-info")) stem = entry.substr(0, entry.size() - 9);
  else return std::nullopt;
  auto dash = stem.find('-');
  if (dash == std::string_view::npos) return DistributionName{normalized_name(stem), ""};
  std::string_view version = stem.substr(dash + 1);
  version = version.substr(0, version.find('-'));  // egg-info may add "-py3.11"
  return DistributionName{normalized_name(stem.substr(0, dash)), std::string(version)};
}

std::string metadata_header(const std::string& metadata, std::string_view key) {
  for (std::string_view line : split_non_empty(metadata, '\n')) {
    if (line.size() <= 1 || line == "\r") break;  // headers end at the first blank line
    if (line.starts_with(key) && line.size() > key.size() && line[key.size()] == ':') return clean_fingerprint_value(line.substr(key.size() + 1));
  }
  return "";
}

// As `import tensorflow` would find it: PYTHONPATH first, then the site directories.
std::string tensorflow_version(const Tree& tree, const std::vector<std::string>& search_dirs) {
  for (const auto& dir : search_dirs) {
    for (const auto& entry : tree.list(dir)) {
      auto distribution = split_distribution(entry);
      if (!distribution || !entry.ends_with(".dist-info") || !distribution->name.starts_with("tensorflow")) continue;
      std::string metadata = tree.read_head(dir + "/" + entry + "/METADATA").value_or("");
      std::string name = normalized_name(metadata_header(metadata, "Name"));
      std::string version = metadata_header(metadata, "Version");
      if (name.empty()) name = distribution->name;
      if (version.empty()) version = distribution->version;
      if (std::find(std::begin(tensorflow_names), std::end(tensorflow_names), name) == std::end(tensorflow_names)) continue;
      return clean_fingerprint_value(name == "tensorflow" ? version : version + " (" + name + ")");
    }
  }
  return std::string(fingerprint_absent);
}

std::string distributions_digest(const Tree& tree, const std::vector<std::string>& search_dirs) {
  std::set<std::string> installed;
  for (const auto& dir : search_dirs) {
    for (const auto& entry : tree.list(dir)) {
      if (auto distribution = split_distribution(entry)) installed.insert(distribution->name + "==" + distribution->version);
    }
  }
  if (installed.empty()) return std::string(fingerprint_absent);
  std::string text;
  for (const auto& item : installed) text += item + "\n";
  return std::to_string(installed.size()) + " distributions, sha256 " + sha256_hex(text).substr(0, 16);
}

// The version in the dist-info of the first distribution whose name starts with `prefix`.
std::string distribution_version(const Tree& tree, const std::vector<std::string>& search_dirs, std::string_view prefix) {
  for (const auto& dir : search_dirs) {
    for (const auto& entry : tree.list(dir)) {
      auto distribution = split_distribution(entry);
      if (distribution && distribution->name.starts_with(prefix) && !distribution->version.empty()) return clean_fingerprint_value(distribution->version);
    }
  }
  return std::string(fingerprint_absent);
}

// The version of the distribution named exactly `name` (torch, not torchvision), as import finds it.
std::string exact_distribution_version(const Tree& tree, const std::vector<std::string>& search_dirs, std::string_view name) {
  for (const auto& dir : search_dirs) {
    for (const auto& entry : tree.list(dir)) {
      auto distribution = split_distribution(entry);
      if (distribution && distribution->name == name && !distribution->version.empty()) return clean_fingerprint_value(distribution->version);
    }
  }
  return std::string(fingerprint_absent);
}

std::string cuda_version(const Tree& tree, const std::vector<std::string>& search_dirs) {
  auto json = nlohmann::json::parse(tree.read_head("/usr/local/cuda/version.json").value_or(""), nullptr, false);
  for (const char* key : {"cuda", "cuda_cudart"}) {
    if (json.is_object() && json.contains(key) && json[key].is_object() && json[key].contains("version") &&
        json[key]["version"].is_string()) {
      return clean_fingerprint_value(json[key]["version"].get<std::string>());
    }
  }
  return distribution_version(tree, search_dirs, "nvidia-cuda-runtime");
}

// "libcudnn.so.8.9.7": the real file behind the libcudnn.so.8 symlink names the full version.
std::string library_version(const Tree& tree, const Environment& env, const std::string& library,
                            const std::vector<std::string>& search_dirs, std::string_view distribution) {
  const std::string library_path = env_value(env, "LD_LIBRARY_PATH");
  const auto parts = split_non_empty(library_path, ':');
  std::vector<std::string> dirs(parts.begin(), parts.end());
  dirs.insert(dirs.end(), std::begin(library_dirs), std::end(library_dirs));
  dirs = without_repeats(std::move(dirs));
  const std::string stem = library + ".so.";
  for (const auto& dir : dirs) {
    std::string best;
    for (const auto& entry : tree.list(dir)) {
      if (entry.starts_with(stem) && entry.size() > stem.size() && tree.is_regular_not_symlink(dir + "/" + entry) &&
          entry.size() >= best.size()) {
        best = entry;
      }
    }
    if (!best.empty()) return clean_fingerprint_value(best.substr(stem.size()));
  }
  return distribution_version(tree, search_dirs, distribution);
}

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ..." -> "535.104.05".
std::string driver_version(const Tree& tree) {
  std::string text = tree.read_head("/proc/driver/nvidia/version", 4096).value_or("");
  std::string first_line = text.substr(0, text.find('\n'));
  for (std::string_view word : split_non_empty(first_line, ' ')) {
    bool version = std::isdigit(static_cast<unsigned char>(word[0])) && word.find('.') != std::string::npos &&
                   std::all_of(word.begin(), word.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; });
    if (version) return clean_fingerprint_value(word);
  }
  return std::string(fingerprint_absent);
}

void read_gpus(const Tree& tree, Fingerprint& fingerprint) {
  std::set<std::string> models;
  int count = 0;
  for (const auto& gpu : tree.list("/proc/driver/nvidia/gpus")) {
    std::string information = tree.read_head("/proc/driver/nvidia/gpus/" + gpu + "/information", 4096).value_or("");
    for (std::string_view line : split_non_empty(information, '\n')) {
      if (!line.starts_with("Model:")) continue;
      models.insert(clean_fingerprint_value(line.substr(6)));
      ++count;
    }
  }
  if (count == 0) return;
  fingerprint.gpus = clean_fingerprint_value(joined({models.begin(), models.end()}, ", "));
  fingerprint.gpu_count = std::to_string(count);
}

std::string visible_devices(const Environment& env) {
  std::string text;
  for (const char* name : {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}) {
    if (auto it = env.find(name); it != env.end()) text += (text.empty() ? "" : " ") + std::string(name) + "=" + it->second;
  }
  return clean_fingerprint_value(text);
}

}  // namespace

Fingerprint read_fingerprint(const Environment& env, const std::vector<std::string>& command, const std::string& root,
                             const FingerprintLimits& limits) {
  const Tree tree(root, limits);
  const FoundPython found = find_python(tree, env, command);
  const PythonInstall& python = found.install;
  const std::string python_path = env_value(env, "PYTHONPATH");
  const auto parts = split_non_empty(python_path, ':');
  std::vector<std::string> search_dirs(parts.begin(), parts.end());
  search_dirs.insert(search_dirs.end(), python.site_dirs.begin(), python.site_dirs.end());
  search_dirs = without_repeats(std::move(search_dirs));

  Fingerprint fingerprint;
  fingerprint.python = python.version;
  fingerprint.tensorflow = tensorflow_version(tree, search_dirs);
  fingerprint.torch = exact_distribution_version(tree, search_dirs, "torch");
  fingerprint.jax = exact_distribution_version(tree, search_dirs, "jax");
  fingerprint.jaxlib = exact_distribution_version(tree, search_dirs, "jaxlib");
  fingerprint.cuda = cuda_version(tree, search_dirs);
  fingerprint.cudnn = library_version(tree, env, "libcudnn", search_dirs, "nvidia-cudnn");
  fingerprint.nccl = library_version(tree, env, "libnccl", search_dirs, "nvidia-nccl");
  fingerprint.nvidia_driver = driver_version(tree);
  read_gpus(tree, fingerprint);
  fingerprint.visible_devices = visible_devices(env);
  fingerprint.distributions = distributions_digest(tree, search_dirs);
  fingerprint.cut_short = tree.cut_short();
  if (python.version != fingerprint_absent) fingerprint.interpreter = found.executable;
  return fingerprint;
}

}  // namespace tfboot
