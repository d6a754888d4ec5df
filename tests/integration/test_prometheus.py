"""Live metrics for Prometheus (docs/prometheus.md): `fennec record --metrics-listen` serves
/metrics from the record process while the program runs. The exposition passes `promtool
check metrics` with no warning and holds what the fixture did; a real Prometheus, started
here on loopback, scrapes a live recording every second and its HTTP API gives back the
step counter and the region time the fixture made; bad addresses and a taken port are
refused before the program starts; `fennec view --metrics-listen` serves the same."""

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.parse

from helpers import (SLOW, Skip, assert_between, assert_eq, assert_true, base_env, fennec_bin, fixture,
                     record, run, timeout, wait_for)

N_STEPS = 40
STEP_MS = 150
FORWARD_S = N_STEPS * STEP_MS * 0.6 / 1000  # what the fixture sleeps in "forward"
LISTEN_RE = r"serving metrics at http://(\[[0-9a-f:.]+\]|[0-9.]+):(\d+)/metrics"


def tool(name):
    """The path of a binary of Debian's prometheus package. Missing: a failure when apt can
    install the package (`make deps` does, as CI runs it), else the test is skipped."""
    p = shutil.which(name)
    if p:
        return p
    r = subprocess.run(["apt-cache", "policy", "prometheus"], capture_output=True, text=True) \
        if shutil.which("apt-cache") else None
    if r is None or r.returncode != 0 or "Candidate: (none)" in r.stdout or "Candidate:" not in r.stdout:
        raise Skip("%s is not installed and apt cannot provide the prometheus package" % name)
    raise AssertionError("%s is missing: make deps installs it (apt-get install -y prometheus)" % name)


