#!/usr/bin/env node
/*
 * check_page.js - opens fennec's HTML report or `fennec view` dashboard in Debian's headless
 * Chromium (driven by playwright-core from tests/consumers/node_modules) and reports, as
 * one JSON object on stdout, what a user would see: console and page errors, every tab
 * clicked and each visible chart's canvas checked for drawn pixels, zoom by mouse wheel on
 * the zoomable charts, the flame graph search, and (--live) the page following updates.
 * The tabs clicked are those the page shows (GPU and Ranks only with their data); the
 * rows of the tables and the cards of those tabs are returned as text, and whether a name made to look
 * like markup ran or made elements (it must show as text). Screenshots go to OUTDIR. The Python tests (tests/integration/test_html.py,
 * test_view.py) make the assertions.
 *
 * usage: check_page.js URL OUTDIR [--live N] [--touch FILE...]
 *   --live N   after the tabs, wait until the page has replaced its data N times
 */
'use strict';

const path = require('path');
const fs = require('fs');

function loadPlaywright() {
	const dir = path.join(__dirname, '..', 'consumers', 'node_modules', 'playwright-core');
	return require(dir);
}

function chromiumPath() {
	const cands = [process.env.FENNEC_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter(Boolean);
	for (const c of cands)
		if (fs.existsSync(c)) return c;
	return null;
}

/* In the page: the text of every table in the active tab, by container id: rows of cells. */
function tableState() {
	const out = {};
	document.querySelectorAll('section.tab.active .table-wrap').forEach(function (el) {
		if (el.offsetParent === null) return;
		out[el.id] = Array.from(el.querySelectorAll('tr')).map(function (tr) {
			return Array.from(tr.children).map(function (c) { return c.textContent; });
		});
	});
	return out;
}

/* In the page: the cards of the active tab, by container id: [label, value, note] each. */
function cardState() {
	const out = {};
	document.querySelectorAll('section.tab.active .cards').forEach(function (el) {
		if (el.offsetParent === null) return;
		out[el.id] = Array.from(el.querySelectorAll('.card')).map(function (c) {
			return ['.k', '.v', '.s'].map(function (s) { const e = c.querySelector(s); return e ? e.textContent : ''; });
		});
	});
	return out;
}

/* In the page: what a name like <script>/<img onerror> would have done if not escaped. */
function injectionState() {
	return {ran: !!window.__fennec_injected,
		elements: document.querySelectorAll('main script, main img, main iframe, .cards script, .cards img').length +
			document.querySelectorAll('div[class*=tooltip] script, div[class*=tooltip] img').length};
}

/* In the page: the state of every chart container in the active tab. */
function chartState() {
	const out = {};
	document.querySelectorAll('section.tab.active .chart').forEach(function (el) {
		const visible = el.offsetParent !== null && el.clientWidth > 0 && el.clientHeight > 0;
		const canvases = el.querySelectorAll('canvas');
		let drawn = 0, w = 0, h = 0;
		canvases.forEach(function (cv) {
			w = Math.max(w, cv.width);
			h = Math.max(h, cv.height);
			const ctx = cv.getContext('2d');
			if (!ctx || !cv.width || !cv.height) return;
			const d = ctx.getImageData(0, 0, cv.width, cv.height).data;
			for (let i = 3; i < d.length; i += 16)
				if (d[i] > 0) drawn++;
		});
		const inst = window.fennec.charts[el.id];
		let series = 0, points = 0;
		if (inst) {
			const o = inst.getOption();
			series = (o.series || []).length;
			(o.series || []).forEach(function (s) { points += (s.data || []).length; });
		}
		out[el.id] = {visible: visible, canvases: canvases.length, width: w, height: h, drawn_pixels: drawn,
			rendered: !!window.fennec.rendered[el.id], series: series, points: points};
	});
	return out;
}

function zoomOf(id) {
	const c = window.fennec.charts[id];
	if (!c) return null;
	const z = (c.getOption().dataZoom || [])[0];
	return z ? [z.start, z.end] : null;
}

async function main() {
	const args = process.argv.slice(2);
	const url = args[0], outdir = args[1];
	let live = 0;
	for (let i = 2; i < args.length; i++)
		if (args[i] === '--live') live = +args[++i];
	const result = {console_errors: [], page_errors: [], failed_requests: [], tabs: {}, zoom: {}, search: {}, screenshots: []};
	const exe = chromiumPath();
	if (!exe) {
		result.skip = 'no chromium (Debian package chromium; make deps installs it)';
		console.log(JSON.stringify(result));
		return;
	}
	const pw = loadPlaywright();
	const browser = await pw.chromium.launch({executablePath: exe, headless: true,
		args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']});
	try {
		const page = await browser.newPage({viewport: {width: 1400, height: 1000}});
		page.on('console', function (m) { if (m.type() === 'error') result.console_errors.push(m.text()); });
		page.on('pageerror', function (e) { result.page_errors.push(String(e && e.stack || e)); });
		page.on('requestfailed', function (r) { result.failed_requests.push(r.url() + ' ' + (r.failure() && r.failure().errorText)); });
		const external = [];
		page.on('request', function (r) {
			const u = r.url();
			if (!u.startsWith('file:') && !u.startsWith('data:') && !u.startsWith(new URL(url).origin)) external.push(u);
		});
		const t0 = Date.now();
		await page.goto(url, {waitUntil: 'load'});
		await page.waitForFunction(function () { return window.fennec && window.fennec.ready && (!window.FENNEC_LIVE || window.fennec.updates > 0); },
			null, {timeout: 60000});
		result.load_ms = Date.now() - t0;
		result.notices = await page.evaluate(function () { return document.getElementById('notices').textContent; });
		const TABS = await page.evaluate(function () {
			return Array.from(document.querySelectorAll('nav.tabs button')).filter(function (b) { return !b.hidden; })
				.map(function (b) { return b.getAttribute('data-tab'); });
		});
		result.tab_buttons = TABS;
		result.tables = {};
		result.cards = {};
		for (const tab of TABS) {
			await page.click('nav.tabs button[data-tab="' + tab + '"]');
			await page.waitForFunction(function (t) {
				if (window.fennec.tab !== t) return false;
				const ids = Array.from(document.querySelectorAll('section.tab.active .chart')).filter(function (el) {
					return el.offsetParent !== null; }).map(function (el) { return el.id; });
				return ids.every(function (id) { return window.fennec.rendered[id]; });
			}, tab, {timeout: 30000}).catch(function (e) { result.page_errors.push('tab ' + tab + ': charts not rendered: ' + e.message); });
			await page.waitForTimeout(300);
			const visibleSection = await page.evaluate(function (t) {
				const s = document.getElementById('tab-' + t);
				return s && s.offsetParent !== null && getComputedStyle(s).display !== 'none';
			}, tab);
			result.tabs[tab] = {visible: visibleSection, charts: await page.evaluate(chartState)};
			Object.assign(result.tables, await page.evaluate(tableState));
			Object.assign(result.cards, await page.evaluate(cardState));
			/* Hover the charts so that their tooltips (HTML) are built with the names in them. */
			for (const id of Object.keys(result.tabs[tab].charts)) {
				const box = await page.evaluate(function (i) {
					const el = document.getElementById(i);
					if (!el || el.offsetParent === null) return null;
					el.scrollIntoView({block: 'center'});
					const r = el.getBoundingClientRect();
					return {x: r.left + r.width * 0.6, y: r.top + r.height * 0.4};
				}, id);
				if (!box) continue;
				await page.mouse.move(box.x, box.y);
				await page.waitForTimeout(60);
			}
			const shot = path.join(outdir, 'tab-' + tab + '.png');
			await page.screenshot({path: shot, fullPage: true});
			result.screenshots.push(shot);
		}
		/* Zoom: the mouse wheel over the timeline and the flame graphs. */
		for (const [tab, id] of [['operations', 'chart-timeline'], ['operations', 'chart-rflame'], ['callgraph', 'chart-cflame']]) {
			await page.click('nav.tabs button[data-tab="' + tab + '"]');
			const box = await page.evaluate(function (i) {
				const el = document.getElementById(i);
				if (!el || el.offsetParent === null || !window.fennec.charts[i]) return null;
				el.scrollIntoView({block: 'center'});
				const r = el.getBoundingClientRect();
				return {x: r.left + r.width / 2, y: r.top + r.height / 3};
			}, id);
			if (!box) continue;
			const before = await page.evaluate(zoomOf, id);
			await page.mouse.move(box.x, box.y);
			for (let k = 0; k < 8; k++) {
				await page.mouse.wheel(0, -300);
				await page.waitForTimeout(80);
			}
			await page.waitForTimeout(300);
			const after = await page.evaluate(zoomOf, id);
			result.zoom[id] = {before: before, after: after};
			if (id === 'chart-timeline') {
				/* fennec view loads the window's detail after a zoom (when the timeline was reduced). */
				await page.waitForFunction(function () { return window.fennec.detailLoads > 0; }, null, {timeout: 8000}).catch(function () {});
				result.zoom[id].detail_loads = await page.evaluate(function () { return window.fennec.detailLoads; });
				result.zoom[id].note = await page.textContent('#timeline-note');
			}
			const shot = path.join(outdir, 'zoom-' + id + '.png');
			await page.screenshot({path: shot});
			result.screenshots.push(shot);
		}
		/* Search in the region flame graph: the name of its largest region. */
		await page.click('nav.tabs button[data-tab="operations"]');
		const term = await page.evaluate(function () {
			const d = JSON.parse(document.getElementById('fennec-data').textContent || 'null');
			const regs = window.fennec.lastRegions || (d && d.analysis.regions) || [];
			return regs.length ? regs[regs.length - 1].name : null;
		});
		if (term) {
			await page.fill('#rflame-search', term);
			await page.waitForTimeout(600);
			result.search = {term: term, match: await page.textContent('#rflame-match')};
		}
		if (live) {
			const before = await page.evaluate(function () { return window.fennec.updates; });
			await page.click('nav.tabs button[data-tab="summary"]');
			await page.waitForFunction(function (n) { return window.fennec.updates >= n; }, before + live, {timeout: 60000})
				.catch(function (e) { result.page_errors.push('live: ' + e.message); });
			result.live = await page.evaluate(function () {
				return {updates: window.fennec.updates, generation: window.fennec.generation, status: document.getElementById('live').textContent,
					cards: document.getElementById('cards').textContent};
			});
			result.tabs.summary_after_update = {charts: await page.evaluate(chartState)};
			/* The optional tabs again after the update: redrawn from the new data. */
			for (const tab of ['gpu', 'ranks']) {
				if (TABS.indexOf(tab) < 0) continue;
				await page.click('nav.tabs button[data-tab="' + tab + '"]');
				await page.waitForTimeout(400);
				result.tabs[tab + '_after_update'] = {charts: await page.evaluate(chartState)};
			}
			const shot = path.join(outdir, 'live.png');
			await page.screenshot({path: shot, fullPage: true});
			result.screenshots.push(shot);
		}
		result.injection = await page.evaluate(injectionState);
		result.gpu_notices = await page.evaluate(function () { return document.getElementById('gpu-notices').textContent; });
		result.gpu_nvtx = await page.evaluate(function () {
			const shown = function (id) { const el = document.getElementById(id); return !!el && !el.hidden && !el.closest('[hidden]'); };
			return {shown: shown('gpu-nvtx'), ranges: shown('gpu-nvtx-range-panel'), marks: shown('gpu-nvtx-mark-panel'),
				note: document.getElementById('gpu-nvtx-note').textContent};
		});
		result.fennec_errors = await page.evaluate(function () { return window.fennec.errors; });
		result.external_requests = external;
	} finally {
		await browser.close();
	}
	console.log(JSON.stringify(result));
}

main().catch(function (e) {
	console.log(JSON.stringify({fatal: String(e && e.stack || e)}));
	process.exit(1);
});
