/*
 * mlp_train.c - a small, real training loop instrumented with fennec: an MLP
 * (64 -> H -> H/2 -> 10, ReLU, softmax cross-entropy, SGD with momentum) learns a
 * synthetic 10-class task from a fixed-seed generator. It is what `make demo` profiles
 * and what the docs and tests use; run unprofiled, the fennec calls are no-ops.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fennec.h"

#define N_IN 64          /* input features */
#define N_CLASSES 10     /* output classes */
#define N_LATENT 8       /* dimension of the hidden structure the data is drawn from */
#define N_MODES 4        /* Gaussian modes per class in latent space */
#define N_TRAIN 16384    /* training samples */
#define N_TEST 2048      /* held-out samples */
#define EVAL_CHUNK 256   /* samples per forward pass during evaluation */

/* ---- random numbers ------------------------------------------------------------ */

typedef struct rng {
	uint64_t s;
} rng;

/* Next 64 random bits (splitmix64: tiny, fast, good enough for data and init). */
static uint64_t rng_next(rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A uniform float in [0, 1). */
static float rng_uniform(rng *r)
{
	return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* A uniform integer in [0, n), n > 0. */
static uint32_t rng_below(rng *r, uint32_t n)
{
	return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* A standard normal sample (Box-Muller; the second value is discarded for simplicity). */
static float rng_normal(rng *r)
{
	float u1 = rng_uniform(r), u2 = rng_uniform(r);
	if (u1 < 1e-7f)
		u1 = 1e-7f;
	return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

/* ---- data -------------------------------------------------------------------- */

typedef struct dataset {
	int n;
	float *x;  /* n * N_IN raw features */
	int *y;    /* n labels in [0, N_CLASSES) */
} dataset;

/* The generator of the task: latent class modes and a fixed random nonlinear embedding
 * x = tanh(M z + c) + noise, so the classes are curved, overlapping manifolds in 64-D. */
typedef struct task {
	float mode[N_CLASSES][N_MODES][N_LATENT];
	float m[N_IN][N_LATENT];
	float c[N_IN];
} task;

/* Fill `t` with a task drawn from `r`. */
static void task_init(task *t, rng *r)
{
	for (int k = 0; k < N_CLASSES; k++)
		for (int j = 0; j < N_MODES; j++)
			for (int d = 0; d < N_LATENT; d++)
				t->mode[k][j][d] = 1.2f * rng_normal(r);
	for (int i = 0; i < N_IN; i++) {
		for (int d = 0; d < N_LATENT; d++)
			t->m[i][d] = rng_normal(r) * 0.6f;
		t->c[i] = 0.3f * rng_normal(r);
	}
}

/* Draw `n` labelled samples of task `t` into `ds` (allocated here). Returns 0 or -1. */
static int dataset_make(dataset *ds, const task *t, int n, rng *r)
{
	ds->n = n;
	ds->x = malloc((size_t)n * N_IN * sizeof(float));
	ds->y = malloc((size_t)n * sizeof(int));
	if (!ds->x || !ds->y)
		return -1;
	for (int s = 0; s < n; s++) {
		int k = (int)rng_below(r, N_CLASSES);
		int j = (int)rng_below(r, N_MODES);
		float z[N_LATENT];
		for (int d = 0; d < N_LATENT; d++)
			z[d] = t->mode[k][j][d] + 0.7f * rng_normal(r);
		float *x = ds->x + (size_t)s * N_IN;
		for (int i = 0; i < N_IN; i++) {
			float a = t->c[i];
			for (int d = 0; d < N_LATENT; d++)
				a += t->m[i][d] * z[d];
			x[i] = tanhf(a) + 0.1f * rng_normal(r);
		}
		ds->y[s] = k;
	}
	return 0;
}

/* Release the arrays of `ds`. */
static void dataset_free(dataset *ds)
{
	free(ds->x);
	free(ds->y);
}

/* Per-feature mean and 1/stddev of `ds`, for normalising inputs. */
static void feature_stats(const dataset *ds, float *mean, float *inv_std)
{
	for (int i = 0; i < N_IN; i++) {
		double s = 0, s2 = 0;
		for (int k = 0; k < ds->n; k++) {
			double v = ds->x[(size_t)k * N_IN + i];
			s += v;
			s2 += v * v;
		}
		double m = s / ds->n, var = s2 / ds->n - m * m;
		mean[i] = (float)m;
		inv_std[i] = (float)(1.0 / sqrt(var > 1e-12 ? var : 1e-12));
	}
}

/* The training input pipeline: an epoch order, normalisation and augmentation. */
typedef struct loader {
	const dataset *ds;
	int *order;  /* a permutation of [0, ds->n) */
	int pos;     /* next index into order */
	float mean[N_IN], inv_std[N_IN];
	rng r;
} loader;

/* Shuffle the epoch order in place (Fisher-Yates). */
static void loader_shuffle(loader *ld)
{
	for (int i = ld->ds->n - 1; i > 0; i--) {
		int j = (int)rng_below(&ld->r, (uint32_t)i + 1);
		int t = ld->order[i];
		ld->order[i] = ld->order[j];
		ld->order[j] = t;
	}
	ld->pos = 0;
}

/* Copy the next `b` samples into x (b * N_IN) and y, normalised and augmented with
 * Gaussian jitter and random feature dropout; reshuffles at each epoch's end. */
static void loader_next(loader *ld, int b, float *x, int *y)
{
	for (int s = 0; s < b; s++) {
		if (ld->pos == ld->ds->n)
			loader_shuffle(ld);
		int k = ld->order[ld->pos++];
		const float *src = ld->ds->x + (size_t)k * N_IN;
		float *dst = x + (size_t)s * N_IN;
		for (int i = 0; i < N_IN; i++) {
			float v = (src[i] - ld->mean[i]) * ld->inv_std[i];
			v += 0.1f * rng_normal(&ld->r);
			if (rng_below(&ld->r, 32) == 0)
				v = 0.0f; /* drop about 3% of the features */
			dst[i] = v;
		}
		y[s] = ld->ds->y[k];
	}
}

/* ---- model ------------------------------------------------------------------- */

/* A fully connected layer y = x W + b, with W stored [in][out] so that the inner loops
 * run over contiguous outputs. g* are gradients, v* momentum buffers. */
typedef struct linear {
	int in, out;
	float *w, *b, *gw, *gb, *vw, *vb;
} linear;

/* Allocate `l` with weights N(0, gain / in): gain 2 (He) before a ReLU, 1 for the
 * output layer so the first logits are moderate. Returns 0 or -1. */
static int linear_init(linear *l, int in, int out, float gain, rng *r)
{
	size_t nw = (size_t)in * out;
	l->in = in;
	l->out = out;
	l->w = malloc(nw * sizeof(float));
	l->gw = calloc(nw, sizeof(float));
	l->vw = calloc(nw, sizeof(float));
	l->b = calloc((size_t)out, sizeof(float));
	l->gb = calloc((size_t)out, sizeof(float));
	l->vb = calloc((size_t)out, sizeof(float));
	if (!l->w || !l->gw || !l->vw || !l->b || !l->gb || !l->vb)
		return -1;
	float scale = sqrtf(gain / (float)in);
	for (size_t i = 0; i < nw; i++)
		l->w[i] = scale * rng_normal(r);
	return 0;
}

/* Release the arrays of `l`. */
static void linear_free(linear *l)
{
	free(l->w);
	free(l->gw);
	free(l->vw);
	free(l->b);
	free(l->gb);
	free(l->vb);
}

/* y[b][out] = x[b][in] W + bias, for `n` rows. */
static void linear_forward(const linear *l, int n, const float *x, float *y)
{
	for (int s = 0; s < n; s++) {
		const float *xs = x + (size_t)s * l->in;
		float *ys = y + (size_t)s * l->out;
		memcpy(ys, l->b, (size_t)l->out * sizeof(float));
		for (int i = 0; i < l->in; i++) {
			float a = xs[i];
			const float *wi = l->w + (size_t)i * l->out;
			for (int o = 0; o < l->out; o++)
				ys[o] += a * wi[o];
		}
	}
}

/*
 * The work of a forward pass of `n` rows, for the roofline (docs/roofline.md): one
 * multiply-add (2 FLOP) per row, input and output, over at least the weights, the inputs
 * and the outputs moved once. The backward pass does twice the multiply-adds with dx and
 * moves the weights and their gradient.
 */
static void linear_work(const linear *l, int n, int backward, int with_dx)
{
	uint64_t mac = (uint64_t)n * l->in * l->out, w = (uint64_t)l->in * l->out;
	uint64_t io = (uint64_t)n * (l->in + l->out);
	if (!backward)
		fennec_region_work_fp32(2 * mac, sizeof(float) * (w + io));
	else
		fennec_region_work_fp32((with_dx ? 4 : 2) * mac,
					sizeof(float) * (2 * w + io + (with_dx ? (uint64_t)n * l->in : 0)));
}

/* Given dy (n x out) and the layer input x, set gw, gb and, if dx is not NULL,
 * dx = dy W^T (n x in). */
static void linear_backward(linear *l, int n, const float *x, const float *dy, float *dx)
{
	memset(l->gw, 0, (size_t)l->in * l->out * sizeof(float));
	memset(l->gb, 0, (size_t)l->out * sizeof(float));
	for (int s = 0; s < n; s++) {
		const float *xs = x + (size_t)s * l->in;
		const float *ds = dy + (size_t)s * l->out;
		for (int o = 0; o < l->out; o++)
			l->gb[o] += ds[o];
		for (int i = 0; i < l->in; i++) {
			float a = xs[i];
			float *gi = l->gw + (size_t)i * l->out;
			for (int o = 0; o < l->out; o++)
				gi[o] += a * ds[o];
		}
		if (dx) {
			float *dxs = dx + (size_t)s * l->in;
			for (int i = 0; i < l->in; i++) {
				const float *wi = l->w + (size_t)i * l->out;
				float acc = 0.0f;
				for (int o = 0; o < l->out; o++)
					acc += wi[o] * ds[o];
				dxs[i] = acc;
			}
		}
	}
}

/* In-place ReLU over `n` values. */
static void relu_forward(float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = v[i] > 0.0f ? v[i] : 0.0f;
}

/* Mask the gradient d by the ReLU's output a: d[i] = 0 where a[i] == 0. */
static void relu_backward(const float *a, float *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] = a[i] > 0.0f ? d[i] : 0.0f;
}

/* Turn logits (n x N_CLASSES) into probabilities in place; return the mean
 * cross-entropy against labels y, and add the number of correct argmaxes to *correct. */
static double softmax_xent(float *z, const int *y, int n, int *correct)
{
	double loss = 0.0;
	for (int s = 0; s < n; s++) {
		float *zs = z + (size_t)s * N_CLASSES;
		int arg = 0;
		for (int k = 1; k < N_CLASSES; k++)
			if (zs[k] > zs[arg])
				arg = k;
		float mx = zs[arg], sum = 0.0f;
		for (int k = 0; k < N_CLASSES; k++) {
			zs[k] = expf(zs[k] - mx);
			sum += zs[k];
		}
		for (int k = 0; k < N_CLASSES; k++)
			zs[k] /= sum;
		loss -= log(fmax(zs[y[s]], 1e-12));
		*correct += arg == y[s];
	}
	return loss / n;
}

typedef struct mlp {
	linear l1, l2, l3;
	int cap;                  /* rows the activation buffers hold */
	float *a1, *a2, *p;       /* activations: after relu1, relu2; probabilities */
	float *d1, *d2, *dp;      /* their gradients */
} mlp;

/* Build a 64 -> h -> h/2 -> 10 network with buffers for `cap` rows. Returns 0 or -1. */
static int mlp_init(mlp *m, int h, int cap, rng *r)
{
	int h2 = h / 2 > 0 ? h / 2 : 1;
	memset(m, 0, sizeof(*m));
	if (linear_init(&m->l1, N_IN, h, 2.0f, r) || linear_init(&m->l2, h, h2, 2.0f, r) ||
	    linear_init(&m->l3, h2, N_CLASSES, 1.0f, r))
		return -1;
	m->cap = cap;
	m->a1 = malloc((size_t)cap * h * sizeof(float));
	m->a2 = malloc((size_t)cap * h2 * sizeof(float));
	m->p = malloc((size_t)cap * N_CLASSES * sizeof(float));
	m->d1 = malloc((size_t)cap * h * sizeof(float));
	m->d2 = malloc((size_t)cap * h2 * sizeof(float));
	m->dp = malloc((size_t)cap * N_CLASSES * sizeof(float));
	if (!m->a1 || !m->a2 || !m->p || !m->d1 || !m->d2 || !m->dp)
		return -1;
	return 0;
}

/* Release everything `m` holds. */
static void mlp_free(mlp *m)
{
	linear_free(&m->l1);
	linear_free(&m->l2);
	linear_free(&m->l3);
	free(m->a1);
	free(m->a2);
	free(m->p);
	free(m->d1);
	free(m->d2);
	free(m->dp);
}

/* Forward `n` rows (n <= cap) of x through the network into m->p; return the mean loss
 * and count correct predictions into *correct. Per-layer regions when `traced`. */
static double mlp_forward(mlp *m, int n, const float *x, const int *y, int *correct, int traced)
{
	double loss;
	if (!traced) {
		linear_forward(&m->l1, n, x, m->a1);
		relu_forward(m->a1, (size_t)n * m->l1.out);
		linear_forward(&m->l2, n, m->a1, m->a2);
		relu_forward(m->a2, (size_t)n * m->l2.out);
		linear_forward(&m->l3, n, m->a2, m->p);
		return softmax_xent(m->p, y, n, correct);
	}
	fennec_region_begin("forward");
	fennec_region_begin("linear1");
	linear_forward(&m->l1, n, x, m->a1);
	linear_work(&m->l1, n, 0, 0);
	fennec_region_end();
	fennec_region_begin("relu1");
	relu_forward(m->a1, (size_t)n * m->l1.out);
	fennec_region_end();
	fennec_region_begin("linear2");
	linear_forward(&m->l2, n, m->a1, m->a2);
	linear_work(&m->l2, n, 0, 0);
	fennec_region_end();
	fennec_region_begin("relu2");
	relu_forward(m->a2, (size_t)n * m->l2.out);
	fennec_region_end();
	fennec_region_begin("linear3");
	linear_forward(&m->l3, n, m->a2, m->p);
	linear_work(&m->l3, n, 0, 0);
	fennec_region_end();
	fennec_region_begin("softmax");
	loss = softmax_xent(m->p, y, n, correct);
	fennec_region_end();
	fennec_region_end(); /* forward */
	return loss;
}

/* Backpropagate the mean cross-entropy of the last traced forward of `n` rows of x with
 * labels y, leaving the gradients in the layers. */
static void mlp_backward(mlp *m, int n, const float *x, const int *y)
{
	FENNEC_REGION("backward");
	{
		FENNEC_REGION("softmax_bwd");
		float inv_n = 1.0f / (float)n;
		for (int s = 0; s < n; s++)
			for (int k = 0; k < N_CLASSES; k++) {
				size_t i = (size_t)s * N_CLASSES + k;
				m->dp[i] = (m->p[i] - (k == y[s] ? 1.0f : 0.0f)) * inv_n;
			}
	}
	fennec_region_begin("linear3_bwd");
	linear_backward(&m->l3, n, m->a2, m->dp, m->d2);
	linear_work(&m->l3, n, 1, 1);
	fennec_region_end();
	fennec_region_begin("relu2_bwd");
	relu_backward(m->a2, m->d2, (size_t)n * m->l2.out);
	fennec_region_end();
	fennec_region_begin("linear2_bwd");
	linear_backward(&m->l2, n, m->a1, m->d2, m->d1);
	linear_work(&m->l2, n, 1, 1);
	fennec_region_end();
	fennec_region_begin("relu1_bwd");
	relu_backward(m->a1, m->d1, (size_t)n * m->l1.out);
	fennec_region_end();
	fennec_region_begin("linear1_bwd");
	linear_backward(&m->l1, n, x, m->d1, NULL); /* no gradient for the inputs */
	linear_work(&m->l1, n, 1, 0);
	fennec_region_end();
}

/* One SGD-with-momentum update of `l`: v = mu v + g + wd w (no decay on biases);
 * w -= lr v. */
static void sgd_update(linear *l, float lr, float mu, float wd)
{
	size_t nw = (size_t)l->in * l->out;
	for (size_t i = 0; i < nw; i++) {
		l->vw[i] = mu * l->vw[i] + l->gw[i] + wd * l->w[i];
		l->w[i] -= lr * l->vw[i];
	}
	for (int o = 0; o < l->out; o++) {
		l->vb[o] = mu * l->vb[o] + l->gb[o];
		l->b[o] -= lr * l->vb[o];
	}
}

/* Learning rate at `step` of `steps`: linear warm-up over the first 5%, then cosine
 * decay to 5% of the peak. */
static float lr_at(int step, int steps, float peak)
{
	int warm = steps / 20 > 1 ? steps / 20 : 1;
	if (step < warm)
		return peak * (float)(step + 1) / (float)warm;
	double t = (double)(step - warm) / (double)(steps - warm > 1 ? steps - warm : 1);
	return (float)(peak * (0.05 + 0.95 * 0.5 * (1.0 + cos(3.14159265358979 * t))));
}

/* Accuracy and mean loss of `m` on `ds` (normalised with the loader's statistics),
 * evaluated in chunks of EVAL_CHUNK rows using `xbuf` (EVAL_CHUNK * N_IN floats). */
static double evaluate(mlp *m, const dataset *ds, const loader *ld, float *xbuf, double *loss_out)
{
	FENNEC_REGION("evaluate");
	int correct = 0;
	double loss = 0.0;
	for (int s0 = 0; s0 < ds->n; s0 += EVAL_CHUNK) {
		int n = ds->n - s0 < EVAL_CHUNK ? ds->n - s0 : EVAL_CHUNK;
		for (int s = 0; s < n; s++)
			for (int i = 0; i < N_IN; i++)
				xbuf[(size_t)s * N_IN + i] =
					(ds->x[(size_t)(s0 + s) * N_IN + i] - ld->mean[i]) * ld->inv_std[i];
		loss += mlp_forward(m, n, xbuf, ds->y + s0, &correct, 0) * n;
	}
	*loss_out = loss / ds->n;
	return (double)correct / ds->n;
}

/* ---- driver ------------------------------------------------------------------ */

/* Print the usage line to `f`. */
static void usage(FILE *f)
{
	fprintf(f, "usage: mlp_train [--steps N] [--batch B] [--hidden H] [--seed S] [--quiet]\n");
}

/* Parse the integer value `s` of option `opt`, which must lie in [min, max], into *out;
 * 0 on success, -1 (after a message) if it is missing or bad. */
static int parse_int(const char *opt, const char *s, long min, long max, long *out)
{
	char *end;
	if (!s) {
		fprintf(stderr, "mlp_train: %s needs a value\n", opt);
		return -1;
	}
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "mlp_train: %s: expected an integer in [%ld, %ld], got '%s'\n", opt, min,
			max, s);
		return -1;
	}
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	long steps = 1200, batch = 64, hidden = 128, seed = 42;
	int quiet = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;
		if (!strcmp(a, "--steps"))
			bad = parse_int(a, v, 1, 100000000, &steps), i++;
		else if (!strcmp(a, "--batch"))
			bad = parse_int(a, v, 1, N_TRAIN, &batch), i++;
		else if (!strcmp(a, "--hidden"))
			bad = parse_int(a, v, 1, 4096, &hidden), i++;
		else if (!strcmp(a, "--seed"))
			bad = parse_int(a, v, 0, 0x7fffffffL, &seed), i++;
		else if (!strcmp(a, "--quiet"))
			quiet = 1;
		else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "mlp_train: unknown option '%s'\n", a);
			bad = 1;
		}
		if (bad) {
			usage(stderr);
			return 2;
		}
	}

	/* The task and the held-out set depend only on the seed; so do the init and the
	 * data order, through their own streams. */
	rng r_task = {(uint64_t)seed * 0x2545f4914f6cdd1dULL + 1};
	rng r_init = {(uint64_t)seed ^ 0x5851f42d4c957f2dULL};
	static task t;
	dataset train, test;
	loader ld;
	mlp m;
	int eval_every = steps / 8 > 1 ? (int)(steps / 8) : 1;

	fennec_region_begin("make_dataset");
	task_init(&t, &r_task);
	int bad = dataset_make(&train, &t, N_TRAIN, &r_task) || dataset_make(&test, &t, N_TEST, &r_task);
	if (!bad) {
		ld.ds = &train;
		ld.r.s = (uint64_t)seed * 0x9e3779b97f4a7c15ULL + 7;
		ld.order = malloc((size_t)N_TRAIN * sizeof(int));
		bad = !ld.order;
	}
	if (!bad) {
		for (int i = 0; i < N_TRAIN; i++)
			ld.order[i] = i;
		loader_shuffle(&ld);
		feature_stats(&train, ld.mean, ld.inv_std);
	}
	fennec_region_end();
	int cap = batch > EVAL_CHUNK ? (int)batch : EVAL_CHUNK;
	float *xb = malloc((size_t)cap * N_IN * sizeof(float));
	int *yb = malloc((size_t)cap * sizeof(int));
	if (bad || !xb || !yb || mlp_init(&m, (int)hidden, cap, &r_init)) {
		fprintf(stderr, "mlp_train: out of memory\n");
		return 1;
	}

	const float peak_lr = 0.1f, momentum = 0.9f, wd = 5e-4f;
	double test_loss, acc0 = evaluate(&m, &test, &ld, xb, &test_loss), acc = acc0;
	double first_loss = -1.0, loss_sum = 0.0;
	int loss_n = 0;
	fennec_value_record("accuracy", acc0);
	if (!quiet)
		printf("mlp_train: 64-%ld-%ld-10 MLP, %d train / %d test samples, batch %ld, %ld steps\n"
		       "step %6d  test loss %.4f  test acc %.3f\n",
		       hidden, hidden / 2 > 0 ? hidden / 2 : 1, N_TRAIN, N_TEST, batch, steps, 0,
		       test_loss, acc0);

	fennec_step(); /* the loop starts: what came before (data, model) is set-up, not a step */
	for (int step = 0; step < steps; step++) {
		int n = (int)batch, correct = 0;
		float lr = lr_at(step, (int)steps, peak_lr);

		fennec_region_begin("data_loading");
		loader_next(&ld, n, xb, yb);
		fennec_region_end();

		double loss = mlp_forward(&m, n, xb, yb, &correct, 1);
		mlp_backward(&m, n, xb, yb);

		{
			FENNEC_REGION("optimizer");
			sgd_update(&m.l1, lr, momentum, wd);
			sgd_update(&m.l2, lr, momentum, wd);
			sgd_update(&m.l3, lr, momentum, wd);
		}

		fennec_value_record("loss", loss);
		fennec_gauge_set("learning_rate", lr);
		fennec_counter_add("samples_seen", n);
		if (first_loss < 0)
			first_loss = loss;
		loss_sum += loss;
		loss_n++;

		if ((step + 1) % eval_every == 0 || step + 1 == steps) {
			acc = evaluate(&m, &test, &ld, xb, &test_loss);
			fennec_value_record("accuracy", acc);
			if (!quiet)
				printf("step %6d  train loss %.4f  test loss %.4f  test acc %.3f  lr %.4f\n",
				       step + 1, loss_sum / loss_n, test_loss, acc, lr);
			fflush(stdout); /* progress stays live when stdout is a pipe */
			loss_sum = 0.0;
			loss_n = 0;
		}
		fennec_step_items((uint64_t)n);
	}

	printf("mlp_train: %ld steps, %ld samples: first batch loss %.4f, final test loss %.4f, "
	       "test accuracy %.3f -> %.3f\n",
	       steps, steps * batch, first_loss, test_loss, acc0, acc);

	mlp_free(&m);
	free(xb);
	free(yb);
	free(ld.order);
	dataset_free(&train);
	dataset_free(&test);
	return 0;
}
