/*
 * svg.c - an interactive flame graph drawn by fennec itself: one self-contained SVG with
 * inline JavaScript (hover for name, samples and share; click to zoom; a search box that
 * highlights matches and shows their share; reset). The frames are the collapsed stacks
 * of stacks.c merged into a tree; children are ordered by name, widths are sample
 * weights. Colours are a hash of the module (hue) and the function (shade), so a function
 * has the same colour in every graph. Memory flame graphs (exp_options.memory) are the same
 * drawing with widths in heap bytes. Frames narrower than EXP_SVG_MIN_PX are left out
 * (their weight still counts in their parent's width). The tree and the writer are shared
 * with the differential flame graph (diffsvg.c), which colours frames its own way.
 */
#include "export/internal.h"

#include <stdlib.h>

#define SVG_WIDTH 1200
#define SVG_PAD 10
#define FRAME_H 16
#define TOP_H 64    /* title, search box */
#define BOTTOM_H 36 /* details line */
#define EXP_SVG_MIN_PX 0.1

static uint32_t tree_child(exp_flame *t, uint32_t parent, const exp_frame *f)
{
	int added;
	uint64_t *slot = exp_map_put(&t->kids, parent, (uint64_t)f->kind << 32 | f->id, &added);
	if (!slot)
		return UINT32_MAX;
	if (!added)
		return (uint32_t)*slot;
	if (t->len == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 1024;
		exp_flame_node *n = realloc(t->n, cap * sizeof *n);
		if (!n)
			return UINT32_MAX;
		t->n = n;
		t->cap = cap;
	}
	uint32_t id = t->len++;
	*slot = id;
	t->n[id] = (exp_flame_node){*f, parent, UINT32_MAX, UINT32_MAX, t->n[parent].depth + 1, 0, 0};
	t->n[id].next = t->n[parent].first;
	t->n[parent].first = id;
	return id;
}

/* ---- colours ---- */

static uint32_t fnv(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static void frame_fill(const ana_profile *p, const exp_frame *f, char *buf, size_t n)
{
	if (f->kind == EXP_F_THREAD) {
		snprintf(buf, n, "rgb(176,176,186)");
		return;
	}
	if (f->kind == EXP_F_REGION) {
		uint32_t h = fnv(f->id < p->nnames ? p->names[f->id] : "");
		snprintf(buf, n, "rgb(%u,%u,%u)", 90 + h % 40, 150 + (h >> 8) % 50, 220 + (h >> 16) % 35);
		return;
	}
	const char *name = exp_func_name(p, f->id);
	if (name[0] == '[' || f->id >= p->smp.nfuncs) { /* [unknown] and friends */
		snprintf(buf, n, "rgb(200,120,120)");
		return;
	}
	/* Module picks the hue (red through yellow), the function the shade. */
	uint32_t m = fnv(base_name(exp_func_module(p, f->id))), h = fnv(name);
	unsigned r = 205 + h % 50, g = 40 + (m % 7) * 28 + (h >> 8) % 24, b = (h >> 16) % 55;
	snprintf(buf, n, "rgb(%u,%u,%u)", r, g > 255 ? 255 : g, b);
}

/* ---- output ---- */

static void put_xml(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&apos;", out); break;
		default:
			/* XML 1.0 forbids most control characters even escaped. */
			fputc((unsigned char)*s < 0x20 ? ' ' : *s, out);
		}
	}
}

typedef struct sort_ctx {
	const ana_profile *p;
	const exp_flame_node *n;
} sort_ctx;

static int by_name(const void *a, const void *b, void *arg)
{
	const sort_ctx *c = arg;
	char x[512], y[512];
	const char *nx = exp_frame_name(c->p, &c->n[*(const uint32_t *)a].f, x, sizeof x);
	const char *ny = exp_frame_name(c->p, &c->n[*(const uint32_t *)b].f, y, sizeof y);
	int r = strcmp(nx, ny);
	return r ? r : (*(const uint32_t *)a > *(const uint32_t *)b) - (*(const uint32_t *)a < *(const uint32_t *)b);
}

