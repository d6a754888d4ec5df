/*
 * canvas_svg.c - the SVG backend of the plot canvas: one self-contained SVG document
 * (no script, no external font or style), written to the output as the chart is drawn.
 * Elements carry the canvas's classes and tooltips, so a reader (or a test) can tell the
 * data series from the axes.
 */
#include "plot/canvas.h"

#include <stdlib.h>

#include "fennec.h"

typedef struct svg_canvas {
	plot_canvas base;
	FILE *out;
} svg_canvas;

static void esc(FILE *out, const char *text)
{
	char buf[1024];
	for (const char *s = plot_utf8(text, buf, sizeof buf); *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		default:
			/* XML 1.0 allows no other control characters. */
			fputc((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n' ? ' ' : *s, out);
		}
	}
}

static void cls_attr(FILE *out, const char *cls)
{
	if (cls) {
		fputs(" class=\"", out);
		esc(out, cls);
		fputc('"', out);
	}
}

/* Ends an element: with a <title> child when there is a tooltip. */
static void end_elem(FILE *out, const char *name, const char *tip)
{
	if (!tip) {
		fputs("/>\n", out);
		return;
	}
	fputs("><title>", out);
	esc(out, tip);
	fprintf(out, "</title></%s>\n", name);
}

static void svg_rect(plot_canvas *c, double x, double y, double w, double h, uint32_t fill, const char *cls,
		     const char *tip)
{
	FILE *out = ((svg_canvas *)c)->out;
	fputs("<rect", out);
	cls_attr(out, cls);
	fprintf(out, " x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#%06x\"", x, y, w, h, fill);
	end_elem(out, "rect", tip);
}

static void svg_line(plot_canvas *c, double x1, double y1, double x2, double y2, uint32_t color, double width,
		     int dashed, const char *cls)
{
	FILE *out = ((svg_canvas *)c)->out;
	fputs("<line", out);
	cls_attr(out, cls);
	fprintf(out, " x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#%06x\" stroke-width=\"%.2f\"%s/>\n",
		x1, y1, x2, y2, color, width, dashed ? " stroke-dasharray=\"6 4\"" : "");
}

static void svg_polyline(plot_canvas *c, const double *xy, size_t n, uint32_t color, double width, const char *cls,
			 const char *tip)
{
	FILE *out = ((svg_canvas *)c)->out;
	fputs("<polyline", out);
	cls_attr(out, cls);
	fprintf(out, " fill=\"none\" stroke=\"#%06x\" stroke-width=\"%.2f\" stroke-linejoin=\"round\" points=\"", color,
		width);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%s%.2f,%.2f", i ? " " : "", xy[2 * i], xy[2 * i + 1]);
	fputc('"', out);
	end_elem(out, "polyline", tip);
}

static void svg_text(plot_canvas *c, double x, double y, const char *s, double size, int anchor, uint32_t color,
		     int bold, int vertical)
{
	static const char *const anchors[] = {"start", "middle", "end"};
	FILE *out = ((svg_canvas *)c)->out;
	fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\" text-anchor=\"%s\" fill=\"#%06x\"%s", x, y, size,
		anchors[anchor], color, bold ? " font-weight=\"bold\"" : "");
	if (vertical)
		fprintf(out, " transform=\"rotate(-90 %.2f %.2f)\"", x, y);
	fputc('>', out);
	esc(out, s);
	fputs("</text>\n", out);
}

static int svg_finish(plot_canvas *c)
{
	FILE *out = ((svg_canvas *)c)->out;
	fputs("</svg>\n", out);
	return c->failed ? c->failed : ferror(out) ? FENNEC_EIO : 0;
}

static void svg_free(plot_canvas *c) { free(c); }

static const plot_canvas_ops svg_ops = {svg_rect, svg_line, svg_polyline, svg_text, svg_finish, svg_free};

int plot_canvas_svg(FILE *out, double width, double height, plot_canvas **cp)
{
	svg_canvas *c = calloc(1, sizeof *c);
	*cp = NULL;
	if (!c)
		return FENNEC_ENOMEM;
	c->base = (plot_canvas){&svg_ops, width, height, 0};
	c->out = out;
	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
		"viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\">\n"
		"<rect class=\"background\" width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
		width, height, width, height);
	*cp = &c->base;
	return 0;
}
