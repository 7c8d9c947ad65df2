// Platforms that describe the job (docs/identity.md, "Platforms"): Slurm's srun environment,
// SageMaker's resourceconfig.json, Volcano's svc and env plugins, JobSet's pod labels, each in the
// form the platform documents, the order in which they are asked, and how their files are read.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "plan/platforms/platforms.h"
#include "test_support.h"

namespace tfboot {
namespace {

struct Situation {
  std::vector<std::string> args;
  Environment env;
  PlatformFiles files;
  std::string system_hostname = "node-a";
  std::string hosts_file;
};

// "none", "error 2: <message>", or "<task> from <source> | <type> <host:port>...; <type> ...".
template <typename Reader>
std::string describe(Reader read, const Situation& situation) {
  auto options = parse_options(situation.args, situation.env);
  if (!options) return "options error: " + options.error().message;
  HostFacts facts{situation.system_hostname, situation.hosts_file, "", {}, situation.files};
  Hostname hostname = choose_hostname(options->hostname, situation.env, facts.system_hostname);
  auto parsed = parse_plan_inputs(*options, situation.env);
  if (!parsed) return "error " + std::to_string(parsed.error().code) + ": " + parsed.error().message;
  if (auto flags = parse_identity_flags(*options, *parsed); !flags) return "error 2: " + flags.error().message;
  auto job = read(PlatformInputs{*parsed, situation.env, facts, hostname});
  if (!job) return "error " + std::to_string(job.error().code) + ": " + job.error().message;
  if (!*job) return "none";
  std::string text = (*job)->identity.task() + " from " + (*job)->identity.source + " |";
  std::optional<TaskType> last;
  int expected_index = 0;
  for (const auto& peer : (*job)->peers) {
    if (peer.type != last) {
      text += std::string(last ? ";" : "") + " " + std::string(to_string(peer.type));
      expected_index = 0;
    }
    last = peer.type;
    text += " " + join_host_port(peer.lookup_name(), peer.port);
    if (peer.index != expected_index++) text += " (index " + std::to_string(peer.index) + ")";  // peers count 0, 1, ... per type
  }
  return text;
}

std::string slurm(const Situation& situation) { return describe(job_from_slurm, situation); }
std::string sagemaker(const Situation& situation) { return describe(job_from_sagemaker, situation); }
std::string volcano(const Situation& situation) { return describe(job_from_volcano, situation); }
std::string jobset(const Situation& situation) { return describe(job_from_jobset, situation); }
std::string kubeflow(const Situation& situation) { return describe(job_from_kubeflow, situation); }
std::string any_platform(const Situation& situation) { return describe(describe_job_by_platform, situation); }

struct Row {
  const char* behaviour;
  Situation situation;
  std::string expected;
};

template <typename Describe>
void check_rows(Describe describe_one, const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    CAPTURE(row.behaviour);
    CHECK(describe_one(row.situation) == row.expected);
  }
}

// srun's environment for task `rank` of the issue's example: 4 tasks, 2 on gpu07, 1 each on gpu08 and cpu1.
Environment srun_task(const std::string& rank) {
  return {{"SLURM_PROCID", rank},
          {"SLURM_STEP_NUM_TASKS", "4"},
          {"SLURM_STEP_NODELIST", "gpu[07-08],cpu1"},
          {"SLURM_STEP_TASKS_PER_NODE", "2,1(x2)"}};
}

Environment with(Environment env, const Environment& more) {
  for (const auto& [key, value] : more) env[key] = value;
  return env;
}

Environment without(Environment env, const std::string& key) {
  env.erase(key);
  return env;
}

PlatformFiles sagemaker_file(const std::string& text) {
  PlatformFiles files;
  files.sagemaker_resource_config = text;
  return files;
}

// A pod of JobSet "bert" whose downward-API volume holds these labels (and the same as annotations).
PlatformFiles jobset_pod(const std::string& labels, std::optional<std::string> annotations = std::nullopt) {
  PlatformFiles files;
  files.pod_info_dir = "/etc/podinfo";
  files.pod_labels = labels;
  files.pod_annotations = annotations ? *annotations : labels;
  return files;
}

std::string jobset_labels(const std::string& replicated_job, const std::string& replicas, const std::string& job_index,
                          const std::string& global_replicas, bool completion_index = true) {
  std::string text = completion_index ? "batch.kubernetes.io/job-completion-index=\"0\"\n" : "";
  if (!global_replicas.empty()) text += "jobset.sigs.k8s.io/global-replicas=\"" + global_replicas + "\"\n";
  text += "jobset.sigs.k8s.io/job-index=\"" + job_index + "\"\n";
  text += "jobset.sigs.k8s.io/jobset-name=\"bert\"\n";
  text += "jobset.sigs.k8s.io/replicatedjob-name=\"" + replicated_job + "\"\n";
  text += "jobset.sigs.k8s.io/replicatedjob-replicas=\"" + replicas + "\"";
  return text;
}

// The kubelet's /etc/hosts for pod bert-worker-1-0 with subdomain "bert" in namespace "ml".
const std::string jobset_hosts_file =
    "127.0.0.1 localhost\n10.1.0.7 bert-worker-1-0.bert.ml.svc.cluster.local bert-worker-1-0\n";

}  // namespace

