/*
 * test_critpath.c - the critical-path walk (src/analyze/critpath.c, ana_cp_walk) on
 * synthetic lanes with known answers: nested regions, a fork and join, gaps, empty and
 * clipped windows, ties, a GPU stream and its idle gaps, and random lanes (some of them
 * streams) whose pieces must tile the window.
 */
#include <stdlib.h>

#include "analyze/critpath.h"
#include "unit.h"

#define N ANA_NONE

typedef struct want {
	uint32_t lane, label;
	uint64_t s, e;
} want;

/* Walk and compare with the expected pieces; prints the pieces got on a mismatch. */
static void check_walk(int *unit_failures, const ana_cp_lane *lanes, uint32_t nlanes, const uint8_t *waiting, uint64_t t0,
		       uint64_t t1, const want *w, size_t nw)
{
	ana_cp_piece *pc = NULL;
	size_t n = 0, cap = 0;
	UNIT_CHECK_EQ(ana_cp_walk(lanes, nlanes, 0, waiting, t0, t1, &pc, &n, &cap), 0);
	UNIT_CHECK_EQ(n, nw);
	int bad = n != nw;
	for (size_t i = 0; i < n && i < nw; i++) {
		UNIT_CHECK_EQ(pc[i].lane, w[i].lane);
		UNIT_CHECK_EQ(pc[i].label, w[i].label);
		UNIT_CHECK_EQ(pc[i].start_ns, w[i].s);
		UNIT_CHECK_EQ(pc[i].end_ns, w[i].e);
		bad |= pc[i].lane != w[i].lane || pc[i].label != w[i].label || pc[i].start_ns != w[i].s || pc[i].end_ns != w[i].e;
	}
	if (bad)
		for (size_t i = 0; i < n; i++)
			printf("    got piece %zu: lane %u label %d [%llu, %llu)\n", i, pc[i].lane, (int)pc[i].label,
			       (unsigned long long)pc[i].start_ns, (unsigned long long)pc[i].end_ns);
	free(pc);
}

/* One thread: A holds B then C; the path is the innermost region at every instant. */
UNIT_TEST(critpath_nested)
{
	uint64_t t[] = {0, 1, 5, 6, 9, 10};
	uint32_t lab[] = {0, 1, 0, 2, 0, N};
	ana_cp_lane l = {t, lab, 6, 0};
	uint8_t waiting[3] = {0};
	want w[] = {{0, 0, 0, 1}, {0, 1, 1, 5}, {0, 0, 5, 6}, {0, 2, 6, 9}, {0, 0, 9, 10}};
	check_walk(unit_failures, &l, 1, waiting, 0, 10, w, 5);
	/* a window that starts and ends inside segments is clipped to them */
	want w2[] = {{0, 1, 3, 5}, {0, 0, 5, 6}, {0, 2, 6, 7}};
	check_walk(unit_failures, &l, 1, waiting, 3, 7, w2, 3);
	/* an empty window has no pieces; one after the last transition is all in its label */
	check_walk(unit_failures, &l, 1, waiting, 4, 4, NULL, 0);
	want w3[] = {{0, N, 10, 20}};
	check_walk(unit_failures, &l, 1, waiting, 10, 20, w3, 1);
}

/* One thread with a gap and a waiting region that nothing explains: both stay on it. */
UNIT_TEST(critpath_gaps)
{
	uint64_t t[] = {0, 3, 5, 8, 12};
	uint32_t lab[] = {0, N, 1, 2, N};
	ana_cp_lane l = {t, lab, 5, 0};
	uint8_t waiting[3] = {0, 0, 1};
	want w[] = {{0, 0, 0, 3}, {0, N, 3, 5}, {0, 1, 5, 8}, {0, 2, 8, 12}};
	check_walk(unit_failures, &l, 1, waiting, 0, 12, w, 4);
}

/*
 * Fork and join: the main thread loads [0, 100), waits [100, 405) for two workers, updates
 * [405, 450). work_a [102, 400) on lane 1, work_b [101, 250) on lane 2. The path is load,
 * the wake-up of lane 1 (untracked), work_a, the join's latency (wait), update; work_b is
 * not on it.
 */
