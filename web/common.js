/*
 * common.js - what the report page (fennec.js) and the comparison page (compare.js) share:
 * error display, number formatting, the sortable table, the chart helper (and resizing the
 * charts on screen when the window changes size), summary cards.
 * Loaded before either; window.fennecUI holds the functions, window.fennec the test
 * hooks (chart instances, which charts rendered, errors seen).
 */
(function () {
	'use strict';

	var fennec = window.fennec = {
		charts: {},       /* id -> echarts instance */
		rendered: {},     /* id -> true once the chart finished its first rendering */
		errors: [],
		generation: 0,
		updates: 0,       /* times the page data was replaced (live) */
		ready: false,
		tab: null
	};

	function showError(msg) {
		fennec.errors.push(String(msg));
		var el = document.getElementById('errors');
		if (el) {
			el.hidden = false;
			el.textContent = fennec.errors.join('\n');
		}
	}
	window.addEventListener('error', function (e) { showError(e.message || e); });
	window.addEventListener('unhandledrejection', function (e) { showError('unhandled: ' + (e.reason && e.reason.message || e.reason)); });


	/* ---- formatting ---- */

	function fmtNs(ns) {
		if (ns === null || ns === undefined || !isFinite(ns)) return '–';
		var a = Math.abs(ns);
		if (a >= 60e9) return (ns / 60e9).toFixed(1) + ' min';
		if (a >= 1e9) return (ns / 1e9).toFixed(a >= 10e9 ? 2 : 3) + ' s';
		if (a >= 1e6) return (ns / 1e6).toFixed(2) + ' ms';
		if (a >= 1e3) return (ns / 1e3).toFixed(2) + ' µs';
		return Math.round(ns) + ' ns';
	}
	function fmtBytes(b) {
		if (b === null || b === undefined || !isFinite(b)) return '–';
		var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0, a = Math.abs(b);
		while (a >= 1024 && i < u.length - 1) { a /= 1024; b /= 1024; i++; }
		return (i ? b.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2) : Math.round(b)) + ' ' + u[i];
	}
	function fmtNum(n) {
		if (n === null || n === undefined || !isFinite(n)) return '–';
		if (Math.abs(n) >= 1e4 || n === Math.round(n)) return Math.round(n).toLocaleString('en-US');
		return n.toPrecision(4);
	}
	function fmtRate(n) {
		if (n === null || n === undefined || !isFinite(n)) return '–';
		return n >= 100 ? fmtNum(Math.round(n)) : n.toPrecision(3);
	}
	function fmtPct(p) {
		if (p === null || p === undefined || !isFinite(p)) return '–';
		return (Math.abs(p) >= 10 ? p.toFixed(1) : p.toFixed(2)) + ' %';
	}
	function esc(s) {
		return String(s === null || s === undefined ? '' : s).replace(/[&<>"']/g, function (c) {
			return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
		});
	}
	function $(id) { return document.getElementById(id); }
	/* A number to show: not null, undefined or NaN (JSON null is how the report says "none"). */
	function isNum(x) { return x !== null && x !== undefined && x !== '' && isFinite(x); }
	/* A long name cut from the left (region paths: the leaf matters most). */
	function ellipsize(s, n) { s = String(s); return s.length > n ? '…' + s.slice(-(n - 1)) : s; }
	/* fn once the document is parsed. */
	function onReady(fn) {
		if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', fn);
		else fn();
	}

	/* The same name gets the same colour in every chart, for the life of the page. The
	 * first names asked for (the biggest regions: the summary draws first) get distinct
	 * colours while the palette lasts; then colours repeat by hash. */
	var PALETTE = ['#e8590c', '#f08c00', '#d6336c', '#ae3ec9', '#7048e8', '#4263eb', '#1c7ed6', '#1098ad',
		'#0ca678', '#37b24d', '#74b816', '#f59f00', '#e64980', '#845ef7', '#5c7cfa', '#22b8cf'];
	var colors = {}, taken = [], ntaken = 0;
	function colorOf(name) {
		var c = colors[name];
		if (c) return c;
		var h = 2166136261;
		for (var i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
		var k = (h >>> 0) % PALETTE.length;
		if (ntaken < PALETTE.length) {
			while (taken[k]) k = (k + 1) % PALETTE.length;
			taken[k] = true;
			ntaken++;
		}
		return (colors[name] = PALETTE[k]);
	}

	/* ---- tables ---- */

	/*
	 * A sortable table: cols [{key, label, num, fmt(row) -> html, sort(row) -> value}];
	 * shows `limit` rows with a line that says how many more there are.
	 */
	function table(el, cols, rows, opts) {
		opts = opts || {};
		var limit = opts.limit || 300;
		var sortKey = el._sortKey, sortDir = el._sortDir || -1;
		var data = rows.slice();
		if (sortKey !== undefined) {
			var c = cols[sortKey];
			var get = c.sort || function (r) { return r[c.key]; };
			data.sort(function (a, b) {
				var x = get(a), y = get(b);
				if (x === y) return 0;
				if (x === null || x === undefined) return 1;
				if (y === null || y === undefined) return -1;
				return (x < y ? -1 : 1) * sortDir;
			});
		}
		var h = ['<table><thead><tr>'];
		cols.forEach(function (c, i) {
			h.push('<th data-col="' + i + '"' + (c.num ? ' class="num"' : '') + '>' + esc(c.label) +
				(sortKey === i ? (sortDir > 0 ? ' ▲' : ' ▼') : '') + '</th>');
		});
		h.push('</tr></thead><tbody>');
		data.slice(0, limit).forEach(function (r) {
			h.push('<tr' + (opts.rowClass ? ' class="' + esc(opts.rowClass(r)) + '"' : '') + '>');
			cols.forEach(function (c) {
				var v = c.fmt ? c.fmt(r) : esc(r[c.key]);
				h.push('<td' + (c.num ? ' class="num"' : c.mono ? ' class="mono"' : '') + '>' + v + '</td>');
			});
			h.push('</tr>');
		});
		if (data.length > limit)
			h.push('<tr class="more"><td colspan="' + cols.length + '">' + fmtNum(data.length - limit) +
				' more rows not shown (the JSON report has them all)</td></tr>');
		if (!data.length)
			h.push('<tr class="more"><td colspan="' + cols.length + '">none</td></tr>');
		h.push('</tbody></table>');
		el.innerHTML = h.join('');
		el.querySelectorAll('th').forEach(function (th) {
			th.addEventListener('click', function () {
				var i = +th.getAttribute('data-col');
				el._sortDir = el._sortKey === i ? -(el._sortDir || -1) : -1;
				el._sortKey = i;
				table(el, cols, rows, opts);
			});
		});
	}

	/* ---- charts ---- */

	/* Set a chart's option, creating the chart on first use; an existing chart keeps the
	 * zoom its user chose. */
	function chart(id, option) {
		var el = $(id);
		var c = fennec.charts[id];
		if (!c) {
			c = fennec.charts[id] = echarts.init(el, null, {renderer: 'canvas'});
			c.on('finished', function () { fennec.rendered[id] = true; });
		} else {
			var old = c.getOption();
			if (old && old.dataZoom && option.dataZoom) {
				option.dataZoom.forEach(function (z, i) {
					var o = old.dataZoom[i];
					if (o && (o.start !== 0 || o.end !== 100)) {
						z.start = o.start;
						z.end = o.end;
					}
				});
			}
		}
		option.animation = false;
		c.setOption(option, {notMerge: true});
		return c;
	}

	/* Resize the charts that are on screen; a chart in a hidden tab or panel has no size
	 * and is resized when it is shown (fennec.js showTab). */
	function resizeVisible() {
		Object.keys(fennec.charts).forEach(function (id) {
			var el = $(id);
			if (el && el.offsetParent !== null && el.clientWidth > 0) fennec.charts[id].resize();
		});
	}
	window.addEventListener('resize', resizeVisible);

	/* Height of a chart's container in pixels (before drawing; a drawn chart is resized). */
	function sizeChart(id, px) {
		var el = $(id);
		if (el.style.height === px + 'px') return;
		el.style.height = px + 'px';
		if (fennec.charts[id]) fennec.charts[id].resize();
	}

	function emptyChart(id, text) {
		return chart(id, {
			graphic: [{type: 'text', left: 'center', top: 'middle', style: {text: text, fill: '#868e96', fontSize: 14}}],
			xAxis: {show: false}, yAxis: {show: false}, series: []
		});
	}

	/* ---- summary ---- */

	function card(k, v, s, warn) {
		return '<div class="card' + (warn ? ' warn' : '') + '"><div class="k">' + esc(k) + '</div><div class="v">' + esc(v) +
			'</div>' + (s ? '<div class="s">' + esc(s) + '</div>' : '') + '</div>';
	}

	window.fennecUI = {
		showError: showError, fmtNs: fmtNs, fmtBytes: fmtBytes, fmtNum: fmtNum, fmtRate: fmtRate,
		fmtPct: fmtPct, esc: esc, $: $, isNum: isNum, ellipsize: ellipsize, onReady: onReady, colorOf: colorOf,
		table: table, chart: chart, resizeVisible: resizeVisible, sizeChart: sizeChart, emptyChart: emptyChart, card: card
	};
})();