TEST_CASE("platforms::job_from_slurm") {
  SUBCASE("the step's tasks fill the nodes in order; the k-th task on a node listens on port + k") {
    check_rows(slurm, {
        {"the issue's example", {{}, srun_task("2")},
         "worker:2 from Slurm (SLURM_PROCID) | worker gpu07:2222 gpu07:2223 gpu08:2222 cpu1:2222"},
        {"task 0", {{}, srun_task("0")}, "worker:0 from Slurm (SLURM_PROCID) | worker gpu07:2222 gpu07:2223 gpu08:2222 cpu1:2222"},
        {"--port sets the base", {{"--port", "5000"}, srun_task("3")},
         "worker:3 from Slurm (SLURM_PROCID) | worker gpu07:5000 gpu07:5001 gpu08:5000 cpu1:5000"},
        {"--chief-at-ordinal-0: task 0 is the chief, task k worker k-1", {{"--chief-at-ordinal-0"}, srun_task("2")},
         "worker:1 from Slurm (SLURM_PROCID), chief at ordinal 0 | chief gpu07:2222; worker gpu07:2223 gpu08:2222 cpu1:2222"},
        {"--chief-at-ordinal-0, task 0", {{"--chief-at-ordinal-0"}, srun_task("0")},
         "chief:0 from Slurm (SLURM_PROCID), chief at ordinal 0 | chief gpu07:2222; worker gpu07:2223 gpu08:2222 cpu1:2222"},
        {"the chief's own port, plus its place on the node", {{"--chief-at-ordinal-0", "--port", "2222,chief=3000"}, srun_task("1")},
         "worker:0 from Slurm (SLURM_PROCID), chief at ordinal 0 | chief gpu07:3000; worker gpu07:2223 gpu08:2222 cpu1:2222"},
        {"one task per node, zero-padded names", {{}, {{"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_TASKS", "3"},
                                                      {"SLURM_STEP_NODELIST", "nid00[2285-2286,2718]"},
                                                      {"SLURM_STEP_TASKS_PER_NODE", "1(x3)"}}},
         "worker:1 from Slurm (SLURM_PROCID) | worker nid002285:2222 nid002286:2222 nid002718:2222"},
        {"the job's variables when the step's are missing",
         {{}, {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "a[1-2]"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}}},
         "worker:1 from Slurm (SLURM_PROCID) | worker a1:2222 a2:2222"},
        {"the job's variables, one task", {{}, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_NODELIST", "a1"}, {"SLURM_TASKS_PER_NODE", "1"}}},
         "worker:0 from Slurm (SLURM_PROCID) | worker a1:2222"},
        {"the step's variables beat the job's",
         {{}, with(srun_task("1"), {{"SLURM_NTASKS", "8"}, {"SLURM_JOB_NODELIST", "z[1-4]"}, {"SLURM_TASKS_PER_NODE", "2(x4)"}})},
         "worker:1 from Slurm (SLURM_PROCID) | worker gpu07:2222 gpu07:2223 gpu08:2222 cpu1:2222"},
        {"SLURM_LOCALID and SLURMD_NODENAME that agree", {{}, with(srun_task("1"), {{"SLURM_LOCALID", "1"}, {"SLURMD_NODENAME", "gpu07"}})},
         "worker:1 from Slurm (SLURM_PROCID) | worker gpu07:2222 gpu07:2223 gpu08:2222 cpu1:2222"},
        {"cyclic distribution: one task per node in turn, a node with fewer tasks leaving the later rounds",
         {{}, with(srun_task("1"), {{"SLURM_DISTRIBUTION", "cyclic"}, {"SLURM_LOCALID", "0"}, {"SLURMD_NODENAME", "gpu08"}})},
         "worker:1 from Slurm (SLURM_PROCID) | worker gpu07:2222 gpu08:2222 cpu1:2222 gpu07:2223"},
        {"cyclic distribution, a node's second task",
         {{}, with(srun_task("3"), {{"SLURM_DISTRIBUTION", "cyclic:block"}, {"SLURM_LOCALID", "1"}, {"SLURMD_NODENAME", "gpu07"}})},
         "worker:3 from Slurm (SLURM_PROCID) | worker gpu07:2222 gpu08:2222 cpu1:2222 gpu07:2223"},
        {"block across nodes, whatever the distribution within a node",
         {{}, with(srun_task("1"), {{"SLURM_DISTRIBUTION", "block:cyclic,Pack"}, {"SLURM_LOCALID", "1"}, {"SLURMD_NODENAME", "gpu07"}})},
         "worker:1 from Slurm (SLURM_PROCID) | worker gpu07:2222 gpu07:2223 gpu08:2222 cpu1:2222"},
        {"no SLURM_PROCID: not Slurm", {{}, without(srun_task("1"), "SLURM_PROCID")}, "none"},
        {"an empty SLURM_PROCID counts as unset", {{}, with(srun_task("1"), {{"SLURM_PROCID", ""}})}, "none"},
    });
  }
  SUBCASE("bad or partial data is a usage error naming the variable") {
    check_rows(slurm, {
        {"a rank that is not a number", {{}, srun_task("two")}, "error 2: SLURM_PROCID 'two' is not a non-negative integer"},
        {"a rank outside the step", {{}, srun_task("4")}, "error 2: SLURM_PROCID '4' is outside SLURM_STEP_NUM_TASKS '4'"},
        {"no node list", {{}, without(srun_task("1"), "SLURM_STEP_NODELIST")},
         "error 2: Slurm (SLURM_PROCID is set): SLURM_STEP_NODELIST is not set"},
        {"no task count", {{}, without(srun_task("1"), "SLURM_STEP_NUM_TASKS")},
         "error 2: Slurm (SLURM_PROCID is set): SLURM_STEP_NUM_TASKS is not set"},
        {"no tasks per node", {{}, without(srun_task("1"), "SLURM_STEP_TASKS_PER_NODE")},
         "error 2: Slurm (SLURM_PROCID is set): SLURM_STEP_TASKS_PER_NODE is not set"},
        {"the batch script itself (task 0, the job's variables of several tasks, no step)",
         {{}, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_JOB_NODELIST", "gnode[10,20]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}}},
         "error 2: Slurm: SLURM_PROCID is set without SLURM_STEP_* while SLURM_NTASKS is '4': this is the batch script, not a task of a "
         "job step; start tfboot with srun"},
        {"a step's layout is never mixed with the job's", {{}, with(without(srun_task("1"), "SLURM_STEP_TASKS_PER_NODE"), {{"SLURM_TASKS_PER_NODE", "2,1(x2)"}})},
         "error 2: Slurm (SLURM_PROCID is set): SLURM_STEP_TASKS_PER_NODE is not set"},
        {"a malformed host list", {{}, with(srun_task("1"), {{"SLURM_STEP_NODELIST", "gpu[07-08,cpu1"}})},
         "error 2: SLURM_STEP_NODELIST 'gpu[07-08,cpu1': '[' without ']'"},
        {"malformed tasks per node", {{}, with(srun_task("1"), {{"SLURM_STEP_TASKS_PER_NODE", "2,1(x2"}})},
         "error 2: SLURM_STEP_TASKS_PER_NODE '2,1(x2': '1(x2' is not <tasks> or <tasks>(x<nodes>)"},
        {"a task count that is not a number", {{}, with(srun_task("1"), {{"SLURM_STEP_NUM_TASKS", "four"}})},
         "error 2: SLURM_STEP_NUM_TASKS 'four' is not a positive integer"},
        {"a task count over the limit, before any task is placed", {{}, with(srun_task("1"), {{"SLURM_STEP_NUM_TASKS", "100001"}})},
         "error 2: SLURM_STEP_NUM_TASKS '100001' is more than 100000 tasks"},
        {"tasks per node for another number of nodes", {{}, with(srun_task("1"), {{"SLURM_STEP_TASKS_PER_NODE", "2,1"}})},
         "error 2: SLURM_STEP_TASKS_PER_NODE '2,1' places tasks on 2 nodes, but SLURM_STEP_NODELIST 'gpu[07-08],cpu1' names 3"},
        {"tasks per node for another number of tasks", {{}, with(srun_task("1"), {{"SLURM_STEP_TASKS_PER_NODE", "2(x3)"}})},
         "error 2: SLURM_STEP_TASKS_PER_NODE '2(x3)' places 6 tasks, but SLURM_STEP_NUM_TASKS '4' says 4"},
        {"a host listed twice", {{}, with(srun_task("1"), {{"SLURM_STEP_NODELIST", "gpu07,gpu08,gpu07"}})},
         "error 2: SLURM_STEP_NODELIST 'gpu07,gpu08,gpu07' names host 'gpu07' twice"},
        {"a host name DNS cannot look up", {{}, with(srun_task("1"), {{"SLURM_STEP_NODELIST", "gpu[07-08],cpu!"}})},
         "error 2: SLURM_STEP_NODELIST 'gpu[07-08],cpu!' gives host 'cpu!', which has a character that is not a letter, digit, "
         "'-' or '_'"},
        {"another distribution than block: the task is elsewhere on its node",
         {{}, with(srun_task("1"), {{"SLURM_LOCALID", "0"}})},
         "error 2: Slurm: SLURM_PROCID 1 is task 1 on gpu07 when tasks fill the nodes in order (SLURM_STEP_TASKS_PER_NODE "
         "'2,1(x2)'), but SLURM_LOCALID '0'; start the step with block distribution (srun --distribution=block)"},
        {"another distribution than block: the task is on another node",
         {{}, with(srun_task("2"), {{"SLURM_LOCALID", "1"}, {"SLURMD_NODENAME", "gpu07"}})},
         "error 2: Slurm: SLURM_PROCID 2 is task 0 on gpu08 when tasks fill the nodes in order (SLURM_STEP_TASKS_PER_NODE "
         "'2,1(x2)'), but SLURM_LOCALID '1' and SLURMD_NODENAME 'gpu07'; start the step with block distribution "
         "(srun --distribution=block)"},
        {"a cyclic step whose task is elsewhere than cyclic puts it",
         {{}, with(srun_task("3"), {{"SLURM_DISTRIBUTION", "cyclic"}, {"SLURMD_NODENAME", "cpu1"}})},
         "error 2: Slurm: SLURM_PROCID 3 is task 1 on gpu07 when tasks go round the nodes in turn (SLURM_DISTRIBUTION cyclic, "
         "SLURM_STEP_TASKS_PER_NODE '2,1(x2)'), but SLURMD_NODENAME 'cpu1'; start the step with block distribution "
         "(srun --distribution=block)"},
        {"plane distribution cannot be mapped, on any task", {{}, with(srun_task("0"), {{"SLURM_DISTRIBUTION", "plane"}})},
         "error 2: Slurm: SLURM_DISTRIBUTION 'plane' places tasks in a way tfboot cannot map to hosts (it maps block and cyclic); "
         "start the step with srun --distribution=block or --distribution=cyclic"},
        {"arbitrary distribution cannot be mapped", {{}, with(srun_task("0"), {{"SLURM_DISTRIBUTION", "arbitrary"}})},
         "error 2: Slurm: SLURM_DISTRIBUTION 'arbitrary' places tasks in a way tfboot cannot map to hosts (it maps block and "
         "cyclic); start the step with srun --distribution=block or --distribution=cyclic"},
        {"a port past 65535", {{"--port", "65535"}, srun_task("0")},
         "error 2: Slurm: worker:1 on gpu07 would listen on port 65536 (its type's port 65535 + 1), above 65535; use a lower --port"},
    });
  }
}

