#!/usr/bin/env node
/*
 * check_compare.js - opens the page of `fennec compare --format html` in Debian's headless
 * Chromium (playwright-core from tests/consumers/node_modules) and reports, as one JSON
 * object on stdout, what a user would see: console and page errors, every chart's canvas
 * checked for drawn pixels, the rows of the region table before and after typing in its
 * filter, and the differential flame graph's frame (its SVG document drawn, the frames it
 * has, a click that zooms). Screenshots go to OUTDIR. tests/integration/test_compare.py
 * makes the assertions.
 *
 * usage: check_compare.js URL OUTDIR [FILTER]
 */
'use strict';

const path = require('path');
const fs = require('fs');

function chromiumPath() {
	const cands = [process.env.FENNEC_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter(Boolean);
	for (const c of cands)
		if (fs.existsSync(c)) return c;
	return null;
}

/* In the page: every chart container's canvas, inked pixels and series. */
function chartState() {
	const out = {};
	document.querySelectorAll('.chart').forEach(function (el) {
		let drawn = 0;
		el.querySelectorAll('canvas').forEach(function (cv) {
			const ctx = cv.getContext('2d');
			if (!ctx || !cv.width || !cv.height) return;
			const d = ctx.getImageData(0, 0, cv.width, cv.height).data;
			for (let i = 3; i < d.length; i += 16)
				if (d[i] > 0) drawn++;
		});
		const inst = window.fennec.charts[el.id];
		let points = 0;
		if (inst)
			(inst.getOption().series || []).forEach(function (s) { points += (s.data || []).length; });
		out[el.id] = {visible: el.offsetParent !== null && el.clientHeight > 0, drawn_pixels: drawn,
			rendered: !!window.fennec.rendered[el.id], points: points};
	});
	return out;
}

function tableRows(id) {
	return Array.from(document.querySelectorAll('#' + id + ' tbody tr')).filter(function (tr) {
		return !tr.classList.contains('more'); }).map(function (tr) {
		return Array.from(tr.children).map(function (td) { return td.textContent; }); });
}

async function main() {
	const [url, outdir, filter] = process.argv.slice(2);
	const result = {console_errors: [], page_errors: [], failed_requests: [], external_requests: [], screenshots: []};
	const exe = chromiumPath();
	if (!exe) {
		result.skip = 'no chromium (Debian package chromium; make deps installs it)';
		console.log(JSON.stringify(result));
		return;
	}
	const pw = require(path.join(__dirname, '..', 'consumers', 'node_modules', 'playwright-core'));
	const browser = await pw.chromium.launch({executablePath: exe, headless: true,
		args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']});
	try {
		const page = await browser.newPage({viewport: {width: 1400, height: 1000}});
		page.on('console', function (m) { if (m.type() === 'error') result.console_errors.push(m.text()); });
		page.on('pageerror', function (e) { result.page_errors.push(String(e && e.stack || e)); });
		page.on('requestfailed', function (r) { result.failed_requests.push(r.url() + ' ' + (r.failure() && r.failure().errorText)); });
		page.on('request', function (r) {
			const u = r.url();
			if (!u.startsWith('file:') && !u.startsWith('data:') && !u.startsWith('blob:')) result.external_requests.push(u);
		});
		await page.goto(url, {waitUntil: 'load'});
		await page.waitForFunction(function () { return window.fennec && window.fennec.ready; }, null, {timeout: 60000});
		await page.waitForFunction(function () {
			return Object.keys(window.fennec.charts).every(function (id) { return window.fennec.rendered[id]; });
		}, null, {timeout: 30000}).catch(function (e) { result.page_errors.push('charts not rendered: ' + e.message); });
		await page.waitForTimeout(300);
		result.charts = await page.evaluate(chartState);
		result.verdict = await page.textContent('#verdict');
		result.cards = await page.textContent('#cards');
		result.regions = await page.evaluate(tableRows, 'region-table');
		result.findings = await page.evaluate(tableRows, 'finding-table');
		let shot = path.join(outdir, 'compare.png');
		await page.screenshot({path: shot, fullPage: true});
		result.screenshots.push(shot);
		if (filter) {
			await page.fill('#region-filter', filter);
			await page.waitForTimeout(200);
			result.filtered = await page.evaluate(tableRows, 'region-table');
		}
		/* The flame graph: its own document in a sandboxed frame. */
		result.diff = {shown: await page.evaluate(function () { return !document.getElementById('diff-frame').hidden; }),
			note: await page.textContent('#diff-none')};
		if (result.diff.shown) {
			const el = await page.$('#diff-frame');
			await el.scrollIntoViewIfNeeded();
			let frame = null;
			for (let k = 0; k < 50 && !frame; k++) {
				frame = await el.contentFrame();
				if (!frame || !(await frame.$('svg'))) {
					frame = null;
					await page.waitForTimeout(100);
				}
			}
			if (frame) {
				result.diff.frames = await frame.evaluate(function () { return document.querySelectorAll('g rect, rect').length; });
				result.diff.title = await frame.evaluate(function () { const t = document.querySelector('svg text'); return t && t.textContent; });
				result.diff.coloured = await frame.evaluate(function () {
					return Array.from(document.querySelectorAll('rect')).filter(function (r) {
						const f = r.getAttribute('fill') || ''; return /^rgb\(/.test(f) && f !== 'rgb(225,225,225)'; }).length;
				});
			} else {
				result.diff.frames = 0;
			}
			shot = path.join(outdir, 'diff.png');
			await el.screenshot({path: shot});
			result.screenshots.push(shot);
		}
		result.fennec_errors = await page.evaluate(function () { return window.fennec.errors; });
	} finally {
		await browser.close();
	}
	console.log(JSON.stringify(result));
}

main().catch(function (e) {
	console.log(JSON.stringify({fatal: String(e && e.stack || e)}));
	process.exit(1);
});
