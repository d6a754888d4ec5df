/*
 * fennec.js - the HTML report and `fennec view` dashboard (docs/html.md). Reads the page
 * data (the JSON report under "analysis", plus "timeline", "flame" and "rank_steps") and
 * draws tabs of cards, tables and ECharts charts; the GPU and Ranks tabs only when the
 * analysis has GPU data or several ranks. Charts are drawn when their tab is first shown. Under
 * `fennec view` (window.FENNEC_LIVE) it polls /api/status about once a second and redraws
 * from /api/page when the analysis changed, keeping each chart's zoom.
 * For tests, window.fennec exposes the chart instances, which charts have rendered, the
 * errors seen, and tab switching.
 */
(function () {
	'use strict';

	var fennec = window.fennec, U = window.fennecUI;
	var showError = U.showError, fmtNs = U.fmtNs, fmtBytes = U.fmtBytes, fmtNum = U.fmtNum, fmtRate = U.fmtRate,
		fmtPct = U.fmtPct, esc = U.esc, $ = U.$, isNum = U.isNum, ellipsize = U.ellipsize, colorOf = U.colorOf,
		table = U.table, chart = U.chart, sizeChart = U.sizeChart, emptyChart = U.emptyChart, card = U.card;

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
		if (A.gpu)
			h.push(card('GPU busy', fmtPct(A.gpu.busy_pct), (A.gpu.devices || []).length + ' device(s), kernels ' + fmtNs(A.gpu.kernel_ns) +
				'; see the GPU tab'));
		if (hasRanks() && A.balance)
			h.push(card('Rank imbalance', fmtPct(A.balance.imbalance_pct), 'slowest: ' + rankName(A.balance.slowest_rank) + '; see the Ranks tab',
				A.balance.imbalance_pct >= 10));
		h.push(card('Dropped events', fmtNum(s.dropped_events), s.dropped_events ? 'counts and totals are low: see the warnings' : 'nothing lost', s.dropped_events > 0));
		var smp = A.samples || {};
		if (smp.mode && smp.mode !== 'off')
			h.push(card('CPU samples', fmtNum(smp.cpu_samples), (smp.rate_hz ? fmtRate(smp.rate_hz) + ' Hz achieved, ' : '') + smp.mode + ' mode'));
		h.push(card('Events', fmtNum(s.events), fmtNum((A.regions || []).length) + ' region paths'));
		var en = A.energy;
		if (en && en.total_joules !== null && en.total_joules !== undefined)
			h.push(card(en.estimate ? 'Energy (estimate)' : 'Energy', fmtNum(+en.total_joules.toPrecision(4)) + ' J',
				(en.estimate ? 'ESTIMATE from CPU time at ' + en.watts_per_core + ' W per core; ' : 'measured (' + en.source + '); ') +
				(+en.co2_grams).toPrecision(3) + ' g CO2e at ' + en.grid_gco2_per_kwh + ' g/kWh' +
				(en.per_step_joules !== null && en.per_step_joules !== undefined ? '; ' + (+en.per_step_joules).toPrecision(3) + ' J per step' : '')));
		$('cards').innerHTML = h.join('');
		drawSystem();

		/* What the page left out or reduced, and the recording's own warnings. */
		var n = [];
		var tl = D.timeline;
		if (tl && tl.blocks)
			n.push(['info', 'Timeline reduced for display: ' + fmtNum(tl.calls) + ' calls' +
				(tl.gpu_work ? ' and ' + fmtNum(tl.gpu_work) + ' GPU kernels, copies and memsets' : '') + ' drawn as ' + fmtNum(tl.intervals) +
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

	/* The call graph's colours say what a frame is: Python code in blues and greens, native
	 * code (C, C++, the interpreter's and the libraries') in reds and yellows, frames that
	 * are no code of the program ([kernel], [fennec], [waiting for the GIL]) grey; within
	 * a kind the name picks the shade, the same on every redraw. */
	var FRAME_KIND = ['native code', 'Python code', 'not the program\'s code'];
	var FRAME_PALETTES = [['#e8590c', '#f08c00', '#d9480f', '#f59f00', '#e67700', '#c92a2a', '#fa5252', '#fd7e14'],
		['#1c7ed6', '#1098ad', '#0ca678', '#4263eb', '#3bc9db', '#2b8a3e', '#15aabf', '#37b24d'],
		['#868e96', '#adb5bd', '#495057', '#a5a5a5']];
	function frameColor(name, kind) {
		var pal = FRAME_PALETTES[kind] || FRAME_PALETTES[0];
		var h = 2166136261;
		for (var i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
		return pal[(h >>> 0) % pal.length];
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
				var fill = re ? (api.value(4) ? '#e03131' : '#dee2e6') : tree.color ? tree.color(i) : colorOf(nm);
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
		drawRegionTable();

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

	function drawRegionTable() {
		var q = $('region-filter').value.toLowerCase();
		var regs = (A.regions || []).filter(function (r) { return !q || r.path.toLowerCase().indexOf(q) >= 0; });
		table($('region-table'), [
			{key: 'path', label: 'region path', mono: true, fmt: function (r) {
				return '<span class="bar" style="width:' + Math.min(60, Math.round((isNum(r.share_pct) ? r.share_pct : 0) * 0.6)) + 'px"></span>' + esc(r.path); }},
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
		], regs);
	}

	/*
	 * Thread timeline: one row per thread and region depth, then per GPU stream a row of
	 * kernels and one of copies and memsets; x is time since the start of the recording.
	 * Merged blocks (count > 1) are drawn lighter and say how many calls they stand for;
	 * calls still open are outlined. Under `fennec view`, zooming into a
	 * reduced timeline loads the calls of the window from /api/timeline, with the whole
	 * interval budget, so detail appears as you zoom.
	 */
	var TL = {cur: null, coarse: null, open: {}, base: {}, seq: 0, timer: null, detail: false};
	fennec.detailLoads = 0;

	function timelineNote(t) {
		var w = t.to_ns !== null && t.to_ns !== undefined;
		return (w ? 'Zoomed: ' + fmtNum(t.calls) + ' calls between ' + fmtNs(t.from_ns) + ' and ' + fmtNs(t.to_ns) : fmtNum(t.calls) + ' calls') +
			(t.gpu_work ? ' and ' + fmtNum(t.gpu_work) + ' GPU kernels, copies and memsets (' + (t.gpu_lanes || []).length + ' streams)' : '') +
			(t.blocks ? ' drawn as ' + fmtNum(t.intervals) + ' intervals: calls and gaps under ' + fmtNs(t.resolution_ns) +
				' merged into blocks for display (hover a block for its call count)' : ', every call drawn') +
			(t.deep_calls ? '; ' + fmtNum(t.deep_calls) + ' calls deeper than ' + t.max_depth + ' not drawn' : '') +
			(w ? '. Zoom out to see the whole run.' : '. Scroll or drag the slider to zoom' + (window.FENNEC_LIVE && t.blocks ? ' (detail loads as you zoom)' : '') + '.');
	}

	/* A GPU lane of timeline t ("thread" at or past gpu_lane_base), or null for a thread. */
	function gpuLane(t, v) {
		return t.gpu_lane_base !== undefined && v >= t.gpu_lane_base ? (t.gpu_lanes || [])[v - t.gpu_lane_base] || null : null;
	}
	/* A row group's key, the same in the full timeline and a window's (/api/timeline
	 * numbers GPU lanes in the order it meets them). */
	function laneKey(t, v) {
		var g = gpuLane(t, v);
		return g ? 'gpu ' + g.pid + ' ' + g.device + ' ' + g.stream : 'thread ' + v;
	}

	function timelineRows(t) {
		TL.open = {};
		(t.open || []).forEach(function (k) { TL.open[k] = 1; });
		var rows = [], keys = {};
		for (var i = 0; i < t.intervals; i++) {
			var v = t.thread[i];
			if (keys[v] === undefined) keys[v] = laneKey(t, v);
			var b = TL.base[keys[v]], row = b && b[t.depth[i]];
			if (row === undefined) continue; /* a row the full timeline does not have */
			var s = t.start_ns[i] / 1e6;
			rows.push([s, s + t.dur_ns[i] / 1e6, row, i]);
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
		/* Rows: per thread with intervals, its depths 0..max; per GPU stream, a row of
		 * kernels and one of copies and memsets, each when it has any. */
		var maxDepth = {}, gpuDepths = {};
		for (var i = 0; i < tl.intervals; i++) {
			var t = tl.thread[i], d = tl.depth[i];
			if (maxDepth[t] === undefined || d > maxDepth[t]) maxDepth[t] = d;
			(gpuDepths[t] = gpuDepths[t] || {})[d] = 1;
		}
		var tids = Object.keys(maxDepth).map(Number).sort(function (a, b) { return a - b; });
		var cats = [], many = A.summary.processes > 1;
		TL.base = {};
		tids.forEach(function (t) {
			var rows = TL.base[laneKey(tl, t)] = [];
			var g = gpuLane(tl, t);
			if (g) {
				var name = 'GPU ' + g.device + ' · stream ' + g.stream + (many ? ' [' + g.pid + ']' : '');
				[0, 1].forEach(function (d) {
					if (!gpuDepths[t][d]) return;
					rows[d] = cats.length;
					cats.push(d && gpuDepths[t][0] ? 'copies, memsets' : d ? name + ' copies' : name);
				});
				return;
			}
			var th = threads[t] || {};
			for (var d = 0; d <= maxDepth[t]; d++) {
				rows[d] = cats.length;
				cats.push(d ? '' : (th.name ? th.name + ' ' : '') + (th.tid !== undefined ? th.tid : t) + (many ? ' [' + th.pid + ']' : ''));
			}
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
				var nm = t.names[t.name[k]], n = t.count[k], g = gpuLane(t, t.thread[k]);
				var what = g ? 'GPU ' + g.device + ' stream ' + g.stream + ': ' : '';
				return n > 1 ? esc(what) + '<b>' + fmtNum(n) + (g ? ' kernels or copies' : ' calls') + '</b> merged (shorter than ' + fmtNs(t.resolution_ns) + ' each), longest: ' + esc(nm) +
					'<br>from ' + fmtNs(t.start_ns[k]) + ', over ' + fmtNs(t.dur_ns[k]) + ', busy ' + fmtNs(t.busy_ns[k]) :
					esc(what) + '<b>' + esc(nm) + '</b>' + (TL.open[k] ? ' (still open at the end)' : '') + '<br>start ' + fmtNs(t.start_ns[k]) + ', duration ' + fmtNs(t.dur_ns[k]);
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

	/* The system sampler's timeline (docs/json.md system): CPU and RSS, disk and network
	 * rates, one series per process. */
	function drawSystem() {
		var sy = A.system;
		$('system-panel').hidden = !(sy && (sy.processes || []).some(function (p) { return (p.timeline || []).length; }));
		if ($('system-panel').hidden)
			return;
		$('system-note').textContent = 'every ' + fmtNs(sy.interval_ns) + ' and after steps; disk ' + fmtBytes(sy.disk_read_bytes) + ' read, ' +
			fmtBytes(sy.disk_write_bytes) + ' written; network ' + fmtBytes(sy.net_rx_bytes) + ' in, ' + fmtBytes(sy.net_tx_bytes) + ' out';
		var many = sy.processes.length > 1, cpu = [], io = [];
		sy.processes.forEach(function (p) {
			var sfx = many ? ' (pid ' + p.pid + ')' : '', tl = p.timeline || [];
			var pts = function (k) { return tl.map(function (x) { return [x.t_ns / 1e6, x[k]]; }); };
			cpu.push({type: 'line', name: 'CPU %' + sfx, showSymbol: false, data: pts('cpu_pct')});
			cpu.push({type: 'line', name: 'RSS' + sfx, yAxisIndex: 1, showSymbol: false, lineStyle: {width: 1}, data: pts('rss_bytes')});
			io.push({type: 'line', name: 'disk read' + sfx, showSymbol: false, data: pts('disk_read_bytes_per_s')});
			io.push({type: 'line', name: 'disk write' + sfx, showSymbol: false, data: pts('disk_write_bytes_per_s')});
			if (p.net_counted) {
				io.push({type: 'line', name: 'net in', showSymbol: false, data: pts('net_rx_bytes_per_s')});
				io.push({type: 'line', name: 'net out', showSymbol: false, data: pts('net_tx_bytes_per_s')});
			}
		});
		var x = {type: 'value', axisLabel: {formatter: function (v) { return fmtNs(v * 1e6); }}};
		chart('chart-sys-cpu', {grid: {left: 10, right: 10, top: 30, bottom: 10, containLabel: true}, legend: {top: 0},
			tooltip: {trigger: 'axis'}, xAxis: x,
			yAxis: [{type: 'value', name: '% of a core'}, {type: 'value', axisLabel: {formatter: function (v) { return fmtBytes(v); }}}],
			series: cpu});
		chart('chart-sys-io', {grid: {left: 10, right: 10, top: 30, bottom: 10, containLabel: true}, legend: {top: 0},
			tooltip: {trigger: 'axis', valueFormatter: function (v) { return fmtBytes(v) + '/s'; }}, xAxis: x,
			yAxis: {type: 'value', axisLabel: {formatter: function (v) { return fmtBytes(v) + '/s'; }}}, series: io});
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
		if (m.cut_short_processes)
			h.push(card('Live when killed', fmtBytes(m.cut_short_bytes), fmtNum(m.cut_short_count) + ' blocks in ' + fmtNum(m.cut_short_processes) +
				' process' + (m.cut_short_processes > 1 ? 'es' : '') + ' cut short: not leaks', false));
		if (m.exec_processes)
			h.push(card('Live at exec', fmtBytes(m.exec_bytes), fmtNum(m.exec_count) + (m.exec_count === 1 ? ' block' : ' blocks') + ' in ' +
				fmtNum(m.exec_processes) + ' process' + (m.exec_processes > 1 ? 'es' : '') + ' that exec\'d another program: not leaks', false));
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
		/* The stacks whose live bytes rose highest, each over its process's timeline. */
		var sot = m.stacks_over_time || [];
		$('memory-stacks-panel').hidden = !sot.length;
		if (sot.length) {
			var many2 = sot.some(function (s) { return s.process !== sot[0].process; });
			/* Two stacks through the same allocating function are told apart by its caller. */
			var fnCount = {};
			sot.forEach(function (s) { fnCount[s.function] = (fnCount[s.function] || 0) + 1; });
			var sseries = sot.map(function (s) {
				var tr = s.trend, slope = tr ? (tr.slope_bytes_per_step !== undefined ? tr.slope_bytes_per_step : tr.slope_bytes_per_s) : null;
				var caller = '';
				if (fnCount[s.function] > 1 && s.stack) {
					/* frames read "function file:line" (or "function"); function names may hold spaces */
					var fnOf = function (f) { return String(f).replace(/ \S*:\d+$/, ''); };
					var at = s.stack.findIndex(function (f) { return fnOf(f) === s.function; });
					if (at >= 0 && at + 1 < s.stack.length) caller = ' \u2190 ' + fnOf(s.stack[at + 1]);
				}
				var name = (s.function || '?') + caller + (many2 ? ' (pid ' + s.process + ')' : '') +
					(slope !== null && slope !== undefined ? ' ' + (slope >= 0 ? '+' : '-') + fmtBytes(Math.abs(slope)) + '/' + (tr.basis === 'step' ? 'step' : 's') : '');
				return {type: 'line', name: name, showSymbol: false, sampling: 'lttb', step: 'end',
					data: (s.points || []).map(function (q) { return [q[0] / 1e6, q[1]]; })};
			});
			$('memory-stacks-note').textContent = 'the ' + sot.length + ' allocation stacks whose live bytes rose highest' +
				(m.mode === 'sampled' ? ' (estimated from sampled allocations)' : '') + '; legend: growth per step (or second)';
			timeChart('chart-memory-stacks', sseries, fmtBytes);
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
		var reach = m.reachable || [];
		$('reach-panel').hidden = !reach.length;
		$('reach-panel').querySelector('small').textContent = m.mode === 'sampled'
			? 'no leak found: unfreed, but pointed to from globals, stacks or the heap at exit (sampled mode: estimates; ' +
			  'it reads the heap whole, so a block that only lost memory points to counts here too: --memory=full tells)'
			: 'not leaks: unfreed, but the program still pointed to them from globals, stacks or other reachable blocks';
		if (reach.length) table($('reach-table'), siteCols('blocks'), reach);
		var execLive = m.exec_live || [];
		$('exec-live-panel').hidden = !execLive.length;
		if (execLive.length) table($('exec-live-table'), siteCols('blocks'), execLive);
		var cutLive = m.cut_short_live || [];
		$('cut-live-panel').hidden = !cutLive.length;
		if (cutLive.length) table($('cut-live-table'), siteCols('blocks'), cutLive);
		$('alloc-panel').hidden = !m.top_allocators;
		table($('alloc-table'), siteCols('allocations'), m.top_allocators || []);
		var atPeak = m.at_peak || [], temps = m.temporary || [];
		$('peak-live-panel').hidden = !atPeak.length;
		if (atPeak.length) table($('peak-live-table'), siteCols('blocks'), atPeak);
		$('temp-panel').hidden = !temps.length;
		if (temps.length) table($('temp-table'), siteCols('allocations'), temps);
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
			'; shares are estimates (±√n samples)' + (f && f.kinds && f.kinds.indexOf(1) >= 0 ? '; blue-green: Python, red-yellow: native, grey: kernel, fennec, waits' : '') + (f && f.pruned_nodes ? '; ' + fmtNum(f.pruned_nodes) + ' small nodes not drawn' : '') + '. Click to zoom.';
		if (!f || !f.nodes)
			emptyChart('chart-cflame', 'no call stacks');
		else {
			var tree = {name: f.name.map(function (k) { return f.names[k]; }), parent: f.parent,
				total: kind === 'cpu' ? f.total_cpu : f.total_offcpu, self: kind === 'cpu' ? f.self_cpu : f.self_offcpu};
			if (f.kinds) {
				tree.color = function (i) { return frameColor(tree.name[i], f.kinds[f.name[i]]); };
				tree.extra = function (i) { return '<br>' + FRAME_KIND[f.kinds[f.name[i]]]; };
			}
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
			{key: 'file', label: 'line', mono: true, fmt: function (r) { return esc(String(r.file || '?').split('/').pop() + ':' + r.line); }},
			{key: 'function', label: 'function', mono: true},
			{key: 'self_samples', label: 'samples', num: true, fmt: function (r) { return fmtNum(r.self_samples); }},
			{key: 'self_pct', label: '%', num: true, fmt: function (r) { return fmtPct(r.self_pct); }}
		], A.lines || []);
	}

	/* ---- GPU ---- */

	function fmtBw(b) { return isNum(b) ? fmtBytes(b) + '/s' : '–'; }
	function devLabel(d, many) {
		return 'GPU ' + (d.id >= 65536 ? 'nvml' + (d.id - 65536) : d.id) + (many ? ' [' + d.pid + ']' : '');
	}
	/* Several processes with GPUs: a device is named with its pid. */
	function gpuManyProcs(g) {
		var pids = {};
		(g.devices || []).forEach(function (d) { pids[d.pid] = 1; });
		return Object.keys(pids).length > 1;
	}

	/* A line chart of per-device series over time ([t_ns, value] points); `unit` formats the axis. */
	function timeChart(id, series, unit, yOpts) {
		chart(id, {
			grid: {left: 10, right: 20, top: 30, bottom: 56, containLabel: true},
			legend: {top: 0, type: 'scroll'},
			tooltip: {trigger: 'axis', valueFormatter: unit},
			xAxis: {type: 'value', axisLabel: {formatter: function (v) { return fmtNs(v * 1e6); }}},
			yAxis: Object.assign({type: 'value', axisLabel: {formatter: unit}}, yOpts || {}),
			dataZoom: [{type: 'inside'}, {type: 'slider', height: 18, bottom: 8, labelFormatter: function (v) { return fmtNs(v * 1e6); }}],
			series: series
		});
	}

	function nvmlSeries(g, many, field, name, scale, extra) {
		var out = [];
		(g.devices || []).forEach(function (d) {
			var pts = (d.utilisation || []).filter(function (u) { return isNum(u[field]); });
			if (!pts.length) return;
			out.push(Object.assign({type: 'line', name: devLabel(d, many) + ' ' + name, showSymbol: pts.length < 60, symbolSize: 4,
				sampling: 'lttb', data: pts.map(function (u) { return [u.t_ns / 1e6, u[field] * scale]; })}, extra || {}));
		});
		return out;
	}

	function drawGpu() {
		var g = A.gpu;
		if (!g) return;
		var devs = g.devices || [], many = gpuManyProcs(g);
		var h = [];
		h.push(card('GPU busy', fmtPct(g.busy_pct), fmtNs(g.busy_ns) + ' busy over ' + devs.length + ' device(s)'));
		h.push(card('Kernel time', fmtNs(g.kernel_ns), fmtNum((g.kernels || []).reduce(function (s, k) { return s + (k.count || 0); }, 0)) + ' launches of ' +
			fmtNum((g.kernels || []).length) + ((g.kernels || []).length === 1 ? ' kernel' : ' kernels')));
		if (!g.kernels_only)
			h.push(card('Copies', fmtNs(g.memcpy_ns), fmtBytes((g.memcpy || []).reduce(function (s, c) { return s + (c.bytes || 0); }, 0)) + ' moved'));
		h.push(card('Host waiting', fmtNs(g.sync_ns), fmtNum(g.sync_calls) + ' synchronising calls', g.busy_ns > 0 && g.sync_ns > 0.1 * g.busy_ns));
		if (isNum(g.launch_calls) && g.launch_calls)
			h.push(card('Launch calls', fmtNum(g.launch_calls), fmtNs(g.launch_ns) + ' on the host'));
		devs.forEach(function (d) {
			var nv = d.nvml || {};
			h.push(card(devLabel(d, many) + (d.name ? ' · ' + d.name : ''), fmtPct(d.busy_pct),
				'busy; peak ' + fmtBytes(d.peak_allocated_bytes) + ' allocated' +
				(isNum(nv.mem_used_max_bytes) && nv.mem_used_max_bytes ? ', ' + fmtBytes(nv.mem_used_max_bytes) + ' reserved (NVML)' : '')));
		});
		if (isNum(g.peak_reserved_bytes))
			h.push(card('Peak reserved', fmtBytes(g.peak_reserved_bytes), 'device memory in use (NVML: context and caches included)'));
		$('gpu-cards').innerHTML = h.join('');

		var n = [];
		if (g.kernels_only) n.push(['info', 'Recorded with --gpu-kernels-only: copies, API calls and GPU memory are absent, not zero.']);
		if (g.dropped_records || g.cupti_dropped_records)
			n.push(['warn', fmtNum((g.dropped_records || 0) + (g.cupti_dropped_records || 0)) + ' GPU records lost: the GPU numbers are low.']);
		if (g.cupti_version === null) n.push(['info', 'CUPTI was not loaded: no kernels or copies, only NVML samples and timers.']);
		else if (!(g.kernels || []).length && !(g.memcpy || []).length)
			n.push(['info', 'No kernels or copies were recorded (no GPU work ran while recording).']);
		var tl = D.timeline;
		if (tl && tl.gpu_work)
			n.push(['info', 'The thread timeline (Operations) has a row per GPU stream: ' + fmtNum(tl.gpu_work) + ' kernels, copies and memsets' +
				(tl.blocks ? ', short ones merged into blocks of at most ' + fmtNs(tl.resolution_ns) + ' like the regions' : ', every one drawn') + '.']);
		$('gpu-notices').innerHTML = n.map(function (x) { return '<li class="' + x[0] + '">' + esc(x[1]) + '</li>'; }).join('');

		table($('gpu-device-table'), [
			{key: 'id', label: 'device', fmt: function (d) { return esc(devLabel(d, many)); }},
			{key: 'name', label: 'name'},
			{key: 'compute_capability', label: 'cc'},
			{key: 'sm_count', label: 'SMs', num: true, fmt: function (d) { return fmtNum(d.sm_count); }},
			{key: 'busy_ns', label: 'busy', num: true, fmt: function (d) { return fmtNs(d.busy_ns); }},
			{key: 'busy_pct', label: '% wall', num: true, fmt: function (d) { return fmtPct(d.busy_pct); }},
			{key: 'window_busy_pct', label: '% window', num: true, fmt: function (d) { return fmtPct(d.window_busy_pct); }},
			{key: 'streams', label: 'streams', num: true, fmt: function (d) { return fmtNum(d.streams); }},
			{key: 'overlap_ns', label: 'overlap', num: true, fmt: function (d) { return fmtNs(d.overlap_ns); }},
			{key: 'stream_busy_ns', label: 'streams at once', num: true, sort: function (d) { return d.busy_ns ? d.stream_busy_ns / d.busy_ns : null; },
				fmt: function (d) { return d.busy_ns ? (d.stream_busy_ns / d.busy_ns).toFixed(2) : '–'; }},
			{key: 'peak_allocated_bytes', label: 'peak allocated', num: true, fmt: function (d) { return fmtBytes(d.peak_allocated_bytes); }},
			{key: 'allocated_end_bytes', label: 'at the end', num: true, fmt: function (d) { return fmtBytes(d.allocated_end_bytes); }},
			{key: 'nvml', label: 'reserved (NVML)', num: true, sort: function (d) { return d.nvml && d.nvml.mem_used_max_bytes; },
				fmt: function (d) { return d.nvml ? fmtBytes(d.nvml.mem_used_max_bytes) : '–'; }},
			{key: 'sm', label: 'SM % (NVML)', num: true, sort: function (d) { return d.nvml && d.nvml.sm_pct_mean; },
				fmt: function (d) { return d.nvml ? fmtPct(d.nvml.sm_pct_mean) : '–'; }}
		], devs);

		/* Top kernels by total time. */
		var ks = (g.kernels || []).slice(0, 15).reverse();
		$('gpu-kernels-note').textContent = ks.length ? 'top ' + ks.length + ' of ' + fmtNum((g.kernels || []).length) + ', with launch counts' : '';
		$('gpu-kernels-panel').hidden = !ks.length;
		if (ks.length)
			chart('chart-gpu-kernels', {
				grid: {left: 10, right: 90, top: 10, bottom: 24, containLabel: true},
				tooltip: {trigger: 'item', formatter: function (p) {
					var k = ks[p.dataIndex];
					return esc(k.name) + '<br>total ' + fmtNs(k.total_ns) + ' (' + fmtPct(k.gpu_time_pct) + ' of kernel time)<br>' +
						fmtNum(k.count) + ' launches, mean ' + fmtNs(k.mean_ns) + ', min ' + fmtNs(k.min_ns) + ', max ' + fmtNs(k.max_ns) +
						(isNum(k.occupancy_pct) ? '<br>occupancy ' + fmtPct(k.occupancy_pct) + ' (' + esc(k.occupancy_limiter) + ')' : '');
				}},
				xAxis: {type: 'value', axisLabel: {formatter: function (v) { return fmtNs(v); }}},
				yAxis: {type: 'category', data: ks.map(function (k) { return ellipsize(k.name, 40); })},
				series: [{type: 'bar', barMaxWidth: 26, data: ks.map(function (k) { return {value: k.total_ns, itemStyle: {color: colorOf(k.name)}}; }),
					label: {show: true, position: 'right', formatter: function (p) {
						var k = ks[p.dataIndex];
						return fmtNs(k.total_ns) + ' · ' + fmtNum(k.count) + '×';
					}}}]
			});

		/* GPU memory: allocated bytes per device (CUPTI), and NVML's memory in use. */
		var mem = [];
		devs.forEach(function (d) {
			var pts = d.memory || [];
			if (pts.length)
				mem.push({type: 'line', step: 'end', name: devLabel(d, many) + ' allocated', showSymbol: pts.length < 60, symbolSize: 4,
					areaStyle: {opacity: 0.12}, data: pts.map(function (m) { return [m.t_ns / 1e6, m.allocated_bytes]; })});
		});
		mem = mem.concat(nvmlSeries(g, many, 'mem_used_bytes', 'in use (NVML)', 1, {lineStyle: {type: 'dashed', width: 1}}));
		$('gpu-memory-panel').hidden = !mem.length;
		if (mem.length) {
			$('gpu-memory-note').textContent = 'allocated: CUPTI memory records (cudaMalloc, pools); dashed: NVML, the whole device' +
				(isNum(g.peak_allocated_bytes) && g.peak_allocated_bytes ? '; peak ' + fmtBytes(g.peak_allocated_bytes) +
					(g.peak_allocated_region ? ' in ' + g.peak_allocated_region : '') : '');
			timeChart('chart-gpu-memory', mem, fmtBytes);
		}

		/* NVML: utilisation, power and temperature. */
		var util = nvmlSeries(g, many, 'sm_pct', 'SM %', 1).concat(nvmlSeries(g, many, 'mem_pct', 'memory %', 1, {lineStyle: {type: 'dashed'}}));
		var power = nvmlSeries(g, many, 'power_mw', 'power W', 1e-3);
		var temp = nvmlSeries(g, many, 'temperature_c', '°C', 1, {yAxisIndex: 1, lineStyle: {type: 'dotted'}});
		$('gpu-util-panel').hidden = !util.length;
		$('gpu-power-panel').hidden = !power.length && !temp.length;
		if (util.length)
			timeChart('chart-gpu-util', util, function (v) { return fmtPct(v); }, {min: 0, max: 100});
		if (power.length || temp.length) {
			chart('chart-gpu-power', {
				grid: {left: 10, right: 20, top: 30, bottom: 56, containLabel: true},
				legend: {top: 0, type: 'scroll'},
				tooltip: {trigger: 'axis', valueFormatter: function (v) { return isNum(v) ? (+v).toFixed(1) : '–'; }},
				xAxis: {type: 'value', axisLabel: {formatter: function (v) { return fmtNs(v * 1e6); }}},
				yAxis: [{type: 'value', name: 'W'}, {type: 'value', name: '°C', splitLine: {show: false}}],
				dataZoom: [{type: 'inside'}, {type: 'slider', height: 18, bottom: 8}],
				series: power.concat(temp)
			});
		}

		var q = $('gpu-kernel-filter').value.toLowerCase();
		drawGpuKernelTable(q);
		table($('gpu-copy-table'), [
			{key: 'kind', label: 'direction', mono: true},
			{key: 'count', label: 'copies', num: true, fmt: function (c) { return fmtNum(c.count); }},
			{key: 'bytes', label: 'bytes', num: true, fmt: function (c) { return fmtBytes(c.bytes); }},
			{key: 'total_ns', label: 'time', num: true, fmt: function (c) { return fmtNs(c.total_ns); }},
			{key: 'bandwidth_bytes_per_s', label: 'bandwidth', num: true, fmt: function (c) { return fmtBw(c.bandwidth_bytes_per_s); }},
			{key: 'pageable_pct', label: 'pageable', num: true, fmt: function (c) { return fmtPct(c.pageable_pct) + (c.pageable_count ? ' (' + fmtNum(c.pageable_count) + ')' : ''); }}
		], g.memcpy || []);
		table($('gpu-stream-table'), [
			{key: 'device', label: 'device', fmt: function (s) { return esc('GPU ' + s.device + (many ? ' [' + s.pid + ']' : '')); }},
			{key: 'stream', label: 'stream', num: true},
			{key: 'kernels', label: 'kernels', num: true, fmt: function (s) { return fmtNum(s.kernels); }},
			{key: 'memcpys', label: 'copies', num: true, fmt: function (s) { return fmtNum(s.memcpys); }},
			{key: 'memsets', label: 'memsets', num: true, fmt: function (s) { return fmtNum(s.memsets); }},
			{key: 'busy_ns', label: 'busy', num: true, fmt: function (s) { return fmtNs(s.busy_ns); }},
			{key: 'busy_pct', label: 'busy %', num: true, fmt: function (s) {
				return '<span class="bar" style="width:' + Math.round(Math.min(100, isNum(s.busy_pct) ? s.busy_pct : 0) * 0.5) + 'px"></span>' + fmtPct(s.busy_pct); }}
		], g.streams || []);
		table($('gpu-sync-table'), [
			{key: 'region', label: 'region', mono: true, fmt: function (r) { return r.region === null ? '<span class="muted">outside regions</span>' : esc(r.region); }},
			{key: 'sync_ns', label: 'waiting', num: true, fmt: function (r) { return fmtNs(r.sync_ns); }},
			{key: 'calls', label: 'calls', num: true, fmt: function (r) { return fmtNum(r.calls); }}
		], g.sync_regions || []);
		$('gpu-timer-panel').hidden = !(g.timers || []).length;
		table($('gpu-timer-table'), [
			{key: 'name', label: 'timer', mono: true},
			{key: 'count', label: 'count', num: true, fmt: function (t) { return fmtNum(t.count); }},
			{key: 'total_ns', label: 'total', num: true, fmt: function (t) { return fmtNs(t.total_ns); }},
			{key: 'mean_ns', label: 'mean', num: true, fmt: function (t) { return fmtNs(t.mean_ns); }},
			{key: 'min_ns', label: 'min', num: true, fmt: function (t) { return fmtNs(t.min_ns); }},
			{key: 'max_ns', label: 'max', num: true, fmt: function (t) { return fmtNs(t.max_ns); }}
		], g.timers || []);
		drawNvtx(g.nvtx);
	}

	/* NVTX start/end ranges and marks by message (push/pop ranges are regions: the
	 * Operations tab has them); shown only when there are some. */
	function drawNvtx(nv) {
		var ranges = (nv && nv.ranges) || [], marks = (nv && nv.marks) || [];
		var lost = nv ? [[nv.open, 'never ended'], [nv.unmatched, 'ended without a start'], [nv.dropped, 'lost (queue full)']]
			.filter(function (x) { return x[0]; }) : [];
		$('gpu-nvtx').hidden = !ranges.length && !marks.length && !lost.length;
		$('gpu-nvtx-range-panel').hidden = !ranges.length && !lost.length;
		$('gpu-nvtx-mark-panel').hidden = !marks.length;
		$('gpu-nvtx-note').textContent = 'nvtxRangeStart/End, by message; push/pop ranges are regions' +
			lost.map(function (x) { return '; ' + fmtNum(x[0]) + ' ' + x[1]; }).join('');
		var msg = function (r) { return r.name === '' ? '<span class="muted">(no message)</span>' : esc(r.name); };
		table($('gpu-nvtx-range-table'), [
			{key: 'name', label: 'range', mono: true, fmt: msg},
			{key: 'count', label: 'count', num: true, fmt: function (r) { return fmtNum(r.count); }},
			{key: 'total_ns', label: 'total', num: true, fmt: function (r) { return fmtNs(r.total_ns); }},
			{key: 'mean_ns', label: 'mean', num: true, fmt: function (r) { return fmtNs(r.mean_ns); }},
			{key: 'min_ns', label: 'min', num: true, fmt: function (r) { return fmtNs(r.min_ns); }},
			{key: 'max_ns', label: 'max', num: true, fmt: function (r) { return fmtNs(r.max_ns); }},
			{key: 'threads', label: 'threads', num: true, fmt: function (r) { return fmtNum(r.threads); }},
			{key: 'cross_thread', label: 'ended on another thread', num: true, fmt: function (r) { return fmtNum(r.cross_thread); }}
		], ranges);
		table($('gpu-nvtx-mark-table'), [
			{key: 'name', label: 'mark', mono: true, fmt: msg},
			{key: 'count', label: 'count', num: true, fmt: function (m) { return fmtNum(m.count); }},
			{key: 'threads', label: 'threads', num: true, fmt: function (m) { return fmtNum(m.threads); }}
		], marks);
	}

	function drawGpuKernelTable(q) {
		var ks = (A.gpu && A.gpu.kernels) || [];
		if (q) ks = ks.filter(function (k) { return String(k.name).toLowerCase().indexOf(q) >= 0; });
		var dim = function (v) { return v ? v.join('×') : ''; };
		table($('gpu-kernel-table'), [
			{key: 'name', label: 'kernel', mono: true, fmt: function (k) {
				return '<span class="bar" style="width:' + Math.round(Math.min(100, isNum(k.gpu_time_pct) ? k.gpu_time_pct : 0) * 0.6) + 'px"></span>' + esc(k.name); }},
			{key: 'count', label: 'launches', num: true, fmt: function (k) { return fmtNum(k.count); }},
			{key: 'total_ns', label: 'total', num: true, fmt: function (k) { return fmtNs(k.total_ns); }},
			{key: 'mean_ns', label: 'mean', num: true, fmt: function (k) { return fmtNs(k.mean_ns); }},
			{key: 'min_ns', label: 'min', num: true, fmt: function (k) { return fmtNs(k.min_ns); }},
			{key: 'max_ns', label: 'max', num: true, fmt: function (k) { return fmtNs(k.max_ns); }},
			{key: 'gpu_time_pct', label: '% GPU time', num: true, fmt: function (k) { return fmtPct(k.gpu_time_pct); }},
			{key: 'occupancy_pct', label: 'occupancy', num: true, fmt: function (k) {
				return fmtPct(k.occupancy_pct) + (k.occupancy_limiter && isNum(k.occupancy_pct) ? ' <span class="muted">' + esc(k.occupancy_limiter) + '</span>' : ''); }},
			{key: 'block', label: 'grid · block', sort: function (k) { return k.block ? k.block[0] * k.block[1] * k.block[2] : null; },
				fmt: function (k) { return esc(dim(k.grid) + ' · ' + dim(k.block)); }},
			{key: 'registers', label: 'regs', num: true, fmt: function (k) { return fmtNum(k.registers); }},
			{key: 'streams', label: 'streams', sort: function (k) { return (k.streams || []).length; }, fmt: function (k) {
				return (k.streams || []).slice(0, 4).map(function (s) { return esc('s' + s.stream + ' ×' + fmtNum(s.count)); }).join(', ') +
					((k.streams || []).length > 4 ? ' …' : ''); }}
		], ks);
	}

	/* ---- ranks ---- */

	function hasRanks() { return (A.ranks || []).length > 1; }
	function rankName(r) { return r === null || r === undefined ? 'no rank' : 'rank ' + r; }

	function drawRanks() {
		var ranks = A.ranks || [], b = A.balance, slow = b ? b.slowest_rank : null;
		var h = [];
		h.push(card('Ranks', fmtNum(ranks.length), fmtNum(A.summary.processes) + ' process(es)'));
		if (b) {
			h.push(card('Imbalance', fmtPct(b.imbalance_pct), 'max / mean − 1 of the ranks\' ' + b.basis, b.imbalance_pct >= 10));
			h.push(card('Step imbalance', fmtPct(b.step_imbalance_pct), 'of the ranks\' mean step times'));
			h.push(card('Slowest', rankName(b.slowest_rank), 'fastest: ' + rankName(b.fastest_rank), true));
			h.push(card('Others wait', fmtNs(b.wait_ns), 'for the slowest rank (its ' + b.basis + ' less the others\' mean)'));
		} else
			h.push(card('Balance', '–', 'needs two recordings or more, each with a rank'));
		$('rank-cards').innerHTML = h.join('');

		table($('rank-table'), [
			{key: 'rank', label: 'rank', num: true, fmt: function (r) { return esc(rankName(r.rank)) + (r.rank === slow && b ? ' <span class="sev HIGH">slowest</span>' : ''); }},
			{key: 'host', label: 'host'},
			{key: 'pid', label: 'pid', num: true},
			{key: 'processes', label: 'procs', num: true},
			{key: 'wall_ns', label: 'wall', num: true, fmt: function (r) { return fmtNs(r.wall_ns); }},
			{key: 'cpu_ns', label: 'CPU', num: true, fmt: function (r) { return fmtNs(r.cpu_ns); }},
			{key: 'work_ns', label: 'work', num: true, fmt: function (r) { return fmtNs(r.work_ns); }},
			{key: 'comm_ns', label: 'comm', num: true, fmt: function (r) { return fmtNs(r.comm_ns); }},
			{key: 'steps', label: 'steps', num: true, fmt: function (r) { return fmtNum(r.steps); }},
			{key: 'step_mean_ns', label: 'step mean', num: true, fmt: function (r) { return fmtNs(r.step_mean_ns); }},
			{key: 'step_p50_ns', label: 'median', num: true, fmt: function (r) { return fmtNs(r.step_p50_ns); }},
			{key: 'step_p95_ns', label: 'p95', num: true, fmt: function (r) { return fmtNs(r.step_p95_ns); }},
			{key: 'vs_mean', label: 'vs mean', num: true, sort: function (r) { return basisOf(r, b); }, fmt: function (r) {
				var v = basisOf(r, b);
				return b && isNum(v) && b.mean_ns ? (v >= b.mean_ns ? '+' : '') + fmtPct(100 * (v / b.mean_ns - 1)) : '–'; }},
			{key: 'top_region', label: 'top region (self)', mono: true, fmt: function (r) { return r.top_region === null ? '' : esc(r.top_region) + ' ' + fmtNs(r.top_region_self_ns); }}
		], ranks, {rowClass: function (r) { return b && r.rank === slow ? 'slowest' : ''; }});

		/* Step time per rank: every rank when few, else the slowest, the fastest and the
		 * median over the ranks of each step. */
		var rs = (D.rank_steps || []).filter(function (r) { return r.durations_ns.length; });
		if (!rs.length) {
			$('rank-steps-note').textContent = '';
			emptyChart('chart-rank-steps', 'no steps (mark iterations with fennec_step())');
		} else {
			var shown = rs, MAXR = 16, median = null;
			if (rs.length > MAXR) {
				shown = rs.filter(function (r) { return b && (r.rank === b.slowest_rank || r.rank === b.fastest_rank); });
				var len = Math.min.apply(null, rs.map(function (r) { return r.durations_ns.length; }));
				median = [];
				for (var i = 0; i < len; i++) {
					var col = rs.map(function (r) { return r.durations_ns[i]; }).sort(function (x, y) { return x - y; });
					median.push([Math.round(i * rs[0].stride) + 1, col[col.length >> 1] / 1e6]);
				}
			}
			var thinned = rs.some(function (r) { return r.stride > 1; });
			$('rank-steps-note').textContent = (median ? rs.length + ' ranks: the slowest, the fastest and the median of each step' : 'one line per rank') +
				(thinned ? '; thinned to every ' + fmtNum(Math.max.apply(null, rs.map(function (r) { return r.stride; }))) + 'th step' : '');
			var series = shown.map(function (r) {
				var isSlow = b && r.rank === b.slowest_rank;
				return {type: 'line', name: rankName(r.rank) + (isSlow ? ' (slowest)' : ''), showSymbol: r.durations_ns.length < 100, symbolSize: 4,
					sampling: 'lttb', lineStyle: {width: isSlow ? 2.4 : 1.2}, z: isSlow ? 3 : 2, color: isSlow ? '#c92a2a' : undefined,
					data: r.durations_ns.map(function (v, i) { return [Math.round(i * r.stride) + 1, v / 1e6]; })};
			});
			if (median)
				series.push({type: 'line', name: 'median of the ranks', showSymbol: false, lineStyle: {type: 'dashed'}, data: median});
			chart('chart-rank-steps', {
				grid: {left: 10, right: 20, top: 30, bottom: 56, containLabel: true},
				legend: {top: 0, type: 'scroll'},
				tooltip: {trigger: 'axis', valueFormatter: function (v) { return fmtNs(v * 1e6); }},
				xAxis: {type: 'value', name: 'step', nameLocation: 'middle', nameGap: 24, minInterval: 1},
				yAxis: {type: 'value', scale: true, axisLabel: {formatter: function (v) { return fmtNs(v * 1e6); }}},
				dataZoom: [{type: 'inside'}, {type: 'slider', height: 18, bottom: 8}],
				series: series
			});
		}

		/* Work and communication per rank, stacked. */
		var cats = ranks.map(function (r) { return rankName(r.rank); });
		chart('chart-rank-work', {
			grid: {left: 10, right: 20, top: 30, bottom: 10, containLabel: true},
			legend: {top: 0},
			tooltip: {trigger: 'axis', axisPointer: {type: 'shadow'}, valueFormatter: function (v) { return fmtNs(v); }},
			xAxis: {type: 'category', data: cats},
			yAxis: {type: 'value', axisLabel: {formatter: function (v) { return fmtNs(v); }}},
			series: [
				{type: 'bar', name: 'work', stack: 'busy', data: ranks.map(function (r) {
					return {value: r.work_ns, itemStyle: {color: b && r.rank === slow ? '#c92a2a' : '#1c7ed6'}}; })},
				{type: 'bar', name: 'communication', stack: 'busy', itemStyle: {color: '#adb5bd'}, data: ranks.map(function (r) { return r.comm_ns; })}
			].concat(b && b.mean_ns ? [{type: 'line', name: 'mean ' + b.basis, symbol: 'none', lineStyle: {type: 'dashed', color: '#495057'},
				data: ranks.map(function () { return b.basis === 'work' ? b.mean_ns : null; })}] : [])
		});

		var losses = (b && b.losses) || [];
		$('rank-loss-note').textContent = b ? rankName(b.slowest_rank) + ': the regions whose self time there exceeds the other ranks\' mean the most ' +
			'(communication regions left out); the others wait about ' + fmtNs(b.wait_ns) + ' for it' : 'no balance: ranks are compared when every recording has a rank';
		table($('rank-loss-table'), [
			{key: 'region', label: 'region', mono: true},
			{key: 'rank_ns', label: 'on the slowest rank', num: true, fmt: function (l) { return fmtNs(l.rank_ns); }},
			{key: 'others_mean_ns', label: 'others\' mean', num: true, fmt: function (l) { return fmtNs(l.others_mean_ns); }},
			{key: 'excess_ns', label: 'excess', num: true, fmt: function (l) {
				return '<span class="bar" style="width:' + (b && b.wait_ns > 0 ? Math.round(Math.min(1, l.excess_ns / b.wait_ns) * 60) : 0) + 'px"></span>+' + fmtNs(l.excess_ns); }}
		], losses);
	}

	/* A rank's value of the balance basis. */
	function basisOf(r, b) {
		if (!b) return null;
		return b.basis === 'work' ? r.work_ns : b.basis === 'steps' ? r.step_mean_ns : r.wall_ns;
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
			/* memory findings save memory (expected_gain_bytes), the others time */
			{key: 'expected_gain_pct', label: 'gain ≤', num: true, fmt: function (x) {
				return x.expected_gain_bytes > 0 ? fmtBytes(x.expected_gain_bytes) + ' memory'
					: x.expected_gain_pct > 0 ? fmtPct(x.expected_gain_pct) : '–'; }}
		], f, {rowClass: function (x) { return 'sev-' + x.severity; }});
		$('nfindings').textContent = f.length ? String(f.length) : '';
	}

	/* ---- tabs, data, live updates ---- */

	var DRAW = {summary: drawSummary, operations: drawOperations, memory: drawMemory, callgraph: drawCallgraph, gpu: drawGpu,
		ranks: drawRanks, bottlenecks: drawBottlenecks};
	/* Tabs shown only when their data exists. */
	var OPTIONAL = {gpu: function () { return !!A.gpu; }, ranks: hasRanks};
	function tabShown(tab) { return !!DRAW[tab] && (!OPTIONAL[tab] || (A && OPTIONAL[tab]())); }

	function draw(tab) {
		try {
			DRAW[tab]();
		} catch (e) {
			showError(tab + ': ' + (e && e.stack || e));
		}
		drawn[tab] = true;
	}

	function showTab(tab) {
		if (!tabShown(tab)) tab = 'summary';
		fennec.tab = tab;
		document.querySelectorAll('nav.tabs button').forEach(function (b) { b.classList.toggle('active', b.getAttribute('data-tab') === tab); });
		document.querySelectorAll('section.tab').forEach(function (s) { s.classList.toggle('active', s.id === 'tab-' + tab); });
		if (!drawn[tab]) draw(tab);
		U.resizeVisible(); /* charts drawn while their tab was hidden have no size yet */
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
		Object.keys(OPTIONAL).forEach(function (t) {
			document.querySelector('nav.tabs button[data-tab="' + t + '"]').hidden = !tabShown(t);
		});
		if (!tabShown(fennec.tab)) fennec.tab = 'summary';
		drawBottlenecks(); /* the findings badge is always visible */
		drawn.bottlenecks = true;
		draw(fennec.tab || 'summary'); /* the other tabs when shown: a chart drawn in a hidden tab has no size */
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
		/* Each input its own timer: typing in one does not cancel another's pending redraw. */
		function later(fn) {
			var t = null;
			return function () { clearTimeout(t); t = setTimeout(function () { try { fn(); } catch (e) { showError(e); } }, 150); };
		}
		$('rflame-search').addEventListener('input', later(function () {
			if (A && (A.regions || []).length) flameChart('chart-rflame', regionTree(), fmtNs, $('rflame-search').value, $('rflame-match'));
		}));
		$('cflame-search').addEventListener('input', later(drawCallgraph));
		$('cflame-kind').addEventListener('change', later(drawCallgraph));
		/* Filters redraw their table only (not the charts and the timeline above it). */
		$('region-filter').addEventListener('input', later(drawRegionTable));
		$('gpu-kernel-filter').addEventListener('input', later(function () { drawGpuKernelTable($('gpu-kernel-filter').value.toLowerCase()); }));
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

	U.onReady(init);
})();