TEST_CASE("platforms::job_from_sagemaker") {
  const std::string two_hosts =
      R"({"current_host": "algo-2", "hosts": ["algo-1", "algo-2"], "network_interface_name": "eth0",)"
      R"( "current_instance_type": "ml.p3.2xlarge", "instance_groups": [{"instance_group_name": "train",)"
      R"( "instance_type": "ml.p3.2xlarge", "hosts": ["algo-2", "algo-1"]}]})";
  const std::string where = "error 2: /opt/ml/input/config/resourceconfig.json";
  SUBCASE("hosts in the given order; the own position is the index") {
    check_rows(sagemaker, {
        {"workers", {{}, {}, sagemaker_file(two_hosts)},
         "worker:1 from SageMaker (current_host 'algo-2' in /opt/ml/input/config/resourceconfig.json) | worker algo-1:2222 "
         "algo-2:2222"},
        {"--chief-at-ordinal-0: the first host is the chief", {{"--chief-at-ordinal-0"}, {}, sagemaker_file(two_hosts)},
         "worker:0 from SageMaker (current_host 'algo-2' in /opt/ml/input/config/resourceconfig.json), chief at ordinal 0 | "
         "chief algo-1:2222; worker algo-2:2222"},
        {"the order is SageMaker's, not sorted", {{"--port", "7777"}, {}, sagemaker_file(R"({"current_host":"b","hosts":["b","a"]})")},
         "worker:0 from SageMaker (current_host 'b' in /opt/ml/input/config/resourceconfig.json) | worker b:7777 a:7777"},
        {"one host", {{}, {}, sagemaker_file(R"({"current_host":"algo-1","hosts":["algo-1"]})")},
         "worker:0 from SageMaker (current_host 'algo-1' in /opt/ml/input/config/resourceconfig.json) | worker algo-1:2222"},
        {"no file: not SageMaker", {{}, {}, PlatformFiles{}}, "none"},
    });
  }
  SUBCASE("bad or partial data is a usage error naming the file") {
    check_rows(sagemaker, {
        {"empty", {{}, {}, sagemaker_file("")}, where + " is not valid JSON"},
        {"not JSON", {{}, {}, sagemaker_file("{current_host: algo-1}")}, where + " is not valid JSON"},
        {"not an object", {{}, {}, sagemaker_file(R"(["algo-1"])")}, where + " is not a JSON object"},
        {"no current_host", {{}, {}, sagemaker_file(R"({"hosts":["algo-1"]})")},
         where + ": \"current_host\" is missing or not a non-empty string"},
        {"current_host not a string", {{}, {}, sagemaker_file(R"({"current_host":1,"hosts":["algo-1"]})")},
         where + ": \"current_host\" is missing or not a non-empty string"},
        {"no hosts", {{}, {}, sagemaker_file(R"({"current_host":"algo-1"})")}, where + ": \"hosts\" is missing or not a non-empty list"},
        {"empty hosts", {{}, {}, sagemaker_file(R"({"current_host":"algo-1","hosts":[]})")},
         where + ": \"hosts\" is missing or not a non-empty list"},
        {"a host that is not a string", {{}, {}, sagemaker_file(R"({"current_host":"algo-1","hosts":["algo-1",2]})")},
         where + ": \"hosts\" holds a value that is not a string"},
        {"a host twice", {{}, {}, sagemaker_file(R"({"current_host":"algo-1","hosts":["algo-1","algo-1"]})")},
         where + ": \"hosts\" lists 'algo-1' twice"},
        {"current_host not among the hosts", {{}, {}, sagemaker_file(R"({"current_host":"algo-3","hosts":["algo-1","algo-2"]})")},
         where + ": current_host 'algo-3' is not in \"hosts\""},
        {"a host DNS cannot look up", {{}, {}, sagemaker_file(R"({"current_host":"algo-1","hosts":["algo-1","algo 2"]})")},
         where + " \"hosts\" gives host 'algo 2', which has a character that is not a letter, digit, '-' or '_'"},
        {"nested too deep", {{}, {}, sagemaker_file(std::string(100, '[') + std::string(100, ']'))},
         where + " is nested more than 16 levels deep"},
    });
  }
  // A heterogeneous cluster: "data" (algo-1, algo-2) feeds "train" (algo-3, algo-4). Each group's
  // own list need not be in the same order on every host (here algo-3's file puts algo-4 first).
  const std::string two_groups =
      R"({"current_host": "algo-3", "current_group_name": "train", "hosts": ["algo-1", "algo-2", "algo-3", "algo-4"],)"
      R"( "instance_groups": [{"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "hosts": ["algo-2", "algo-1"]},)"
      R"( {"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-4", "algo-3"]}]})";
  auto groups_with = [&](const std::string& from, const std::string& to) {
    std::string text = two_groups;
    text.replace(text.find(from), from.size(), to);
    return sagemaker_file(text);
  };
  SUBCASE("several instance groups: the current group's hosts, as AWS's training toolkit distributes by default") {
    check_rows(sagemaker, {
        {"the training group", {{}, {}, sagemaker_file(two_groups)},
         "worker:0 from SageMaker (current_host 'algo-3' in instance group 'train' of /opt/ml/input/config/resourceconfig.json) | "
         "worker algo-3:2222 algo-4:2222"},
        {"--chief-at-ordinal-0: the group's first host in \"hosts\" is the chief", {{"--chief-at-ordinal-0"}, {}, sagemaker_file(two_groups)},
         "chief:0 from SageMaker (current_host 'algo-3' in instance group 'train' of /opt/ml/input/config/resourceconfig.json), "
         "chief at ordinal 0 | chief algo-3:2222; worker algo-4:2222"},
        {"a host of the other group forms that group's job",
         {{}, {}, groups_with(R"("current_host": "algo-3", "current_group_name": "train")",
                              R"("current_host": "algo-1", "current_group_name": "data")")},
         "worker:0 from SageMaker (current_host 'algo-1' in instance group 'data' of /opt/ml/input/config/resourceconfig.json) | "
         "worker algo-1:2222 algo-2:2222"},
        {"one group: every host of \"hosts\", in its order, as before", {{}, {}, sagemaker_file(two_hosts)},
         "worker:1 from SageMaker (current_host 'algo-2' in /opt/ml/input/config/resourceconfig.json) | worker algo-1:2222 "
         "algo-2:2222"},
    });
  }
  SUBCASE("several instance groups that do not say which group this host is in are a usage error asking for --cluster") {
    check_rows(sagemaker, {
        {"no current_group_name", {{}, {}, groups_with(R"("current_group_name": "train", )", "")},
         where + ": \"instance_groups\" lists 2 groups but \"current_group_name\" is missing or not a non-empty string, so "
                 "the job's hosts are unknown; describe the job with --cluster (and --peer-template, --task-index)"},
        {"a current group that is not listed", {{}, {}, groups_with(R"("current_group_name": "train")", R"("current_group_name": "eval")")},
         where + ": current_group_name 'eval' is not in \"instance_groups\", so the job's hosts are unknown; describe the job "
                 "with --cluster (and --peer-template, --task-index)"},
        {"current_host outside its group", {{}, {}, groups_with(R"("current_host": "algo-3")", R"("current_host": "algo-1")")},
         where + ": current_host 'algo-1' is not in instance group 'train'"},
        {"a group host that is not in hosts", {{}, {}, groups_with(R"(["algo-4", "algo-3"])", R"(["algo-9", "algo-3"])")},
         where + ": instance group 'train' lists 'algo-9', which is not in \"hosts\""},
        {"a group listed twice", {{}, {}, groups_with(R"("instance_group_name": "data")", R"("instance_group_name": "train")")},
         where + ": \"instance_groups\" lists group 'train' twice"},
        {"a group without hosts", {{}, {}, groups_with(R"("hosts": ["algo-2", "algo-1"])", R"("hosts": "algo-2")")},
         where + ": \"instance_groups\" holds an entry that is not {\"instance_group_name\": <text>, \"hosts\": [<text>, ...]}"},
    });
  }
  SUBCASE("current_host against the hostname: SageMaker's container has the instance's name, not current_host") {
    check_rows(sagemaker, {
        {"the instance's name (SageMaker)", {{}, {{"TRAINING_JOB_NAME", "mnist-1"}}, sagemaker_file(two_hosts), "ip-10-0-103-105"},
         "worker:1 from SageMaker (current_host 'algo-2' in /opt/ml/input/config/resourceconfig.json) | worker algo-1:2222 "
         "algo-2:2222"},
        {"current_host itself (a gethostname() that reads the file, as the toolkit preloads for MPI)",
         {{}, {}, sagemaker_file(two_hosts), "algo-2"},
         "worker:1 from SageMaker (current_host 'algo-2' in /opt/ml/input/config/resourceconfig.json) | worker algo-1:2222 "
         "algo-2:2222"},
        {"another of the job's hosts", {{}, {}, sagemaker_file(two_hosts), "algo-1"},
         "error 2: SageMaker: /opt/ml/input/config/resourceconfig.json says this is current_host 'algo-2', but hostname "
         "'algo-1' (from gethostname()) is another of its hosts"},
        {"a hostname tfboot was given", {{"--hostname", "trainer-1"}, {}, sagemaker_file(two_hosts)},
         "error 2: SageMaker: /opt/ml/input/config/resourceconfig.json says this is current_host 'algo-2', but hostname "
         "'trainer-1' (from --hostname) says otherwise (a copy of the file left in the image? remove it, or give --cluster)"},
        {"a Kubernetes pod's name", {{}, {{"POD_NAME", "mnist-worker-1"}}, sagemaker_file(two_hosts)},
         "error 2: SageMaker: /opt/ml/input/config/resourceconfig.json says this is current_host 'algo-2', but hostname "
         "'mnist-worker-1' (from POD_NAME) says otherwise (a copy of the file left in the image? remove it, or give --cluster)"},
    });
  }
}

