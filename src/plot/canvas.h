/*
 * canvas.h - the drawing surface under the charts of plot.c: a handful of primitives
 * (rectangles, lines, polylines, text) with two backends, SVG written by fennec
 * (canvas_svg.c) and PNG rendered by cairo (canvas_cairo.c). The charts are drawn once,
 * through this interface, so both formats show the same picture. Internal to src/plot/.
 *
 * Coordinates are pixels from the top left; colours are 0xRRGGBB. `cls` names what an
 * element is (SVG class attribute: "series", "bar", ...; the tests find elements by it)
 * and `tip` is a tooltip (SVG <title>); the PNG backend ignores both. Errors are sticky:
 * a failed primitive sets `failed` and later ones do nothing; finish() reports it.
 */
#ifndef FENNEC_PLOT_CANVAS_H
#define FENNEC_PLOT_CANVAS_H

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

/* A canvas of width x height pixels writing to `out` (an SVG document as it is drawn; a
 * PNG file at finish). Returns 0 or FENNEC_ENOMEM; free with c->ops->free(c). */
int plot_canvas_svg(FILE *out, double width, double height, plot_canvas **c);
int plot_canvas_png(FILE *out, double width, double height, plot_canvas **c);

#endif
