/*
 * web.c - the web front end embedded into the fennec binary: web/index.html, fennec.css,
 * common.js, fennec.js, compare.html, compare.js and the charting library installed from npm at build time. The Makefile
 * assembles them with .incbin into $(O)/obj/web_assets.o (symbols cli_web_<name> and
 * cli_web_<name>_end); this file hands them to the report layer.
 */
#include "cli/cli.h"
#include "report/report.h"

#define ASSET(name) extern const char cli_web_##name[], cli_web_##name##_end[]
ASSET(page);
ASSET(style);
ASSET(common);
ASSET(app);
ASSET(comparepage);
ASSET(compareapp);
ASSET(charts);
#undef ASSET

void cli_web(rep_web *w)
{
	w->page = cli_web_page;
	w->page_len = (size_t)(cli_web_page_end - cli_web_page);
	w->style = cli_web_style;
	w->style_len = (size_t)(cli_web_style_end - cli_web_style);
	w->common = cli_web_common;
	w->common_len = (size_t)(cli_web_common_end - cli_web_common);
	w->compare_page = cli_web_comparepage;
	w->compare_page_len = (size_t)(cli_web_comparepage_end - cli_web_comparepage);
	w->compare_app = cli_web_compareapp;
	w->compare_app_len = (size_t)(cli_web_compareapp_end - cli_web_compareapp);
	w->app = cli_web_app;
	w->app_len = (size_t)(cli_web_app_end - cli_web_app);
	w->charts = cli_web_charts;
	w->charts_len = (size_t)(cli_web_charts_end - cli_web_charts);
}