TEST_CASE("platforms::job_from_volcano") {
  // Pods of Volcano job "mnist": tasks ps (1) and worker (2), hosts <job>-<task>-<index>.<job>.
  const Environment mnist{{"VC_PS_HOSTS", "mnist-ps-0.mnist"},
                          {"VC_PS_NUM", "1"},
                          {"VC_WORKER_HOSTS", "mnist-worker-0.mnist,mnist-worker-1.mnist"},
                          {"VC_WORKER_NUM", "2"}};
  const std::string peers = " | worker mnist-worker-0.mnist:2222 mnist-worker-1.mnist:2222; ps mnist-ps-0.mnist:2222";
  SUBCASE("the index from the env plugin, the type from the list that holds the own hostname") {
    check_rows(volcano, {
        {"a worker", {{}, with(mnist, {{"VC_TASK_INDEX", "1"}, {"POD_NAME", "mnist-worker-1"}})},
         "worker:1 from Volcano (VC_TASK_INDEX, type from hostname 'mnist-worker-1' (from POD_NAME) in VC_WORKER_HOSTS)" + peers},
        {"the ps, by gethostname()", {{}, with(mnist, {{"VC_TASK_INDEX", "0"}}), {}, "mnist-ps-0"},
         "ps:0 from Volcano (VC_TASK_INDEX, type from hostname 'mnist-ps-0' (from gethostname()) in VC_PS_HOSTS)" + peers},
        {"VK_TASK_INDEX, the older name", {{}, with(mnist, {{"VK_TASK_INDEX", "1"}}), {}, "mnist-worker-1"},
         "worker:1 from Volcano (VK_TASK_INDEX, type from hostname 'mnist-worker-1' (from gethostname()) in VC_WORKER_HOSTS)" +
             peers},
        {"no index variable: the position in the list", {{}, mnist, {}, "mnist-worker-1"},
         "worker:1 from Volcano (hostname 'mnist-worker-1' (from gethostname()) in VC_WORKER_HOSTS, position 1)" + peers},
        {"a hostname outside the lists: the type in the hostname", {{"--hostname", "other-ps-0"}, with(mnist, {{"VC_TASK_INDEX", "0"}})},
         "ps:0 from Volcano (VC_TASK_INDEX, type from hostname 'other-ps-0' (from --hostname))" + peers},
        {"--task-type", {{"--task-type", "ps"}, with(mnist, {{"VC_TASK_INDEX", "0"}}), {}, "3f2a9c0d1e4b"},
         "ps:0 from Volcano (VC_TASK_INDEX, type from --task-type)" + peers},
        {"--task-type that agrees with the list keeps the position", {{"--task-type", "worker"}, mnist, {}, "mnist-worker-1"},
         "worker:1 from Volcano (hostname 'mnist-worker-1' (from gethostname()) in VC_WORKER_HOSTS, position 1)" + peers},
        {"ports per type", {{"--port", "2222,ps=2223"}, with(mnist, {{"VC_TASK_INDEX", "0"}}), {}, "mnist-ps-0"},
         "ps:0 from Volcano (VC_TASK_INDEX, type from hostname 'mnist-ps-0' (from gethostname()) in VC_PS_HOSTS) | worker "
         "mnist-worker-0.mnist:2222 mnist-worker-1.mnist:2222; ps mnist-ps-0.mnist:2223"},
        {"a task named master is the chief",
         {{}, {{"VC_TASK_INDEX", "0"}, {"VC_MASTER_HOSTS", "j-master-0.j"}, {"VC_WORKER_HOSTS", "j-worker-0.j"}}, {}, "j-master-0"},
         "chief:0 from Volcano (VC_TASK_INDEX, type from hostname 'j-master-0' (from gethostname()) in VC_MASTER_HOSTS) | chief "
         "j-master-0.j:2222; worker j-worker-0.j:2222"},
        {"other tasks of the job are not TensorFlow's", {{}, with(mnist, {{"VC_TASK_INDEX", "0"}, {"VC_LAUNCHER_HOSTS", "x.mnist"}}), {},
                                                        "mnist-ps-0"},
         "ps:0 from Volcano (VC_TASK_INDEX, type from hostname 'mnist-ps-0' (from gethostname()) in VC_PS_HOSTS)" + peers},
        {"no Volcano variables or files: not Volcano", {{}, {{"POD_NAME", "mnist-worker-1"}}}, "none"},
    });
  }
  SUBCASE("VC_<TASK>_NUM is compared as a number, not as text") {
    const std::string worker_1 =
        "worker:1 from Volcano (VC_TASK_INDEX, type from hostname 'mnist-worker-1' (from gethostname()) in VC_WORKER_HOSTS)" + peers;
    for (const char* count : {"2", "02", "+2", " 2", "2 ", "\t2\n"}) {
      CAPTURE(count);
      CHECK(volcano({{}, with(mnist, {{"VC_TASK_INDEX", "1"}, {"VC_WORKER_NUM", count}}), {}, "mnist-worker-1"}) == worker_1);
    }
  }
  SUBCASE("the files under /etc/volcano when the variables are missing") {
    PlatformFiles files;
    files.volcano_host_files["worker.host"] = "mnist-worker-0.mnist\nmnist-worker-1.mnist";
    files.volcano_host_files["ps.host"] = "mnist-ps-0.mnist\n";
    check_rows(volcano, {
        {"the files alone", {{}, {{"VC_TASK_INDEX", "1"}}, files, "mnist-worker-1"},
         "worker:1 from Volcano (VC_TASK_INDEX, type from hostname 'mnist-worker-1' (from gethostname()) in "
         "/etc/volcano/worker.host)" + peers},
        {"a variable beats its file", {{}, {{"VC_TASK_INDEX", "0"}, {"VC_WORKER_HOSTS", "w-0.x"}}, files, "w-0"},
         "worker:0 from Volcano (VC_TASK_INDEX, type from hostname 'w-0' (from gethostname()) in VC_WORKER_HOSTS) | worker "
         "w-0.x:2222; ps mnist-ps-0.mnist:2222"},
    });
  }
  SUBCASE("bad or partial data is a usage error naming the variable or file") {
    check_rows(volcano, {
        {"an index but no host lists", {{}, {{"VC_TASK_INDEX", "0"}}},
         "error 2: Volcano (VC_TASK_INDEX is set): no VC_CHIEF_HOSTS, VC_WORKER_HOSTS, VC_PS_HOSTS or VC_EVALUATOR_HOSTS, nor "
         "/etc/volcano/<task>.host (enable the svc plugin, and name the job's tasks chief, worker, ps or evaluator)"},
        {"a count that does not match its list", {{}, with(mnist, {{"VC_TASK_INDEX", "0"}, {"VC_WORKER_NUM", "3"}}), {}, "mnist-ps-0"},
         "error 2: VC_WORKER_NUM '3' does not match VC_WORKER_HOSTS, which lists 2 hosts"},
        {"a count that is no number", {{}, with(mnist, {{"VC_TASK_INDEX", "0"}, {"VC_WORKER_NUM", "two"}}), {}, "mnist-ps-0"},
         "error 2: VC_WORKER_NUM 'two' is not a number of hosts"},
        {"a negative count", {{}, with(mnist, {{"VC_TASK_INDEX", "0"}, {"VC_WORKER_NUM", "-2"}}), {}, "mnist-ps-0"},
         "error 2: VC_WORKER_NUM '-2' is not a number of hosts"},
        {"a count with a tail", {{}, with(mnist, {{"VC_TASK_INDEX", "0"}, {"VC_WORKER_NUM", "2x"}}), {}, "mnist-ps-0"},
         "error 2: VC_WORKER_NUM '2x' is not a number of hosts"},
        {"a count past any list", {{}, with(mnist, {{"VC_TASK_INDEX", "0"}, {"VC_WORKER_NUM", "99999999999999999999"}}), {}, "mnist-ps-0"},
         "error 2: VC_WORKER_NUM '99999999999999999999' does not match VC_WORKER_HOSTS, which lists 2 hosts"},
        {"an index outside the own list", {{"--task-type", "worker"}, with(mnist, {{"VC_TASK_INDEX", "2"}})},
         "error 2: VC_TASK_INDEX '2' is outside VC_WORKER_HOSTS, which lists 2 hosts"},
        {"an index that is not a number", {{}, with(mnist, {{"VC_TASK_INDEX", "one"}}), {}, "mnist-ps-0"},
         "error 2: VC_TASK_INDEX 'one' is not a non-negative integer"},
        {"an index that contradicts the own place in the list", {{}, with(mnist, {{"VC_TASK_INDEX", "0"}}), {}, "mnist-worker-1"},
         "error 2: VC_TASK_INDEX '0' contradicts hostname 'mnist-worker-1' (from gethostname()) in VC_WORKER_HOSTS at position 1"},
        {"a hostname that says nothing", {{}, with(mnist, {{"VC_TASK_INDEX", "0"}}), {}, "3f2a9c0d1e4b"},
         "error 2: Volcano: hostname '3f2a9c0d1e4b' (from gethostname()) is in none of the job's host lists and names no listed task "
         "type; set --task-type"},
        {"no index and a hostname outside the lists", {{"--task-type", "ps"}, mnist, {}, "3f2a9c0d1e4b"},
         "error 2: Volcano: VC_TASK_INDEX is not set (enable the env plugin)"},
        {"--task-type of a type the job does not have", {{"--task-type", "chief"}, with(mnist, {{"VC_TASK_INDEX", "0"}})},
         "error 2: Volcano: this task is a chief (from --task-type), but the job lists no chief hosts"},
        {"--task-type that contradicts the list holding the own hostname", {{"--task-type", "chief"}, with(mnist, {{"VC_TASK_INDEX", "0"}}), {},
                                                                             "mnist-worker-0"},
         "error 2: Volcano: --task-type 'chief' contradicts VC_WORKER_HOSTS, which lists hostname 'mnist-worker-0' (from gethostname())"},
        {"a bad --task-type", {{"--task-type", "boss"}, with(mnist, {{"VC_TASK_INDEX", "0"}})},
         "error 2: --task-type 'boss' is not a task type (use chief, worker, ps or evaluator)"},
        {"both chief and master", {{}, {{"VC_TASK_INDEX", "0"}, {"VC_CHIEF_HOSTS", "a.j"}, {"VC_MASTER_HOSTS", "b.j"}}},
         "error 2: Volcano: both VC_CHIEF_HOSTS and VC_MASTER_HOSTS list the chief"},
        {"two chiefs", {{}, {{"VC_TASK_INDEX", "0"}, {"VC_CHIEF_HOSTS", "a-chief-0.a,a-chief-1.a"}}, {}, "a-chief-0"},
         "error 2: Volcano describes 2 chief tasks; TensorFlow allows one"},
        {"an empty entry", {{}, {{"VC_TASK_INDEX", "0"}, {"VC_WORKER_HOSTS", "a-0.a,,a-1.a"}}, {}, "a-0"},
         "error 2: VC_WORKER_HOSTS gives host '', which is empty"},
        {"a host twice", {{}, {{"VC_TASK_INDEX", "0"}, {"VC_WORKER_HOSTS", "a-0.a,a-0.a"}}, {}, "a-0"},
         "error 2: VC_WORKER_HOSTS lists 'a-0.a' twice"},
    });
  }
}