static const char script[] =
	"var NS='http://www.w3.org/2000/svg',W=%d,PAD=%d,TOTAL=%llu,FW=W-2*PAD,UNIT='%s';\n"
	"var frames=[].slice.call(document.querySelectorAll('g.f'));\n"
	"var det=document.getElementById('details'),matched=document.getElementById('matched'),\n"
	"    reset=document.getElementById('reset'),search=document.getElementById('search');\n"
	"function pct(s){return (100*s/TOTAL).toFixed(2);}\n"
	"function show(f){det.textContent=f?f.n+' ('+f.s+' '+UNIT+', '+pct(f.s)+'%%)'+(f.t?' '+f.t:''):' ';}\n"
	"function label(g){var f=g._f,t=g._t,w=+g._r.getAttribute('width'),c=Math.floor((w-6)/7);\n"
	"  t.textContent=c<3?'':f.n.length<=c?f.n:f.n.slice(0,c-2)+'..';}\n"
	"function place(g,x0,w0){var f=g._f,x=PAD+(f.x-x0)/w0*FW,w=f.s/w0*FW;\n"
	"  if(x<PAD){w-=PAD-x;x=PAD;} if(x+w>W-PAD)w=W-PAD-x;\n"
	"  g._r.setAttribute('x',x.toFixed(2));g._r.setAttribute('width',Math.max(w,0).toFixed(2));\n"
	"  g._t.setAttribute('x',(x+3).toFixed(2));label(g);}\n"
	"function zoom(g){var z=g._f;reset.style.display='';\n"
	"  frames.forEach(function(h){var f=h._f,inside=f.d>=z.d&&f.x>=z.x&&f.x+f.s<=z.x+z.s,\n"
	"      above=f.d<z.d&&f.x<=z.x&&f.x+f.s>=z.x+z.s;\n"
	"    h.style.display=inside||above?'':'none';h.style.opacity=above?'0.6':'';\n"
	"    if(inside||above)place(h,z.x,z.s);});}\n"
	"function unzoom(){reset.style.display='none';\n"
	"  frames.forEach(function(h){h.style.display='';h.style.opacity='';place(h,0,TOTAL);});}\n"
	"function find(q){var re=null,hits=[];\n"
	"  if(q){try{re=new RegExp(q);}catch(e){re={test:function(s){return s.indexOf(q)>=0;}};}}\n"
	"  frames.forEach(function(h){var on=re&&h._f.d>0&&re.test(h._f.n);\n"
	"    h._r.setAttribute('fill',on?'rgb(230,0,230)':h._c);if(on)hits.push(h._f);});\n"
	"  /* a match nested in another match is already counted */\n"
	"  hits.sort(function(a,b){return a.x-b.x||a.d-b.d;});var end=-1,sum=0;\n"
	"  hits.forEach(function(f){if(f.x>=end){sum+=f.s;end=f.x+f.s;}});\n"
	"  matched.textContent=q?'Matched: '+pct(sum)+'%%':'';}\n"
	"frames.forEach(function(g){g._r=g.getElementsByTagName('rect')[0];g._t=g.getElementsByTagName('text')[0];\n"
	"  g._c=g._r.getAttribute('fill');\n"
	"  g._f={n:g.getAttribute('data-n'),s:+g.getAttribute('data-s'),x:+g.getAttribute('data-x'),d:+g.getAttribute('data-d'),\n"
	"    t:g.getAttribute('data-t')};\n"
	"  g.addEventListener('mouseover',function(){show(g._f);});\n"
	"  g.addEventListener('mouseout',function(){show(null);});\n"
	"  g.addEventListener('click',function(){zoom(g);});});\n"
	"reset.addEventListener('click',unzoom);\n"
	"search.addEventListener('input',function(){find(search.value);});\n"
	"document.addEventListener('keydown',function(e){\n"
	"  if(e.key==='Escape'){unzoom();search.value='';find('');}\n"
	"  else if((e.ctrlKey||e.metaKey)&&e.key==='f'){e.preventDefault();search.focus();}});\n";

