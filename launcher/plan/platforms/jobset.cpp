// JobSet: the labels and annotations the JobSet controller puts on every pod, read from a
// downward-API volume (--pod-info-dir); the peers' names follow the controller's naming
// (docs/identity.md, "Platforms").
#include "plan/kubernetes.h"
#include "plan/platforms/downward_api.h"
#include "plan/platforms/platforms.h"

namespace tfboot {
namespace {

constexpr std::string_view jobset_name_key = "jobset.sigs.k8s.io/jobset-name";
constexpr std::string_view replicated_job_key = "jobset.sigs.k8s.io/replicatedjob-name";
constexpr std::string_view replicas_key = "jobset.sigs.k8s.io/replicatedjob-replicas";
constexpr std::string_view job_index_key = "jobset.sigs.k8s.io/job-index";
constexpr std::string_view global_replicas_key = "jobset.sigs.k8s.io/global-replicas";
constexpr std::string_view completion_index_key = "batch.kubernetes.io/job-completion-index";
// Set by the user on every pod template when the JobSet has more than one replicated job: the
// other replicated jobs' replica counts are in no label of this pod.
constexpr std::string_view cluster_annotation = "tfboot/cluster";

class PodInfo {
 public:
  explicit PodInfo(const PlatformFiles& files) : files_(files) {}

  // JobSet writes its keys as labels and as annotations: either file will do.
  Result<std::optional<Setting>> find(std::string_view key) const {
    for (const auto& [text, name] : {std::pair{&files_.pod_labels, "labels"}, std::pair{&files_.pod_annotations, "annotations"}}) {
      if (!*text) continue;
      const std::string path = files_.pod_info_dir + "/" + name;
      auto value = downward_api_value(**text, key, path);
      if (!value) return std::unexpected(value.error());
      if (*value) return std::optional<Setting>{Setting{**value, path + ": " + std::string(key)}};
    }
    return std::optional<Setting>{};
  }

  // The annotations file is mounted (the annotation that completes the counts lives there).
  bool annotations_mounted() const { return files_.pod_annotations.has_value(); }
  std::string annotations_path() const { return files_.pod_info_dir + "/annotations"; }

  Result<Setting> require(std::string_view key, const Setting& jobset) const {
    auto found = find(key);
    if (!found) return std::unexpected(found.error());
    if (*found) return **found;
    return usage_error(files_.pod_info_dir + ": a pod of JobSet '" + jobset.value + "' without " + std::string(key) +
                       " in its labels or annotations");
  }

