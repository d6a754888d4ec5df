/*
 * fennec.js - the HTML report and `fennec view` dashboard (docs/html.md). Reads the page
 * data (the JSON report under "analysis", plus "timeline" and "flame") and draws tabs of
 * cards, tables and ECharts charts. Charts are drawn when their tab is first shown. Under
 * `fennec view` (window.FENNEC_LIVE) it polls /api/status about once a second and redraws
 * from /api/page when the analysis changed, keeping each chart's zoom.
 * For tests, window.fennec exposes the chart instances, which charts have rendered, the
 * errors seen, and tab switching.
 */
(function () {
	'use strict';

	var fennec = window.fennec, U = window.fennecUI;
	var showError = U.showError, fmtNs = U.fmtNs, fmtBytes = U.fmtBytes, fmtNum = U.fmtNum, fmtRate = U.fmtRate,
		fmtPct = U.fmtPct, esc = U.esc, $ = U.$, colorOf = U.colorOf, table = U.table, chart = U.chart,
		sizeChart = U.sizeChart, emptyChart = U.emptyChart, card = U.card;

	var D = null;                  /* the page data */
	var A = null;                  /* D.analysis */
	var drawn = {};                /* tab -> drawn with the current data */

	function drawSummary() {
		var s = A.summary, mem = A.memory || {};
		var cpu = (s.cpu_user_ns || 0) + (s.cpu_sys_ns || 0);
		var rss = 0;
		(A.processes || []).forEach(function (p) { rss = Math.max(rss, p.max_rss_bytes || 0); });
		var h = [];
		h.push(card('Wall time', fmtNs(s.wall_ns), s.cut_short ? 'cut short: what was flushed' : s.processes + ' process(es), ' + s.threads + ' thread(s)'));
		h.push(card('CPU time', fmtNs(cpu), 'user ' + fmtNs(s.cpu_user_ns) + ', sys ' + fmtNs(s.cpu_sys_ns) +
			(s.wall_ns >= 1e8 ? ' · ' + (cpu / s.wall_ns).toFixed(2) + ' cores busy' : '')));
		h.push(card('Steps', fmtNum(s.steps), s.steps ? 'mean ' + fmtNs(s.step_mean_ns) + ', p95 ' + fmtNs(s.step_p95_ns) : 'no fennec_step() marks'));
		h.push(card('Throughput', s.items_per_s !== null && s.items_per_s !== undefined ? fmtRate(s.items_per_s) + ' items/s' :
			s.steps_per_s !== null && s.steps_per_s !== undefined ? fmtRate(s.steps_per_s) + ' steps/s' : '–',
			s.items_per_s !== null && s.items_per_s !== undefined ? fmtRate(s.steps_per_s) + ' steps/s' : 'over the steps'));
		if (mem.peak_bytes !== undefined && mem.peak_bytes !== null)
			h.push(card('Peak memory', fmtBytes(mem.peak_bytes), 'live heap' + (mem.peak_rss_bytes ? ', RSS ' + fmtBytes(mem.peak_rss_bytes) : '')));
		else
			h.push(card('Peak memory', rss ? fmtBytes(rss) : '–', 'max RSS (getrusage)'));
		if (A.gpu && A.gpu.busy_pct !== undefined)
			h.push(card('GPU busy', fmtPct(A.gpu.busy_pct), ''));
		h.push(card('Dropped events', fmtNum(s.dropped_events), s.dropped_events ? 'counts and totals are low: see the warnings' : 'nothing lost', s.dropped_events > 0));
		var smp = A.samples || {};
		if (smp.mode && smp.mode !== 'off')
			h.push(card('CPU samples', fmtNum(smp.cpu_samples), (smp.rate_hz ? fmtRate(smp.rate_hz) + ' Hz achieved, ' : '') + smp.mode + ' mode'));
		h.push(card('Events', fmtNum(s.events), fmtNum((A.regions || []).length) + ' region paths'));
		$('cards').innerHTML = h.join('');

		/* What the page left out or reduced, and the recording's own warnings. */
		var n = [];
		var tl = D.timeline;
		if (tl && tl.blocks)
			n.push(['info', 'Timeline reduced for display: ' + fmtNum(tl.calls) + ' calls drawn as ' + fmtNum(tl.intervals) +
				' intervals; calls and gaps shorter than ' + fmtNs(tl.resolution_ns) + ' are merged into blocks (' +
				fmtNum(tl.blocks) + ' blocks). The statistics are computed from every call.']);
		if (tl && tl.deep_calls)
			n.push(['info', 'Timeline: ' + fmtNum(tl.deep_calls) + ' calls deeper than depth ' + tl.max_depth + ' are not drawn.']);
		if (A.steps && A.steps.thinned)
			n.push(['info', 'Step chart thinned: ' + fmtNum(A.steps.count) + ' steps, ' + fmtNum(A.steps.durations_ns.length) + ' shown (evenly spaced).']);
		if (D.flame && D.flame.pruned_nodes)
			n.push(['info', 'Sampled call graph: ' + fmtNum(D.flame.pruned_nodes) + ' call-tree nodes with fewer than ' +
				fmtNum(D.flame.min_weight) + ' samples are not drawn (' + fmtNum(D.flame.nodes) + ' drawn).']);
		if ((A.regions || []).length > MAX_TREE)
			n.push(['info', 'Region sunburst and flame graph: the ' + fmtNum(MAX_TREE) + ' largest of ' + fmtNum(A.regions.length) +
				' region paths are drawn (the table has them all).']);
		(A.warnings || []).forEach(function (w) { n.push(['warn', w]); });
		$('notices').innerHTML = n.map(function (x) { return '<li class="' + x[0] + '">' + esc(x[1]) + '</li>'; }).join('');
		$('warnings').innerHTML = (A.warnings || []).length ? A.warnings.map(function (w) { return '<li>' + esc(w) + '</li>'; }).join('') :
			'<li class="info">none</li>';

		/* Timing breakdown: top regions by total time. */
		var regs = (A.regions || []).slice(0, 15).reverse();
		if (!regs.length)
			emptyChart('chart-breakdown', 'no regions recorded (the program used no fennec regions)');
		else
			chart('chart-breakdown', {
				grid: {left: 10, right: 90, top: 10, bottom: 24, containLabel: true},
				tooltip: {trigger: 'item', formatter: function (p) {
					var r = regs[p.dataIndex];
					return esc(r.path) + '<br>total ' + fmtNs(r.total_ns) + ' (' + fmtPct(r.share_pct) + ' of wall)<br>self ' +
						fmtNs(r.self_ns) + '<br>' + fmtNum(r.count) + ' calls, mean ' + fmtNs(r.mean_ns) + ', p95 ' + fmtNs(r.p95_ns);
				}},
				xAxis: {type: 'value', axisLabel: {formatter: function (v) { return fmtNs(v); }}},
				yAxis: {type: 'category', data: regs.map(function (r) { return r.path.length > 40 ? '…' + r.path.slice(-39) : r.path; })},
				series: [{type: 'bar', barMaxWidth: 26, data: regs.map(function (r) { return {value: r.total_ns, itemStyle: {color: colorOf(r.name)}}; }),
					label: {show: true, position: 'right', formatter: function (p) {
						var r = regs[p.dataIndex];
						return fmtNs(r.total_ns) + ' · ' + fmtNum(r.count) + '×';
					}}}]
			});

		/* Per-step series. */
		var st = A.steps || {}, durs = st.durations_ns || [];
		$('steps-note').textContent = durs.length ? fmtNum(st.count) + ' steps' + (st.thinned ? ', thinned to ' + fmtNum(durs.length) : '') +
			'; lines at p50 and p95' : '';
		if (!durs.length)
			emptyChart('chart-steps', 'no steps (mark iterations with fennec_step())');
		else {
			var stride = st.thinned ? st.count / durs.length : 1;
			chart('chart-steps', {
				grid: {left: 10, right: 36, top: 24, bottom: 60, containLabel: true},
				tooltip: {trigger: 'axis', valueFormatter: function (v) { return fmtNs(v * 1e6); }},
				xAxis: {type: 'category', data: durs.map(function (_, i) { return 'step ' + (Math.round(i * stride) + 1); }),
					axisLabel: {formatter: function (v) { return v.slice(5); }}},
				yAxis: {type: 'value', scale: true, axisLabel: {formatter: function (v) { return fmtNs(v * 1e6); }}},
				dataZoom: [{type: 'inside'}, {type: 'slider', height: 18, bottom: 8}],
				series: [{type: 'line', name: 'step time', showSymbol: durs.length < 200, sampling: 'lttb', lineStyle: {width: 1.2},
					data: durs.map(function (v) { return v / 1e6; }),
					markLine: {symbol: 'none', silent: true, label: {formatter: '{b}'}, data: [
						{name: 'p50', yAxis: A.summary.step_p50_ns / 1e6},
						{name: 'p95', yAxis: A.summary.step_p95_ns / 1e6}]}}]
			});
		}

		var f = (A.findings || []).slice(0, 3);
		$('top-findings').innerHTML = f.length ? f.map(function (x) {
			return '<p><span class="sev ' + esc(x.severity) + '">' + esc(x.severity) + '</span> <b>' + esc(x.subject) + '</b>: ' +
				esc(x.evidence && x.evidence.text) + '<br><span class="finding-rec">→ ' + esc(x.recommendation) + '</span></p>';
		}).join('') : '<p class="match">No findings: no rule fired.</p>';
	}

	/* ---- flame graphs (regions and samples) ---- */

	/*
	 * A flame graph (top-down icicle) of a tree given as parallel arrays: name[i] (string),
	 * parent[i] (-1 for a root; parents come before children), total[i], self[i].
	 * Children are laid out by name, so a live update keeps shapes in place.
	 */
	function flameLayout(name, parent, total) {
		var n = name.length, kids = [], x0 = new Float64Array(n), depth = new Int32Array(n);
		for (var i = 0; i < n; i++) kids.push([]);
		var roots = [];
		for (i = 0; i < n; i++) (parent[i] < 0 ? roots : kids[parent[i]]).push(i);
		var byName = function (a, b) { return name[a] < name[b] ? -1 : name[a] > name[b] ? 1 : 0; };
		var sum = 0, maxDepth = 0;
		roots.sort(byName);
		roots.forEach(function (r) { x0[r] = sum; depth[r] = 0; sum += total[r]; });
		for (i = 0; i < n; i++) {  /* parents come first: their x0 is set */
			var k = kids[i];
			if (!k.length) continue;
			k.sort(byName);
			var x = x0[i];
			for (var j = 0; j < k.length; j++) {
				x0[k[j]] = x;
				depth[k[j]] = depth[i] + 1;
				if (depth[i] + 1 > maxDepth) maxDepth = depth[i] + 1;
				x += total[k[j]];
			}
		}
		return {x0: x0, depth: depth, sum: sum, maxDepth: maxDepth};
	}

	function flameChart(id, tree, unitFmt, search, matchEl) {
		var L = flameLayout(tree.name, tree.parent, tree.total);
		var re = null;
		if (search) {
			try { re = new RegExp(search, 'i'); } catch (e) { re = null; }
		}
		var rows = [], matched = 0;
		/* Matched weight: count a match once, not again under a matching ancestor. */
		var inMatch = new Uint8Array(tree.name.length);
		for (var i = 0; i < tree.name.length; i++) {
			if (!tree.total[i]) continue;
			var m = re ? re.test(tree.name[i]) : false;
			var p = tree.parent[i];
			if (m && !(p >= 0 && inMatch[p])) matched += tree.total[i];
			inMatch[i] = m || (p >= 0 && inMatch[p]) ? 1 : 0;
			rows.push([L.x0[i], L.x0[i] + tree.total[i], L.depth[i], i, m ? 1 : 0]);
		}
		if (matchEl)
			matchEl.textContent = re ? fmtPct(L.sum ? 100 * matched / L.sum : 0) + ' of the total matches' : '';
		var rowsShown = Math.max(L.maxDepth + 1, 3);
		sizeChart(id, Math.min(900, Math.max(160, rowsShown * 24 + 44)));
		var c = chart(id, {
			grid: {left: 4, right: 4, top: 4, bottom: 34},
			tooltip: {formatter: function (p) {
				var i = p.value[3];
				return esc(tree.name[i]) + '<br>total ' + unitFmt(tree.total[i]) + ' (' + fmtPct(100 * tree.total[i] / L.sum) + ')<br>self ' +
					unitFmt(tree.self[i]) + (tree.extra ? tree.extra(i) : '');
			}},
			xAxis: {type: 'value', min: 0, max: L.sum || 1, show: false},
			yAxis: {type: 'value', min: 0, max: rowsShown, inverse: true, show: false},
			dataZoom: [{type: 'inside', xAxisIndex: 0, filterMode: 'weakFilter'},
				{type: 'slider', xAxisIndex: 0, filterMode: 'weakFilter', height: 16, bottom: 6, showDetail: false}],
			series: [{type: 'custom', encode: {x: [0, 1], y: 2}, data: rows, progressive: 0, renderItem: function (params, api) {
				var a = api.coord([api.value(0), api.value(2)]);
				var b = api.coord([api.value(1), api.value(2) + 1]);
				var rect = echarts.graphic.clipRectByRect({x: a[0], y: a[1], width: b[0] - a[0], height: b[1] - a[1] - 1},
					{x: params.coordSys.x, y: params.coordSys.y, width: params.coordSys.width, height: params.coordSys.height});
				if (!rect || rect.width < 0.5) return null;
				var i = api.value(3), nm = tree.name[i];
				var fill = re ? (api.value(4) ? '#e03131' : '#dee2e6') : colorOf(nm);
				return {type: 'rect', shape: rect, style: {fill: fill, stroke: '#fff', lineWidth: 0.5},
					textContent: rect.width > 36 ? {style: {text: nm, fill: re && !api.value(4) ? '#495057' : '#fff', fontSize: 11,
						overflow: 'truncate', width: rect.width - 6}} : undefined,
					textConfig: {position: 'insideLeft'}};
			}}]
		});
		c.off('click');
		c.on('click', function (p) {
			if (!p.value) return;
			c.dispatchAction({type: 'dataZoom', startValue: p.value[0], endValue: p.value[1]});
		});
		return c;
	}

	/*
	 * The region tree from the report's regions (paths joined by '/'): the MAX_TREE
	 * largest paths by total time (the report lists them by total, so a path's ancestors,
	 * never smaller, come with it); drawTree notes what was left out.
	 */
	var MAX_TREE = 3000;
	function regionTree() {
		var regs = (A.regions || []).slice(0, MAX_TREE);
		var idx = {}, name = [], parent = [], total = [], self = [], reg = [];
		var sorted = regs.slice().sort(function (a, b) { return a.depth - b.depth; });
		sorted.forEach(function (r) {
			var cut = r.path.length - r.name.length - 1;
			var pp = r.depth > 0 ? r.path.slice(0, cut) : null;
			if (pp !== null && idx[pp] === undefined) return; /* its ancestor was cut: left out too */
			var p = pp !== null ? idx[pp] : -1;
			idx[r.path] = name.length;
			name.push(r.name); parent.push(p); total.push(r.total_ns); self.push(r.self_ns); reg.push(r);
		});
		return {name: name, parent: parent, total: total, self: self, reg: reg,
			extra: function (i) { return '<br>' + fmtNum(reg[i].count) + ' calls on ' + reg[i].threads + ' thread(s), mean ' + fmtNs(reg[i].mean_ns); }};
	}

	/* ---- operations ---- */

	function drawOperations() {
		var regs = A.regions || [];
		var tree = regionTree();
		/* Sunburst: nested children. */
		if (!regs.length) {
			emptyChart('chart-sunburst', 'no regions');
			emptyChart('chart-rflame', 'no regions');
		} else {
			var nodes = tree.name.map(function (nm, i) {
				return {name: nm, value: tree.total[i], path: tree.reg[i].path, itemStyle: {color: colorOf(nm)}, children: []};
			});
			var roots = [];
			tree.parent.forEach(function (p, i) { (p < 0 ? roots : nodes[p].children).push(nodes[i]); });
			chart('chart-sunburst', {
				tooltip: {formatter: function (p) {
					return p.data && p.data.path ? esc(p.data.path) + '<br>' + fmtNs(p.value) : '';
				}},
				series: [{type: 'sunburst', data: roots, radius: ['12%', '95%'], sort: null, nodeClick: 'rootToNode',
					label: {rotate: 'radial', minAngle: 8, fontSize: 11, overflow: 'truncate', width: 70},
					itemStyle: {borderColor: '#fff', borderWidth: 1},
					emphasis: {focus: 'ancestor'}}]
			});
			flameChart('chart-rflame', tree, fmtNs, $('rflame-search').value, $('rflame-match'));
		}
		drawTimeline();

		table($('region-table'), [
			{key: 'path', label: 'region path', mono: true, fmt: function (r) {
				return '<span class="bar" style="width:' + Math.min(60, Math.round(r.share_pct * 0.6)) + 'px"></span>' + esc(r.path); }},
			{key: 'count', label: 'calls', num: true, fmt: function (r) { return fmtNum(r.count); }},
			{key: 'total_ns', label: 'total', num: true, fmt: function (r) { return fmtNs(r.total_ns); }},
			{key: 'share_pct', label: '% wall', num: true, fmt: function (r) { return fmtPct(r.share_pct); }},
			{key: 'self_ns', label: 'self', num: true, fmt: function (r) { return fmtNs(r.self_ns); }},
			{key: 'mean_ns', label: 'mean', num: true, fmt: function (r) { return fmtNs(r.mean_ns); }},
			{key: 'p50_ns', label: 'p50', num: true, fmt: function (r) { return fmtNs(r.p50_ns); }},
			{key: 'p95_ns', label: 'p95', num: true, fmt: function (r) { return fmtNs(r.p95_ns); }},
			{key: 'p99_ns', label: 'p99', num: true, fmt: function (r) { return fmtNs(r.p99_ns); }},
			{key: 'max_ns', label: 'max', num: true, fmt: function (r) { return fmtNs(r.max_ns); }},
			{key: 'threads', label: 'threads', num: true},
			{key: 'samples', label: 'samples', num: true, fmt: function (r) { return fmtNum(r.samples); }},
			{key: 'top_functions', label: 'top functions (samples)', sort: function (r) { return r.samples; }, fmt: function (r) {
				return (r.top_functions || []).slice(0, 3).map(function (f) { return esc(f.name) + ' ' + fmtPct(f.self_pct); }).join('<br>'); }}
		], filterRegions(regs));

		var ms = A.metrics || [];
		$('metrics-panel').hidden = !ms.length;
		table($('metric-table'), [
			{key: 'name', label: 'metric', mono: true}, {key: 'kind', label: 'kind'},
			{key: 'count', label: 'updates', num: true, fmt: function (m) { return fmtNum(m.count); }},
			{key: 'summary', label: 'values', fmt: function (m) {
				if (m.kind === 'counter') return 'total ' + fmtNum(m.total) + ', ' + fmtRate(m.rate_per_s) + '/s';
				if (m.kind === 'gauge') return 'last ' + fmtNum(m.last) + ', min ' + fmtNum(m.min) + ', max ' + fmtNum(m.max) + ', mean ' + fmtNum(m.mean);
				return 'mean ' + fmtNum(m.mean) + ' ± ' + fmtNum(m.std) + ', p50 ' + fmtNum(m.p50) + ', p95 ' + fmtNum(m.p95) + ', max ' + fmtNum(m.max);
			}}
		], ms);
	}

	function filterRegions(regs) {
		var q = $('region-filter').value.toLowerCase();
		return q ? regs.filter(function (r) { return r.path.toLowerCase().indexOf(q) >= 0; }) : regs;
	}

	/*
	 * Thread timeline: one row per thread and region depth; x is time since the start of
	 * the recording. Merged blocks (count > 1) are drawn lighter and say how many calls
	 * they stand for; calls still open are outlined. Under `fennec view`, zooming into a
	 * reduced timeline loads the calls of the window from /api/timeline, with the whole
	 * interval budget, so detail appears as you zoom.
	 */
	var TL = {cur: null, coarse: null, open: {}, base: {}, seq: 0, timer: null, detail: false};
	fennec.detailLoads = 0;

	function timelineNote(t) {
		var w = t.to_ns !== null && t.to_ns !== undefined;
		return (w ? 'Zoomed: ' + fmtNum(t.calls) + ' calls between ' + fmtNs(t.from_ns) + ' and ' + fmtNs(t.to_ns) : fmtNum(t.calls) + ' calls') +
			(t.blocks ? ' drawn as ' + fmtNum(t.intervals) + ' intervals: calls and gaps under ' + fmtNs(t.resolution_ns) +
				' merged into blocks for display (hover a block for its call count)' : ', every call drawn') +
			(t.deep_calls ? '; ' + fmtNum(t.deep_calls) + ' calls deeper than ' + t.max_depth + ' not drawn' : '') +
			(w ? '. Zoom out to see the whole run.' : '. Scroll or drag the slider to zoom' + (window.FENNEC_LIVE && t.blocks ? ' (detail loads as you zoom)' : '') + '.');
	}

	function timelineRows(t) {
		TL.open = {};
		(t.open || []).forEach(function (k) { TL.open[k] = 1; });
		var rows = [];
		for (var i = 0; i < t.intervals; i++) {
			var b = TL.base[t.thread[i]];
			if (b === undefined) continue; /* a lane the full timeline does not have */
			var s = t.start_ns[i] / 1e6;
			rows.push([s, s + t.dur_ns[i] / 1e6, b + t.depth[i], i]);
		}
		return rows;
	}

	function useTimeline(t) {
		TL.cur = t;
		TL.detail = t !== TL.coarse;
		$('timeline-note').textContent = timelineNote(t);
		var c = fennec.charts['chart-timeline'];
		if (c) c.setOption({series: [{id: 'timeline', data: timelineRows(t)}]});
	}

	/* After a zoom: the window's calls from the server, or the full timeline back. */
	function timelineZoomed() {
		var c = fennec.charts['chart-timeline'], full = TL.coarse;
		if (!c || !full || !window.FENNEC_LIVE || !full.blocks) return;
		var z = (c.getOption().dataZoom || [])[0] || {};
		var span = full.span_ns, lo = span * (z.start || 0) / 100, hi = span * (z.end === undefined ? 100 : z.end) / 100;
		if (hi - lo > span * 0.9) {
			if (TL.detail) useTimeline(full);
			return;
		}
		var pad = (hi - lo) * 0.25, from = Math.max(0, Math.floor(lo - pad)), to = Math.ceil(hi + pad);
		var seq = ++TL.seq;
		fetch('api/timeline?from_ns=' + from + '&to_ns=' + to, {cache: 'no-store'}).then(function (r) {
			if (r.status === 503) { /* another window is being read: ask again */
				setTimeout(function () { if (seq === TL.seq) timelineZoomed(); }, 500);
				return null;
			}
			return r.json();
		}).then(function (d) {
			if (!d || seq !== TL.seq || !d.timeline || TL.coarse !== full) return;
			fennec.detailLoads++;
			useTimeline(d.timeline);
		}).catch(function (e) { showError('timeline detail: ' + e.message); });
	}

	function drawTimeline() {
		var tl = D.timeline;
		var note = $('timeline-note');
		if (!tl || !tl.intervals) {
			note.textContent = '';
			emptyChart('chart-timeline', tl ? 'no region calls to draw' : 'timeline unavailable: ' + (D.timeline_error || 'not computed'));
			return;
		}
		var threads = A.threads || [];
		/* Rows: per thread with intervals, its depths 0..max. */
		var maxDepth = {};
		for (var i = 0; i < tl.intervals; i++) {
			var t = tl.thread[i], d = tl.depth[i];
			if (maxDepth[t] === undefined || d > maxDepth[t]) maxDepth[t] = d;
		}
		var tids = Object.keys(maxDepth).map(Number).sort(function (a, b) { return a - b; });
		var cats = [];
		TL.base = {};
		tids.forEach(function (t) {
			TL.base[t] = cats.length;
			var th = threads[t] || {};
			for (var d = 0; d <= maxDepth[t]; d++)
				cats.push(d ? '' : (th.name ? th.name + ' ' : '') + (th.tid !== undefined ? th.tid : t) +
					(A.summary.processes > 1 ? ' [' + th.pid + ']' : ''));
		});
		TL.coarse = TL.cur = tl;
		TL.detail = false;
		note.textContent = timelineNote(tl);
		var span = tl.span_ns / 1e6;
		sizeChart('chart-timeline', Math.max(200, Math.min(900, 80 + cats.length * 24)));
		var c = chart('chart-timeline', {
			grid: {left: 8, right: 20, top: 8, bottom: 56, containLabel: true},
			tooltip: {formatter: function (p) {
				var t = TL.cur, k = p.value[3];
				var nm = t.names[t.name[k]], n = t.count[k];
				return n > 1 ? '<b>' + fmtNum(n) + ' calls</b> merged (shorter than ' + fmtNs(t.resolution_ns) + ' each), longest: ' + esc(nm) +
					'<br>from ' + fmtNs(t.start_ns[k]) + ', over ' + fmtNs(t.dur_ns[k]) + ', busy ' + fmtNs(t.busy_ns[k]) :
					'<b>' + esc(nm) + '</b>' + (TL.open[k] ? ' (still open at the end)' : '') + '<br>start ' + fmtNs(t.start_ns[k]) + ', duration ' + fmtNs(t.dur_ns[k]);
			}},
			xAxis: {type: 'value', min: 0, max: span || 1, axisLabel: {formatter: function (v) { return fmtNs(v * 1e6); }}},
			yAxis: {type: 'category', data: cats, inverse: true, axisTick: {show: false}, splitLine: {show: false}},
			dataZoom: [{type: 'inside', xAxisIndex: 0, filterMode: 'weakFilter'},
				{type: 'slider', xAxisIndex: 0, filterMode: 'weakFilter', height: 18, bottom: 8,
					labelFormatter: function (v) { return fmtNs(v * 1e6); }}],
			series: [{id: 'timeline', type: 'custom', encode: {x: [0, 1], y: 2}, data: timelineRows(tl), progressive: 0, renderItem: function (params, api) {
				var a = api.coord([api.value(0), api.value(2)]);
				var b = api.coord([api.value(1), api.value(2)]);
				var h = api.size([0, 1])[1] * 0.8;
				var rect = echarts.graphic.clipRectByRect({x: a[0], y: a[1] - h / 2, width: Math.max(b[0] - a[0], 0.6), height: h},
					{x: params.coordSys.x, y: params.coordSys.y, width: params.coordSys.width, height: params.coordSys.height});
				if (!rect) return null;
				var t = TL.cur, k = api.value(3), nm = t.names[t.name[k]], block = t.count[k] > 1, open = TL.open[k];
				return {type: 'rect', shape: rect,
					style: {fill: colorOf(nm), opacity: block ? 0.55 : 1, stroke: open ? '#212529' : null, lineWidth: open ? 1 : 0},
					textContent: rect.width > 40 ? {style: {text: block ? nm + ' +' + fmtNum(t.count[k] - 1) : nm, fill: '#fff', fontSize: 10,
						overflow: 'truncate', width: rect.width - 4}} : undefined,
					textConfig: {position: 'insideLeft'}};
			}}]
		});
		c.off('datazoom');
		c.on('datazoom', function () {
			clearTimeout(TL.timer);
			TL.timer = setTimeout(timelineZoomed, 250);
		});
		timelineZoomed(); /* a redraw (live update) that kept a zoom: its detail again */
	}

	/* ---- memory ---- */

	function stackText(st) {
		if (!st || !st.length) return '';
		return st.slice(0, 6).map(function (f) {
			var t = typeof f === 'string' ? f : (f.function || f.name || JSON.stringify(f));
			return esc(t.replace(/ \S*\/([^\/ ]+:\d+)$/, ' $1')); /* "fn /abs/path/file.c:12" -> "fn file.c:12" */
		}).join(' ← ') +
			(st.length > 6 ? ' ← …' : '');
	}

	function drawMemory() {
		var m = A.memory;
		var procs = A.processes || [];
		chart('chart-rss', {
			grid: {left: 10, right: 80, top: 10, bottom: 10, containLabel: true},
			tooltip: {formatter: function (p) { return esc(procs[p.dataIndex].command) + '<br>' + fmtBytes(p.value); }},
			xAxis: {type: 'value', axisLabel: {formatter: function (v) { return fmtBytes(v); }}},
			yAxis: {type: 'category', data: procs.map(function (p) { return 'pid ' + p.pid + ' (' + p.origin + ')'; })},
			series: [{type: 'bar', barMaxWidth: 26, data: procs.map(function (p) { return p.max_rss_bytes; }), itemStyle: {color: '#1c7ed6'},
				label: {show: true, position: 'right', formatter: function (p) { return fmtBytes(p.value); }}}]
		});
		if (!m || typeof m !== 'object') {
			$('memory-none').hidden = false;
			$('memory-some').hidden = true;
			$('memory-none').textContent = 'No allocation data in this recording. Record with memory tracking on to see the heap over time, ' +
				'leaks and the top allocators; the peak resident memory of each process is below.';
			return;
		}
		$('memory-none').hidden = true;
		$('memory-some').hidden = false;
		var h = [];
		if (m.peak_bytes !== undefined) h.push(card('Peak live heap', fmtBytes(m.peak_bytes), m.mode ? 'mode: ' + m.mode : ''));
		if (m.peak_rss_bytes !== undefined) h.push(card('Peak RSS', fmtBytes(m.peak_rss_bytes), ''));
		if (m.allocations !== undefined) h.push(card('Allocations', fmtNum(m.allocations), m.frees !== undefined ? fmtNum(m.frees) + ' frees' : ''));
		if (m.allocated_bytes !== undefined) h.push(card('Allocated', fmtBytes(m.allocated_bytes), m.largest_bytes !== undefined ? 'largest ' + fmtBytes(m.largest_bytes) : ''));
		var leaks = m.leaks || [];
		var leakBytes = m.leaked_bytes !== undefined && m.leaked_bytes !== null ? m.leaked_bytes : leaks.reduce(function (s, l) { return s + (l.bytes || 0); }, 0);
		var leakCount = m.leaked_count !== undefined && m.leaked_count !== null ? m.leaked_count : leaks.reduce(function (s, l) { return s + (l.count || 0); }, 0);
		if (m.leaks || m.leaked_bytes !== undefined)
			h.push(card('Never freed', fmtBytes(leakBytes), fmtNum(leakCount) + ' blocks' + (m.leaks_estimated ? ' (estimated from samples)' : ''), leakBytes > 0));
		if (m.trend && m.trend.slope_bytes_per_step !== undefined && m.trend.slope_bytes_per_step !== null)
			h.push(card('Growth per step', fmtBytes(m.trend.slope_bytes_per_step), 'linear fit' + (m.trend.r2 !== undefined && m.trend.r2 !== null ? ', r² ' + (+m.trend.r2).toFixed(2) : ''),
				m.trend.slope_bytes_per_step > 0 && m.trend.r2 > 0.8));
		$('memory-cards').innerHTML = h.join('');

		var tlm = m.timeline || [];
		$('memory-timeline-panel').hidden = !tlm.length;
		if (tlm.length) {
			/* One live-heap (and RSS) series per process. */
			var procsSeen = [], byProc = {};
			tlm.forEach(function (p) {
				var k = p.process !== undefined ? p.process : 0;
				if (!byProc[k]) { byProc[k] = {live: [], rss: []}; procsSeen.push(k); }
				var t = (p.t_ns || 0) / 1e6;
				if (p.live_bytes !== undefined && p.live_bytes !== null) byProc[k].live.push([t, p.live_bytes]);
				if (p.rss_bytes !== undefined && p.rss_bytes !== null) byProc[k].rss.push([t, p.rss_bytes]);
			});
			var many = procsSeen.length > 1, series = [];
			procsSeen.forEach(function (k, i) {
				var sfx = many ? ' (pid ' + k + ')' : '';
				series.push({type: 'line', name: 'live heap' + sfx, showSymbol: false, sampling: 'lttb', areaStyle: i ? undefined : {opacity: 0.15},
					data: byProc[k].live, color: i ? undefined : '#e8590c'});
				if (byProc[k].rss.length)
					series.push({type: 'line', name: 'RSS' + sfx, showSymbol: false, sampling: 'lttb', data: byProc[k].rss, lineStyle: {width: 1},
						color: i ? undefined : '#1c7ed6'});
			});
			/* The regression over steps (trend.basis "step"), drawn from the first to the
			 * last point of the first process: intercept + slope * step. */
			var tr = m.trend || {}, trend = [];
			var first = byProc[procsSeen[0]];
			if (tr.slope_bytes_per_step !== undefined && tr.slope_bytes_per_step !== null) {
				var pts = tlm.filter(function (p) { return (p.process === undefined || p.process === procsSeen[0]) && p.step !== undefined && p.step !== null; });
				if (pts.length > 1) {
					var icp = tr.intercept_bytes;
					if (icp === undefined || icp === null) {
						var ms = 0, mb = 0;
						pts.forEach(function (p) { ms += p.step; mb += p.live_bytes || 0; });
						icp = mb / pts.length - tr.slope_bytes_per_step * ms / pts.length;
					}
					[pts[0], pts[pts.length - 1]].forEach(function (p) {
						trend.push([(p.t_ns || 0) / 1e6, icp + tr.slope_bytes_per_step * p.step]);
					});
					series.push({type: 'line', name: 'trend ' + (tr.slope_bytes_per_step >= 0 ? '+' : '') + fmtBytes(tr.slope_bytes_per_step) + '/step' +
						(tr.r2 !== undefined && tr.r2 !== null ? ' (r² ' + (+tr.r2).toFixed(2) + ')' : ''), data: trend, showSymbol: false,
						lineStyle: {type: 'dashed', width: 2}, color: '#c92a2a'});
				}
			}
			/* Annotations: the peak, and what leaked at the end. */
			var marks = [];
			if (m.peak_t_ns !== undefined && m.peak_t_ns !== null && m.peak_bytes)
				marks.push({coord: [m.peak_t_ns / 1e6, m.peak_bytes], name: 'peak ' + fmtBytes(m.peak_bytes) + (m.peak_region ? ' in ' + m.peak_region : ''),
					value: 'peak', itemStyle: {color: '#e8590c'}});
			if (leakBytes > 0 && first.live.length)
				marks.push({coord: first.live[first.live.length - 1], name: fmtBytes(leakBytes) + ' never freed (' + fmtNum(leakCount) + ' blocks)',
					value: 'leak', itemStyle: {color: '#c92a2a'}});
			if (marks.length)
				series[0].markPoint = {symbol: 'pin', symbolSize: 42, label: {fontSize: 9, formatter: '{c}'}, data: marks,
					tooltip: {formatter: function (p) { return esc(p.name); }}};
			$('memory-note').textContent = fmtNum(tlm.length) + ' points' + (trend.length ? '; dashed: linear trend over steps' : '') +
				(marks.length ? '; pins: the peak' + (leakBytes > 0 ? ' and the memory never freed' : '') : '');
			chart('chart-memory', {
				grid: {left: 10, right: 20, top: 30, bottom: 56, containLabel: true},
				legend: {top: 0},
				tooltip: {trigger: 'axis', valueFormatter: function (v) { return fmtBytes(v); }},
				xAxis: {type: 'value', axisLabel: {formatter: function (v) { return fmtNs(v * 1e6); }}},
				yAxis: {type: 'value', axisLabel: {formatter: function (v) { return fmtBytes(v); }}},
				dataZoom: [{type: 'inside'}, {type: 'slider', height: 18, bottom: 8}],
				series: series
			});
		}
		$('leaks-panel').hidden = !m.leaks;
		var siteCols = function (what) {
			return [
				{key: 'bytes', label: 'bytes', num: true, fmt: function (l) { return fmtBytes(l.bytes); }},
				{key: 'count', label: what, num: true, fmt: function (l) { return fmtNum(l.count); }},
				{key: 'region', label: 'region', mono: true, fmt: function (l) { return esc(l.region || ''); }},
				{key: 'stack', label: 'allocated at', mono: true, sort: function (l) { return stackText(l.stack); }, fmt: function (l) { return stackText(l.stack); }}
			];
		};
		table($('leak-table'), siteCols('blocks'), leaks);
		$('alloc-panel').hidden = !m.top_allocators;
		table($('alloc-table'), siteCols('allocations'), m.top_allocators || []);
	}

	/* ---- call graph (samples) ---- */

	function drawCallgraph() {
		var s = A.samples || {};
		var none = !s.mode || s.mode === 'off' || !(s.cpu_samples || s.offcpu_samples);
		$('samples-none').hidden = !none;
		$('samples-some').hidden = none;
		if (none) {
			$('samples-none').textContent = 'No CPU samples in this recording (sampling was off). `fennec record` samples call stacks by default; ' +
				'--sample=wall adds where threads wait.';
			return;
		}
		var kindSel = $('cflame-kind');
		kindSel.querySelector('option[value=offcpu]').disabled = !s.offcpu_samples;
		if (!s.offcpu_samples) kindSel.value = 'cpu';
		var kind = kindSel.value;
		var f = D.flame;
		var sel = s.selection;
		$('cflame-note').textContent = (kind === 'cpu' ? fmtNum(s.cpu_samples) + ' on-CPU samples' : fmtNum(s.offcpu_samples) + ' off-CPU samples') +
			(s.rate_hz ? ' at ' + fmtRate(s.rate_hz) + ' Hz' : '') + (sel ? ' (selection: ' + [sel.pid && 'pid ' + sel.pid, sel.tid && 'tid ' + sel.tid, sel.region && 'region ' + sel.region].filter(Boolean).join(', ') + ')' : '') +
			'; shares are estimates (±√n samples)' + (f && f.pruned_nodes ? '; ' + fmtNum(f.pruned_nodes) + ' small nodes not drawn' : '') + '. Click to zoom.';
		if (!f || !f.nodes)
			emptyChart('chart-cflame', 'no call stacks');
		else {
			var tree = {name: f.name.map(function (k) { return f.names[k]; }), parent: f.parent,
				total: kind === 'cpu' ? f.total_cpu : f.total_offcpu, self: kind === 'cpu' ? f.self_cpu : f.self_offcpu};
			flameChart('chart-cflame', tree, function (w) { return fmtNum(w) + ' samples'; }, $('cflame-search').value, $('cflame-match'));
		}
		var fnCols = [
			{key: 'name', label: 'function', mono: true},
			{key: 'self_samples', label: 'self', num: true, fmt: function (r) { return fmtNum(r.self_samples); }},
			{key: 'self_pct', label: 'self %', num: true, fmt: function (r) { return '<span class="bar" style="width:' + Math.round(Math.min(100, r.self_pct) * 0.5) + 'px"></span>' + fmtPct(r.self_pct); }},
			{key: 'total_samples', label: 'total', num: true, fmt: function (r) { return fmtNum(r.total_samples); }},
			{key: 'total_pct', label: 'total %', num: true, fmt: function (r) { return fmtPct(r.total_pct); }},
			{key: 'file', label: 'hottest line', mono: true, fmt: function (r) { return r.file ? esc(r.file.split('/').pop() + ':' + r.line) : ''; }},
			{key: 'caller', label: 'mostly called from', mono: true, fmt: function (r) { return r.caller ? esc(r.caller) + ' (' + fmtPct(r.caller_pct) + ')' : ''; }},
			{key: 'module', label: 'module', mono: true, fmt: function (r) { return esc((r.module || '').split('/').pop()); }}
		];
		$('functions-note').textContent = fmtNum((A.functions || []).length) + ' functions; self = samples in its own code';
		table($('function-table'), fnCols, A.functions || []);
		table($('offcpu-table'), fnCols.slice(0, 5), A.offcpu_functions || []);
		table($('line-table'), [
			{key: 'file', label: 'line', mono: true, fmt: function (r) { return esc(r.file.split('/').pop() + ':' + r.line); }},
			{key: 'function', label: 'function', mono: true},
			{key: 'self_samples', label: 'samples', num: true, fmt: function (r) { return fmtNum(r.self_samples); }},
			{key: 'self_pct', label: '%', num: true, fmt: function (r) { return fmtPct(r.self_pct); }}
		], A.lines || []);
	}

	/* ---- bottlenecks ---- */

	function drawBottlenecks() {
		var f = A.findings || [];
		var rank = {HIGH: 3, MEDIUM: 2, LOW: 1};
		table($('finding-table'), [
			{key: 'severity', label: 'severity', sort: function (x) { return rank[x.severity] || 0; }, fmt: function (x) {
				return '<span class="sev ' + esc(x.severity) + '">' + esc(x.severity) + '</span>'; }},
			{key: 'type', label: 'rule', mono: true},
			{key: 'subject', label: 'subject', mono: true},
			{key: 'evidence', label: 'evidence', sort: function (x) { return x.evidence && x.evidence.text; }, fmt: function (x) {
				var ev = x.evidence || {};
				var nums = Object.keys(ev).filter(function (k) { return k !== 'text'; }).map(function (k) {
					return esc(k) + ' = ' + fmtNum(ev[k]); });
				return esc(ev.text) + (nums.length ? '<br><span class="match">' + nums.join(', ') + '</span>' : ''); }},
			{key: 'recommendation', label: 'recommendation', fmt: function (x) { return '<span class="finding-rec">' + esc(x.recommendation) + '</span>'; }},
			{key: 'expected_gain_pct', label: 'gain ≤', num: true, fmt: function (x) { return fmtPct(x.expected_gain_pct); }}
		], f, {rowClass: function (x) { return 'sev-' + x.severity; }});
		$('nfindings').textContent = f.length ? String(f.length) : '';
	}

	/* ---- tabs, data, live updates ---- */

	var DRAW = {summary: drawSummary, operations: drawOperations, memory: drawMemory, callgraph: drawCallgraph, bottlenecks: drawBottlenecks};

	function draw(tab) {
		try {
			DRAW[tab]();
		} catch (e) {
			showError(tab + ': ' + (e && e.stack || e));
		}
		drawn[tab] = true;
	}

	function showTab(tab) {
		if (!DRAW[tab]) tab = 'summary';
		fennec.tab = tab;
		document.querySelectorAll('nav.tabs button').forEach(function (b) { b.classList.toggle('active', b.getAttribute('data-tab') === tab); });
		document.querySelectorAll('section.tab').forEach(function (s) { s.classList.toggle('active', s.id === 'tab-' + tab); });
		if (!drawn[tab]) draw(tab);
		Object.keys(fennec.charts).forEach(function (id) {
			var el = $(id);
			if (el && el.getAttribute('data-tab') === tab) fennec.charts[id].resize();
		});
		if (location.hash !== '#' + tab) history.replaceState(null, '', '#' + tab);
	}
	fennec.showTab = showTab;

	function setData(d) {
		D = d;
		A = d.analysis;
		var s = A.summary;
		$('cmd').textContent = s.command || '';
		document.title = 'fennec · ' + (s.command || 'report');
		$('footer').textContent = 'fennec ' + A.fennec_version + ' · ' + (A.files || []).join(', ') + ' · charts: Apache ECharts ' + echarts.version +
			' · data: the JSON report (schema ' + A.schema + ') and page data ' + D.page;
		drawn = {};
		drawBottlenecks(); /* the findings badge is always visible */
		drawn.bottlenecks = true;
		draw(fennec.tab || 'summary');
		if (fennec.tab && fennec.tab !== 'summary') draw('summary');
	}

	function init() {
		var raw = $('fennec-data').textContent;
		var d = null;
		try { d = JSON.parse(raw); } catch (e) { showError('page data: ' + e.message); }
		document.querySelectorAll('nav.tabs button').forEach(function (b) {
			b.addEventListener('click', function () { showTab(b.getAttribute('data-tab')); });
		});
		document.querySelectorAll('[data-goto]').forEach(function (a) {
			a.addEventListener('click', function (e) { e.preventDefault(); showTab(a.getAttribute('data-goto')); });
		});
		document.querySelectorAll('[data-reset]').forEach(function (b) {
			b.addEventListener('click', function () {
				var c = fennec.charts[b.getAttribute('data-reset')];
				if (c) c.dispatchAction({type: 'dataZoom', start: 0, end: 100});
			});
		});
		var t = null;
		function later(fn) { return function () { clearTimeout(t); t = setTimeout(function () { try { fn(); } catch (e) { showError(e); } }, 150); }; }
		$('rflame-search').addEventListener('input', later(function () { if (A.regions.length) flameChart('chart-rflame', regionTree(), fmtNs, $('rflame-search').value, $('rflame-match')); }));
		$('cflame-search').addEventListener('input', later(drawCallgraph));
		$('cflame-kind').addEventListener('change', later(drawCallgraph));
		$('region-filter').addEventListener('input', later(drawOperations));
		window.addEventListener('resize', function () {
			Object.keys(fennec.charts).forEach(function (id) { fennec.charts[id].resize(); });
		});
		var tab = (location.hash || '').slice(1);
		fennec.tab = DRAW[tab] ? tab : 'summary';
		if (d) {
			setData(d);
			showTab(fennec.tab);
		}
		fennec.ready = true;
		if (window.FENNEC_LIVE) poll(d);
	}

	/* fennec view: /api/status about once a second; the page data again when it changed. */
	function poll(d) {
		var live = $('live');
		live.hidden = false;
		live.textContent = 'live';
		var busy = false;
		function tick() {
			if (busy) return;
			busy = true;
			fetch('api/status', {cache: 'no-store'}).then(function (r) { return r.json(); }).then(function (st) {
				live.className = 'live' + (st.error ? ' error' : st.growing ? '' : ' stale');
				live.textContent = (st.growing ? 'live · recording in progress · ' : 'live · ') + fmtBytes(st.size_bytes) +
					(st.error ? ' · ' + st.error : '') + ' · updated ' + new Date().toLocaleTimeString();
				if (st.generation && st.generation !== fennec.generation) {
					return fetch('api/page', {cache: 'no-store'}).then(function (r) { return r.json(); }).then(function (nd) {
						fennec.generation = st.generation;
						fennec.updates++;
						setData(nd);
						showTab(fennec.tab);
					});
				}
			}).catch(function (e) {
				live.className = 'live error';
				live.textContent = 'server unreachable: ' + e.message;
			}).then(function () { busy = false; });
		}
		if (d && d.generation) fennec.generation = d.generation;
		setInterval(tick, 1000);
		tick();
	}

	if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
	else init();
})();
