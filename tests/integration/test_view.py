"""fennec view: the dashboard server (docs/html.md). Its endpoints return the analysis as
JSON, it refuses path traversal, oversized and foreign requests, says when its port is
taken, follows a recording while it is written (also in a real browser), and serves a
bounded load from wrk on loopback without errors."""

import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import threading
import time

from helpers import (SLOW, Skip, analyze, assert_eq, assert_true, base_env, fennec_bin, fixture, record,
                     record_command, run, timeout, wait_for, without_library)
from test_html import assert_charts_drawn, assert_clean_page, assert_escaped, browse, gpu_recording, record_ranks


URL_RE = r"http://(\[[0-9a-f:.]+\]|[0-9.]+):(\d+)/\?token=([0-9a-f]{32}) "


class Viewer:
    """`fennec view PATH --port 0` in the background; .port, .token and .url (the printed
    URL, with its token) once it serves."""

    def __init__(self, path, *opts):
        self.cmd = [fennec_bin(), "view", str(path), "--port", "0"] + list(opts)
        self.err = open("view.stderr", "w+")
        self.p = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self.err, env=base_env(),
                                  start_new_session=True)
        line = self.p.stdout.readline().decode()
        m = re.search(URL_RE, line)
        if not m:
            self.stop()
            raise AssertionError("fennec view did not say where it serves: %r\n  stderr: %s" % (line, self.stderr()))
        self.set_url(m)

    def set_url(self, m):
        """From a match of URL_RE."""
        self.host = m.group(1).strip("[]")
        if self.host == "0.0.0.0":
            self.host = "127.0.0.1"
        self.port, self.token = int(m.group(2)), m.group(3)
        self.url = "http://%s:%d/?token=%s" % (m.group(1), self.port, self.token)

    def with_token(self, path):
        return path + ("&" if "?" in path else "?") + "token=" + self.token

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def stop(self):
        """SIGTERM; the exit status (0 expected)."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=30 * SLOW)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
                raise AssertionError("fennec view did not stop on SIGTERM")
        err = self.stderr()
        for marker in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"):
            assert_true(marker not in err, "sanitizer report from fennec view:\n" + err[-3000:])
        return self.p.returncode

    def get(self, path, method="GET", headers=None, body=None, token=True, source=None):
        """(status, headers dict, body bytes); the path with the token unless token is
        False; from address `source` if given; no proxy, whatever the environment says."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=30 * SLOW,
                                       source_address=(source, 0) if source else None)
        try:
            c.request(method, self.with_token(path) if token else path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def json(self, path):
        st, hd, body = self.get(path)
        assert_eq(st, 200, "GET %s status (body %r)" % (path, body[:200]))
        assert_true(hd.get("Content-Type", "").startswith("application/json"), "GET %s content type: %s" % (path, hd))
        try:
            return json.loads(body)
        except ValueError as e:
            raise AssertionError("GET %s: not JSON (%s): %r" % (path, e, body[:300]))

    def raw(self, data):
        """Send bytes as they are; the status line of the answer (or '' if the server closed)."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30 * SLOW)
        try:
            s.sendall(data)
            got = b""
            while b"\r\n" not in got:
                b = s.recv(4096)
                if not b:
                    break
                got += b
            return got.split(b"\r\n")[0].decode(errors="replace")
        except OSError:
            return ""
        finally:
            s.close()


def test_endpoints():
    _, path = record("nested", 200)
    v = Viewer(path)
    try:
        rep = analyze(path)
        st = v.json("/api/status")
        assert_eq(st["schema"], "fennec.view/1", "status schema")
        assert_true(st["generation"] >= 1 and st["error"] is None, "status after the first analysis: %s" % st)
        assert_eq(st["events"], rep["summary"]["events"], "status events")
        assert_eq(st["cut_short"], False, "status cut_short")
        a = v.json("/api/analysis")
        assert_eq(a["schema"], "fennec.analysis/1", "analysis schema")
        for k in ("summary", "regions", "findings"):
            assert_eq(json.dumps(a[k], sort_keys=True), json.dumps(rep[k], sort_keys=True), "/api/analysis %s" % k)
        page = v.json("/api/page")
        assert_eq(page["page"], "fennec.page/1", "page data schema")
        assert_eq(page["live"], True, "page data live flag")
        assert_eq(page["analysis"]["summary"], rep["summary"], "page data analysis")
        assert_true(page["timeline"]["intervals"] > 0, "page data timeline")
        code, hd, body = v.get("/")
        assert_eq(code, 200, "GET /")
        assert_true(hd.get("Content-Type", "").startswith("text/html"), "GET / content type")
        assert_true(b"window.FENNEC_LIVE = true" in body and b"echarts" in body, "GET / is the live dashboard")
        assert_true("connect-src 'self'" in hd.get("Content-Security-Policy", ""), "CSP: %s" % hd)
        code, _, body = v.get("/", method="HEAD")
        assert_eq((code, body), (200, b""), "HEAD /")
        code, _, body = v.get("/nothing/here")
        assert_eq(code, 404, "unknown path")
        assert_eq(json.loads(body)["status"], 404, "404 body is JSON")
    finally:
        assert_eq(v.stop(), 0, "exit status after SIGTERM")


def test_refusals():
    """Path traversal, oversized requests, other methods and foreign Host headers."""
    _, path = record("nested", 100)
    v = Viewer(path)
    try:
        for p in ("/../../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/api/..%2f..%2f..%2fetc%2fpasswd",
                  "/..\\..\\etc\\passwd", "//etc/passwd", "/api/%01status"):
            code, _, body = v.get(p)
            assert_eq(code, 400, "GET %s" % p)
            assert_true(b"root:" not in body, "GET %s leaked a file" % p)
            assert_eq(json.loads(body)["error"], "bad path", "GET %s body" % p)
        # A NUL would end the decoded path early: refused before it is decoded.
        for p in ("/api/%00/../../etc/passwd", "/api/status%00", "/api/status%00.html"):
            code, _, body = v.get(p)
            assert_eq(code, 400, "GET %s (%r)" % (p, body[:100]))
        code, _, _ = v.get("/" + "a" * 5000)
        assert_eq(code, 414, "a 5000-byte URL")
        code, _, body = v.get("/api/status", method="POST", body=b"x" * 200000)
        assert_eq(code, 413, "a 200 KB body")
        code, _, _ = v.get("/api/status", method="GET", body=b"x" * 100000)
        assert_eq(code, 413, "a GET with a 100 KB body")
        code, hd, _ = v.get("/api/status", method="DELETE")
        assert_eq(code, 405, "DELETE")
        assert_true("GET" in hd.get("Allow", ""), "405 says what is allowed: %s" % hd)
        line = v.raw(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Big: %s\r\n\r\n" % (v.port, b"a" * 100000))
        assert_true(line == "" or re.match(r"HTTP/1\.[01] (413|431|400)", line), "100 KB of headers: %r" % line)
        line = v.raw(b"POST /api/status HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nTransfer-Encoding: chunked\r\n\r\n" % v.port)
        assert_true(re.match(r"HTTP/1\.[01] 413", line), "a chunked body: %r" % line)
        code, _, _ = v.get("/api/analysis", headers={"Host": "attacker.example:%d" % v.port})
        assert_eq(code, 403, "a foreign Host header (DNS rebinding)")
        code, _, _ = v.get("/api/analysis", headers={"Host": "localhost:%d" % v.port})
        assert_eq(code, 200, "Host localhost")
        # Still serving after all that.
        assert_eq(v.json("/api/status")["schema"], "fennec.view/1", "status after the refusals")
    finally:
        assert_eq(v.stop(), 0, "exit status")


def test_token():
    """Every request needs the printed URL's random token (other users of the machine can
    reach a loopback port too): none or a wrong one gets 403 and nothing of the profile;
    the URL's ?token= sets an HttpOnly cookie for the page's own requests, which then
    need no token in the URL. Two servers have different tokens."""
    _, path = record("nested", 100)
    v, w = Viewer(path), Viewer(path)
    try:
        assert_true(v.token != w.token, "two servers, two tokens: %s" % v.token)
        for p in ("/", "/api/status", "/api/analysis", "/api/page", "/api/timeline?from_ns=0&to_ns=9"):
            for q in ("", "?token=" + "0" * 32, "?token=" + w.token, "?token=" + v.token[:-1]):
                code, _, body = v.get(p + (q if "?" not in p else q.replace("?", "&")), token=False)
                assert_eq(code, 403, "GET %s%s without the token" % (p, q))
                assert_true(b"nested" not in body and b"phase_a" not in body, "403 body leaks: %r" % body[:200])
        code, hd, _ = v.get("/")
        assert_eq(code, 200, "GET / with the token")
        cookie = hd.get("Set-Cookie", "")
        assert_true(cookie.startswith("fennec_token_%d=%s;" % (v.port, v.token)) and "HttpOnly" in cookie
                    and "SameSite=Strict" in cookie, "the page sets its cookie: %r" % cookie)
        code, _, body = v.get("/api/analysis", token=False, headers={"Cookie": cookie.split(";")[0]})
        assert_eq(code, 200, "GET /api/analysis with the cookie")
        assert_true(b"phase_a" in body, "the analysis with the cookie")
        code, _, _ = v.get("/api/analysis", token=False, headers={"Cookie": "fennec_token_%d=%s" % (v.port, w.token)})
        assert_eq(code, 403, "another server's token as the cookie")
    finally:
        assert_eq(v.stop(), 0, "exit status")
        assert_eq(w.stop(), 0, "exit status")


def test_host_check_follows_the_bound_address():
    """--host 127.0.0.5 accepts a Host naming 127.0.0.5 (it answered 403); --host
    ::ffff:127.0.0.1 is loopback, so a foreign Host is refused there too (the check was
    off). Binding 0.0.0.0 is warned about: other machines can reach it."""
    _, path = record("nested", 100)
    v = Viewer(path, "--host", "127.0.0.5")
    try:
        assert_eq(v.host, "127.0.0.5", "the URL names the address bound")
        assert_eq(v.get("/api/status", headers={"Host": "127.0.0.5:%d" % v.port})[0], 200, "Host 127.0.0.5")
        assert_eq(v.get("/api/status", headers={"Host": "localhost:%d" % v.port})[0], 200, "Host localhost")
        assert_eq(v.get("/api/status", headers={"Host": "evil.example:%d" % v.port})[0], 403, "a foreign Host")
        assert_true("not a loopback" not in v.stderr(), "no warning on loopback: %s" % v.stderr())
    finally:
        assert_eq(v.stop(), 0, "exit status")
    try:
        socket.create_connection(("::ffff:127.0.0.1", 9), timeout=1).close()
    except ConnectionRefusedError:
        pass
    except OSError as e:
        raise Skip("no IPv6 sockets here: %s" % e)
    v = Viewer(path, "--host", "::ffff:127.0.0.1")
    try:
        assert_eq(v.get("/api/status", headers={"Host": "evil.example:%d" % v.port})[0], 403, "a foreign Host")
        assert_eq(v.get("/api/status")[0], 200, "Host [::ffff:127.0.0.1]")
    finally:
        assert_eq(v.stop(), 0, "exit status")
    v = Viewer(path, "--host", "0.0.0.0")
    try:
        assert_true("warning" in v.stderr() and "not a loopback address" in v.stderr(), "warned: %r" % v.stderr())
        assert_eq(v.get("/api/status", headers={"Host": "evil.example:%d" % v.port})[0], 200,
                  "no Host check off loopback (the token guards it)")
        assert_eq(v.get("/api/status", token=False)[0], 403, "no token off loopback either")
    finally:
        assert_eq(v.stop(), 0, "exit status")


def test_connections_per_client_are_capped():
    """One client address cannot hold every connection with idle sockets: past 32 of its
    own, its new connections are closed at once, while another address (127.0.0.2) is
    still answered; once it lets go, it is answered again."""
    _, path = record("nested", 100)
    v = Viewer(path)
    idle = []
    try:
        for _ in range(40):
            idle.append(socket.create_connection(("127.0.0.1", v.port), timeout=30 * SLOW))
        # Every earlier connection is accepted before this one (one listen queue).
        assert_eq(v.get("/api/status", source="127.0.0.2")[0], 200, "another client while one holds 40 sockets")
        readable, _, _ = select.select(idle, [], [], 1.0)  # a closed socket reads as such
        closed = 0
        for s in readable:
            try:
                closed += s.recv(1) == b""
            except ConnectionResetError:
                closed += 1
        assert_eq(closed, 8, "idle connections closed beyond the 32 of one client")
    finally:
        for s in idle:
            s.close()

    def answered():
        try:
            return v.get("/api/status")[0] == 200
        except (OSError, http.client.HTTPException):
            return False
    try:
        wait_for(answered, 30, "the client answered once it let go")
    finally:
        assert_eq(v.stop(), 0, "exit status")


def test_port_taken_and_usage():
    _, path = record("nested", 100)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        r = subprocess.run([fennec_bin(), "view", path, "--port", str(port)], env=base_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60 * SLOW)
        err = r.stderr.decode()
        assert_eq(r.returncode, 1, "exit status with the port taken (stderr %r)" % err)
        assert_true("port" in err and "taken" in err and str(port) in err and "--port" in err,
                    "the message says the port is taken and what to do: %r" % err)
    finally:
        s.close()
    for args, what in ((["view"], "no file"), (["view", path, "--port", "70000"], "port out of range"),
                       (["view", path, "--bogus"], "unknown option")):
        r = subprocess.run([fennec_bin()] + args, env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60 * SLOW)
        assert_eq(r.returncode, 2, "usage error: %s (stderr %r)" % (what, r.stderr))
    r = subprocess.run([fennec_bin(), "view", "missing.fnc", "--port", "0"], env=base_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60 * SLOW)
    assert_true(r.returncode == 1 and b"missing.fnc" in r.stderr, "a missing file: %r" % r.stderr)


def test_without_libmicrohttpd():
    """libmicrohttpd is loaded when a server starts, not linked (src/common/lib.h): without
    it, fennec view says so, naming the package, and exits 1; the other commands work."""
    _, path = record("nested", 20)
    r = run(without_library("libmicrohttpd.so.12", [fennec_bin(), "view", path, "--port", "0"]), timeout_s=60)
    assert_eq(r.returncode, 1, "exit status without libmicrohttpd (stderr %r)" % r.stderr)
    assert_true("cannot serve" in r.stderr and "libmicrohttpd.so.12" in r.stderr and "libmicrohttpd12" in r.stderr,
                "the message names the library and its package: %r" % r.stderr)
    r = run(without_library("libmicrohttpd.so.12", [fennec_bin(), "analyze", path]))
    assert_eq(r.returncode, 0, "analyze without libmicrohttpd (stderr %r)" % r.stderr)
    assert_true("phase_a" in r.stdout, "the analysis is printed: %r" % r.stdout[:300])


def start_recording(seconds, out="live.fnc"):
    """`fennec record -- spinner SECONDS` in the background, in a session of its own
    (stop_recording ends it); returns the process once the file exists."""
    cmd, env = record_command(fixture("spinner"), [seconds], out=out)
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    wait_for(lambda: os.path.exists(out) and os.path.getsize(out) > 0, 30, "the recording to start")
    time.sleep(0.3)
    return p


def stop_recording(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    p.wait()


@timeout(300)
def test_follows_a_recording_in_progress():
    """The analysis is redone as the file grows: generation and events go up, the status
    says it is growing, and the last analysis is that of the finished file."""
    rec = start_recording(4)
    v = Viewer("live.fnc")
    try:
        first = v.json("/api/status")
        growing = wait_for(lambda: (lambda s: s if s["generation"] > first["generation"] and s["events"] > first["events"]
                                    else None)(v.json("/api/status")), 30, "a new analysis with more events")
        assert_true(growing["growing"] and growing["cut_short"], "a recording in progress is growing: %s" % growing)
        assert_eq(rec.wait(timeout=60 * SLOW), 0, "fennec record's exit status")
        final = wait_for(lambda: (lambda s: s if not s["cut_short"] else None)(v.json("/api/status")), 30,
                         "the analysis of the finished recording")
        rep = analyze("live.fnc")
        a = wait_for(lambda: (lambda a: a if a["summary"]["events"] == rep["summary"]["events"] else None)(
            v.json("/api/analysis")), 10, "/api/analysis of the finished file")
        assert_eq(a["regions"][0]["count"], rep["regions"][0]["count"], "spin calls in the final analysis")
        assert_eq(final["growing"], False, "a finished recording is not growing")
    finally:
        stop_recording(rec)
        assert_eq(v.stop(), 0, "exit status")


@timeout(400)
def test_browser_live_dashboard():
    """The dashboard in a real browser on a recording in progress: it draws every chart,
    then replaces its data as the recording grows, with no errors."""
    rec = start_recording(120)
    v = Viewer("live.fnc")
    try:
        doc = browse(v.url, os.path.abspath("shots"), "--live", "2")
        assert_clean_page(doc)
        assert_eq(doc["external_requests"], [], "requests leaving the page")
        assert_charts_drawn(doc, {"summary": ["chart-breakdown", "chart-steps"], "operations": ["chart-timeline"]})
        assert_true(doc["live"]["updates"] >= 3, "the page took new data: %s" % doc["live"])
        assert_true("live" in doc["live"]["status"], "the page says it is live: %r" % doc["live"]["status"])
        for cid, c in doc["tabs"]["summary_after_update"]["charts"].items():
            assert_true(c["rendered"] and c["drawn_pixels"] > 200, "after an update, %s: %s" % (cid, c))
    finally:
        stop_recording(rec)
        assert_eq(v.stop(), 0, "exit status")


@timeout(300)
def test_wrk_load():
    """A bounded load (wrk, 2 threads, 16 connections, 3 s per endpoint) on loopback is
    served without socket errors or non-2xx answers, and the server still answers after."""
    wrk = shutil.which("wrk")
    if not wrk:
        raise Skip("wrk is not installed (Debian package wrk; make deps installs it)")
    _, path = record("nested", 200)
    v = Viewer(path)
    try:
        for ep in ("/api/status", "/api/analysis", "/api/page", "/"):
            r = subprocess.run([wrk, "-t2", "-c16", "-d3s", "--timeout", "10s",
                                "http://127.0.0.1:%d%s" % (v.port, v.with_token(ep))],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60 * SLOW, env=base_env())
            out = r.stdout.decode()
            assert_eq(r.returncode, 0, "wrk on %s: %s %s" % (ep, out, r.stderr.decode()))
            m = re.search(r"(\d+) requests in", out)
            assert_true(m and int(m.group(1)) > 0, "wrk made no requests on %s:\n%s" % (ep, out))
            assert_true("Socket errors" not in out, "socket errors on %s:\n%s" % (ep, out))
            assert_true("Non-2xx" not in out, "non-2xx answers on %s:\n%s" % (ep, out))
        assert_eq(v.json("/api/status")["error"], None, "status after the load")
    finally:
        assert_eq(v.stop(), 0, "exit status")


@timeout(400)
def test_timeline_detail_of_a_window():
    """/api/timeline gives the calls of a window with the whole interval budget: finer than
    the full timeline, only calls that overlap the window, every call accounted for; and
    the dashboard loads it when the user zooms into a reduced timeline."""
    _, path = record("flood", 400000, opts=("--buffer-kb", "32768", "--sample=off"), timeout_s=300)
    v = Viewer(path)
    try:
        full = v.json("/api/page")["timeline"]
        assert_true(full["blocks"] > 0 and full["resolution_ns"] > 0, "the full timeline is reduced: %s" % {
            k: x for k, x in full.items() if not isinstance(x, list)})
        # a window of 2 % of where the calls are, in their middle (a fixed share of the span
        # found none when the start-up or the final flush took most of it on a busy machine)
        starts = sorted(full["start_ns"])
        lo = starts[len(starts) // 2]
        hi = lo + max((starts[-1] - starts[0]) // 50, 1)
        tl = v.json("/api/timeline?from_ns=%d&to_ns=%d" % (lo, hi))["timeline"]
        assert_eq((tl["from_ns"], tl["to_ns"]), (lo, hi), "the window")
        assert_true(0 < tl["calls"] < full["calls"], "calls in the window: %d of %d" % (tl["calls"], full["calls"]))
        assert_true(tl["resolution_ns"] < full["resolution_ns"], "finer in the window: %d vs %d ns" % (
            tl["resolution_ns"], full["resolution_ns"]))
        assert_eq(sum(tl["count"]), tl["calls"], "calls the window's intervals stand for")
        for i in range(tl["intervals"]):
            s, e = tl["start_ns"][i], tl["start_ns"][i] + tl["dur_ns"][i]
            assert_true(s < hi and e >= lo, "interval [%d, %d] outside the window [%d, %d]" % (s, e, lo, hi))
        for q in ("", "?from_ns=5", "?from_ns=9&to_ns=3", "?from_ns=-1&to_ns=3", "?from_ns=1e3&to_ns=5000"):
            code, _, body = v.get("/api/timeline" + q)
            assert_eq(code, 400, "GET /api/timeline%s (%r)" % (q, body[:100]))
        doc = browse(v.url, os.path.abspath("shots"))
        assert_clean_page(doc)
        z = doc["zoom"]["chart-timeline"]
        assert_true(z.get("detail_loads", 0) >= 1 and z["note"].startswith("Zoomed"),
                    "zooming the dashboard's timeline loads the window's detail: %s" % z)
    finally:
        assert_eq(v.stop(), 0, "exit status")


@timeout(300)
def test_record_view():
    """fennec record --view=0: serves while it records (an older file of the same name is
    not shown), goes on serving the finished recording, and exits with the program's
    status when stopped."""
    _, old = record("nested", 50, out="rv.fnc")  # an older recording at the same path
    old_events = analyze(old)["summary"]["events"]
    cmd, env = record_command(fixture("spinner"), [2], out="rv.fnc", opts=("--view=0",))
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        line = p.stdout.readline().decode()
        m = re.search(r"fennec record: serving .*rv\.fnc at " + URL_RE, line)
        assert_true(m, "fennec record --view did not say where it serves: %r" % line)
        v = Viewer.__new__(Viewer)
        v.set_url(m)
        seen = []

        def status():
            st = v.json("/api/status")
            seen.append(st)
            return st
        wait_for(lambda: status()["cut_short"] and status()["events"] > 0, 30, "the recording in progress")
        shown_old = [s for s in seen if s["generation"] and not s["cut_short"] and s["events"] == old_events]
        assert_eq(shown_old, [], "statuses showing the older, finished recording at the same path")
        line = p.stdout.readline().decode()
        assert_true("the recording ended (exit status 0)" in line and "still serving" in line and v.url in line,
                    "the end of the recording is said, with the same URL (%s): %r" % (v.url, line))
        st = wait_for(lambda: (lambda s: s if not s["cut_short"] else None)(status()), 30, "the finished recording")
        rep = analyze("rv.fnc")
        assert_eq(st["events"], rep["summary"]["events"], "events of the finished recording")
        assert_eq(v.json("/api/analysis")["regions"][0]["count"], rep["regions"][0]["count"], "spin calls served")
        p.send_signal(signal.SIGTERM)
        assert_eq(p.wait(timeout=30 * SLOW), 0, "exit status (the program's)")
        err = p.stderr.read().decode()
        for marker in ("ERROR: AddressSanitizer", "runtime error:"):
            assert_true(marker not in err, "sanitizer report:\n" + err[-3000:])
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def job_with_gpu():
    """Two fake ranks (rank 1 the slowest), rank 0's file with GPU activity added: a
    dashboard with both a GPU and a Ranks tab."""
    record_ranks()
    _, counts = gpu_recording(base="job/run.rank0.fnc")
    return "job", counts


def test_api_gpu_and_ranks():
    """/api/page carries the GPU section, the GPU lanes of the timeline and each rank's
    step times; /api/timeline's window has the GPU intervals of that window, named by
    stream as in the full timeline."""
    path, counts = job_with_gpu()
    v = Viewer(path)
    try:
        page = v.json("/api/page")
        g = page["analysis"].get("gpu")
        assert_true(g, "a gpu section in /api/page")
        assert_eq({k["name"]: k["count"] for k in g["kernels"]}, counts, "kernels and their launches")
        assert_eq(sorted(r["rank"] for r in page["rank_steps"]), [0, 1], "step times of both ranks")
        assert_eq(page["analysis"]["balance"]["slowest_rank"], 1, "the slowest rank")
        tl = page["timeline"]
        assert_eq(tl["gpu_work"], 6, "GPU work on the timeline")
        base = tl["gpu_lane_base"]
        kern = [i for i in range(tl["intervals"]) if tl["thread"][i] >= base and tl["depth"][i] == 0]
        first = min(tl["start_ns"][i] for i in kern)
        w = v.json("/api/timeline?from_ns=%d&to_ns=%d" % (first, first + 1000))["timeline"]
        assert_eq(w["gpu_work"], 1, "the window holds the first kernel only")
        lanes = [w["gpu_lanes"][w["thread"][i] - w["gpu_lane_base"]] for i in range(w["intervals"])
                 if w["thread"][i] >= w["gpu_lane_base"]]
        assert_eq([(l["device"], l["stream"]) for l in lanes], [(0, 1)], "the first kernel's stream")
    finally:
        assert_eq(v.stop(), 0, "exit status")


@timeout(400)
def test_browser_live_gpu_and_ranks():
    """The dashboard of a job with GPU activity: the GPU and Ranks tabs drawn, and drawn
    again after live updates (the files touched while the page is open), with no errors."""
    path, counts = job_with_gpu()
    v = Viewer(path)
    stop = threading.Event()

    def touch():
        while not stop.wait(0.7):
            for f in os.listdir("job"):
                os.utime(os.path.join("job", f))

    t = threading.Thread(target=touch, daemon=True)
    t.start()
    try:
        doc = browse(v.url, os.path.abspath("shots"), "--live", "2")
        assert_clean_page(doc)
        assert_escaped(doc)
        assert_true("gpu" in doc["tab_buttons"] and "ranks" in doc["tab_buttons"], "tabs: %s" % doc["tab_buttons"])
        assert_charts_drawn(doc, {"gpu": ["chart-gpu-kernels", "chart-gpu-util"], "ranks": ["chart-rank-steps"]})
        assert_true(doc["live"]["updates"] >= 3, "the page took new data: %s" % doc["live"])
        for tab in ("gpu_after_update", "ranks_after_update"):
            charts = doc["tabs"][tab]["charts"]
            assert_true(charts, "charts of %s" % tab)
            for cid, c in charts.items():
                if c["visible"]:
                    assert_true(c["rendered"] and c["drawn_pixels"] > 200, "%s, %s: %s" % (tab, cid, c))
        got = {r[0]: int(r[1]) for r in doc["tables"]["gpu-kernel-table"][1:]}
        assert_eq(got, counts, "kernel table")
        slow = [r[0] for r in doc["tables"]["rank-table"][1:] if "slowest" in r[0]]
        assert_eq(slow, ["rank 1 slowest"], "rank 1 marked the slowest")
    finally:
        stop.set()
        t.join()
        assert_eq(v.stop(), 0, "exit status")
