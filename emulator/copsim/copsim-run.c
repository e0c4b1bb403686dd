/*
 * copsim-run.c - `copsim --event=SPU_CYCLES:N --stream-out FILE -- COMMAND
 * ARGS`: one command profiled against a private copsim, the way operf
 * profiles one command (see copsim-host.h).
 *
 * The command is forked first and waits on a pipe: a private copsim serves
 * until its parent_pid ends, and that process must exist before copsim
 * does.  Then copsim is created with its socket in a fresh directory
 * ($TMPDIR/copsim-run-XXXXXX, or under /tmp), the
 * driver attached and its session started, a thread copies the stream into
 * FILE, and the command is let go with COPSIM_SOCKET naming the socket.
 * When it ends, copsim_serve() returns and copsim is torn down: its clients'
 * contexts are retired, then the session stops (its stop hook), the end of
 * the stream reaches FILE, and every slot's trace-unit counters at the stop
 * and the driver's totals go to stderr.  A private copsim removes its state
 * directory.
 */
#include "abi/trace-regs.h"
#include "emulator/copsim/copsim-host.h"
#include "lfsr/lfsr.h"
#include "common/cli.h"
#include "common/safe-file.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_FAILED	125
#define EXIT_CANNOT_RUN	126
#define EXIT_NOT_FOUND	127
#define SOCKET_NAME	"copsim.sock"
#define DIR_NAME	"copsim-run"
/* The longest $TMPDIR under which the socket's path still fits. */
#define TMPDIR_MAX	(sizeof(((struct sockaddr_un *)0)->sun_path) - \
			 sizeof("/" DIR_NAME "-XXXXXX/" SOCKET_NAME))

struct stream_copy {
	int fd;
	FILE *out;
	struct safe_out safe;		/* FILE, made by safe-file.h's rule */
	const char *path;
	int failed;
	pthread_t thread;
};

static void *copy_stream(void *arg)
{
	struct stream_copy *copy = arg;
	char buf[65536];
	ssize_t got;

	while ((got = read(copy->fd, buf, sizeof(buf))) > 0)
		if (fwrite(buf, 1, (size_t)got, copy->out) != (size_t)got)
			copy->failed = errno ? errno : EIO;
	if (got < 0)
		copy->failed = errno;
	return NULL;
}

