/* lendsup.c — supervision of the lend children; see lendsup.h. */
#include "node-agent/lendsup.h"

#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000

void lendsup_init(struct lendsup_child *c, const char *dir, const char *name,
                  int64_t id)
{
	memset(c, 0, sizeof *c);
	c->contract = id;
	c->ended_code = -1;
	c->death_signal = SIGTERM;
	snprintf(c->name, sizeof c->name, "%s", name);
	snprintf(c->secret_file, sizeof c->secret_file, "%s/%s-%lld.secret",
	         dir, name, (long long)id);
	snprintf(c->meter_file, sizeof c->meter_file, "%s/%s-%lld.meter", dir,
	         name, (long long)id);
	snprintf(c->log_file, sizeof c->log_file, "%s/%s-%lld.log", dir, name,
	         (long long)id);
	c->backoff_ms = BACKOFF_MIN_MS;
}

void lendsup_arg(struct lendsup_child *c, const char *fmt, ...)
{
	va_list ap;
	if (c->argc >= LENDSUP_ARGS - 1)
		return;
	va_start(ap, fmt);
	vsnprintf(c->argv_buf[c->argc++], LENDSUP_PATH, fmt, ap);
	va_end(ap);
}

int lendsup_write_secret(struct lendsup_child *c, const char *hex, char *err,
                         size_t errlen)
{
	/* created 0600 from the start (and chmod'ed, in case it existed):
	 * the secret lets anyone read or write the contract's pages */
	int fd =
	    open(c->secret_file,
	         O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "could not write %s: %s", c->secret_file,
		         strerror(errno));
		return -1;
	}
	size_t n = strlen(hex);
	int ok = fchmod(fd, 0600) == 0 && write(fd, hex, n) == (ssize_t)n &&
	         write(fd, "\n", 1) == 1;
	if (close(fd) != 0)
		ok = 0;
	if (!ok) {
		snprintf(err, errlen, "could not write %s: %s", c->secret_file,
		         strerror(errno));
		return -1;
	}
	return 0;
}

int lendsup_start(struct lendsup_child *c, int64_t now_ms, char *err,
                  size_t errlen)
{
	char *argv[LENDSUP_ARGS];
	for (int i = 0; i < c->argc; i++)
		argv[i] = c->argv_buf[i];
	argv[c->argc] = NULL;
	if (c->argc == 0 || access(argv[0], X_OK) != 0) {
		snprintf(err, errlen,
		         "%s is not an executable (set lend_bin_dir to the "
		         "directory of the ramex-lend-* programs)",
		         c->argc ? argv[0] : "(no program)");
		return -1;
	}
	/* Every signal is blocked across the fork: a SIGTERM that reaches
	 * the child before its exec must not run the agent's handler there
	 * (it would wake the agent's loop and leave the child running); it
	 * stays pending until the child has default dispositions. */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		/* the agent's own dispositions (handlers, SIGPIPE ignored)
		 * are not the child's */
		for (int sig = 1; sig < NSIG; sig++)
			if (sig != SIGKILL && sig != SIGSTOP)
				signal(sig, SIG_DFL);
		prctl(PR_SET_PDEATHSIG, c->death_signal);
		if (getppid() != parent)
			_exit(1);
		int fd = open(c->log_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(argv[0], argv);
		_exit(127);
	}
	int fork_errno = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		snprintf(err, errlen, "fork failed: %s", strerror(fork_errno));
		return -1;
	}
	c->pid = pid;
	c->starts++;
	c->restart_at_ms = now_ms + c->backoff_ms;
	log_info("lend child started",
	         "contract=%lld child=%s pid=%d starts=%d log=%s",
	         (long long)c->contract, c->name, (int)pid, c->starts,
	         c->log_file);
	return 0;
}

int lendsup_final_code(const struct lendsup_child *c)
{
	return c->ended_code;
}