UNIT_TEST(critpath_fork_join)
{
	uint64_t t0[] = {0, 100, 405, 450}, t1[] = {102, 400}, t2[] = {101, 250};
	uint32_t l0[] = {0, 1, 2, N}, l1[] = {3, N}, l2[] = {4, N};
	ana_cp_lane lanes[] = {{t0, l0, 4, 0}, {t1, l1, 2, 0}, {t2, l2, 2, 0}};
	uint8_t waiting[5] = {0, 1, 0, 0, 0};
	want w[] = {{0, 0, 0, 100}, {1, N, 100, 102}, {1, 3, 102, 400}, {0, 1, 400, 405}, {0, 2, 405, 450}};
	check_walk(unit_failures, lanes, 3, waiting, 0, 450, w, 5);
	/* the imbalance flipped: work_b is longer and the path goes through it */
	uint64_t t1b[] = {102, 250}, t2b[] = {101, 400};
	ana_cp_lane flip[] = {{t0, l0, 4, 0}, {t1b, l1, 2, 0}, {t2b, l2, 2, 0}};
	want wf[] = {{0, 0, 0, 100}, {2, N, 100, 101}, {2, 4, 101, 400}, {0, 1, 400, 405}, {0, 2, 405, 450}};
	check_walk(unit_failures, flip, 3, waiting, 0, 450, wf, 5);
	/* a tie between the workers goes to the lower lane */
	uint64_t t2c[] = {101, 400};
	ana_cp_lane tie[] = {{t0, l0, 4, 0}, {t1, l1, 2, 0}, {t2c, l2, 2, 0}};
	check_walk(unit_failures, tie, 3, waiting, 0, 450, w, 5);
	/* the same join with no "wait" region (untracked time on the main thread) */
	uint32_t l0u[] = {0, N, 2, N};
	ana_cp_lane untr[] = {{t0, l0u, 4, 0}, {t1, l1, 2, 0}, {t2, l2, 2, 0}};
	want wu[] = {{0, 0, 0, 100}, {1, N, 100, 102}, {1, 3, 102, 400}, {0, N, 400, 405}, {0, 2, 405, 450}};
	check_walk(unit_failures, untr, 3, waiting, 0, 450, wu, 5);
}

/*
 * A host thread and a GPU stream: "launch" [0, 10), "synchronize" (waiting) [10, 90),
 * "post" [90, 100); kernels k1 [15, 40) and k2 [40, 85) back to back. The path: launch,
 * the stream's idle start (untracked), k1, k2, the synchronize's tail, post.
 */
UNIT_TEST(critpath_gpu_stream)
{
	uint64_t th[] = {0, 10, 90, 100}, gs[] = {15, 40, 85};
	uint32_t lh[] = {0, 1, 2, N}, lg[] = {3, 4, N};
	ana_cp_lane lanes[] = {{th, lh, 4, 0}, {gs, lg, 3, 1}};
	uint8_t waiting[5] = {0, 1, 0, 0, 0};
	want w[] = {{0, 0, 0, 10}, {1, N, 10, 15}, {1, 3, 15, 40}, {1, 4, 40, 85}, {0, 1, 85, 90}, {0, 2, 90, 100}};
	check_walk(unit_failures, lanes, 2, waiting, 0, 100, w, 6);
}

/*
 * A stream idle with nothing ending in its gap hands the path to the host work running as
 * its kernel starts (issue 5: a kernel that starts inside the region that launches it left
 * that region off the path, its time untracked on the stream).
 */
UNIT_TEST(critpath_gpu_idle_to_host)
{
	uint8_t waiting[6] = {0, 1, 0, 0, 0, 0};
	/* "launch" [0, 20) starts k1 at 15; "sync" (waiting) [20, 90); "post" [90, 100). */
	uint64_t th[] = {0, 20, 90, 100}, gs[] = {15, 85};
	uint32_t lh[] = {0, 1, 2, N}, lg[] = {3, N};
	ana_cp_lane a[] = {{th, lh, 4, 0}, {gs, lg, 2, 1}};
	want wa[] = {{0, 0, 0, 15}, {1, 3, 15, 85}, {0, 1, 85, 90}, {0, 2, 90, 100}};
	check_walk(unit_failures, a, 2, waiting, 0, 100, wa, 4);
	/* A starved stream: "forward" [0, 60) launches k1 [5, 20), k2 [30, 50), k3 [55, 85);
	 * the host is the bottleneck until k3 starts, and k1 and k2 are off the path. */
	uint64_t tb[] = {0, 60, 90, 100}, gb[] = {5, 20, 30, 50, 55, 85};
	uint32_t lgb[] = {3, N, 4, N, 5, N};
	ana_cp_lane b[] = {{tb, lh, 4, 0}, {gb, lgb, 6, 1}};
	want wb[] = {{0, 0, 0, 55}, {1, 5, 55, 85}, {0, 1, 85, 90}, {0, 2, 90, 100}};
	check_walk(unit_failures, b, 2, waiting, 0, 100, wb, 4);
	/* The stepping thread waits from the start; another thread's "prep" [0, 40) runs as
	 * k1 [15, 85) starts: the path goes there. */
	uint64_t tc[] = {0, 90, 100}, tp[] = {0, 40};
	uint32_t lc[] = {1, 2, N}, lp[] = {0, N};
	ana_cp_lane c[] = {{tc, lc, 3, 0}, {tp, lp, 2, 0}, {gs, lg, 2, 1}};
	want wc[] = {{1, 0, 0, 15}, {2, 3, 15, 85}, {0, 1, 85, 90}, {0, 2, 90, 100}};
	check_walk(unit_failures, c, 3, waiting, 0, 100, wc, 4);
	/* The same lane as a second stream: streams do not launch, so the gap stays untracked. */
	c[1].gpu = 1;
	want wd[] = {{2, N, 0, 15}, {2, 3, 15, 85}, {0, 1, 85, 90}, {0, 2, 90, 100}};
	check_walk(unit_failures, c, 3, waiting, 0, 100, wd, 4);
}

