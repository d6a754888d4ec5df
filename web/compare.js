/*
 * compare.js - the page of `fennec compare A B --format html` (docs/compare.md). Draws the
 * comparison (page data "compare", schema fennec.compare/1) as it is: the verdicts, speedups,
 * confidence intervals and p-values are the analysis's, never recomputed here. Adds what
 * only a page can show: a forest plot of the region speedups with their intervals, both
 * runs' step times, the function share changes and the differential flame graph.
 */
(function () {
	'use strict';

	var fennec = window.fennec, U = window.fennecUI;
	var fmtNs = U.fmtNs, fmtBytes = U.fmtBytes, fmtNum = U.fmtNum, fmtRate = U.fmtRate, fmtPct = U.fmtPct,
		esc = U.esc, $ = U.$, isNum = U.isNum, ellipsize = U.ellipsize, table = U.table, chart = U.chart,
		emptyChart = U.emptyChart, card = U.card;

	var D = null, C = null;
	var MAX_FOREST = 40;
	var COLOR = {faster: '#2b8a3e', slower: '#c92a2a', same: '#868e96'};

	function fmtX(x) { return !isNum(x) ? '–' : x.toFixed(x >= 10 ? 1 : 2) + 'x'; }
	function fmtP(p) { return !isNum(p) ? '–' : p < 1e-4 ? p.toExponential(1) : p.toFixed(4); }
	function fmtDelta(d) { return !isNum(d) ? '–' : (d >= 0 ? '+' : '') + d.toFixed(2); }
	function tone(t) { return t.significant ? (t.speedup >= 1 ? 'faster' : 'slower') : 'same'; }
	function verdictHtml(t) {
		return '<span class="vd ' + tone(t) + '">' + esc(t.verdict) + '</span>';
	}
	function ci(t) { return !isNum(t.ci_low) ? '–' : fmtX(t.ci_low) + ' – ' + fmtX(t.ci_high); }

	/* ---- the verdict and the summary cards ---- */

	function drawSummary() {
		var s = C.summary, a = s.a, b = s.b, st = C.steps || {};
		var conf = Math.round((C.options.confidence || 0.95) * 100);
		var v;
		if (st.tested)
			v = st.significant ? 'B is ' + (st.speedup >= 1 ? fmtX(st.speedup) + ' faster' : fmtX(1 / st.speedup) + ' slower') +
				' per step (' + conf + ' % CI of the speedup ' + ci(st) + ', p = ' + fmtP(st.p_value) + ')' :
				'No significant change in step time (speedup ' + fmtX(st.speedup) + ', ' + conf + ' % CI ' + ci(st) + ')';
		else
			v = 'Wall time ' + fmtNs(a.wall_ns) + ' → ' + fmtNs(b.wall_ns) + ' (' + fmtX(s.wall_speedup) +
				'); no steps to test (fennec_step() marks give a per-step test)';
		v += '. Regions: ' + s.faster_regions + ' faster, ' + s.slower_regions + ' slower beyond the ' +
			fmtNum(C.options.threshold_pct) + ' % noise threshold.';
		var el = $('verdict');
		el.className = 'verdict ' + (s.significant ? (s.slower_regions > s.faster_regions || (st.tested && st.significant && st.speedup < 1) ?
			'slower' : 'faster') : 'same');
		el.textContent = v;

		function pair(k, x, y, fmt, speedup, sub) {
			return card(k, fmt(x) + ' → ' + fmt(y), (isNum(speedup) ? fmtX(speedup) + ' ' : '') + (sub || ''));
		}
		var h = [];
		h.push(pair('Wall time', a.wall_ns, b.wall_ns, fmtNs, s.wall_speedup, 'speedup A/B'));
		h.push(pair('CPU time', a.cpu_ns, b.cpu_ns, fmtNs, s.cpu_speedup, 'speedup A/B'));
		if (a.steps || b.steps) {
			h.push(pair('Step mean', a.step_mean_ns, b.step_mean_ns, fmtNs, st.speedup, st.tested ? st.verdict : ''));
			h.push(pair('Step median', a.step_p50_ns, b.step_p50_ns, fmtNs, null, fmtNum(a.steps) + ' → ' + fmtNum(b.steps) + ' steps'));
			if (isNum(a.items_per_s))
				h.push(pair('Throughput', a.items_per_s, b.items_per_s, function (x) { return fmtRate(x); }, null, 'items/s'));
			else
				h.push(pair('Throughput', a.steps_per_s, b.steps_per_s, function (x) { return fmtRate(x); }, null, 'steps/s'));
		}
		if (a.peak_heap_bytes !== undefined)
			h.push(pair('Peak heap', a.peak_heap_bytes, b.peak_heap_bytes, fmtBytes, null, 'live heap at its peak'));
		h.push(pair('Peak RSS', a.max_rss_bytes, b.max_rss_bytes, fmtBytes, null, 'getrusage max RSS'));
		if (a.cpu_samples || b.cpu_samples)
			h.push(pair('CPU samples', a.cpu_samples, b.cpu_samples, fmtNum, null, ''));
		$('cards').innerHTML = h.join('');

		var n = [];
		['a', 'b'].forEach(function (k) {
			(C[k].warnings || []).forEach(function (w) { n.push(k.toUpperCase() + ': ' + w); });
		});
		if (D.steps && D.steps.thinned)
			n.push('Step chart thinned to ' + fmtNum(D.steps.a.length + D.steps.b.length) + ' points (evenly spaced); the tests use every step.');
		$('notices').innerHTML = n.map(function (x) { return '<li>' + esc(x) + '</li>'; }).join('');
		$('cmd').textContent = 'A: ' + (C.a.command || C.a.path) + '   B: ' + (C.b.command || C.b.path);
		$('footer').textContent = 'fennec ' + C.fennec_version + ' · ' + C.schema + ' · α = ' + C.options.alpha + ', ' +
			fmtNum(C.options.resamples) + ' bootstrap resamples · A: ' + C.a.path + ' · B: ' + C.b.path;
	}

	/* ---- regions: forest plot and table ---- */

	function drawRegions() {
		var tested = (C.regions || []).filter(function (r) { return r.tested && r.speedup > 0 && r.ci_low > 0; });
		/* The largest changes first, whichever the direction; at most MAX_FOREST rows. */
		tested.sort(function (x, y) { return Math.abs(Math.log(y.speedup)) - Math.abs(Math.log(x.speedup)); });
		var shown = tested.slice(0, MAX_FOREST).reverse();
		var t = (C.options.threshold_pct || 0) / 100;
		$('forest-note').textContent = 'speedup with its ' + Math.round(C.options.confidence * 100) + ' % confidence interval, log scale; ' +
			'grey band: within the ' + fmtNum(C.options.threshold_pct) + ' % noise threshold' +
			(tested.length > shown.length ? '; the ' + shown.length + ' largest changes of ' + tested.length : '');
		if (!shown.length) {
			emptyChart('chart-forest', 'no region was recorded in both runs with enough calls to test');
		} else {
			var lo = 1 / (1 + t), hi = 1 + t, xmin = lo, xmax = hi;
			shown.forEach(function (r) { xmin = Math.min(xmin, r.ci_low); xmax = Math.max(xmax, r.ci_high); });
			$('chart-forest').style.height = Math.max(160, 60 + 26 * shown.length) + 'px';
			chart('chart-forest', {
				grid: {left: 10, right: 30, top: 16, bottom: 30, containLabel: true},
				tooltip: {trigger: 'item', formatter: function (p) {
					var r = shown[p.dataIndex];
					return esc(r.path) + '<br>speedup ' + fmtX(r.speedup) + ' (CI ' + ci(r) + '), p = ' + fmtP(r.p_value) +
						'<br>mean ' + fmtNs(r.a_mean_ns) + ' → ' + fmtNs(r.b_mean_ns) + ' · calls ' + fmtNum(r.a_count) + ' → ' +
						fmtNum(r.b_count) + '<br>' + esc(r.verdict);
				}},
				xAxis: {type: 'log', min: xmin / 1.15, max: xmax * 1.15, name: 'speedup (A/B)', nameLocation: 'middle', nameGap: 22,
					axisLabel: {formatter: function (v) { return fmtX(v); }}},
				yAxis: {type: 'category', data: shown.map(function (r) { return ellipsize(r.path, 40); })},
				series: [{
					type: 'custom',
					data: shown.map(function (r, i) { return [r.ci_low, r.ci_high, r.speedup, i]; }),
					encode: {x: [0, 1, 2], y: 3},
					renderItem: function (params, api) {
						var r = shown[params.dataIndex], c = COLOR[tone(r)];
						var a = api.coord([api.value(0), api.value(3)]), b = api.coord([api.value(1), api.value(3)]);
						var m = api.coord([api.value(2), api.value(3)]);
						return {type: 'group', children: [
							{type: 'line', shape: {x1: a[0], y1: a[1], x2: b[0], y2: b[1]}, style: {stroke: c, lineWidth: 2}},
							{type: 'line', shape: {x1: a[0], y1: a[1] - 5, x2: a[0], y2: a[1] + 5}, style: {stroke: c, lineWidth: 2}},
							{type: 'line', shape: {x1: b[0], y1: b[1] - 5, x2: b[0], y2: b[1] + 5}, style: {stroke: c, lineWidth: 2}},
							{type: 'circle', shape: {cx: m[0], cy: m[1], r: 5}, style: {fill: c}}
						]};
					},
					markArea: {silent: true, itemStyle: {color: 'rgba(134,142,150,0.15)'}, data: [[{xAxis: lo}, {xAxis: hi}]]},
					markLine: {silent: true, symbol: 'none', lineStyle: {color: '#495057', type: 'dashed'}, label: {show: false}, data: [{xAxis: 1}]}
				}]
			});
		}
		drawRegionTable();
	}

	function drawRegionTable() {
		var q = $('region-filter').value.trim().toLowerCase();
		var rows = (C.regions || []).filter(function (r) { return !q || r.path.toLowerCase().indexOf(q) >= 0; });
		table($('region-table'), [
			{key: 'path', label: 'region path', mono: true},
			{key: 'status', label: 'in', fmt: function (r) { return r.status === 'both' ? 'A, B' : r.status === 'added' ? 'B only' : 'A only'; }},
			{key: 'a_count', label: 'calls A', num: true, fmt: function (r) { return fmtNum(r.a_count); }},
			{key: 'b_count', label: 'calls B', num: true, fmt: function (r) { return fmtNum(r.b_count); }},
			{key: 'a_mean_ns', label: 'mean A', num: true, fmt: function (r) { return fmtNs(r.a_mean_ns); }},
			{key: 'b_mean_ns', label: 'mean B', num: true, fmt: function (r) { return fmtNs(r.b_mean_ns); }},
			{key: 'a_total_ns', label: 'total A', num: true, fmt: function (r) { return fmtNs(r.a_total_ns); }},
			{key: 'b_total_ns', label: 'total B', num: true, fmt: function (r) { return fmtNs(r.b_total_ns); }},
			{key: 'speedup', label: 'speedup', num: true, fmt: function (r) { return fmtX(r.speedup); }},
			{key: 'ci_low', label: 'CI', num: true, fmt: ci},
			{key: 'p_value', label: 'p', num: true, fmt: function (r) { return fmtP(r.p_value); }},
			{key: 'verdict', label: 'verdict', fmt: verdictHtml}
		], rows, {limit: 500});
	}

	/* ---- steps and functions ---- */

	function drawSteps() {
		var s = D.steps || {a: [], b: []};
		var st = C.steps || {};
		if (!s.a.length && !s.b.length) {
			$('steps-note').textContent = '';
			emptyChart('chart-steps', 'no fennec_step() marks in either run');
			return;
		}
		$('steps-note').textContent = 'each step\'s duration, A and B over step number' + (st.tested ? '; ' + st.verdict : '');
		function series(name, v, stride, color) {
			return {name: name, type: 'line', showSymbol: v.length < 200, symbolSize: 4, lineStyle: {width: 1.2}, color: color,
				data: v.map(function (d, i) { return [Math.round(i * stride) + 1, d / 1e6]; })};
		}
		chart('chart-steps', {
			grid: {left: 10, right: 20, top: 30, bottom: 40, containLabel: true},
			legend: {top: 0},
			tooltip: {trigger: 'axis', valueFormatter: function (v) { return fmtNs(v * 1e6); }},
			xAxis: {type: 'value', name: 'step', nameLocation: 'middle', nameGap: 24, minInterval: 1},
			yAxis: {type: 'value', scale: true, axisLabel: {formatter: function (v) { return fmtNs(v * 1e6); }}},
			dataZoom: [{type: 'inside'}, {type: 'slider', height: 14, bottom: 4}],
			series: [series('A', s.a, s.a_stride || 1, '#1c7ed6'), series('B', s.b, s.b_stride || 1, '#e8590c')]
		});
	}

	function drawFunctions() {
		var fs = C.functions || [];
		if (!C.functions_compared || !fs.length) {
			$('functions-note').textContent = '';
			$('function-panel').hidden = true;
			emptyChart('chart-functions', C.functions_compared === false ? 'one of the runs has no CPU samples' : 'no sampled functions');
			return;
		}
		var top = fs.slice().sort(function (x, y) { return Math.abs(y.delta_pct) - Math.abs(x.delta_pct); }).slice(0, 15).reverse();
		$('functions-note').textContent = 'change of self share, points; coloured where significant (Holm-corrected)';
		chart('chart-functions', {
			grid: {left: 10, right: 40, top: 10, bottom: 24, containLabel: true},
			tooltip: {trigger: 'item', formatter: function (p) {
				var f = top[p.dataIndex];
				return esc(f.name) + '<br>self ' + fmtPct(f.a_self_pct) + ' → ' + fmtPct(f.b_self_pct) + ' (' + fmtDelta(f.delta_pct) + ' points)<br>samples ' + fmtNum(f.a_self_samples) + ' → ' + fmtNum(f.b_self_samples) +
					'<br>p = ' + fmtP(f.p_holm) + (f.significant ? ', significant' : ', not significant');
			}},
			xAxis: {type: 'value', axisLabel: {formatter: function (v) { return (v > 0 ? '+' : '') + v + ' pt'; }}},
			yAxis: {type: 'category', data: top.map(function (f) { return f.name.length > 36 ? f.name.slice(0, 35) + '…' : f.name; })},
			series: [{type: 'bar', barMaxWidth: 20, data: top.map(function (f) {
				return {value: f.delta_pct, itemStyle: {color: f.significant ? (f.delta_pct > 0 ? COLOR.slower : COLOR.faster) : '#ced4da'}};
			})}]
		});
		table($('function-table'), [
			{key: 'name', label: 'function', mono: true},
			{key: 'status', label: 'in', fmt: function (f) { return f.status === 'both' ? 'A, B' : f.status === 'added' ? 'B only' : 'A only'; }},
			{key: 'a_self_pct', label: 'self A', num: true, fmt: function (f) { return fmtPct(f.a_self_pct); }},
			{key: 'b_self_pct', label: 'self B', num: true, fmt: function (f) { return fmtPct(f.b_self_pct); }},
			{key: 'delta_pct', label: 'Δ points', num: true, sort: function (f) { return Math.abs(f.delta_pct); },
				fmt: function (f) { return fmtDelta(f.delta_pct); }},
			{key: 'a_self_samples', label: 'samples A', num: true, fmt: function (f) { return fmtNum(f.a_self_samples); }},
			{key: 'b_self_samples', label: 'samples B', num: true, fmt: function (f) { return fmtNum(f.b_self_samples); }},
			{key: 'p_holm', label: 'p (Holm)', num: true, fmt: function (f) { return fmtP(f.p_holm); }},
			{key: 'significant', label: 'significant', fmt: function (f) { return f.significant ? 'yes' : 'no'; }}
		], fs, {limit: 300});
	}

	/* ---- findings and the flame graph ---- */

	function drawFindings() {
		var rows = [];
		['fixed', 'new', 'unchanged'].forEach(function (k) {
			((C.findings || {})[k] || []).forEach(function (f) { rows.push({status: k, f: f}); });
		});
		table($('finding-table'), [
			{key: 'status', label: 'status', fmt: function (r) { return '<span class="vd ' + (r.status === 'fixed' ? 'faster' : r.status === 'new' ? 'slower' : 'same') + '">' + r.status + '</span>'; }},
			{key: 'severity', label: 'severity', sort: function (r) { return r.f.severity; }, fmt: function (r) {
				var a = r.f.a_severity && r.f.a_severity !== r.f.severity ? '<span class="sev ' + esc(r.f.a_severity) + '">' + esc(r.f.a_severity) + '</span> → ' : '';
				return a + '<span class="sev ' + esc(r.f.severity) + '">' + esc(r.f.severity) + '</span>';
			}},
			{key: 'type', label: 'rule', sort: function (r) { return r.f.type; }, fmt: function (r) { return esc(r.f.type); }},
			{key: 'subject', label: 'subject', mono: true, sort: function (r) { return r.f.subject; }, fmt: function (r) { return esc(r.f.subject); }},
			{key: 'evidence', label: 'evidence and recommendation', fmt: function (r) {
				var e = esc(r.f.evidence);
				if (r.status === 'unchanged' && r.f.a_evidence) e = 'B: ' + e + '<br><span class="muted">A: ' + esc(r.f.a_evidence) + '</span>';
				return e + '<div class="finding-rec">' + esc(r.f.recommendation) + '</div>';
			}}
		], rows, {limit: 200});
	}

	function drawDiff() {
		var frame = $('diff-frame'), none = $('diff-none');
		if (!D.diff_svg) {
			frame.hidden = true;
			none.hidden = false;
			none.textContent = D.diff_note || 'no differential flame graph';
			return;
		}
		/* A blob: URL keeps the SVG a document of its own, with its own script (hover,
		 * click to zoom, search), sandboxed away from this page. */
		var h = /<svg[^>]*\sheight="(\d+)/.exec(D.diff_svg);
		if (h) frame.style.height = Math.min(Math.max(+h[1] + 24, 200), 2000) + 'px';
		frame.src = URL.createObjectURL(new Blob([D.diff_svg], {type: 'image/svg+xml'}));
	}

	function init() {
		try {
			D = JSON.parse($('fennec-data').textContent);
			C = D.compare;
			drawSummary();
			drawRegions();
			drawSteps();
			drawFunctions();
			drawFindings();
			drawDiff();
			$('region-filter').addEventListener('input', drawRegionTable);
		} catch (e) {
			U.showError(e && e.stack || e);
		}
		fennec.ready = true;
	}

	U.onReady(init);
})();