void lendsup_poll(struct lendsup_child *c, int64_t now_ms)
{
	char err[512];
	if (c->pid > 0) {
		int st;
		pid_t w = waitpid(c->pid, &st, WNOHANG);
		if (w == c->pid) {
			c->pid = 0;
			c->last_status = st;
			int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
			int clean = code == 0;
			int final = clean || (code > 0 && code < 32 &&
			                      (c->final_exits & (1u << code)));
			log_info(
			    clean ? "lend child ended" : "lend child failed",
			    "contract=%lld child=%s status=%d signal=%d "
			    "log=%s",
			    (long long)c->contract, c->name,
			    WIFEXITED(st) ? WEXITSTATUS(st) : -1,
			    WIFSIGNALED(st) ? WTERMSIG(st) : 0, c->log_file);
			if (final) {
				c->stopping = 1; /* its work is over */
				c->ended_code = code;
			} else {
				c->restart_at_ms = now_ms + c->backoff_ms;
				c->backoff_ms *= 2;
				if (c->backoff_ms > BACKOFF_MAX_MS)
					c->backoff_ms = BACKOFF_MAX_MS;
			}
		}
	}
	/* past its deadline: stopped, whether it may be restarted or was
	 * retired and still runs */
	if (c->deadline_ms && now_ms >= c->deadline_ms &&
	    (c->pid > 0 || !c->stopping)) {
		if (c->pid > 0)
			log_warn("lend child still runs at its deadline; "
			         "stopping it",
			         "contract=%lld child=%s pid=%d log=%s",
			         (long long)c->contract, c->name, (int)c->pid,
			         c->log_file);
		lendsup_stop(c, 2000);
		return;
	}
	if (c->pid == 0 && !c->stopping && now_ms >= c->restart_at_ms &&
	    lendsup_start(c, now_ms, err, sizeof err) < 0) {
		log_error("could not restart a lend child",
		          "contract=%lld err=%s", (long long)c->contract,
		          log_quote((char[600]){0}, 600, err));
		c->restart_at_ms = now_ms + c->backoff_ms;
	}
}

void lendsup_signal(struct lendsup_child *c, int sig)
{
	if (c->pid > 0)
		kill(c->pid, sig);
}

void lendsup_retire(struct lendsup_child *c, int sig, int64_t deadline_ms)
{
	c->stopping = 1;
	c->deadline_ms = deadline_ms;
	if (sig && c->pid > 0)
		kill(c->pid, sig);
}

void lendsup_stop(struct lendsup_child *c, int wait_ms)
{
	c->stopping = 1;
	if (c->pid <= 0)
		return;
	kill(c->pid, SIGTERM);
	for (int waited = 0;; waited += 20) {
		int st;
		pid_t w = waitpid(c->pid, &st, WNOHANG);
		if (w == c->pid || (w < 0 && errno != EINTR)) {
			c->last_status = st;
			break;
		}
		if (waited >= wait_ms) {
			log_warn("lend child did not stop; killing it",
			         "contract=%lld child=%s pid=%d",
			         (long long)c->contract, c->name, (int)c->pid);
			kill(c->pid, SIGKILL);
			while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR)
				;
			break;
		}
		struct timespec ts = {0, 20 * 1000000L};
		nanosleep(&ts, NULL);
	}
	c->pid = 0;
}

int lendsup_meter(const struct lendsup_child *c, struct lend_meter_report *r)
{
	char line[512];
	FILE *f = fopen(c->meter_file, "r");
	if (!f)
		return -1;
	int ok = fgets(line, sizeof line, f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	line[strcspn(line, "\r\n")] = '\0';
	return lend_meter_parse(line, r);
}

void lendsup_cleanup(struct lendsup_child *c)
{
	unlink(c->secret_file);
}

int lendsup_free_port(const char *host)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	char h[64];
	size_t n = strlen(host);
	socklen_t len;
	int port = 0;
	/* "[2001:db8::7]" as in lend_listen, or the address alone */
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof h)
		snprintf(h, sizeof h, "%.*s", (int)(n - 2), host + 1);
	else
		snprintf(h, sizeof h, "%s", host);
	if (inet_pton(AF_INET6, h, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		len = sizeof *v6;
	} else {
		v4->sin_family = AF_INET;
		if (inet_pton(AF_INET, h, &v4->sin_addr) != 1)
			v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof *v4;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	if (bind(fd, (struct sockaddr *)&ss, len) == 0 &&
	    getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		port = ntohs(ss.ss_family == AF_INET6 ? v6->sin6_port
		                                      : v4->sin_port);
	close(fd);
	return port;
}
