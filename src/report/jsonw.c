/*
 * jsonw.c - JSON values for the reports and exports (jsonw.h): strings, numbers, null and
 * object keys, written the same way wherever fennec writes JSON.
 */
#include "report/jsonw.h"

#include <math.h>

void rep_json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", out); break;
		case '\\': fputs("\\\\", out); break;
		case '\n': fputs("\\n", out); break;
		case '\r': fputs("\\r", out); break;
		case '\t': fputs("\\t", out); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				fprintf(out, "\\u%04x", *p);
			else
				fputc(*p, out);
		}
	}
	fputc('"', out);
}

void rep_json_string_or_null(FILE *out, const char *s)
{
	if (s)
		rep_json_string(out, s);
	else
		fputs("null", out);
}

void rep_json_number(FILE *out, double v)
{
	if (!isfinite(v))
		fputs("null", out);
	else if (v == floor(v) && fabs(v) < 9e15)
		fprintf(out, "%.0f", v);
	else
		fprintf(out, "%.17g", v);
}

void rep_json_key(FILE *out, const char *indent, const char *k, int *first)
{
	if (!*first)
		fputc(',', out);
	*first = 0;
	fputs(indent, out);
	rep_json_string(out, k);
	fputc(':', out);
}

void rep_json_knum(FILE *out, const char *indent, const char *k, double v, int *first)
{
	rep_json_key(out, indent, k, first);
	rep_json_number(out, v);
}

void rep_json_kstr(FILE *out, const char *indent, const char *k, const char *v, int *first)
{
	rep_json_key(out, indent, k, first);
	rep_json_string_or_null(out, v);
}