TEST_CASE("platforms::job_from_jobset") {
  const std::string fqdn = ".bert.ml.svc.cluster.local.";
  const std::string source_of_worker_1 = "worker:1 from JobSet 'bert' (replicated job worker, job index 1, from /etc/podinfo)";
  SUBCASE("one replicated job: the whole cluster is in the pod's labels") {
    check_rows(jobset, {
        {"the Service from the kubelet's /etc/hosts line, names fully qualified",
         {{}, {}, jobset_pod(jobset_labels("worker", "3", "1", "3")), "bert-worker-1-0", jobset_hosts_file},
         source_of_worker_1 + " | worker bert-worker-0-0" + fqdn + ":2222 bert-worker-1-0" + fqdn + ":2222 bert-worker-2-0" + fqdn +
             ":2222"},
        {"no Service known: bare names", {{}, {}, jobset_pod(jobset_labels("worker", "2", "1", "2")), "bert-worker-1-0"},
         source_of_worker_1 + " | worker bert-worker-0-0:2222 bert-worker-1-0:2222"},
        {"the labels only as annotations", {{}, {}, jobset_pod("", jobset_labels("worker", "2", "1", "2")), "bert-worker-1-0"},
         source_of_worker_1 + " | worker bert-worker-0-0:2222 bert-worker-1-0:2222"},
        {"the completion index from JOB_COMPLETION_INDEX",
         {{}, {{"JOB_COMPLETION_INDEX", "0"}}, jobset_pod(jobset_labels("worker", "2", "1", "2", false)), "bert-worker-1-0"},
         source_of_worker_1 + " | worker bert-worker-0-0:2222 bert-worker-1-0:2222"},
        {"--port", {{"--port", "3000"}, {}, jobset_pod(jobset_labels("worker", "2", "1", "2")), "bert-worker-1-0"},
         source_of_worker_1 + " | worker bert-worker-0-0:3000 bert-worker-1-0:3000"},
        {"no JobSet labels: not a JobSet", {{}, {}, jobset_pod("app=\"x\""), "bert-worker-1-0"}, "none"},
        {"no pod-info files: not a JobSet", {{}, {}, PlatformFiles{}, "bert-worker-1-0"}, "none"},
    });
  }
  SUBCASE("the pod's own hostname must be the one its labels give it") {
    const auto pod = jobset_pod(jobset_labels("worker", "2", "1", "2"));
    const std::string peers = " | worker bert-worker-0-0:2222 bert-worker-1-0:2222";
    check_rows(jobset, {
        {"--hostname, first label", {{"--hostname", "bert-worker-1-0.bert"}, {}, pod, "3f2a9c0d1e4b"}, source_of_worker_1 + peers},
        {"a Job's pod name (POD_NAME) has a random suffix: the hostname counts",
         {{}, {{"POD_NAME", "bert-worker-1-0-x7k2p"}}, pod, "bert-worker-1-0"}, source_of_worker_1 + peers},
        {"another task's hostname", {{}, {}, pod, "bert-worker-0-0"},
         "error 2: JobSet 'bert': the labels in /etc/podinfo make this pod bert-worker-1-0 (replicated job worker, job index 1), "
         "but its hostname is 'bert-worker-0-0' (from gethostname())"},
        {"a --hostname that contradicts the labels", {{"--hostname", "mnist-worker-1"}, {}, pod, "bert-worker-1-0"},
         "error 2: JobSet 'bert': the labels in /etc/podinfo make this pod bert-worker-1-0 (replicated job worker, job index 1), "
         "but its hostname is 'mnist-worker-1' (from --hostname)"},
        {"labels of another JobSet's pod", {{}, {}, pod, "gpt-worker-1-0"},
         "error 2: JobSet 'bert': the labels in /etc/podinfo make this pod bert-worker-1-0 (replicated job worker, job index 1), "
         "but its hostname is 'gpt-worker-1-0' (from gethostname())"},
    });
  }
  SUBCASE("several replicated jobs: the annotation tfboot/cluster gives the others' counts") {
    const std::string annotated = jobset_labels("worker", "2", "1", "3") + "\ntfboot/cluster=\"chief=1,worker=2\"";
    check_rows(jobset, {
        {"chief and workers", {{}, {}, jobset_pod(jobset_labels("worker", "2", "1", "3"), annotated), "bert-worker-1-0", jobset_hosts_file},
         source_of_worker_1 + " | chief bert-chief-0-0" + fqdn + ":2222; worker bert-worker-0-0" + fqdn + ":2222 bert-worker-1-0" +
             fqdn + ":2222"},
        {"the chief's pod", {{"--port", "2222,chief=2224"}, {}, jobset_pod(jobset_labels("chief", "1", "0", "3") +
                                                                      "\ntfboot/cluster=\"chief=1,worker=2\""),
                             "bert-chief-0-0"},
         "chief:0 from JobSet 'bert' (replicated job chief, job index 0, from /etc/podinfo) | chief bert-chief-0-0:2224; worker "
         "bert-worker-0-0:2222 bert-worker-1-0:2222"},
    });
  }
  SUBCASE("what the labels cannot say, and bad data, are usage errors naming the file") {
    auto labels_with = [](const std::string& extra) { return jobset_labels("worker", "2", "1", "3") + "\n" + extra; };
    check_rows(jobset, {
        {"other replicated jobs without the annotation", {{}, {}, jobset_pod(jobset_labels("worker", "2", "1", "3"))},
         "error 2: JobSet: /etc/podinfo/labels: jobset.sigs.k8s.io/global-replicas '3' counts other replicated jobs, whose "
         "replicas are in no label of this pod; set the annotation tfboot/cluster (e.g. \"chief=1,worker=4\") on every pod template"},
        {"other replicated jobs, and the annotations not mounted", {{}, {}, [&] {
           PlatformFiles files = jobset_pod(jobset_labels("worker", "2", "1", "3"));
           files.pod_annotations.reset();
           return files;
         }()},
         "error 2: JobSet: /etc/podinfo/labels: jobset.sigs.k8s.io/global-replicas '3' counts other replicated jobs, whose "
         "replicas are in no label of this pod; set the annotation tfboot/cluster (e.g. \"chief=1,worker=4\") on every pod template, "
         "and mount the pod's annotations (/etc/podinfo/annotations is missing)"},
        {"an old controller without global-replicas", {{}, {}, jobset_pod(jobset_labels("worker", "2", "1", ""))},
         "error 2: JobSet: jobset.sigs.k8s.io/global-replicas is not set (a JobSet controller before it); set the annotation "
         "tfboot/cluster (e.g. \"chief=1,worker=4\") on every pod template"},
        {"an annotation that contradicts the replicas", {{}, {}, jobset_pod(labels_with("tfboot/cluster=\"chief=1,worker=4\""))},
         "error 2: /etc/podinfo/labels: tfboot/cluster 'chief=1,worker=4' says worker=4, but "
         "/etc/podinfo/labels: jobset.sigs.k8s.io/replicatedjob-replicas '2'"},
        {"an annotation that does not add up", {{}, {}, jobset_pod(labels_with("tfboot/cluster=\"ps=2,worker=2\""))},
         "error 2: /etc/podinfo/labels: tfboot/cluster 'ps=2,worker=2' adds up to 4 tasks, but /etc/podinfo/labels: "
         "jobset.sigs.k8s.io/global-replicas '3'"},
        {"a malformed annotation", {{}, {}, jobset_pod(labels_with("tfboot/cluster=\"chief=1,workers=2\""))},
         "error 2: /etc/podinfo/labels: tfboot/cluster 'chief=1,workers=2': unknown task type 'workers' (use chief, worker, ps or "
         "evaluator)"},
        {"a replicated job not named after a task type", {{}, {}, jobset_pod(jobset_labels("trainer", "2", "1", "2"))},
         "error 2: /etc/podinfo/labels: jobset.sigs.k8s.io/replicatedjob-name 'trainer' is not a task type: name the replicated "
         "jobs chief, worker, ps or evaluator"},
        {"master is not accepted: the peers' names need the type's own name",
         {{}, {}, jobset_pod(jobset_labels("master", "1", "0", "1"))},
         "error 2: /etc/podinfo/labels: jobset.sigs.k8s.io/replicatedjob-name 'master' is not a task type: name the replicated "
         "jobs chief, worker, ps or evaluator"},
        {"replicas that are not a number", {{}, {}, jobset_pod(jobset_labels("worker", "x", "1", "2"))},
         "error 2: /etc/podinfo/labels: jobset.sigs.k8s.io/replicatedjob-replicas 'x' is not a positive integer"},
        {"a job index outside the replicas", {{}, {}, jobset_pod(jobset_labels("worker", "2", "2", "2"))},
         "error 2: /etc/podinfo/labels: jobset.sigs.k8s.io/job-index '2' is not an index below /etc/podinfo/labels: "
         "jobset.sigs.k8s.io/replicatedjob-replicas '2'"},
        {"a missing label", {{}, {}, jobset_pod("jobset.sigs.k8s.io/jobset-name=\"bert\"")},
         "error 2: /etc/podinfo: a pod of JobSet 'bert' without jobset.sigs.k8s.io/replicatedjob-name in its labels or "
         "annotations"},
        {"several pods per Job", {{}, {{"JOB_COMPLETION_INDEX", "1"}}, jobset_pod(jobset_labels("worker", "1", "0", "1", false))},
         "error 2: JobSet: JOB_COMPLETION_INDEX '1': tfboot derives the cluster when each Job runs one pod (completions: 1, "
         "replicas: the task count); with more pods per Job set TFBOOT_CLUSTER and TFBOOT_PEER_TEMPLATE"},
        {"no completion index anywhere", {{}, {}, jobset_pod(jobset_labels("worker", "1", "0", "1", false))},
         "error 2: JobSet: neither batch.kubernetes.io/job-completion-index nor JOB_COMPLETION_INDEX is set: the replicated "
         "jobs' Jobs must be Indexed (completionMode: Indexed)"},
        {"a malformed line", {{}, {}, jobset_pod("jobset.sigs.k8s.io/jobset-name=bert")},
         "error 2: /etc/podinfo/labels: the line of 'jobset.sigs.k8s.io/jobset-name' is not "
         "jobset.sigs.k8s.io/jobset-name=\"<value>\""},
    });
  }
}

