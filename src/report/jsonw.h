/*
 * jsonw.h - the one way the reports and exports write JSON values: a string with its
 * escapes, a number (null when it is not finite), a string or null, and the keys of an
 * object. The JSON report (json.c), its GPU section (gpu.c) and the exports share them,
 * each choosing its layout with `indent`.
 */
#ifndef FENNEC_REPORT_JSONW_H
#define FENNEC_REPORT_JSONW_H

#include <stdio.h>

/* A JSON string literal of s (NULL writes ""): quotes, backslashes and control characters
 * escaped; other bytes as they are (UTF-8 stays UTF-8). */
void rep_json_string(FILE *out, const char *s);

/* The string, or null when s is NULL. */
void rep_json_string_or_null(FILE *out, const char *s);

/* A number, or null when v is not finite (NAN is how the model says "no value"). Integral
 * values below 9e15 are written without a fraction, others with 17 significant digits. */
void rep_json_number(FILE *out, double v);

/* A key of an object: a comma unless *first (which it clears), then `indent` (the writer's
 * layout: "" keeps the object on one line, "\n    " puts a key a line), the quoted key
 * and a colon. The value follows. */
void rep_json_key(FILE *out, const char *indent, const char *k, int *first);

/* A key and its number (null when not finite). */
void rep_json_knum(FILE *out, const char *indent, const char *k, double v, int *first);

/* A key and its string (null when v is NULL). */
void rep_json_kstr(FILE *out, const char *indent, const char *k, const char *v, int *first);

#endif