int exp_flame_build(exp_flame *t, const ana_profile *p, const exp_options *o)
{
	exp_agg *agg;
	size_t n;
	uint64_t total;
	memset(t, 0, sizeof *t);
	t->p = p;
	t->unit = o->memory ? "bytes" : "samples";
	int rc = exp_aggregate(p, o, &agg, &n, &total);
	if (rc)
		return rc;
	if (!n || !total) {
		free(agg);
		return FENNEC_ENODATA;
	}
	size_t cap = 256;
	exp_frame *fr = malloc(cap * sizeof *fr);
	t->n = malloc(1024 * sizeof *t->n);
	t->cap = 1024;
	if (!fr || !t->n) {
		rc = FENNEC_ENOMEM;
		goto out;
	}
	t->n[0] = (exp_flame_node){{EXP_F_FUNC, UINT32_MAX}, UINT32_MAX, UINT32_MAX, UINT32_MAX, 0, total, 0};
	t->len = 1;
	t->total = total;
	for (size_t i = 0; i < n; i++) {
		size_t nf = exp_agg_frames_grow(p, &agg[i], &fr, &cap);
		if (nf == SIZE_MAX) {
			rc = FENNEC_ENOMEM;
			goto out;
		}
		uint32_t at = 0;
		for (size_t j = 0; j < nf; j++) {
			if ((at = tree_child(t, at, &fr[j])) == UINT32_MAX) {
				rc = FENNEC_ENOMEM;
				goto out;
			}
			t->n[at].weight += agg[i].weight;
		}
	}
out:
	exp_map_free(&t->kids);
	free(fr);
	free(agg);
	return rc;
}

void exp_flame_free(exp_flame *t)
{
	if (!t)
		return;
	exp_map_free(&t->kids);
	free(t->n);
	memset(t, 0, sizeof *t);
}

