/*
 * canvas_cairo.c - the PNG backend of the plot canvas: the primitives rendered by cairo
 * (Debian libcairo2) on an RGB image surface, antialiased, with the system's sans-serif
 * font through cairo's text API, and written as PNG at finish. cairo is loaded by the
 * first PNG (common/lib.h says why it is not linked); its functions are called through cx.
 */
#include "plot/canvas.h"
#include "plot/plot.h"

#include <cairo/cairo.h>
#include <math.h>
#include <stdlib.h>

#include "common/lib.h"
#include "fennec.h"

#define CAIRO_FUNCS(X)                                                                              \
	X(cairo_create) X(cairo_destroy) X(cairo_fill) X(cairo_image_surface_create) X(cairo_line_to)  \
	X(cairo_move_to) X(cairo_paint) X(cairo_rectangle) X(cairo_restore) X(cairo_rotate)           \
	X(cairo_save) X(cairo_select_font_face) X(cairo_set_dash) X(cairo_set_font_size)              \
	X(cairo_set_line_join) X(cairo_set_line_width) X(cairo_set_source_rgb) X(cairo_show_text)     \
	X(cairo_status) X(cairo_stroke) X(cairo_surface_destroy) X(cairo_surface_flush)               \
	X(cairo_surface_write_to_png_stream) X(cairo_text_extents) X(cairo_translate)

CM_LIB_FUNCS(cx, CAIRO_FUNCS)
static cm_lib cairo_lib = {"libcairo.so.2", "libcairo2", cx_bind, 0, ""};

int plot_png_load(const char **msg)
{
	return cm_lib_load(&cairo_lib, msg);
}

typedef struct cairo_canvas {
	plot_canvas base;
	FILE *out;
	cairo_surface_t *surface;
	cairo_t *cr;
} cairo_canvas;

static void set_rgb(cairo_t *cr, uint32_t rgb)
{
	cx.cairo_set_source_rgb(cr, (rgb >> 16 & 0xff) / 255.0, (rgb >> 8 & 0xff) / 255.0, (rgb & 0xff) / 255.0);
}

static void cr_rect(plot_canvas *c, double x, double y, double w, double h, uint32_t fill, const char *cls,
		    const char *tip)
{
	cairo_t *cr = ((cairo_canvas *)c)->cr;
	set_rgb(cr, fill);
	cx.cairo_rectangle(cr, x, y, w, h);
	cx.cairo_fill(cr);
}

static void stroke(cairo_t *cr, uint32_t color, double width, int dashed)
{
	static const double dash[] = {6, 4};
	set_rgb(cr, color);
	cx.cairo_set_line_width(cr, width);
	cx.cairo_set_dash(cr, dash, dashed ? 2 : 0, 0);
	cx.cairo_stroke(cr);
}

static void cr_line(plot_canvas *c, double x1, double y1, double x2, double y2, uint32_t color, double width,
		    int dashed, const char *cls)
{
	cairo_t *cr = ((cairo_canvas *)c)->cr;
	cx.cairo_move_to(cr, x1, y1);
	cx.cairo_line_to(cr, x2, y2);
	stroke(cr, color, width, dashed);
}

static void cr_polyline(plot_canvas *c, const double *xy, size_t n, uint32_t color, double width, const char *cls,
			const char *tip)
{
	cairo_t *cr = ((cairo_canvas *)c)->cr;
	if (!n)
		return;
	cx.cairo_move_to(cr, xy[0], xy[1]);
	for (size_t i = 1; i < n; i++)
		cx.cairo_line_to(cr, xy[2 * i], xy[2 * i + 1]);
	cx.cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
	stroke(cr, color, width, 0);
}

static void cr_text(plot_canvas *c, double x, double y, const char *text, double size, int anchor, uint32_t color,
		    int bold, int vertical)
{
	cairo_t *cr = ((cairo_canvas *)c)->cr;
	char buf[1024];
	const char *s = plot_utf8(text, buf, sizeof buf);
	cairo_text_extents_t ext;
	cx.cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
			       bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
	cx.cairo_set_font_size(cr, size);
	cx.cairo_text_extents(cr, s, &ext);
	double dx = anchor == PLOT_ANCHOR_MIDDLE ? -ext.x_advance / 2 : anchor == PLOT_ANCHOR_END ? -ext.x_advance : 0;
	cx.cairo_save(cr);
	cx.cairo_translate(cr, x, y);
	if (vertical)
		cx.cairo_rotate(cr, -M_PI / 2);
	cx.cairo_move_to(cr, dx, 0);
	set_rgb(cr, color);
	cx.cairo_show_text(cr, s);
	cx.cairo_restore(cr);
}

static cairo_status_t write_out(void *closure, const unsigned char *data, unsigned int len)
{
	return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

static int cr_finish(plot_canvas *c)
{
	cairo_canvas *k = (cairo_canvas *)c;
	if (c->failed)
		return c->failed;
	cx.cairo_surface_flush(k->surface);
	cairo_status_t st = cx.cairo_status(k->cr);
	if (st == CAIRO_STATUS_SUCCESS)
		st = cx.cairo_surface_write_to_png_stream(k->surface, write_out, k->out);
	if (st == CAIRO_STATUS_NO_MEMORY)
		return FENNEC_ENOMEM;
	return st == CAIRO_STATUS_SUCCESS ? 0 : FENNEC_EIO;
}

static void cr_free(plot_canvas *c)
{
	cairo_canvas *k = (cairo_canvas *)c;
	if (!k)
		return;
	cx.cairo_destroy(k->cr);
	cx.cairo_surface_destroy(k->surface);
	free(k);
}

static const plot_canvas_ops cairo_ops = {cr_rect, cr_line, cr_polyline, cr_text, cr_finish, cr_free};

int plot_canvas_png(FILE *out, double width, double height, plot_canvas **cp)
{
	*cp = NULL;
	if (plot_png_load(NULL))
		return FENNEC_EIO;
	cairo_canvas *k = calloc(1, sizeof *k);
	if (!k)
		return FENNEC_ENOMEM;
	k->base = (plot_canvas){&cairo_ops, width, height, 0};
	k->out = out;
	/* RGB24: an opaque image, as on a slide; PNG stores it without alpha. */
	k->surface = cx.cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)width, (int)height);
	k->cr = cx.cairo_create(k->surface);
	if (cx.cairo_status(k->cr) != CAIRO_STATUS_SUCCESS) {
		cr_free(&k->base);
		return FENNEC_ENOMEM;
	}
	set_rgb(k->cr, 0xffffff);
	cx.cairo_paint(k->cr);
	*cp = &k->base;
	return 0;
}
