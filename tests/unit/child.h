/* SPDX-License-Identifier: MIT
 * For unit tests whose checks must run in a child process (a seccomp
 * filter, Landlock, rlimits: things a process cannot undo).  The child
 * reports a failed check as a sentence on a pipe and exits 1; the parent
 * turns that, or a signal, into a cmocka failure.
 *
 * Every forked child of a unit test comes from fork_child(): cmocka
 * catches the signals of a crash to fail the running test and go on with
 * the next, so a child that kept its handlers would, on a crash, go on
 * running the parent's tests and print a summary of its own.
 *
 * Header-only: the unit-test link rule builds each test from its own file
 * and the module objects it names, nothing shared.
 */
#ifndef KOTOBA_TESTS_CHILD_H
#define KOTOBA_TESTS_CHILD_H

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int report_fd __attribute__((unused)) = -1;

/* fork(), and in the child the default action for every signal cmocka
 * catches (its exception_signals): a crash there ends the child, and the
 * parent reads the signal from its status.  A child leaves by _exit only. */
static inline pid_t fork_child(void)
{
	static const int caught[] = { SIGFPE, SIGILL, SIGSEGV, SIGBUS, SIGSYS };
	pid_t pid = fork();

	if (pid == 0)
		for (size_t i = 0; i < sizeof(caught) / sizeof(caught[0]); i++)
			signal(caught[i], SIG_DFL);
	return pid;
}

__attribute__((noreturn, format(printf, 1, 2))) static inline void child_fail(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0 && write(report_fd, buf, strlen(buf)) < 0) {
		/* the exit status still says it failed */
	}
	_exit(1);
}

/* Runs setup() (when given) and body() in a child; fails the test with
 * the child's message, or with its signal if something killed it. */
static inline void run_in_child_after(void (*setup)(void), void (*body)(void))
{
	char msg[1024] = "";
	int pfd[2], status;
	ssize_t n;
	pid_t pid;

	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	pid = fork_child();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		report_fd = pfd[1];
		if (setup)
			setup();
		body();
		_exit(0);
	}
	close(pfd[1]);
	n = read(pfd[0], msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = '\0';
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("child killed by signal %d", WTERMSIG(status));
	if (WEXITSTATUS(status) != 0)
		fail_msg("%s", msg[0] ? msg : "child failed without a message");
}

/* cmocka counts a skip in a setup function as a failed setup: a test that
 * changes uid skips from its own body, naming what it needed. */
static inline void need_root_and_service_user(const char *for_what)
{
	if (geteuid() != 0) {
		print_message("skipped: %s needs root\n", for_what);
		skip();
	}
	if (!getpwnam("kotoba")) {
		print_message("skipped: no service user 'kotoba' (make run creates it)\n");
		skip();
	}
}

#endif