// What Kubeflow Trainer's torch runtime injects into node `rank` of TrainJob "bert" with 3 nodes.
Environment trainjob_node(const std::string& rank) {
  return {{"PET_NNODES", "3"},
          {"PET_NODE_RANK", rank},
          {"PET_MASTER_ADDR", "bert-node-0-0.bert"},
          {"PET_MASTER_PORT", "29500"},
          {"PET_NPROC_PER_NODE", "2"}};
}

TEST_CASE("platforms::job_from_kubeflow") {
  SUBCASE("a TrainJob's torch runtime: node k is <job>-node-0-k in the master's subdomain") {
    check_rows(kubeflow, {
        {"node 2", {{}, trainjob_node("2")},
         "worker:2 from Kubeflow (PET_NODE_RANK=2) | worker bert-node-0-0.bert:29500 "
         "bert-node-0-1.bert:29500 bert-node-0-2.bert:29500"},
        {"--port wins over PET_MASTER_PORT", {{"--port", "23456"}, trainjob_node("0")},
         "worker:0 from Kubeflow (PET_NODE_RANK=0) | worker bert-node-0-0.bert:23456 "
         "bert-node-0-1.bert:23456 bert-node-0-2.bert:23456"},
        {"no PET_* variables: not Kubeflow", {{}, {{"POD_NAME", "bert-node-0-1"}}}, "none"},
    });
  }
  SUBCASE("a PyTorchJob: the master is the chief, worker k-1 is node k") {
    Environment env{{"PET_NNODES", "3"}, {"PET_NODE_RANK", "1"}, {"PET_MASTER_ADDR", "mnist-master-0"}, {"PET_MASTER_PORT", "23456"}};
    check_rows(kubeflow, {
        {"worker-0 is node 1", {{}, env},
         "worker:0 from Kubeflow (PET_NODE_RANK=1) | chief mnist-master-0:23456; worker "
         "mnist-worker-0:23456 mnist-worker-1:23456"},
        {"the master is node 0", {{}, with(env, {{"PET_NODE_RANK", "0"}})},
         "chief:0 from Kubeflow (PET_NODE_RANK=0) | chief mnist-master-0:23456; worker "
         "mnist-worker-0:23456 mnist-worker-1:23456"},
    });
  }
  SUBCASE("an older PyTorchJob's MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK, with --framework pytorch only") {
    Environment env{{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "mnist-master-0"}, {"MASTER_PORT", "23456"}};
    check_rows(kubeflow, {
        {"asked for", {{"--framework", "pytorch"}, env},
         "worker:0 from Kubeflow (RANK=1) | chief mnist-master-0:23456; worker mnist-worker-0:23456"},
        {"not asked for: any launcher may have left these", {{}, env}, "none"},
    });
  }
  SUBCASE("a TrainJob's JAX runtime") {
    Environment env{{"JAX_NUM_PROCESSES", "2"}, {"JAX_PROCESS_ID", "1"}, {"JAX_COORDINATOR_ADDRESS", "lm-node-0-0.lm:29500"}};
    check_rows(kubeflow, {
        {"process 1", {{}, env},
         "worker:1 from Kubeflow (JAX_PROCESS_ID=1) | worker lm-node-0-0.lm:29500 lm-node-0-1.lm:29500"},
        {"an address without a port", {{}, with(env, {{"JAX_COORDINATOR_ADDRESS", "lm-node-0-0.lm"}})},
         "error 2: JAX_COORDINATOR_ADDRESS 'lm-node-0-0.lm' must be host:port"},
    });
  }
  SUBCASE("partial or malformed variables are usage errors naming them") {
    check_rows(kubeflow, {
        {"a rank without the rest", {{}, {{"PET_NODE_RANK", "1"}}},
         "error 2: Kubeflow: PET_NODE_RANK is set but PET_NNODES, PET_MASTER_ADDR, PET_MASTER_PORT is not"},
        {"a rank outside the nodes", {{}, with(trainjob_node("0"), {{"PET_NODE_RANK", "3"}})},
         "error 2: PET_NODE_RANK '3' must be a node rank 0..2 (PET_NNODES is 3)"},
        {"a port that is no port", {{}, with(trainjob_node("0"), {{"PET_MASTER_PORT", "http"}})},
         "error 2: PET_MASTER_PORT 'http' must be a number 1..65535"},
        {"a master whose name gives no others", {{}, with(trainjob_node("0"), {{"PET_MASTER_ADDR", "trainer.example"}})},
         "error 2: PET_MASTER_ADDR 'trainer.example' is not named like node 0 of a TrainJob (<name>-node-0-0) or of a "
         "PyTorchJob (<name>-master-0), so the other nodes' names are unknown; give --cluster (and --peer-template)"},
    });
  }
}