/* Zero-length segments and repeated times never make the path nor stop it. */
UNIT_TEST(critpath_zero_length)
{
	uint64_t t0[] = {0, 10, 10, 10, 20}, t1[] = {5, 15, 15};
	uint32_t l0[] = {0, 1, 2, 3, N}, l1[] = {4, 5, N};
	ana_cp_lane lanes[] = {{t0, l0, 5, 0}, {t1, l1, 3, 0}};
	uint8_t waiting[6] = {0, 0, 0, 1, 0, 0};
	/* At 20 the main thread has waited (label 3) since 10. Lane 1's label 5 (zero length
	 * at 15) is skipped; its label 4 [5, 15) ends last. Before 5 lane 1 is idle and no work
	 * ends in [0, 5) (main's label 0 ends at 10): untracked on lane 1. */
	want w[] = {{1, N, 0, 5}, {1, 4, 5, 15}, {0, 3, 15, 20}};
	check_walk(unit_failures, lanes, 2, waiting, 0, 20, w, 3);
}

/* Random lanes: the pieces tile the window, each work piece has its lane's label there. */
UNIT_TEST(critpath_random_tiling)
{
	srand(11);
	enum { LANES = 4, TR = 40, LABELS = 6 };
	uint64_t t[LANES][TR];
	uint32_t lab[LANES][TR];
	ana_cp_lane lanes[LANES];
	uint8_t waiting[LABELS] = {0, 0, 0, 0, 1, 1};
	ana_cp_piece *pc = NULL;
	size_t n = 0, cap = 0;
	for (int round = 0; round < 300; round++) {
		for (int l = 0; l < LANES; l++) {
			uint64_t x = (uint64_t)(rand() % 20);
			size_t k = (size_t)(rand() % TR);
			for (size_t i = 0; i < k; i++) {
				x += (uint64_t)(rand() % 30); /* zero steps too */
				t[l][i] = x;
				lab[l][i] = rand() % 4 ? (uint32_t)(rand() % LABELS) : N;
			}
			lanes[l] = (ana_cp_lane){t[l], lab[l], k, l > 0 && rand() % 2};
		}
		uint64_t a = (uint64_t)(rand() % 300), b = a + (uint64_t)(rand() % 500);
		UNIT_CHECK_EQ(ana_cp_walk(lanes, LANES, 0, waiting, a, b, &pc, &n, &cap), 0);
		uint64_t at = a;
		for (size_t i = 0; i < n; i++) {
			UNIT_CHECK_EQ(pc[i].start_ns, at);
			UNIT_CHECK(pc[i].end_ns > pc[i].start_ns);
			at = pc[i].end_ns;
			/* the lane's label all over the piece is the piece's label */
			const ana_cp_lane *l = &lanes[pc[i].lane];
			ptrdiff_t j = -1;
			for (size_t q = 0; q < l->n; q++)
				if (l->t[q] <= pc[i].start_ns)
					j = (ptrdiff_t)q;
			UNIT_CHECK_EQ(pc[i].label, j >= 0 ? l->lab[j] : N);
			for (size_t q = 0; q < l->n; q++) /* zero-length segments aside */
				if (l->t[q] > pc[i].start_ns && l->t[q] < pc[i].end_ns && (q + 1 == l->n || l->t[q + 1] > l->t[q]))
					UNIT_CHECK_EQ(l->lab[q], pc[i].label);
		}
		UNIT_CHECK_EQ(at, n ? b : a);
		if (*unit_failures)
			break;
	}
	free(pc);
}