int exp_flame_write(FILE *out, exp_flame *tr, const char *title, const exp_flame_style *st)
{
	const ana_profile *p = tr->p;
	exp_flame_node *tn = tr->n;
	uint64_t total = tr->total;
	int rc = 0;
	uint32_t *kids = NULL, *stack = NULL;

	/* Lay out: children by name, each after its previous siblings; depth-first with an
	 * explicit stack (stacks can be deep). Frames below the minimum width are cut. */
	double px_per = (double)(SVG_WIDTH - 2 * SVG_PAD) / (double)total;
	uint32_t max_depth = 0;
	kids = malloc(tr->len * sizeof *kids);
	stack = malloc(tr->len * sizeof *stack);
	uint8_t *drawn = calloc(tr->len, 1);
	if (!kids || !stack || !drawn) {
		free(drawn);
		rc = FENNEC_ENOMEM;
		goto out;
	}
	sort_ctx sc = {p, tn};
	size_t sp = 0;
	stack[sp++] = 0;
	while (sp) {
		uint32_t v = stack[--sp];
		if ((double)tn[v].weight * px_per < EXP_SVG_MIN_PX && v)
			continue;
		drawn[v] = 1;
		if (tn[v].depth > max_depth)
			max_depth = tn[v].depth;
		size_t nk = 0;
		for (uint32_t k = tn[v].first; k != UINT32_MAX; k = tn[k].next)
			kids[nk++] = k;
		qsort_r(kids, nk, sizeof *kids, by_name, &sc);
		uint64_t x = tn[v].x;
		for (size_t k = 0; k < nk; k++) {
			tn[kids[k]].x = x;
			x += tn[kids[k]].weight;
			/* Relink in name order for the output pass. */
			tn[kids[k]].next = k + 1 < nk ? kids[k + 1] : UINT32_MAX;
		}
		tn[v].first = nk ? kids[0] : UINT32_MAX;
		/* Push in reverse so the first child is drawn first. */
		for (size_t k = nk; k-- > 0;)
			stack[sp++] = kids[k];
	}

	int height = TOP_H + BOTTOM_H + (int)(max_depth + 1) * FRAME_H;
	fprintf(out,
		"<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" data-total=\"%llu\">\n",
		SVG_WIDTH, height, SVG_WIDTH, height, (unsigned long long)total);
	fputs("<style>text{font:12px Verdana,sans-serif;fill:#000}g.f{cursor:pointer}g.f text{pointer-events:none}"
	      "g.f:hover rect{stroke:#000;stroke-width:0.5}.btn{cursor:pointer;fill:#226}#title{font-size:17px}"
	      "</style>\n", out);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f8f8f4\"/>\n", SVG_WIDTH, height);
	fprintf(out, "<text id=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">", SVG_WIDTH / 2);
	put_xml(out, title ? title : "Flame graph");
	fprintf(out, "</text>\n<text id=\"reset\" class=\"btn\" x=\"%d\" y=\"48\" style=\"display:none\">Reset zoom</text>\n",
		SVG_PAD);
	fprintf(out,
		"<foreignObject x=\"%d\" y=\"32\" width=\"230\" height=\"26\"><input xmlns=\"http://www.w3.org/1999/xhtml\" "
		"id=\"search\" type=\"search\" placeholder=\"search (regex)\" style=\"width:210px;font:12px sans-serif\"/>"
		"</foreignObject>\n",
		SVG_WIDTH - SVG_PAD - 230);
	fprintf(out, "<text id=\"matched\" x=\"%d\" y=\"48\" text-anchor=\"end\"></text>\n", SVG_WIDTH - SVG_PAD - 240);
	fprintf(out, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", SVG_PAD, height - 12);

	/* Emit depth-first again, so the file reads in the order of the graph. */
	char name[512], fill[32], note[256];
	sp = 0;
	stack[sp++] = 0;
	while (sp) {
		uint32_t v = stack[--sp];
		if (!drawn[v])
			continue;
		const exp_flame_node *x = &tn[v];
		const char *nm = v ? exp_frame_name(p, &x->f, name, sizeof name) : "all";
		if (st && st->fill)
			st->fill(st->ctx, tr, v, fill, sizeof fill);
		else if (v)
			frame_fill(p, &x->f, fill, sizeof fill);
		else
			snprintf(fill, sizeof fill, "rgb(200,200,200)");
		note[0] = 0;
		if (st && st->note)
			st->note(st->ctx, tr, v, note, sizeof note);
		double px = SVG_PAD + (double)x->x * px_per, pw = (double)x->weight * px_per;
		int py = height - BOTTOM_H - (int)(x->depth + 1) * FRAME_H;
		fputs("<g class=\"f\" data-n=\"", out);
		put_xml(out, nm);
		fprintf(out, "\" data-s=\"%llu\" data-x=\"%llu\" data-d=\"%u\"", (unsigned long long)x->weight,
			(unsigned long long)x->x, x->depth);
		if (note[0]) {
			fputs(" data-t=\"", out);
			put_xml(out, note);
			fputc('"', out);
		}
		fputs("><title>", out);
		put_xml(out, nm);
		fprintf(out, " (%llu %s, %.2f%%)", (unsigned long long)x->weight, tr->unit,
			100.0 * (double)x->weight / (double)total);
		if (note[0]) {
			fputc(' ', out);
			put_xml(out, note);
		}
		fprintf(out, "</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" rx=\"2\"/>", px, py, pw,
			FRAME_H - 1, fill);
		fprintf(out, "<text x=\"%.2f\" y=\"%d\">", px + 3, py + FRAME_H - 4);
		int fit = (int)((pw - 6) / 7);
		size_t len = strlen(nm);
		if (fit >= 3) {
			if (len <= (size_t)fit)
				put_xml(out, nm);
			else {
				/* Cut at a character boundary (UTF-8 continuation bytes are 10xxxxxx). */
				size_t cut = (size_t)fit - 2;
				while (cut && ((unsigned char)nm[cut] & 0xc0) == 0x80)
					cut--;
				char tmp[512];
				snprintf(tmp, sizeof tmp, "%.*s..", (int)cut, nm);
				put_xml(out, tmp);
			}
		}
		fputs("</text></g>\n", out);
		size_t nk = 0;
		for (uint32_t k = x->first; k != UINT32_MAX; k = tn[k].next)
			kids[nk++] = k;
		for (size_t k = nk; k-- > 0;)
			stack[sp++] = kids[k];
	}
	free(drawn);
	fputs("<script type=\"text/ecmascript\"><![CDATA[\n", out);
	fprintf(out, script, SVG_WIDTH, SVG_PAD, (unsigned long long)total, tr->unit);
	fputs("]]></script>\n</svg>\n", out);
	rc = ferror(out) ? FENNEC_EIO : 0;
out:
	free(kids);
	free(stack);
	return rc;
}

int exp_svg(FILE *out, const ana_profile *p, const exp_options *o)
{
	exp_flame t;
	int rc = exp_flame_build(&t, p, o);
	if (!rc)
		rc = exp_flame_write(out, &t, o->title, NULL);
	exp_flame_free(&t);
	return rc;
}
