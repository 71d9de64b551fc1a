#!/usr/bin/env python3
"""The coordinator's web view (web/) in Debian's headless Chromium, on real local pods:

- the pod page draws the torus, a chip per chip and a link per directed link, for two
  topologies (2-D over two slices, and 3-D), counted here from the topology's own rules;
- a collective's hot links are exactly those its result's link_bytes names, with its bytes;
- three training jobs run at once: a running job's step count advances without a reload, its
  timeline is drawn, /metrics parses and agrees with `tpuemu jobs --json`;
- a worker killed mid-job: the page keeps updating and shows the worker lost, /metrics answers;
- no request left 127.0.0.1.

Screenshots go to build/test-artifacts/web/. Reuses cli_e2e_test's Pod: its own TPUEMU_HOME,
every process stopped."""

import json
import math
import os
import signal
import socket
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cli_e2e_test import BIN, DP_JOB, Pod  # noqa: E402
from headless_chromium import Chromium  # noqa: E402

SCREENSHOTS = os.path.join(BIN, "..", "test-artifacts", "web")
IDLE_COLOURS = {"#c5ccd6", "#9fb0c8"}  # web/assets/app.js: links that carried nothing


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(port, path, token):
    """GET as Prometheus or a script would: the pod's read token in the Authorization header."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as r:
        return r.read().decode()


def prometheus_samples(text):
    """Prometheus' text format, the lines this pod writes: `name{labels} value` or `name value`."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.rsplit(" ", 1)
        samples[key] = float(value)
    return samples


