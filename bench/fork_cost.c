/*
 * fork_cost.c - what a fork costs a recorded program: N forks of a child that exits at
 * once (_exit(0), or exit(0) with "exit"), the mean time from fork() to waitpid()'s return
 * and the parent's time in fork() itself. Run it bare and under `fennec record` in each
 * mode (docs/api.md, "What recording costs a program"): the child of a recorded process
 * records itself into a sibling file (its header, its writer or lazy writer, its rings,
 * its final flush), which a child that lives microseconds pays in full.
 *
 * Usage: fork_cost [N [exit]]   (default 200)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200, use_exit = argc > 2 && !strcmp(argv[2], "exit");
	double total = 0, in_fork = 0;
	if (n < 1)
		n = 1;
	for (int i = 0; i < n; i++) {
		double t0 = now_s();
		pid_t p = fork();
		if (p == 0) {
			if (use_exit)
				exit(0);
			_exit(0);
		}
		if (p < 0) {
			perror("fork");
			return 1;
		}
		double t1 = now_s();
		waitpid(p, NULL, 0);
		total += now_s() - t0;
		in_fork += t1 - t0;
	}
	printf("fork+wait %.3f ms, fork() in the parent %.3f ms (mean of %d)\n", total / n * 1e3, in_fork / n * 1e3, n);
	return 0;
}
