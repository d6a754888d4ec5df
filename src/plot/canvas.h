/*
 * canvas.h - the drawing surface under the charts of plot.c: a handful of primitives
 * (rectangles, lines, polylines, text) with two backends, SVG written by fennec
 * (canvas_svg.c) and PNG rendered by cairo (canvas_cairo.c). The charts are drawn once,
 * through this interface, so both formats show the same picture. Internal to src/plot/.
 *
 * Coordinates are pixels from the top left; colours are 0xRRGGBB. `cls` names what an
 * element is (SVG class attribute: "series", "bar", ...; the tests find elements by it)
 * and `tip` is a tooltip (SVG <title>); the PNG backend ignores both. Text may be any
 * bytes: backends pass it through plot_utf8(). Errors are sticky:
 * a failed primitive sets `failed` and later ones do nothing; finish() reports it.
 */
#ifndef FENNEC_PLOT_CANVAS_H
#define FENNEC_PLOT_CANVAS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { PLOT_ANCHOR_START, PLOT_ANCHOR_MIDDLE, PLOT_ANCHOR_END };

typedef struct plot_canvas plot_canvas;

typedef struct plot_canvas_ops {
	void (*rect)(plot_canvas *c, double x, double y, double w, double h, uint32_t fill, const char *cls,
		     const char *tip);
	void (*line)(plot_canvas *c, double x1, double y1, double x2, double y2, uint32_t color, double width,
		     int dashed, const char *cls);
	/* n points as x0, y0, x1, y1, ... */
	void (*polyline)(plot_canvas *c, const double *xy, size_t n, uint32_t color, double width, const char *cls,
			 const char *tip);
	/* y is the baseline; vertical text reads bottom to top, its baseline at x. */
	void (*text)(plot_canvas *c, double x, double y, const char *utf8, double size, int anchor, uint32_t color,
		     int bold, int vertical);
	/* Write the image to the output given at creation; returns 0 or a FENNEC_E* code. */
	int (*finish)(plot_canvas *c);
	void (*free)(plot_canvas *c);
} plot_canvas_ops;

struct plot_canvas {
	const plot_canvas_ops *ops;
	double width, height;
	int failed;           /* sticky FENNEC_E* code */
};

/* s with every byte that is not part of valid UTF-8 replaced by '?', into buf (cut to
 * fit): region and metric names come from the profiled program, and both an XML parser
 * and cairo reject invalid UTF-8. Returns buf. */
static inline const char *plot_utf8(const char *s, char *buf, size_t n)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t o = 0;
	while (*p && o + 5 < n) {
		int len = p[0] < 0x80 ? 1 : (p[0] >> 5) == 6 ? 2 : (p[0] >> 4) == 14 ? 3 : (p[0] >> 3) == 30 ? 4 : 0;
		int ok = len > 0 && !(len == 2 && p[0] < 0xc2) && !(len == 4 && p[0] > 0xf4);
		for (int i = 1; ok && i < len; i++)
			ok = (p[i] >> 6) == 2;
		/* overlong forms, UTF-16 surrogates, beyond U+10FFFF, and U+FFFE/U+FFFF (not XML) */
		if (ok && len == 3)
			ok = !(p[0] == 0xe0 && p[1] < 0xa0) && !(p[0] == 0xed && p[1] >= 0xa0) &&
			     !(p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xbe);
		if (ok && len == 4)
			ok = !(p[0] == 0xf0 && p[1] < 0x90) && !(p[0] == 0xf4 && p[1] >= 0x90);
		if (!ok) {
			buf[o++] = '?';
			p++;
			continue;
		}
		for (int i = 0; i < len; i++)
			buf[o++] = (char)p[i];
		p += len;
	}
	buf[o] = 0;
	return buf;
}

/* A canvas of width x height pixels writing to `out` (an SVG document as it is drawn; a
 * PNG file at finish). Returns 0 or FENNEC_ENOMEM; free with c->ops->free(c). */
int plot_canvas_svg(FILE *out, double width, double height, plot_canvas **c);
int plot_canvas_png(FILE *out, double width, double height, plot_canvas **c);

#endif