class Recording:
    """`fennec record --metrics-listen SPEC -- prom_steps N STEP_MS release` in the background;
    .port once it serves. The fixture waits after its steps until release() (60 s at most)."""

    def __init__(self, spec="0", n=N_STEPS, step_ms=STEP_MS, out="run.fnc"):
        self.release_file = os.path.abspath("release")
        self.err = open("record.stderr", "w+")
        self.p = subprocess.Popen([fennec_bin(), "record", "-o", out, "--metrics-listen", spec, "--",
                                   fixture("prom_steps"), str(n), str(step_ms), self.release_file],
                                  stdout=subprocess.DEVNULL, stderr=self.err, env=base_env(),
                                  start_new_session=True)
        m = wait_for(lambda: re.search(LISTEN_RE, self.stderr()) or self.p.poll() is not None, 20,
                     "fennec record to say where it serves")
        if m is True:
            raise AssertionError("fennec record ended (%s) before serving:\n%s" % (self.p.returncode, self.stderr()))
        self.port = int(m.group(2))

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def release(self):
        """Let the fixture end; fennec record's exit status."""
        open(self.release_file, "w").close()
        try:
            return self.p.wait(timeout=30 * SLOW)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise AssertionError("fennec record did not end after the release:\n" + self.stderr())

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def get(port, path="/metrics", headers=None, method="GET"):
    """(status, headers, body) of one request to 127.0.0.1:port."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20 * SLOW)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read().decode()
    finally:
        c.close()


def samples(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        assert_true(m, "not a sample line: %r" % line)
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        assert_true((m.group(1), labels) not in out, "a series given twice (a scraper refuses the page): %r" % line)
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def one(s, metric, **labels):
    """The value of the one series of `metric` whose labels include `labels`."""
    got = [v for (n, ls), v in s.items() if n == metric and set(labels.items()) <= set(ls)]
    assert_eq(len(got), 1, "series %s%s" % (metric, labels))
    return got[0]


def steps_now(port):
    s = samples(get(port)[2])
    return [v for (n, _), v in s.items() if n == "fennec_steps_total"]


@timeout(60)
def test_exposition_passes_promtool_and_holds_what_the_program_did():
    promtool = tool("promtool")
    rec = Recording()
    try:
        # while it runs: some steps, not all (the fixture takes 6 s)
        wait_for(lambda: (steps_now(rec.port) or [0])[0] >= 3, 20, "three steps in the metrics")
        status, hdr, text = get(rec.port)
        assert_eq(status, 200, "GET /metrics")
        assert_true(hdr["content-type"].startswith("text/plain; version=0.0.4"), "content type %r" % hdr["content-type"])
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert_true(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
                    "promtool check metrics: rc %d\n%s%s\n--- exposition:\n%s" % (r.returncode, r.stdout, r.stderr, text))
        # at the end of the steps: everything the fixture did
        # (the fixture sets its last gauge after the steps: both, or the flush between them)
        wait_for(lambda: steps_now(rec.port) == [N_STEPS] and "fennec_program_tokens_seen_total_2{" in get(rec.port)[2],
                 30, "all %d steps and the last gauge in the metrics" % N_STEPS, interval=0.2)
        status, hdr, text = get(rec.port)
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert_true(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
                    "promtool check metrics at the end: rc %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
        s = samples(text)
        assert_eq(one(s, "fennec_step_duration_seconds_count"), N_STEPS, "step histogram count")
        # steps are 0.15 s by chained deadlines: one woken late is long, the next short
        buckets = sorted((float(dict(ls)["le"]), v) for (n, ls), v in s.items()
                         if n == "fennec_step_duration_seconds_bucket")
        assert_true(all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), "cumulative buckets: %r" % buckets)
        assert_eq(buckets[-1], (float("inf"), N_STEPS), "the +Inf bucket")
        assert_true(one(s, "fennec_step_duration_seconds_bucket", le="0.1") <= N_STEPS / 2 <=
                    one(s, "fennec_step_duration_seconds_bucket", le="0.25"), "most steps between 0.1 and 0.25 s: %r" % buckets)
        assert_between(one(s, "fennec_step_duration_seconds_sum"), N_STEPS * STEP_MS / 1000 * 0.99,
                       N_STEPS * STEP_MS / 1000 * 1.05, "step time", "s")
        assert_eq(one(s, "fennec_items_total"), 32 * N_STEPS, "items")
        assert_between(one(s, "fennec_items_per_second"), 32 / (STEP_MS / 1000) * 0.9, 32 / (STEP_MS / 1000) * 1.1,
                       "items/s", "")
        assert_eq(one(s, "fennec_region_calls_total", region="forward"), N_STEPS, "forward calls")
        assert_between(one(s, "fennec_region_seconds_total", region="forward"), FORWARD_S * 0.99,
                       FORWARD_S + N_STEPS * 0.03, "forward time", "s")
        assert_eq(one(s, "fennec_program_tokens_seen_total", name="Tokens Seen"), 7 * N_STEPS, "counter Tokens Seen")
        assert_eq(one(s, "fennec_program_learning_rate", name="learningRate"), 0.5 / N_STEPS, "gauge learningRate")
        assert_eq(one(s, "fennec_program_tokens_seen_total_2", name="tokens_seen_total"), 1,
                  "a gauge whose name the counter took")
        assert_eq(one(s, "fennec_program_loss_last", name="loss"), 1.0 / N_STEPS, "last loss")
        assert_eq(one(s, "fennec_program_loss_values_count", name="loss"), N_STEPS, "losses recorded")
        assert_between(one(s, "fennec_resident_memory_bytes"), 1 << 20, 1 << 31, "RSS", " bytes")
        assert_eq(one(s, "fennec_dropped_events_total"), 0, "dropped events")
        assert_true(one(s, "fennec_cpu_seconds_total", mode="user") >= 0, "CPU seconds")
        labels = [dict(ls) for (n, ls) in s if n == "fennec_steps_total"][0]
        assert_true(labels.get("pid", "").isdigit() and labels["pid"] != str(rec.p.pid) and
                    labels.get("host") == socket.gethostname(),
                    "labels pid (the program's, not fennec record's) and host: %r" % labels)
        # OpenMetrics when asked
        status, hdr, om = get(rec.port, headers={"Accept": "application/openmetrics-text;version=1.0.0;q=0.5,"
                                                           "text/plain;version=0.0.4;q=0.2"})
        assert_true(hdr["content-type"].startswith("application/openmetrics-text; version=1.0.0"),
                    "OpenMetrics content type %r" % hdr["content-type"])
        assert_true(om.endswith("\n# EOF\n"), "OpenMetrics ends with # EOF")
        assert_true("# TYPE fennec_steps counter\n" in om and "\nfennec_steps_total{" in om,
                    "OpenMetrics counter family without _total, its sample with it")
        assert_eq(one(samples(om), "fennec_steps_total"), N_STEPS, "steps in OpenMetrics")
        # only GET /metrics
        assert_eq(get(rec.port, "/")[0], 404, "GET /")
        assert_eq(get(rec.port, "/metrics/../etc/passwd")[0], 404, "GET of another path")
        assert_eq(get(rec.port, method="POST")[0], 405, "POST /metrics")
        assert_eq(get(rec.port, headers={"Host": "attacker.example:80"})[0], 403, "a foreign Host header")
        assert_eq(rec.release(), 0, "fennec record's exit status")
    finally:
        rec.stop()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def query(port, expr):
    """The values of an instant query to Prometheus's HTTP API, by pid label."""
    st, _, body = get(port, "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    if st != 200:
        return {}
    d = json.loads(body)
    assert_eq(d.get("status"), "success", "query %s" % expr)
    return {r["metric"].get("pid"): float(r["value"][1]) for r in d["data"]["result"]}


@timeout(90)
def test_a_real_prometheus_scrapes_the_live_recording():
    prometheus = tool("prometheus")
    rec = Recording()
    prom = None
    try:
        port = free_port()
        with open("prometheus.yml", "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: fennec\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % rec.port)
        os.mkdir("tsdb")
        prom = subprocess.Popen([prometheus, "--config.file=prometheus.yml", "--storage.tsdb.path=tsdb",
                                 "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
                                stdout=subprocess.DEVNULL, stderr=open("prometheus.log", "w"), start_new_session=True)

        def seen():
            if prom.poll() is not None:
                raise AssertionError("prometheus ended (%s):\n%s" % (prom.returncode, open("prometheus.log").read()))
            try:
                return query(port, "max_over_time(fennec_steps_total[1m])")
            except (OSError, http.client.HTTPException):
                return {}
        got = wait_for(lambda: [v for v in seen().values() if v >= N_STEPS], 40, "Prometheus to scrape all the steps",
                       interval=0.3)
        assert_eq(got, [N_STEPS], "fennec_steps_total in Prometheus")
        fwd = query(port, 'max_over_time(fennec_region_seconds_total{region="forward",job="fennec"}[1m])')
        assert_eq(len(fwd), 1, "one process's forward time")
        assert_between(list(fwd.values())[0], FORWARD_S * 0.99, FORWARD_S + N_STEPS * 0.03, "forward time in Prometheus", "s")
        calls = query(port, 'max_over_time(fennec_region_calls_total{region="forward"}[1m])')
        assert_eq(list(calls.values()), [N_STEPS], "forward calls in Prometheus")
        live = query(port, 'max_over_time(fennec_recording_ended[1m])')
        assert_eq(list(live.values()), [0.0], "scraped while the program ran (no END chunk yet)")
        up = query(port, 'max_over_time(up{job="fennec"}[1m])')
        assert_eq(list(up.values()), [1.0], "the target up")
        assert_eq(rec.release(), 0, "fennec record's exit status")
    finally:
        rec.stop()
        if prom and prom.poll() is None:
            prom.terminate()
            try:
                prom.wait(timeout=10)
            except subprocess.TimeoutExpired:
                prom.kill()


def test_metrics_listen_refuses_bad_addresses_and_a_taken_port_before_the_program_starts():
    for spec in ["", "abc", "70000", "-1", "9464x", "localhost:", ":9464", "1:2:3", "[::1]", "[]:80",
                 "no.such.host.invalid:0"]:
        r = run([fennec_bin(), "record", "-o", "run.fnc", "--metrics-listen", spec, "--", "sh", "-c", "touch started"],
                env=base_env())
        assert_true(r.returncode in (1, 2) and "--metrics-listen" in r.stderr and not os.path.exists("started"),
                    "--metrics-listen %r refused before the program ran\n  %s" % (spec, r.describe()))
        assert_true(r.returncode == 2 or spec.endswith(".invalid:0"), "a malformed address is a usage error (2): %r" % spec)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        r = run([fennec_bin(), "record", "-o", "run.fnc", "--metrics-listen", str(taken.getsockname()[1]), "--",
                 "sh", "-c", "touch started"], env=base_env())
    finally:
        taken.close()
    assert_eq(r.returncode, 1, "a taken port: exit status\n  " + r.describe())
    assert_true("taken" in r.stderr and "not started" in r.stderr, "says the port is taken: " + r.stderr)
    assert_true(not os.path.exists("started") and not os.path.exists("run.fnc"), "the program did not run")
    # an address that is not loopback: served, with a warning
    r = run([fennec_bin(), "record", "-o", "run.fnc", "--metrics-listen", "0.0.0.0:0", "--", "true"], env=base_env())
    assert_eq(r.returncode, 0, "0.0.0.0:0\n  " + r.describe())
    assert_true("not a loopback address" in r.stderr and re.search(LISTEN_RE, r.stderr), "warned: " + r.stderr)


def test_view_serves_the_metrics_of_a_finished_recording():
    record(fixture("prom_steps"), "12", "20")
    p = subprocess.Popen([fennec_bin(), "view", "run.fnc", "--port", "0", "--metrics-listen", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env(), start_new_session=True)
    try:
        line = p.stdout.readline().decode()
        m = re.search(LISTEN_RE, line)
        assert_true(m, "fennec view says where the metrics are: %r" % line)
        s = samples(get(int(m.group(2)))[2])
        assert_eq(one(s, "fennec_steps_total"), 12, "steps")
        assert_eq(one(s, "fennec_region_calls_total", region="forward"), 12, "forward calls")
        assert_eq(one(s, "fennec_recording_ended"), 1, "the recording ended")
        assert_eq(one(s, "fennec_processes"), 1, "process files")
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_metrics_follow_a_file_written_in_pieces_cut_anywhere():
    """The follower decodes only whole chunks and takes up a torn one once it is whole: a
    finished recording copied in pieces cut at odd bytes gives, at each scrape, totals that
    only grow, and at the end the totals of the whole file."""
    record(fixture("prom_steps"), "30", "10")
    data = open("run.fnc", "rb").read()
    cuts = sorted(set([len(data) * k // 7 + 13 * k for k in range(1, 7)] + [len(data)]))
    with open("grow.fnc", "wb") as f:
        f.write(data[:cuts[0]])
    p = subprocess.Popen([fennec_bin(), "view", "grow.fnc", "--port", "0", "--metrics-listen", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env(), start_new_session=True)
    try:
        m = re.search(LISTEN_RE, p.stdout.readline().decode())
        assert_true(m, "fennec view says where the metrics are")
        port = int(m.group(2))
        last = (-1, -1, -1)
        at = cuts[0]
        for cut in cuts:
            with open("grow.fnc", "ab") as f:
                f.write(data[at:cut])
            at = cut
            s = samples(get(port)[2])
            steps = [v for (n, _), v in s.items() if n == "fennec_steps_total"]
            calls = [v for (n, ls), v in s.items() if n == "fennec_region_calls_total"]
            tokens = [v for (n, _), v in s.items() if n == "fennec_program_tokens_seen_total"]
            now = (steps[0] if steps else 0, calls[0] if calls else 0, tokens[0] if tokens else 0)
            assert_true(all(a <= b for a, b in zip(last, now)), "totals only grow: %r then %r" % (last, now))
            last = now
        assert_eq(last, (30, 30, 7 * 30), "steps, forward calls and tokens of the whole file")
        assert_eq(one(s, "fennec_recording_bytes"), len(data), "bytes decoded: the whole file")
        assert_eq(one(s, "fennec_recording_ended"), 1, "the END chunk read")
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_every_process_of_a_recording_has_its_own_series():
    """Forks and execs: one file each; an exec'd program keeps its process's pid, and is told
    apart by the label exec."""
    f = fixture("prom_steps")
    record(shutil.which("sh"), "-c", "%s 5 20 & %s 7 20; wait" % (f, f))
    p = subprocess.Popen([fennec_bin(), "view", "run.fnc", "--port", "0", "--metrics-listen", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env(), start_new_session=True)
    try:
        m = re.search(LISTEN_RE, p.stdout.readline().decode())
        assert_true(m, "fennec view says where the metrics are")
        s = samples(get(int(m.group(2)))[2])  # no series twice
        steps = {ls: v for (n, ls), v in s.items() if n == "fennec_steps_total"}
        assert_eq(sorted(v for v in steps.values() if v), [5, 7], "steps of the two programs")
        assert_eq(one(s, "fennec_processes"), len(steps), "a series per process file")
        assert_true(any(dict(ls).get("exec") == "1" for ls in steps), "an exec'd program labelled exec: %r" % list(steps))
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_ranks_and_gpu_are_labelled_and_pass_promtool():
    """Two ranks of a job (a folder of per-rank files) and, on rank 0, GPU records (NVML
    points and kernels written here): a series per rank labelled rank, the GPU's last NVML
    point and its kernel time, and promtool still content."""
    from test_html import gpu_recording, record_ranks
    promtool = tool("promtool")
    record_ranks(steps=12)
    gpu_recording(base="job/run.rank0.fnc")
    p = subprocess.Popen([fennec_bin(), "view", "job", "--port", "0", "--metrics-listen", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env(), start_new_session=True)
    try:
        m = re.search(LISTEN_RE, p.stdout.readline().decode())
        assert_true(m, "fennec view says where the metrics are")
        text = get(int(m.group(2)))[2]
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert_true(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
                    "promtool check metrics: rc %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
        s = samples(text)
        assert_eq(one(s, "fennec_steps_total", rank="0"), 12, "rank 0's steps")
        assert_eq(one(s, "fennec_steps_total", rank="1"), 12, "rank 1's steps")
        assert_eq(one(s, "fennec_gpu_utilization_ratio", rank="0", gpu="0"), 0.7, "the last NVML point's SM use")
        assert_eq(one(s, "fennec_gpu_memory_utilization_ratio", gpu="0"), 0.35, "memory use")
        assert_eq(one(s, "fennec_gpu_memory_used_bytes", gpu="0"), 2 << 30, "GPU memory used")
        assert_eq(one(s, "fennec_gpu_memory_total_bytes", gpu="0"), 32 << 30, "GPU memory")
        assert_eq(one(s, "fennec_gpu_kernels_total", gpu="0"), 5, "kernels")
        assert_between(one(s, "fennec_gpu_kernel_seconds_total", gpu="0"), 0.012 - 1e-9, 0.012 + 1e-9, "kernel time", "s")
        assert_true(not [1 for (n, ls) in s if n.startswith("fennec_gpu") and dict(ls).get("rank") == "1"],
                    "no GPU series for rank 1")
    finally:
        p.terminate()
        p.wait(timeout=10)