 private:
  const PlatformFiles& files_;
};

Result<int> count_from(const Setting& setting) {
  auto count = parse_index(setting.value);
  if (!count || *count == 0) return usage_error(quoted(setting) + " is not a positive integer");
  return *count;
}

// The task counts: this replicated job's replicas, and the others' from the annotation (checked
// against the labels) unless the JobSet has no other replicated job.
Result<ClusterSpec> task_counts(const PodInfo& pod, TaskType type, const Setting& replicas_setting, int replicas) {
  auto global = pod.find(global_replicas_key);
  if (!global) return std::unexpected(global.error());
  std::optional<int> all_jobs;
  if (*global) {
    auto parsed = count_from(**global);
    if (!parsed) return std::unexpected(parsed.error());
    all_jobs = *parsed;
  }
  auto annotated = pod.find(cluster_annotation);
  if (!annotated) return std::unexpected(annotated.error());
  if (!*annotated) {
    if (all_jobs == replicas) {
      ClusterSpec spec;
      spec.counts[static_cast<std::size_t>(type)] = replicas;
      return spec;
    }
    std::string why = all_jobs ? quoted(**global) + " counts other replicated jobs, whose replicas are in no label of this pod"
                               : std::string(global_replicas_key) + " is not set (a JobSet controller before it)";
    std::string mount = pod.annotations_mounted() ? "" : ", and mount the pod's annotations (" + pod.annotations_path() + " is missing)";
    return usage_error("JobSet: " + why + "; set the annotation " + std::string(cluster_annotation) +
                       " (e.g. \"chief=1,worker=4\") on every pod template" + mount);
  }
  auto spec = parse_cluster_spec(**annotated);
  if (!spec) return std::unexpected(spec.error());
  if (spec->count(type) != replicas) {
    return usage_error(quoted(**annotated) + " says " + std::string(to_string(type)) + "=" + std::to_string(spec->count(type)) +
                       ", but " + quoted(replicas_setting));
  }
  int total = 0;
  for (int count : spec->counts) total += count;
  if (all_jobs && total != *all_jobs) {
    return usage_error(quoted(**annotated) + " adds up to " + std::to_string(total) + " tasks, but " + quoted(**global));
  }
  return *spec;
}

// The Job controller sets an Indexed Job's pod hostname to <job>-<completion index>, and JobSet names
// its Jobs <jobset>-<replicated job>-<job index>: labels that give this pod another name are not
// its own (copied from another pod, or a volume of another pod mounted). POD_NAME does not count:
// a Job's pod name carries a random suffix (bert-worker-1-0-x7k2p).
Result<void> check_own_hostname(const PlatformInputs& in, const std::string& own_host, const std::string& described_as) {
  const Hostname hostname = choose_hostname(in.parsed.identity_flags.hostname, Environment{}, in.facts.system_hostname);
  if (hostname.name.empty() || platform::first_label(hostname.name) == own_host) return {};
  return usage_error(described_as + ", but its hostname is '" + hostname.name + "' (from " + hostname.source + ")");
}

}  // namespace

Result<std::optional<PlatformJob>> job_from_jobset(const PlatformInputs& in) {
  const PlatformFiles& files = in.facts.platform_files;
  for (const char* name : {"/labels", "/annotations"}) {
    if (auto readable = platform::check_readable(files, files.pod_info_dir + name); !readable) return std::unexpected(readable.error());
  }
  const PodInfo pod(files);
  auto jobset = pod.find(jobset_name_key);
  if (!jobset) return std::unexpected(jobset.error());
  if (!*jobset) return std::optional<PlatformJob>{};
  const Setting jobset_name = **jobset;
  auto replicated_job = pod.require(replicated_job_key, jobset_name);
  if (!replicated_job) return std::unexpected(replicated_job.error());
  auto type = parse_task_type(replicated_job->value);
  if (!type || replicated_job->value == "master") {
    return usage_error(quoted(*replicated_job) + " is not a task type: name the replicated jobs chief, worker, ps or evaluator");
  }
  auto replicas_setting = pod.require(replicas_key, jobset_name);
  if (!replicas_setting) return std::unexpected(replicas_setting.error());
  auto replicas = count_from(*replicas_setting);
  if (!replicas) return std::unexpected(replicas.error());
  auto job_index_setting = pod.require(job_index_key, jobset_name);
  if (!job_index_setting) return std::unexpected(job_index_setting.error());
  auto job_index = parse_index(job_index_setting->value);
  if (!job_index || *job_index >= *replicas) {
    return usage_error(quoted(*job_index_setting) + " is not an index below " + quoted(*replicas_setting));
  }
  // One pod per Job: the task index is the Job's index, and every pod is <jobset>-<type>-<i>-0.
  auto completion = pod.find(completion_index_key);
  if (!completion) return std::unexpected(completion.error());
  std::optional<Setting> pod_index = *completion ? *completion : platform::env_setting(in.env, "JOB_COMPLETION_INDEX");
  if (!pod_index) {
    return usage_error("JobSet: neither " + std::string(completion_index_key) +
                       " nor JOB_COMPLETION_INDEX is set: the replicated jobs' Jobs must be Indexed (completionMode: Indexed)");
  }
  if (pod_index->value != "0") {
    return usage_error("JobSet: " + quoted(*pod_index) + ": tfboot derives the cluster when each Job runs one pod " +
                       "(completions: 1, replicas: the task count); with more pods per Job set TFBOOT_CLUSTER and TFBOOT_PEER_TEMPLATE");
  }
  auto counts = task_counts(pod, *type, *replicas_setting, *replicas);
  if (!counts) return std::unexpected(counts.error());
  const std::string own_host = jobset_name.value + "-" + replicated_job->value + "-" + job_index_setting->value + "-0";
  const std::string described_as = "JobSet '" + jobset_name.value + "': the labels in " + files.pod_info_dir + " make this pod " +
                                   own_host + " (replicated job " + replicated_job->value + ", job index " + job_index_setting->value + ")";
  if (auto own = check_own_hostname(in, own_host, described_as); !own) return std::unexpected(own.error());

  // The controller's subdomain is the headless Service the kubelet names in /etc/hosts.
  auto suffix = choose_dns_suffix(in.parsed.service, in.env, in.facts.hosts_file, parse_resolv_conf(in.facts.resolv_conf),
                                  {in.hostname.name, in.facts.system_hostname});
  if (!suffix) return std::unexpected(suffix.error());
  const PortSpec& ports = in.parsed.ports;
  platform::TasksByType tasks;
  for (TaskType task_type : all_task_types) {
    for (int i = 0; i < counts->count(task_type); ++i) {
      std::string host = jobset_name.value + "-" + std::string(to_string(task_type)) + "-" + std::to_string(i) + "-0";
      if (*suffix) host += "." + (*suffix)->text();
      if (auto named = platform::check_host_name(host, "JobSet '" + jobset_name.value + "'"); !named) return std::unexpected(named.error());
      tasks[static_cast<std::size_t>(task_type)].push_back(platform::Task{host, ports.port(task_type)});
    }
  }
  auto peers = platform::peers_from_tasks(tasks, "JobSet", suffix->has_value());
  if (!peers) return std::unexpected(peers.error());
  Identity identity{*type, *job_index,
                    "JobSet '" + jobset_name.value + "' (replicated job " + replicated_job->value + ", job index " +
                        job_index_setting->value + ", from " + files.pod_info_dir + ")"};
  return std::optional<PlatformJob>{PlatformJob{"JobSet", identity, std::move(*peers), *suffix}};
}

}  // namespace tfboot
