/* The benchmark's stopwatch: runs a program and reports its wall time and peak RSS as JSON.
 *
 * Why C and not Python: Linux carries the peak RSS of the process that forked over exec
 * (exec_mmap records the old mm's high-water mark in signal->maxrss), so a child forked from a
 * 20 MB Python would report at least 20 MB. This helper is tiny and statically linked, so the
 * child's ru_maxrss is the program's own (the floor it adds is reported as "self_maxrss_kb").
 * It also keeps fork/exec overhead out of the numbers as far as possible.
 *
 *   measure once [--stdout FILE] [--stderr FILE] -- PROGRAM [ARG...]
 *       One run. Prints {"first_line_s": time from just before the spawn to the first newline on
 *       the program's stdout (TF_CONFIG printed), "exit_s": time until it was reaped, "status":
 *       exit code (or -signal), "maxrss_kb": the child's ru_maxrss, "user_s"/"system_s": its CPU
 *       time, "self_maxrss_kb"}. The
 *       program's stdout is copied to FILE (default: discarded), stderr goes to FILE (default
 *       /dev/null).
 *   measure loop COUNT -- PROGRAM [ARG...]
 *       COUNT runs one after the other, stdout and stderr to /dev/null. Prints {"seconds":
 *       [wall time of each run, spawn to reaped], "status": first non-zero exit status or 0,
 *       "self_maxrss_kb"}.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double timeval_seconds(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

static int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1000;
}

static long self_maxrss_kb(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

static int usage(void) {
  fprintf(stderr, "usage: measure once [--stdout FILE] [--stderr FILE] -- PROGRAM [ARG...]\n"
                  "       measure loop COUNT -- PROGRAM [ARG...]\n");
  return 2;
}

/* posix_spawn (vfork-like in glibc) keeps the spawn itself as cheap as it gets. */
static pid_t spawn(char **argv, int stdout_fd, int stderr_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, stderr_fd, 2);
  pid_t pid = -1;
  int error = posix_spawn(&pid, argv[0], &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    fprintf(stderr, "measure: cannot run %s: %s\n", argv[0], strerror(error));
    return -1;
  }
  return pid;
}

static int run_once(const char *stdout_path, const char *stderr_path, char **argv) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return perror("measure: pipe"), 1;
  int err_fd = open(stderr_path ? stderr_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int out_fd = stdout_path ? open(stdout_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
  if (err_fd < 0 || (stdout_path && out_fd < 0)) return perror("measure: open"), 1;

  double start = now_seconds();
  pid_t pid = spawn(argv, pipe_fds[1], err_fd);
  if (pid < 0) return 1;
  close(pipe_fds[1]);

  double first_line = -1;
  char buffer[65536];
  for (;;) {
    ssize_t got = read(pipe_fds[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (first_line < 0 && memchr(buffer, '\n', (size_t)got)) first_line = now_seconds() - start;
    if (out_fd >= 0 && write(out_fd, buffer, (size_t)got) != got) return perror("measure: write"), 1;
  }
  int status = 0;
  struct rusage usage;
  while (wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) return perror("measure: wait4"), 1;
  }
  double finished = now_seconds() - start;
  printf("{\"first_line_s\": %.9f, \"exit_s\": %.9f, \"status\": %d, \"maxrss_kb\": %ld, \"user_s\": %.6f, "
         "\"system_s\": %.6f, \"self_maxrss_kb\": %ld}\n",
         first_line, finished, exit_status(status), usage.ru_maxrss, timeval_seconds(usage.ru_utime),
         timeval_seconds(usage.ru_stime), self_maxrss_kb());
  return 0;
}

static int run_loop(long count, char **argv) {
  int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd < 0) return perror("measure: /dev/null"), 1;
  double *seconds = calloc((size_t)count, sizeof *seconds);
  if (!seconds) return 1;
  int first_failure = 0;
  for (long i = 0; i < count; ++i) {
    double start = now_seconds();
    pid_t pid = spawn(argv, null_fd, null_fd);
    if (pid < 0) return 1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) return perror("measure: waitpid"), 1;
    }
    seconds[i] = now_seconds() - start;
    if (!first_failure && exit_status(status) != 0) first_failure = exit_status(status);
  }
  printf("{\"seconds\": [");
  for (long i = 0; i < count; ++i) printf("%s%.9f", i ? ", " : "", seconds[i]);
  printf("], \"status\": %d, \"self_maxrss_kb\": %ld}\n", first_failure, self_maxrss_kb());
  free(seconds);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  int i = 2;
  const char *stdout_path = NULL, *stderr_path = NULL;
  long count = 0;
  if (strcmp(argv[1], "once") == 0) {
    for (; i + 1 < argc && strcmp(argv[i], "--") != 0; i += 2) {
      if (strcmp(argv[i], "--stdout") == 0) stdout_path = argv[i + 1];
      else if (strcmp(argv[i], "--stderr") == 0) stderr_path = argv[i + 1];
      else return usage();
    }
  } else if (strcmp(argv[1], "loop") == 0 && argc > 2) {
    count = strtol(argv[2], NULL, 10);
    if (count < 1 || count > 100000) return usage();
    i = 3;
  } else {
    return usage();
  }
  if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc) return usage();
  char **program = argv + i + 1;
  return count ? run_loop(count, program) : run_once(stdout_path, stderr_path, program);
}