TEST_CASE("platforms::job_from_sagemaker warns when nothing says this is a SageMaker job") {
  const std::string file = R"({"current_host":"algo-1","hosts":["algo-1","algo-2"]})";
  auto warnings_of = [&](const Environment& env, const std::string& system_hostname) {
    auto options = parse_options({}, env);
    REQUIRE(options);
    auto parsed = parse_plan_inputs(*options, env);
    REQUIRE(parsed);
    HostFacts facts{system_hostname, "", "", {}, sagemaker_file(file)};
    Hostname hostname = choose_hostname(options->hostname, env, facts.system_hostname);
    auto job = job_from_sagemaker(PlatformInputs{*parsed, env, facts, hostname});
    REQUIRE(job);
    REQUIRE(*job);
    return (*job)->warnings;
  };
  SUBCASE("a training job: SageMaker sets TRAINING_JOB_NAME, and the instance's name is the hostname") {
    CHECK(warnings_of({{"TRAINING_JOB_NAME", "mnist-1"}}, "ip-10-0-103-105").empty());
  }
  SUBCASE("the hostname is current_host") { CHECK(warnings_of({}, "algo-1").empty()); }
  SUBCASE("neither: the file may be a copy left in the image") {
    CHECK(warnings_of({}, "3f2a9c0d1e4b") ==
          std::vector<std::string>{"SageMaker: /opt/ml/input/config/resourceconfig.json says this is current_host 'algo-1', "
                                   "hostname '3f2a9c0d1e4b' is none of its hosts and TRAINING_JOB_NAME is not set: if this is "
                                   "not a SageMaker training job, the file is a copy left in the image (remove it, or give --cluster)"});
  }
}