/* The command, forked now, runs once go_fd is written to. */
static pid_t fork_command(char *const command[], const char *socket,
			  int *go_fd)
{
	int go[2];
	pid_t pid;
	char byte;

	if (pipe(go) < 0)
		return -1;
	pid = fork();
	if (pid != 0) {
		close(go[0]);
		*go_fd = go[1];
		if (pid < 0)
			close(go[1]);
		return pid;
	}
	close(go[1]);
	if (read(go[0], &byte, 1) != 1)
		_exit(EXIT_FAILED);
	close(go[0]);
	setenv("COPSIM_SOCKET", socket, 1);
	setenv("COPROF_SESSION", socket, 1);	/* libcop: no private copsim */
	execvp(command[0], command);
	fprintf(stderr, "copsim: %s: %s\n", command[0], strerror(errno));
	_exit(errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
}

static int command_status(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return EXIT_FAILED;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static void report(struct copsim_driver *d, const char *stream_path)
{
	struct copdrv_stats s;
	unsigned long long cpu;
	uint64_t lost = 0;

	copsim_driver_report_slots(d, stderr);
	copsim_driver_stats(d, &s, &cpu);
	for (int cause = 0; cause < COPSTREAM_LOST_CAUSE_END; cause++)
		lost += s.lost_by_cause[cause];
	fprintf(stderr, "copsim: %s: samples=%" PRIu64 " lost=%" PRIu64
		" fifo-overflow=%" PRIu64 " buffer-full=%" PRIu64
		" polls=%" PRIu64 " doorbell-polls=%" PRIu64 " stalls=%" PRIu64
		" stall-ns=%" PRIu64 "\n", stream_path, s.samples, lost,
		s.lost_by_cause[COPSTREAM_LOST_FIFO_OVERFLOW],
		s.lost_by_cause[COPSTREAM_LOST_BUFFER_FULL], s.polls,
		s.doorbell_polls, s.stalls, s.stall_ns);
}

/* SET and START the session `run` asks for. */
static int start_session(struct copsim_driver *d,
			 const struct copsim_run_session *run,
			 struct stream_copy *copy, char *err, size_t errlen)
{
	struct copdrv_control_params params;

	if (copsim_driver_fill_params(d, run->count, &params, err, errlen) < 0)
		return -1;
	params.fifo_full = run->fifo_full;
	params.dither = run->dither;
	params.dither_seed = run->dither_seed;
	params.event = run->event;
	if (copsim_driver_set(d, &params, err, errlen) < 0)
		return -1;
	return copsim_driver_start(d, &copy->fd, err, errlen);
}

/* Attaches the driver and starts its session; the stream goes to copy. */
static struct copsim_driver *start_driver(struct copsim *sim,
					  const struct copsim_run_session *run,
					  struct stream_copy *copy)
{
	struct copsim_driver *d;
	char err[COPSIM_TEXT_MAX];

	d = copsim_driver_attach(sim, err, sizeof(err));
	if (d && start_session(d, run, copy, err, sizeof(err)) < 0) {
		copsim_driver_detach(d);
		copsim_driver_free(d);
		d = NULL;
	}
	if (!d) {
		fprintf(stderr, "copsim: %s\n", err);
		return NULL;
	}
	pthread_create(&copy->thread, NULL, copy_stream, copy);
	return d;
}

/*
 * Opens FILE of --stream-out by safe-file.h's rule: no symbolic link
 * another user planted at it or in a parent is followed, and the stream
 * is a new file, 0600 like the session it is replayed into, put in place
 * at once (a copsim that is killed leaves what it copied).
 */
static int open_stream(struct stream_copy *copy)
{
	char err[1024];

	if (safe_out_open(&copy->safe, copy->path, SAFE_OUT_PLACE, err,
			  sizeof(err)) < 0) {
		fprintf(stderr, "copsim: %s\n", err);
		return -1;
	}
	if (!safe_out_stdio(&copy->safe, &copy->out)) {
		fprintf(stderr, "copsim: %s: %s\n", copy->path,
			strerror(errno));
		safe_out_close(&copy->safe, NULL, 0, err, sizeof(err));
		return -1;
	}
	return 0;
}

/* Closes the stream file; 0 or -1 with errno. */
static int close_stream(struct stream_copy *copy)
{
	char err[1024];

	return safe_out_close(&copy->safe, copy->out, 1, err, sizeof(err));
}

/*
 * copsim_destroy() hangs up on every client, so every context is retired
 * (its unbind drains its slot), and then calls the driver's stop hook,
 * which ends the session: the stream closes every context before STOP.
 */
static int finish(struct copsim *sim, struct copsim_driver *d,
		  struct stream_copy *copy)
{
	int failed = 0;

	copsim_destroy(sim);
	pthread_join(copy->thread, NULL);
	close(copy->fd);
	report(d, copy->path);
	copsim_driver_free(d);
	if (close_stream(copy) < 0 && !copy->failed)
		copy->failed = errno;
	if (copy->failed) {
		fprintf(stderr, "copsim: %s: %s\n", copy->path,
			strerror(copy->failed));
		failed = 1;
	}
	return failed;
}

/*
 * A count the driver would refuse, said before anything is made: the
 * stream file that would be truncated may hold an earlier recording.
 */
static int refuse_count(const struct copsim_config *config,
			const struct copsim_run_session *session)
{
	double hz = config->nominal_hz ? (double)config->nominal_hz
				       : (double)COPSIM_DEFAULT_NOMINAL_HZ;
	u32 depth = config->fifo_depth ? config->fifo_depth
				       : TRACE_DEFAULT_FIFO_DEPTH;
	char why[COPSIM_TEXT_MAX];

	if (lfsr_check_count(session->count, hz, depth, why, sizeof(why)) == 0)
		return 0;
	fprintf(stderr, "copsim: kernel driver: %s\n", why);
	return 1;
}

int copsim_driver_run_command(const struct copsim_config *base,
			      const struct copsim_run_session *session,
			      const char *stream_path, char *const command[])
{
	char dir[TMPDIR_MAX + sizeof("/" DIR_NAME "-XXXXXX")];
	char socket[sizeof(dir) + sizeof(SOCKET_NAME)];
	struct copsim_config config = *base;
	struct stream_copy copy = { .fd = -1, .path = stream_path };
	struct copsim_driver *d = NULL;
	struct copsim *sim = NULL;
	char err[1024];
	int go_fd, status;
	pid_t pid;

	if (refuse_count(base, session))
		return EXIT_FAILED;
	if (open_stream(&copy) < 0)
		return EXIT_FAILED;
	if (cli_make_temp_dir(dir, sizeof(dir), DIR_NAME, TMPDIR_MAX) < 0) {
		fprintf(stderr, "copsim: %s: %s\n", dir, strerror(errno));
		close_stream(&copy);
		return EXIT_FAILED;
	}
	snprintf(socket, sizeof(socket), "%s/%s", dir, SOCKET_NAME);
	pid = fork_command(command, socket, &go_fd);
	if (pid < 0) {
		fprintf(stderr, "copsim: fork: %s\n", strerror(errno));
		close_stream(&copy);
		rmdir(dir);
		return EXIT_FAILED;
	}
	config.socket_path = socket;
	config.state_dir = NULL;
	config.parent_pid = pid;
	sim = copsim_create(&config, err, sizeof(err));
	if (!sim)
		fprintf(stderr, "copsim: %s\n", err);
	else
		d = start_driver(sim, session, &copy);
	if (!d) {
		close(go_fd);
		command_status(pid);
		copsim_destroy(sim);
		close_stream(&copy);
		rmdir(dir);
		return EXIT_FAILED;
	}
	if (write(go_fd, "g", 1) != 1)
		fprintf(stderr, "copsim: cannot start %s\n", command[0]);
	close(go_fd);
	if (copsim_serve(sim) < 0)
		kill(pid, SIGTERM);
	status = command_status(pid);
	if (finish(sim, d, &copy))
		return EXIT_FAILED;
	rmdir(dir);
	return status;
}