def expected_links(shape, slices, wrapping):
    """Directed links of a pod: on each axis, two per neighbouring pair along every line of
    chips (a ring of n has n pairs, a line n-1); DCN joins the same chip of neighbouring slices
    (a ring from 3 slices on)."""
    chips = math.prod(shape) * slices
    links = 0
    for axis, size in zip("xyz", shape):
        if size > 1:
            links += 2 * (size if axis in wrapping else size - 1) * (chips // size)
    if slices > 1:
        links += 2 * (slices if slices >= 3 else slices - 1) * (chips // slices)
    return links


class WebViewTest(Pod):
    def setUp(self):
        super().setUp()
        os.makedirs(SCREENSHOTS, exist_ok=True)
        self.browser = Chromium()
        self.addCleanup(self.browser.close)

    def up_with_web(self, *args):
        port = free_port()
        out = self.up(*args, "--http-port", str(port)).stdout
        self.assertIn(f"web view at http://127.0.0.1:{port}/?token={self.token()}", out)
        # `cluster status` says it again; --json without the token.
        status = self.cli("cluster", "status")
        self.assertIn(f"web view:    http://127.0.0.1:{port}/?token={self.token()}", status.stdout)
        self.assertEqual(json.loads(self.cli("cluster", "status", "--json").stdout)["web"], f"http://127.0.0.1:{port}/")
        return port

    def token(self):
        with open(os.path.join(self.home, "tls", "read.token")) as f:
            return f.read().strip()

    def jobs(self):
        return json.loads(self.cli("jobs", "--json").stdout)["jobs"]

    def assert_only_local_requests(self, port):
        self.assertTrue(self.browser.requested_urls)
        outside = [u for u in self.browser.requested_urls if not u.startswith(f"http://127.0.0.1:{port}/")]
        self.assertEqual(outside, [], "the page asked for something beyond the coordinator")

    def test_the_pod_page_draws_every_chip_and_link_of_two_topologies(self):
        for args, wrapping, name in [
            (("--topology", "v5p:2x2", "--slices", "2", "--chips-per-host", "2"), "", "v5p-2x2-2-slices"),
            (("--topology", "v4:2x2x2", "--chips-per-host", "4", "--wraparound", "x,y,z"), "xyz", "v4-2x2x2"),
        ]:
            with self.subTest(name):
                self.browser.requested_urls.clear()
                port = self.up_with_web(*args)
                pod = json.loads(fetch(port, "/api/pod", self.token()))
                with self.assertRaises(urllib.error.HTTPError) as refused:  # no token, nothing
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/pod", timeout=30)
                self.assertEqual(refused.exception.code, 401)
                chips = math.prod(pod["shape"]) * pod["slices"]
                links = expected_links(pod["shape"], pod["slices"], wrapping)
                page = self.browser.open(f"http://127.0.0.1:{port}/?token={self.token()}")
                page.wait_for(f"document.querySelectorAll('#torus [data-chip]').length === {chips}")
                self.assertEqual(page.evaluate("document.querySelectorAll('#torus [data-link]').length"), links)
                self.assertEqual(len(pod["links"]), links)
                drawn = page.evaluate("[...document.querySelectorAll('#torus [data-chip]')]"
                                      ".map(g => [+g.dataset.chip, +g.dataset.slice, +g.dataset.host])")
                self.assertEqual(drawn, [[c["id"], c["slice"], c["host"]] for c in pod["chips"]])
                page.wait_for("document.querySelector('#pod-ready').textContent === 'ready'")
                self.assertEqual(page.evaluate("location.search"), "")  # the token left the address bar
                shot = page.screenshot(os.path.join(SCREENSHOTS, f"pod-{name}.png"))
                with open(shot, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
                self.assert_only_local_requests(port)
                self.assertEqual(self.cli("cluster", "down").returncode, 0)
                # The page says it has lost the coordinator, and no longer calls the pod ready.
                page.wait_for("document.querySelector('#live').textContent === 'coordinator unreachable' && "
                              "document.querySelector('#pod-ready').textContent === 'pod state unknown'")

    def test_hot_links_live_steps_three_jobs_and_a_lost_worker(self):
        # Three slices of one host each: three one-slice jobs run at once.
        port = self.up_with_web("--topology", "v5p:2x2", "--slices", "3", "--chips-per-host", "4")

        # A collective along x: the page's hot links are its result's link_bytes, byte for byte.
        r = self.cli("bench", "collective", "--op", "all-gather", "--axes", "x", "--bytes", "1MiB", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        result = json.loads(r.stdout)["results"][0]
        used = {f"{l['src']}->{l['dst']} {l['axis']}{l['dir']}": l["bytes"] for l in result["link_bytes"] if l["bytes"]}
        self.assertTrue(used)
        page = self.browser.open(f"http://127.0.0.1:{port}/?token={self.token()}#job={result['job']}")
        page.wait_for("[...document.querySelectorAll('#torus [data-link]')].some(e => +e.dataset.bytes > 0)")
        self.assertEqual(page.evaluate("location.search + location.hash"), f"#job={result['job']}")
        drawn = page.evaluate("Object.fromEntries([...document.querySelectorAll('#torus [data-link]')]"
                              ".map(e => [e.dataset.link, [+e.dataset.bytes, e.getAttribute('stroke')]]))")
        hot = {link: b for link, (b, _) in drawn.items() if b > 0}
        self.assertEqual(hot, used)
        for link, (b, stroke) in drawn.items():
            self.assertEqual(stroke in IDLE_COLOURS, b == 0, f"{link}: {b} bytes drawn {stroke}")
        page.screenshot(os.path.join(SCREENSHOTS, "hot-links-all-gather-x.png"))
        # Asked for busy time, which a collective's result does not count: still its bytes, and why.
        page.evaluate("const s = document.querySelector('#colour-by'); s.value = 'busy_s';"
                      "s.dispatchEvent(new Event('change'))")
        self.assertIn("a collective's result counts no busy time", page.evaluate(
            "document.querySelector('#links-of').textContent"))
        strokes = page.evaluate("[...document.querySelectorAll('#torus [data-link]')].filter(e => +e.dataset.bytes > 0)"
                                ".map(e => e.getAttribute('stroke'))")
        self.assertTrue(strokes and not set(strokes) & IDLE_COLOURS, strokes)
        page.evaluate("const t = document.querySelector('#colour-by'); t.value = 'bytes';"
                      "t.dispatchEvent(new Event('change'))")
        # A collective is one step, done once it succeeded (it showed 0 of 1).
        row = next(j for j in json.loads(fetch(port, "/api/jobs", self.token()))["jobs"] if j["id"] == result["job"])
        self.assertEqual((row["steps_done"], row["steps_total"]), (1, 1))
        # The list leaves the heavy parts to /api/jobs/ID, in the result too.
        self.assertNotIn("link_bytes", row.get("result", {}))
        self.assertNotIn("link_bytes", row)
        page.evaluate("window.testMark = 'not reloaded'")
        # A job the coordinator does not keep (a bookmark from another pod): said so, and the
        # coordinator still counts as live.
        page.evaluate("location.hash = 'job=job-77'")
        page.wait_for("document.querySelector('#links-of').textContent.includes('job-77 is not kept by this coordinator')")
        self.assertEqual(page.evaluate("document.querySelector('#live').textContent"), "live")

        # Three long training jobs, one slice each, all running at once.
        long_job = os.path.join(self.home, "long.yaml")
        with open(DP_JOB) as f, open(long_job, "w") as g:
            g.write(f.read().replace("steps: 10", "steps: 100000") + "num_slices: 1\n")
        ids = []
        for _ in range(3):
            r = self.cli("submit", long_job, "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            ids.append(json.loads(r.stdout)["id"])
        deadline = time.time() + 60
        while time.time() < deadline and sum(j["state"] == "running" for j in self.jobs()) < 3:
            time.sleep(0.2)
        self.assertEqual(sorted(j["id"] for j in self.jobs() if j["state"] == "running"), sorted(ids))

        # The first one's page: its step count advances with no reload.
        page.evaluate(f"location.hash = 'job={ids[0]}'")
        page.wait_for(f"document.querySelector('#job-title').textContent.startsWith('{ids[0]}:') && "
                      "+document.querySelector('#step-count').dataset.steps > 0")
        before = int(page.evaluate("document.querySelector('#step-count').dataset.steps"))
        page.wait_for(f"+document.querySelector('#step-count').dataset.steps > {before}")
        self.assertEqual(page.evaluate("window.testMark"), "not reloaded")
        page.wait_for("document.querySelectorAll('#timeline rect.span').length > 0")
        page.wait_for("[...document.querySelectorAll('#torus [data-link]')].some(e => +e.dataset.bytes > 0)")
        # Its hot links are its own slice's.
        job = json.loads(fetch(port, f"/api/jobs/{ids[0]}", self.token()))
        pod = json.loads(fetch(port, "/api/pod", self.token()))
        own = {c["id"] for c in pod["chips"] if c["slice"] == job["placement"]["first_slice"]}
        hot = page.evaluate("[...document.querySelectorAll('#torus [data-link]')].filter(e => +e.dataset.bytes > 0)"
                            ".map(e => e.dataset.link)")
        self.assertTrue(hot)
        for link in hot:
            src, dst = link.split(" ")[0].split("->")
            self.assertTrue(int(src) in own and int(dst) in own, f"{link} is outside {ids[0]}'s slice")
        self.assertEqual(page.evaluate("document.querySelectorAll('#job-table tr[data-state=running]').length"), 3)
        page.screenshot(os.path.join(SCREENSHOTS, "three-jobs-running.png"))
        # The jobs on slices 1 and 2 too: their trace numbers their chips from 0, the page
        # draws them on their own slice (it drew slice 0's links for every job).
        for job_id in ids[1:]:
            job = json.loads(fetch(port, f"/api/jobs/{job_id}", self.token()))
            own = sorted(c["id"] for c in pod["chips"] if c["slice"] == job["placement"]["first_slice"])
            self.assertEqual(job["pod_chips"], own)
            links = json.loads(fetch(port, f"/api/jobs/{job_id}/links", self.token()))["links"]
            self.assertTrue(links)
            for link in links:
                src, dst = link.split(" ")[0].split("->")
                self.assertTrue(int(src) in own and int(dst) in own, f"{link} is outside {job_id}'s slice")
            page.evaluate(f"location.hash = 'job={job_id}'")
            page.wait_for(f"""(() => {{
                const own = new Set({own});
                const hot = [...document.querySelectorAll('#torus [data-link]')].filter(e => +e.dataset.bytes > 0)
                    .map(e => e.dataset.link.split(' ')[0].split('->').map(Number));
                return document.querySelector('#job-title').textContent.startsWith('{job_id}:') && hot.length > 0 &&
                    hot.every(([s, d]) => own.has(s) && own.has(d));
            }})()""")
        page.evaluate(f"location.hash = 'job={ids[0]}'")

        # What the page asks for each poll: the latest steps' spans only, not the whole trace.
        latest = json.loads(fetch(port, f"/api/jobs/{ids[0]}/trace.json?steps=2", self.token()))
        steps = {e["name"].split(":")[0] for e in latest["traceEvents"] if e.get("ph") == "X"}
        self.assertTrue(1 <= len(steps) <= 2, steps)
        # A page that does not exist, or another method than GET, is answered in words.
        with self.assertRaises(urllib.error.HTTPError) as missing:
            fetch(port, "/api/nope", self.token())
        self.assertEqual(missing.exception.code, 404)
        self.assertIn("no page /api/nope here", missing.exception.read().decode())
        posted = urllib.request.Request(f"http://127.0.0.1:{port}/api/pod", data=b"{}", method="POST",
                                        headers={"Authorization": f"Bearer {self.token()}"})
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(posted, timeout=30)
        self.assertEqual(refused.exception.code, 405)
        self.assertEqual(refused.exception.headers["Allow"], "GET, HEAD")
        self.assertIn("POST /api/pod: only GET (and HEAD) is served here", refused.exception.read().decode())
        # The token's scheme in any case (RFC 7235), and a dot in an asset's path only a dot.
        lower = urllib.request.Request(f"http://127.0.0.1:{port}/api/pod",
                                       headers={"Authorization": f"bearer {self.token()}"})
        self.assertEqual(urllib.request.urlopen(lower, timeout=30).status, 200)
        with self.assertRaises(urllib.error.HTTPError) as missing:
            fetch(port, "/appXjs", self.token())
        self.assertEqual(missing.exception.code, 404)
        with self.assertRaises(urllib.error.HTTPError) as refused:
            fetch(port, f"/api/jobs/{ids[0]}/trace.json?steps=0", self.token())
        self.assertEqual(refused.exception.code, 400)
        self.assertIn("steps=0", refused.exception.read().decode())

        # /metrics beside the page: it parses, and says what `tpuemu jobs --json` says.
        samples = prometheus_samples(fetch(port, "/metrics", self.token()))
        listed = self.jobs()
        for state in ("running", "succeeded", "failed"):
            self.assertEqual(samples[f'tpuemu_jobs{{state="{state}"}}'], sum(j["state"] == state for j in listed), state)

        # A worker killed under the second job: that job fails, the page and /metrics go on.
        victim = next(j for j in listed if j["id"] == ids[1])["placement"]["first_slice"]  # one host per slice
        os.kill(self.pod_file()["workers"][victim]["pid"], signal.SIGKILL)
        deadline = time.time() + 30
        while time.time() < deadline and next(j for j in self.jobs() if j["id"] == ids[1])["state"] == "running":
            time.sleep(0.2)
        polls = page.evaluate("window.tpuemuView.polls")
        page.wait_for(f"document.querySelector('#workers tr[data-host=\"{victim}\"]').dataset.state === 'lost'")
        page.wait_for(f"document.querySelector('#job-table tr[data-job=\"{ids[1]}\"]').dataset.state === 'failed'")
        page.wait_for(f"window.tpuemuView.polls > {polls + 2}")
        lost_chips = page.evaluate("[...document.querySelectorAll('#torus [data-chip].lost')].map(g => +g.dataset.host)")
        self.assertEqual(set(lost_chips), {victim})
        self.assertEqual(len(lost_chips), 4)
        self.assertEqual(page.evaluate("window.testMark"), "not reloaded")
        page.screenshot(os.path.join(SCREENSHOTS, "worker-lost.png"))
        samples = prometheus_samples(fetch(port, "/metrics", self.token()))
        up = {k: v for k, v in samples.items() if k.startswith("tpuemu_worker_up{")}
        self.assertEqual(sorted(v for v in up.values()), [0, 1, 1])
        self.assertEqual(samples['tpuemu_jobs{state="failed"}'], 1)
        self.assert_only_local_requests(port)


if __name__ == "__main__":
    unittest.main(verbosity=2)
