"""tfboot's exit codes as the tests name them: the table in docs/supervision.md ("Exit codes")."""

OK = 0
USAGE = 2                 # usage or configuration error (bad flag, env, hostname, cluster spec, TF_CONFIG)
UNRESOLVED = 3            # peers did not resolve before the deadline
LOG_NOT_WRITTEN = 4       # log dir or file could not be written
BARRIER_INCOMPLETE = 5    # not every task of the job was present by --start-timeout
ENV_CHECK_FAILED = 6      # --env-check fail: the tasks run different environments
RESOURCE_REFUSED = 7      # memory, processes, descriptors, a free port
PREFLIGHT_REFUSED = 8     # --preflight: a node cannot run the job (log root, clock, accelerators)
PREEMPTED = 42            # the command's own (TensorFlow's preemption handler), passed on unchanged
NOT_EXECUTABLE = 126
NOT_FOUND = 127
STOPPED_BY_JOB = 200      # another task of the job failed, or the coordinator was lost


def by_signal(number):
    """The code of a process ended by signal `number`, as tfboot and a shell report it."""
    return 128 + number