TEST_CASE("platforms: a platform file that is there but cannot be read is a usage error naming it") {
  PlatformFiles files;
  SUBCASE("SageMaker's") {
    files.unreadable["/opt/ml/input/config/resourceconfig.json"] = "Permission denied";
    CHECK(sagemaker({{}, {}, files}) ==
          "error 2: /opt/ml/input/config/resourceconfig.json exists but cannot be read (Permission denied)");
  }
  SUBCASE("Volcano's, when no variable stands in for it") {
    files.unreadable["/etc/volcano/worker.host"] = "a directory";
    CHECK(volcano({{}, {{"VC_TASK_INDEX", "0"}}, files}) == "error 2: /etc/volcano/worker.host exists but cannot be read (a directory)");
    CHECK(volcano({{}, {}, files}) == "error 2: /etc/volcano/worker.host exists but cannot be read (a directory)");
    CHECK(volcano({{}, {{"VC_TASK_INDEX", "0"}, {"VC_WORKER_HOSTS", "w-0.x"}}, files, "w-0"}) ==
          "worker:0 from Volcano (VC_TASK_INDEX, type from hostname 'w-0' (from gethostname()) in VC_WORKER_HOSTS) | worker w-0.x:2222");
  }
  SUBCASE("a JobSet pod's, even when the other file has the labels") {
    files = jobset_pod(jobset_labels("worker", "2", "1", "2"));
    files.pod_labels.reset();
    files.unreadable["/etc/podinfo/labels"] = "a FIFO";
    CHECK(jobset({{}, {}, files, "bert-worker-1-0"}) == "error 2: /etc/podinfo/labels exists but cannot be read (a FIFO)");
  }
}

TEST_CASE("host_facts::gather_host_facts notes the platform files that are there but cannot be read") {
  namespace fs = std::filesystem;
  std::string pattern = "/tmp/tfboot-host-facts-test-XXXXXX";
  REQUIRE(::mkdtemp(pattern.data()) != nullptr);
  const fs::path dir = pattern;
  auto facts_for = [&] {
    const std::vector<std::string> args{"--pod-info-dir", dir.string()};
    auto options = parse_options(args, {});
    REQUIRE(options);
    return gather_host_facts(options->pod_info_dir.value).platform_files;
  };
  SUBCASE("absent files are simply absent") {
    auto files = facts_for();
    CHECK(files.pod_labels == std::nullopt);
    CHECK(files.unreadable.count(dir.string() + "/labels") == 0);
  }
  SUBCASE("a FIFO, a directory, a file over 1 MiB") {
    REQUIRE(::mkfifo((dir / "labels").c_str(), 0600) == 0);
    fs::create_directory(dir / "annotations");
    auto files = facts_for();
    CHECK(files.pod_labels == std::nullopt);
    CHECK(files.unreadable[dir.string() + "/labels"] == "a FIFO");
    CHECK(files.unreadable[dir.string() + "/annotations"] == "a directory");
    fs::remove(dir / "labels");
    std::ofstream(dir / "labels") << std::string(1024 * 1024 + 1, 'x');
    CHECK(facts_for().unreadable[dir.string() + "/labels"] == "larger than 1 MiB");
  }
  SUBCASE("a readable file is read") {
    std::ofstream(dir / "labels") << "jobset.sigs.k8s.io/jobset-name=\"bert\"";
    auto files = facts_for();
    CHECK(files.pod_labels == std::optional<std::string>("jobset.sigs.k8s.io/jobset-name=\"bert\""));
    CHECK(files.unreadable.count(dir.string() + "/labels") == 0);
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

TEST_CASE("platforms::describe_job_by_platform asks JobSet, Volcano, Slurm, SageMaker in this order") {
  PlatformFiles all = jobset_pod(jobset_labels("worker", "2", "1", "2"));
  all.sagemaker_resource_config = R"({"current_host":"algo-1","hosts":["algo-1"]})";
  const Environment volcano_env{{"VC_TASK_INDEX", "0"}, {"VC_WORKER_HOSTS", "v-worker-0.v"}};
  const Environment both_env = with(srun_task("1"), volcano_env);
  PlatformFiles sagemaker_only;
  sagemaker_only.sagemaker_resource_config = all.sagemaker_resource_config;
  check_rows(any_platform, {
      {"JobSet first", {{}, both_env, all, "bert-worker-1-0"},
       "worker:1 from JobSet 'bert' (replicated job worker, job index 1, from /etc/podinfo) | worker bert-worker-0-0:2222 "
       "bert-worker-1-0:2222"},
      {"then Volcano", {{}, both_env, sagemaker_only, "v-worker-0"},
       "worker:0 from Volcano (VC_TASK_INDEX, type from hostname 'v-worker-0' (from gethostname()) in VC_WORKER_HOSTS) | worker "
       "v-worker-0.v:2222"},
      {"then Slurm", {{}, srun_task("1"), sagemaker_only},
       "worker:1 from Slurm (SLURM_PROCID) | worker gpu07:2222 gpu07:2223 gpu08:2222 cpu1:2222"},
      {"then SageMaker", {{}, {}, sagemaker_only},
       "worker:0 from SageMaker (current_host 'algo-1' in /opt/ml/input/config/resourceconfig.json) | worker algo-1:2222"},
      {"none", {{}, {{"POD_NAME", "mnist-worker-0"}}}, "none"},
      {"the first platform found answers, errors included", {{}, srun_task("1"), jobset_pod("jobset.sigs.k8s.io/jobset-name=\"b\"")},
       "error 2: /etc/podinfo: a pod of JobSet 'b' without jobset.sigs.k8s.io/replicatedjob-name in its labels or annotations"},
  });
}

TEST_CASE("platforms::cluster_counts_text") {
  std::vector<PeerAddress> peers{{TaskType::chief, 0, "a", 1}, {TaskType::worker, 0, "b", 1}, {TaskType::worker, 1, "c", 1},
                                 {TaskType::ps, 0, "d", 1}};
  CHECK(cluster_counts_text(peers) == "chief=1,worker=2,ps=1");
  CHECK(cluster_counts_text({}) == "");
}

}  // namespace tfboot
