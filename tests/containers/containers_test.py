#!/usr/bin/env python3
"""Deployment files proven in real containers (podman with runc here; docker
where an engine runs): the image, docker-compose.yml through a compose
implementation, and the Kubernetes overlays rendered by kustomize and played
as the Pods Kubernetes would create (kube_pods.py), one network namespace per
pod. Every container, network and volume a test starts is removed.

The image is built once, from this machine's build (scripts/image.sh
--from-host: the same Dockerfile and runtime stage, the binaries taken from
build/ instead of compiled a second time)."""

import atexit
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
BIN = os.environ.get("TPUEMU_BIN", os.path.join(ROOT, "build/bin"))
IMAGE = os.environ.get("TPUEMU_IMAGE", "localhost/tpuemu:dev")
DP_JOB = os.path.join(ROOT, "examples/jobs/dp.yaml")


def publishable_port():
    """A port for compose to publish on this machine's loopback: free, outside
    the kernel's ephemeral range, and named by no NAT rule. The engine
    publishes a port with a DNAT rule that takes every connection to it,
    whoever listens there, and a run killed before its teardown leaves the rule
    behind: a CI run met one from a killed run, and a later test's server, given
    the same port by bind(0), was unreachable ("Connection refused"). Outside
    the ephemeral range no port-0 server is ever given it."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    nat = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True).stdout \
        if shutil.which("iptables-save") else ""
    ruled = {int(p) for p in re.findall(r"--dport (\d+)", nat)}
    for _ in range(100):
        port = random.randrange(10000, max(10001, ephemeral_low))
        if port in ruled:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise AssertionError(f"no free port below the ephemeral range ({ephemeral_low}) to publish")


def container_env():
    """The environment scripts/container-env.sh gives podman."""
    out = subprocess.run(["bash", "-c", "source scripts/container-env.sh && env"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


ENV = container_env()
ENGINE = "docker" if "docker" in subprocess.run(["bash", "-c", "source scripts/container-env.sh && echo $ENGINE"],
                                                cwd=ROOT, capture_output=True, text=True).stdout else "podman"


def run(*argv, check=True, timeout=300, **kw):
    r = subprocess.run(list(argv), env=kw.pop("env", ENV), capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def engine(*args, **kw):
    return run(ENGINE, *args, **kw)


# The pods' credentials (docs/security.md), made once, given to the image's
# user (10001): compose mounts them as a secret, the Kubernetes tests as the
# Secret tpuemu-credentials; the CLI on this machine presents the CA and the
# admin token.
CREDENTIALS = tempfile.mkdtemp(prefix="tpuemu-credentials-")
os.rmdir(CREDENTIALS)
subprocess.run([os.path.join(BIN, "tpuemu"), "credentials", "create", CREDENTIALS, "--uid", "10001"], check=True,
               capture_output=True)
os.chmod(CREDENTIALS, 0o755)  # the containers' user crosses it (its files stay 0600, that user's)
atexit.register(shutil.rmtree, CREDENTIALS, True)
CLIENT_ENV = {"TPUEMU_TLS_CA": f"{CREDENTIALS}/ca.pem", "TPUEMU_TOKEN_FILE": f"{CREDENTIALS}/admin.token"}


def http_get(url, token=True):
    """GET as Prometheus would scrape it: with the pod's admin token, unless told not to."""
    with open(CLIENT_ENV["TPUEMU_TOKEN_FILE"]) as f:
        headers = {"Authorization": f"Bearer {f.read().strip()}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
        return r.read().decode()


def host_cli(*args, timeout=300):
    env = {k: v for k, v in os.environ.items() if k != "TPUEMU_COORDINATOR"}
    return run(os.path.join(BIN, "tpuemu"), *args, check=False, timeout=timeout, env=dict(env, **CLIENT_ENV))


_reference = {}


def reference(job):
    if job not in _reference:
        _reference[job] = json.loads(host_cli("reference", job, "--json").stdout)
    return _reference[job]


def wait_until(what, predicate, timeout=60, every=0.5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def setUpModule():
    t0 = time.time()
    r = run("bash", "scripts/image.sh", "--from-host", cwd=ROOT, timeout=1200)
    print(f"\n{r.stdout.strip()} ({time.time() - t0:.0f} s)", file=sys.stderr)


def kill9_and_start(container):
    """SIGKILL, then start again once the engine has it exited (starting it
    sooner fails: "container state improper"), unless its restart policy
    already started it again."""
    def state():
        r = engine("inspect", "--format", "{{.State.Status}} {{.State.Pid}}", container, check=False)
        return r.stdout.split() or ["unknown", "0"]
    pid = state()[1]
    engine("kill", "--signal", "KILL", container)
    wait_until(f"{container} to exit", lambda: state()[0] in ("exited", "stopped") or
               (state()[0] == "running" and state()[1] != pid), timeout=30, every=0.1)
    if state()[0] != "running":
        start(container)


def crash_and_wait_for_restart(container):
    """SIGKILL to the container's process from this machine, as a crash (the
    engine did not stop it): its restart policy starts it again."""
    def state():
        r = engine("inspect", "--format", "{{.State.Status}} {{.State.Pid}}", container, check=False)
        return r.stdout.split() or ["unknown", "0"]
    pid = int(state()[1])
    os.kill(pid, signal.SIGKILL)
    wait_until(f"{container} started again by its restart policy",
               lambda: state()[0] == "running" and int(state()[1]) not in (0, pid), timeout=60, every=0.2)


def start(container, timeout=60):
    """`start`, tried again while the engine still settles the container's pod:
    a pod made by `kube play` stops its infra container once its last container
    exits, and a start during that fails with "container state improper" (a CI
    run saw it right after the coordinator's SIGKILL)."""
    deadline = time.time() + timeout
    while True:
        r = engine("start", container, check=False)
        if r.returncode == 0:
            return
        if "state improper" not in r.stderr or time.time() > deadline:
            raise AssertionError(f"{ENGINE} start {container} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        time.sleep(0.5)


# What a stranger on the pod's network tries: the coordinator in plaintext,
# with the pod's CA (not secret) but no token, and with a made-up token; a
# worker in plaintext and over TLS without the pod's certificate.
STRANGER = r"""
try() { out=$("$@" 2>&1); echo "== $? $(echo "$out" | tr '\n' ' ')"; }
try tpuemu --insecure --coordinator "$1" jobs
try env TPUEMU_TLS_CA=/ca.pem tpuemu --coordinator "$1" jobs
try env TPUEMU_TLS_CA=/ca.pem TPUEMU_TOKEN=0123456789abcdef tpuemu --coordinator "$1" cancel job-1
try env TPUEMU_INSECURE=1 tpuemu health --timeout 3 "$2"
try env TPUEMU_TLS_CA=/ca.pem tpuemu health --timeout 3 "$2"
"""


def assert_strangers_refused(test, network, coordinator, worker):
    """A container of its own (another network namespace) on `network`, with
    the pod's CA and nothing else, reaches no RPC of the pod."""
    r = engine("run", "--rm", "--network", network, "-v", f"{CREDENTIALS}/ca.pem:/ca.pem:ro", IMAGE,
               "sh", "-c", STRANGER, "stranger", coordinator, worker)
    said = [line[3:] for line in r.stdout.splitlines() if line.startswith("== ")]
    print(f"\na stranger on {network}:\n  " + "\n  ".join(said), file=sys.stderr)
    test.assertEqual(len(said), 5, r.stdout + r.stderr)
    for line, expected in zip(said, ["closed the connection", "no credentials", "token was not accepted",
                                     "UNREACHABLE", "UNREACHABLE"]):
        test.assertNotEqual(line.split()[0], "0", line)
        test.assertIn(expected, line)


class Case(unittest.TestCase):
    def assert_equals_reference(self, job, ref):
        self.assertEqual(job["state"], "succeeded", job.get("error"))
        self.assertEqual(len(job["steps"]), len(ref["steps"]))
        for got, want in zip(job["steps"], ref["steps"]):
            self.assertAlmostEqual(got["loss"], want["loss"], delta=1e-5 * want["loss"])
        self.assertAlmostEqual(job["summary"]["param_l2"], ref["param_l2"], delta=1e-5 * ref["param_l2"])


class ImageTest(Case):
    def test_binaries_run_as_the_non_root_user_without_compilers(self):
        r = engine("run", "--rm", IMAGE, "sh", "-c",
                   "id -u; tpuemu --help >/dev/null && tpuemu-worker --help >/dev/null && "
                   "tpuemu-coordinator --help >/dev/null && echo helps; "
                   "for c in gcc cc c++ g++ clang make; do command -v $c; done; true")
        lines = r.stdout.split()
        self.assertEqual(lines[0], "10001", "the image must run as its non-root user")
        self.assertIn("helps", lines)
        self.assertEqual(lines[2:], [], f"compilers in the runtime image: {lines[2:]}")


class BridgeTest(Case):
    def test_a_pinned_bridge_keeps_its_mac_and_dns_answers_when_its_mac_giver_leaves(self):
        """scripts/pin-bridge-mac.sh: the container whose port gave the bridge
        its MAC leaves, and the others' name lookups are still answered (without
        the pin, netavark 1.4's bridge took another MAC and every lookup from the
        others went unanswered for up to a minute)."""
        if ENGINE != "podman":
            self.skipTest("docker sets its bridges' MACs")
        network = f"tpuemu-bridge-{os.getpid()}"
        names = [f"{network}-{i}" for i in range(4)]
        engine("network", "create", network)
        self.addCleanup(engine, "network", "rm", "-f", network, check=False)
        self.addCleanup(engine, "rm", "-f", "-t", "0", *names, check=False)
        bridge = engine("network", "inspect", network, "--format", "{{.NetworkInterface}}").stdout.strip()
        ports = {}  # bridge port -> the container it belongs to
        for name in names:
            before = set(os.listdir(f"/sys/class/net/{bridge}/brif")) if os.path.exists(f"/sys/class/net/{bridge}") else set()
            engine("run", "-d", "--name", name, "--network", network, IMAGE, "sleep", "300")
            ports.update({port: name for port in set(os.listdir(f"/sys/class/net/{bridge}/brif")) - before})
            if name == names[0]:
                run("bash", "scripts/pin-bridge-mac.sh", network, cwd=ROOT)
        def mac(dev):
            with open(f"/sys/class/net/{dev}/address") as f:
                return f.read().strip()
        pinned = mac(bridge)
        giver = next((ports[p] for p in ports if mac(p) == pinned), names[0])
        others = [n for n in names if n != giver]
        def lookups():  # each from another container, of the first of the rest, within 3 s
            return [engine("exec", n, "timeout", "3", "getent", "hosts", others[0], check=False).returncode for n in others]
        self.assertEqual(lookups(), [0] * len(others))  # and so each knows the gateway's MAC
        engine("rm", "-f", "-t", "0", giver)
        self.assertEqual(mac(bridge), pinned)
        self.assertEqual(lookups(), [0] * len(others))


class Compose(Case):
    """docker-compose.yml through scripts/compose.sh, a project of its own."""

    def setUp(self):
        self.project = f"tpuemutest{os.getpid()}"
        self.remove_leftovers()
        self.port = str(publishable_port())
        self.metrics_port = str(publishable_port())
        self.addCleanup(self.down)

    def remove_leftovers(self):
        """Containers and networks of compose projects that runs killed before
        their teardown left (each run's project is named after its process,
        which is gone): removed first, and said."""
        if ENGINE != "podman":
            return
        ours = re.compile(r"tpuemutest(\d+)(_.*)?$")
        def stale(name):
            m = ours.match(name)
            return m is not None and not os.path.exists(f"/proc/{m.group(1)}")
        containers = [c for c in engine("ps", "-a", "--format", "{{.Names}}").stdout.split() if stale(c)]
        networks = [n for n in engine("network", "ls", "--format", "{{.Name}}").stdout.split() if stale(n)]
        if containers or networks:
            print(f"\nremoving what an earlier run left: {', '.join(containers + networks)}", file=sys.stderr)
        for c in containers:
            engine("rm", "-f", "-t", "0", c, check=False)
        for n in networks:
            engine("network", "rm", "-f", n, check=False)

    def compose(self, *args, check=True, **env):
        e = dict(ENV, COMPOSE_PROJECT_NAME=self.project, TPUEMU_PORT=self.port, TPUEMU_METRICS_PORT=self.metrics_port,
                 TPUEMU_CREDENTIALS=CREDENTIALS, **{k: str(v) for k, v in env.items()})
        return run("bash", "scripts/compose.sh", *args, cwd=ROOT, env=e, check=check, timeout=600)

    def down(self):
        self.compose("down", "-v", check=False)
        left = engine("ps", "-a", "--filter", f"label=io.podman.compose.project={self.project}", "--format",
                      "{{.Names}}").stdout.split() if ENGINE == "podman" else []
        nets = [n for n in engine("network", "ls", "--format", "{{.Name}}").stdout.split() if self.project in n]
        volumes = [v for v in engine("volume", "ls", "--format", "{{.Name}}").stdout.split() if self.project in v]
        self.assertEqual(left + nets + volumes, [], "compose down left containers, networks or volumes behind")

    def containers(self, service):
        return engine("ps", "--filter", f"name={self.project}_{service}_", "--format", "{{.Names}}").stdout.split()

    def healthy(self, name):
        # podman runs no healthcheck timers without systemd: run the check itself.
        return engine("healthcheck", "run", name, check=False).returncode == 0 if ENGINE == "podman" else \
            "healthy" in engine("inspect", "--format", "{{.State.Health.Status}}", name).stdout

    def coordinator(self):
        return f"localhost:{self.port}"

    def ready(self):
        return host_cli("health", self.coordinator()).returncode == 0


class ComposeTest(Compose):
    def test_two_slice_pod_scales_trains_like_one_device_and_leaves_nothing(self):
        # Two workers of four: the coordinator waits for the rest.
        self.compose("up", "-d", TPUEMU_WORKERS=2)
        wait_until("two workers", lambda: json.loads(host_cli("cluster", "status", "--coordinator", self.coordinator(),
                                                               "--json").stdout or "{}").get("registered_workers") == 2)
        self.assertFalse(self.ready())
        # Scaled to four: the new workers get the free places from the coordinator.
        self.compose("up", "-d", TPUEMU_WORKERS=4, check=False)
        wait_until("the pod to be ready", self.ready)
        services = self.containers("coordinator") + self.containers("worker")
        self.assertEqual(len(services), 5)
        for name in services:
            wait_until(f"{name} healthy", lambda: self.healthy(name), timeout=30)

        r = host_cli("--coordinator", self.coordinator(), "submit", DP_JOB, "--wait", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        job = json.loads(r.stdout)
        self.assertIn("dcn", job["summary"]["mesh"])
        self.assert_equals_reference(job, reference(DP_JOB))

        r = host_cli("--coordinator", self.coordinator(), "bench", "collective", "--op", "all-reduce", "--axes",
                     "x,y,dcn", "--bytes", "1MiB", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(json.loads(r.stdout)["results"][0]["correct"])

        def listed():
            jobs = self.compose("run", "--rm", "cli", "tpuemu", "jobs", "--json").stdout
            return json.loads(jobs[jobs.index("{"):jobs.rindex("}") + 1])["jobs"]
        before = listed()
        self.assertEqual([j["state"] for j in before], ["succeeded", "succeeded"])
        # The coordinator's metrics, scraped from the host as Prometheus would.
        metrics = dict(line.rsplit(" ", 1) for line in http_get(f"http://localhost:{self.metrics_port}/metrics").splitlines()
                       if not line.startswith("#"))
        with self.assertRaises(urllib.error.HTTPError) as refused:  # without the token: nothing
            http_get(f"http://localhost:{self.metrics_port}/metrics", token=False)
        self.assertEqual(refused.exception.code, 401)
        self.assertEqual(float(metrics['tpuemu_jobs{state="succeeded"}']), 2)
        self.assertEqual(float(metrics['tpuemu_steps_total{kind="train"}']), len(job["steps"]))
        self.assertEqual(float(metrics['tpuemu_steps_total{kind="collective"}']), 1)
        # The web view on the same port, where `cluster status` says (the published port).
        status = json.loads(host_cli("cluster", "status", "--coordinator", self.coordinator(), "--json").stdout)
        self.assertEqual(status["web"], f"http://localhost:{self.metrics_port}/")
        # Its page, and its job list is the CLI's.
        self.assertIn('<svg id="torus"', http_get(f"http://localhost:{self.metrics_port}/"))
        self.assertEqual([j["id"] for j in json.loads(http_get(f"http://localhost:{self.metrics_port}/api/jobs"))["jobs"]],
                         [j["id"] for j in before])
        # Each worker's own metrics on its container's port 9090, read at its address on the
        # compose network: its chips, and the steps it ran.
        for worker in self.containers("worker"):
            ip = engine("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                        worker).stdout.strip()
            own = dict(line.rsplit(" ", 1) for line in http_get(f"http://{ip}:9090/metrics").splitlines()
                       if not line.startswith("#"))
            chips = [float(v) for k, v in own.items() if k.startswith("tpuemu_worker_chips{")]
            runs = [float(v) for k, v in own.items() if k.startswith("tpuemu_worker_calls_total{") and 'call="run"' in k]
            self.assertEqual(chips, [2], worker)
            self.assertEqual(runs, [len(job["steps"]) + 1], worker)  # the training job's steps and the all-reduce
        network = engine("inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}",
                         worker).stdout.strip()
        assert_strangers_refused(self, network, "coordinator:50051", f"{ip}:8471")
        # The four worker containers share this machine's cores for multiplying: each named its
        # machine (the kernel's boot id) when it registered, and counted the others from the
        # names in the coordinator's configuration (worker/machine_share.h).
        for worker in self.containers("worker"):
            logs = engine("logs", worker, check=False)
            self.assertIn("4 worker(s) of the pod share this machine", logs.stdout + logs.stderr, worker)

        # The coordinator and a worker crash (SIGKILL from outside the engine): their restart
        # policy starts them again, and the job store is on a volume.
        for container in (self.containers("coordinator")[0], self.containers("worker")[0]):
            crash_and_wait_for_restart(container)
        wait_until("the pod to be ready after the restarts", self.ready, timeout=60)
        self.assertEqual(listed(), before)


class ComposePacedTest(Compose):
    def test_paced_all_gather_across_two_worker_containers_follows_the_emulated_clock(self):
        # v5p ring of 8 chips, 4 per container; links paced at W / S = 9e10 / 1800 = 50 MB/s.
        scale = 1800
        self.compose("up", "-d", TPUEMU_TOPOLOGY="v5p:8", TPUEMU_SLICES=1, TPUEMU_CHIPS_PER_HOST=4,
                     TPUEMU_WORKERS=2, TPUEMU_TIME_SCALE=scale)
        wait_until("the pod to be ready", self.ready)
        ratios = []
        for run_index in range(4):  # the first warms a fresh pod up (docs/clocks.md)
            r = host_cli("--coordinator", self.coordinator(), "bench", "collective", "--op", "all-gather", "--axes",
                         "x", "--bytes", "8MiB", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            res = json.loads(r.stdout)["results"][0]
            self.assertTrue(res["correct"])
            if run_index > 0:
                ratios.append(res["wall_s"] / (res["emulated_s"] * scale))
        print(f"\npaced 8 MiB all-gather over 2 containers, wall / (emulated x {scale}): "
              f"{', '.join(f'{r:.3f}' for r in ratios)}", file=sys.stderr)
        # Never faster than the emulated clock. Slower by at most 15% in the
        # best run: a busy minute of a shared 2-core machine (the containers
        # and the test's own processes on the same cores) only adds time, and
        # has measured 1.156 and 1.366 for one run while the others were
        # 1.05-1.07 (the middle run once reached 1.157). Pacing that is off
        # slows every run. A run past 1.5 means the pacing itself is off.
        for ratio in ratios:
            self.assertGreaterEqual(ratio, 0.95)
            self.assertLessEqual(ratio, 1.5)
        self.assertLessEqual(min(ratios), 1.15)


# kube play makes a volume for each claim and each ConfigMap a pod mounts, and
# a named one for each emptyDir (podman 4.3: the workers' "checkpoints", which
# removing their pods leaves behind).
KUBE_VOLUMES = ["tpuemu-coordinator-state", "tpuemu-profiles", "checkpoints"]


def remove_leftovers(pods):
    """What a run killed before its teardown left under the manifests' fixed
    names (a CI run once met a killed replica's pod and volume, and every
    Kubernetes test failed with "pod already exists"): removed first, and said.
    Networks of other runs are removed only when no container uses them."""
    left_pods = [p for p in engine("pod", "ls", "--format", "{{.Name}}").stdout.split() if p in pods]
    left_volumes = [v for v in engine("volume", "ls", "--format", "{{.Name}}").stdout.split() if v in KUBE_VOLUMES]
    if left_pods or left_volumes:
        print(f"\nremoving what an earlier run left: {', '.join(left_pods + left_volumes)}", file=sys.stderr)
    for p in left_pods:
        engine("pod", "rm", "-f", "-t", "0", p, check=False)
    for v in left_volumes:
        engine("volume", "rm", "-f", v, check=False)
    for n in engine("network", "ls", "--format", "{{.Name}}").stdout.split():
        if n.startswith("tpuemu-k8s-") and not n.startswith(f"tpuemu-k8s-{os.getpid()}-"):
            engine("network", "rm", n, check=False)


class Kubernetes(Case):
    """An overlay rendered, turned into Pods and played on a network of its own."""

    def play(self, overlay):
        rendered = run("kubectl", "kustomize", os.path.join(ROOT, "deploy/kubernetes/overlays", overlay)).stdout
        self.dir = tempfile.mkdtemp(prefix=f"tpuemu-{overlay}-")
        self.addCleanup(shutil.rmtree, self.dir, True)  # after the teardown below
        os.chmod(self.dir, 0o755)  # the containers' user (10001) reads job files here
        with open(os.path.join(self.dir, "rendered.yaml"), "w") as f:
            f.write(rendered)
        names = run(sys.executable, os.path.join(HERE, "kube_pods.py"), os.path.join(self.dir, "rendered.yaml"),
                    os.path.join(self.dir, "pods"), f"--secret=tpuemu-credentials={CREDENTIALS}").stdout.split()
        remove_leftovers(names)
        # A network of its own per test: one re-created under a name a finished
        # test used is where a CI run saw names resolve nowhere for a minute.
        self.network = f"tpuemu-k8s-{os.getpid()}-{self._testMethodName[5:30].replace('_', '-')}"
        engine("network", "create", self.network)
        self.pods = []
        # Named before anything can fail, so that the cleanup removes whatever was made.
        self.cli_container = f"tpuemu-k8s-cli-{os.getpid()}"
        self.addCleanup(self.teardown)
        for f in sorted(os.listdir(os.path.join(self.dir, "pods"))):
            engine("kube", "play", "--network", self.network, os.path.join(self.dir, "pods", f))
            if not self.pods:  # the network's bridge exists from its first container on
                run("bash", "scripts/pin-bridge-mac.sh", self.network, cwd=ROOT)
            self.pods.append(f[3:-5])
        self.assertEqual(sorted(self.pods), sorted(names))
        # The client runs in the cluster's network, as `kubectl exec` or an in-cluster job would.
        engine("run", "-d", "--rm", "--init", "--name", self.cli_container, "--network", self.network,
               "-v", f"{ROOT}/examples:/examples:ro", "-v", f"{self.dir}:/jobs:ro",
               "-v", f"{CREDENTIALS}:/etc/tpuemu/credentials:ro", "-e", "TPUEMU_COORDINATOR=tpuemu-coordinator:50051",
               "-e", "TPUEMU_TLS_CA=/etc/tpuemu/credentials/ca.pem",
               "-e", "TPUEMU_TOKEN_FILE=/etc/tpuemu/credentials/admin.token", IMAGE, "sleep", "3600")
        try:
            # The coordinator retries configuring every 15 s. Before the bridge's
            # MAC was pinned, a fresh network's first lookups took up to a minute.
            wait_until("the pod to be ready", lambda: self.cli("health", "tpuemu-coordinator:50051").returncode == 0,
                       timeout=120)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.diagnosis()}") from None
        # Each pod's address on the network, read until every one has one (a CI run read two pods'
        # at once as the same: a container between restarts shows no network yet).
        def addresses():
            return {engine("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                           f"{p}-{self.container_of(p)}", check=False).stdout.strip() for p in self.pods} - {""}
        wait_until("every pod's address", lambda: len(addresses()) == len(self.pods), timeout=30)
        self.assertEqual(len(addresses()), len(self.pods), "every pod has a network namespace of its own")

    def diagnosis(self):
        """What a failed wait leaves to read: the health check's answer and each container's last log lines."""
        lines = [f"health: {self.cli('health', 'tpuemu-coordinator:50051').stderr.strip()}"]
        for p in self.pods:
            name = f"{p}-{self.container_of(p)}"
            r = engine("logs", "--tail", "15", name, check=False)
            state = engine("inspect", "--format", "{{.State.Status}}", name, check=False).stdout.strip()
            ip = engine("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name,
                        check=False).stdout.strip()
            resolved = sorted({line.split()[0] for line in engine("exec", self.cli_container, "getent", "ahostsv4", p,
                                                                  check=False).stdout.splitlines()})
            lines.append(f"--- {name} ({state}, address {ip}; its name resolves to {resolved or 'nothing'})")
            lines.append((r.stdout + r.stderr).strip())
        # Name lookups from inside the first worker, timed: a bridge that
        # changed its MAC left them unanswered for up to a minute
        # (scripts/pin-bridge-mac.sh).
        workers = [p for p in self.pods if self.container_of(p) == "worker"]
        for p in self.pods:
            r = engine("exec", f"{workers[0]}-worker", "bash", "-c",
                       't=$(date +%s%N); a=$(getent ahostsv4 "$0" | head -1); '
                       'echo "${a:-nothing} after $(( ($(date +%s%N) - t) / 1000000 )) ms"', p, check=False, timeout=60)
            lines.append(f"{workers[0]} looks up {p}: {' '.join((r.stdout + r.stderr).split())}")
        return "\n".join(lines)

    def container_of(self, pod):
        return "coordinator" if pod == "tpuemu-coordinator" else "worker"

    def teardown(self):
        engine("rm", "-f", "-t", "0", self.cli_container, check=False)
        for p in self.pods:
            engine("pod", "rm", "-f", "-t", "2", p, check=False)
        for v in KUBE_VOLUMES:
            engine("volume", "rm", "-f", v, check=False)
        engine("network", "rm", "-f", self.network, check=False)
        left = [n for n in engine("pod", "ls", "--format", "{{.Name}}").stdout.split() if n in self.pods]
        left += [v for v in engine("volume", "ls", "--format", "{{.Name}}").stdout.split() if v in KUBE_VOLUMES]
        self.assertEqual(left, [], "pods or volumes left behind")

    def cli(self, *args):
        return engine("exec", self.cli_container, "tpuemu", *args, check=False)

    def status(self, job_id, timeout=30):
        """The job as `tpuemu status --json` shows it, asked until it answers (each
        `podman exec` of the CLI opens a new connection; before the bridge's MAC was
        pinned, their name lookups now and then waited for seconds)."""
        answers = []
        try:
            wait_until(f"`tpuemu status {job_id}` to answer",
                       lambda: answers.append(self.cli("status", job_id, "--json")) or answers[-1].stdout.strip(),
                       timeout=timeout, every=0.1)
        except AssertionError as e:
            last = answers[-1] if answers else None
            said = f"exit {last.returncode}: {last.stderr.strip()}" if last else "nothing"
            raise AssertionError(f"{e}; {len(answers)} tries, the last {said}\n{self.diagnosis()}") from None
        return json.loads(answers[-1].stdout)

    def train(self, job_path):
        r = self.cli("submit", job_path, "--wait", "--json")
        if r.returncode != 0:
            self.fail(f"exit {r.returncode}: {r.stderr}\n{self.diagnosis()}")
        return json.loads(r.stdout)


class KubernetesTest(Kubernetes):
    def test_two_slice_statefulsets_train_survive_a_killed_worker_and_take_it_back(self):
        self.play("two-slice")
        self.assert_equals_reference(self.train("/examples/jobs/dp.yaml"), reference(DP_JOB))

        # A long job; one worker container killed while it runs.
        with open(DP_JOB) as f:
            long_job = f.read().replace("steps: 10", "steps: 2000")
        with open(os.path.join(self.dir, "long.yaml"), "w") as f:
            f.write(long_job)
        submitted = self.cli("submit", "/jobs/long.yaml", "--json")
        self.assertEqual(submitted.returncode, 0, submitted.stderr)
        job_id = json.loads(submitted.stdout)["id"]
        wait_until("a few steps", lambda: len(self.status(job_id).get("steps", [])) >= 3)
        killed = time.time()
        engine("kill", "tpuemu-worker-s1-0-worker")
        # Generous waits: how soon the job ended is read from the coordinator's
        # own record below, not from how long reading it took (a CI run once saw
        # `status` go unanswered for 30 s right after the kill).
        wait_until("the job to fail", lambda: self.status(job_id, timeout=120).get("state", "running") != "running",
                   timeout=120, every=0.1)
        job = self.status(job_id, timeout=120)
        # When the coordinator ended the job, on the same machine's clock (reading
        # the status from another container may itself take seconds here).
        took = job["finished_unix_s"] - killed
        print(f"\nkilled worker container: job {job['state']} after {took:.2f} s: {job['error']}", file=sys.stderr)
        self.assertEqual(job["state"], "failed")
        self.assertLess(took, 5)
        self.assertIn("tpuemu-worker-s1-0", job["error"])

        # The worker restarted with the same identity takes its place again.
        start("tpuemu-worker-s1-0-worker")
        try:
            # As long as the first wait for the pod: a CI replica saw 60 s pass here,
            # before the bridge's MAC was pinned.
            wait_until("the pod to be ready again",
                       lambda: self.cli("health", "tpuemu-coordinator:50051").returncode == 0, timeout=120)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.diagnosis()}") from None
        status = json.loads(self.cli("cluster", "status", "--json").stdout)
        self.assertIn("tpuemu-worker-s1-0:8471", [w["address"] for w in status["workers"]])
        self.assert_equals_reference(self.train("/examples/jobs/dp.yaml"), reference(DP_JOB))

        # The coordinator killed and started again: its job store is on the claim.
        before = json.loads(self.cli("jobs", "--json").stdout)["jobs"]
        self.assertEqual([j["state"] for j in before], ["succeeded", "failed", "succeeded"])
        kill9_and_start("tpuemu-coordinator-coordinator")
        restarted = time.time()
        try:
            wait_until("the pod to be ready after the coordinator's restart",
                       lambda: self.cli("health", "tpuemu-coordinator:50051").returncode == 0, timeout=120)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.diagnosis()}") from None
        print(f"\ncoordinator killed and started again: ready after {time.time() - restarted:.1f} s", file=sys.stderr)
        self.assertEqual(json.loads(self.cli("jobs", "--json").stdout)["jobs"], before)

    def test_jobset_multislice_trains_like_one_device(self):
        self.play("jobset")
        status = json.loads(self.cli("cluster", "status", "--json").stdout)
        self.assertEqual(sorted(w["address"] for w in status["workers"]),
                         [f"tpuemu-slice-{j}-{p}:8471" for j in range(2) for p in range(2)])
        self.assert_equals_reference(self.train("/examples/jobs/dp.yaml"), reference(DP_JOB))

    def test_single_slice_runs_a_collective(self):
        self.play("single-slice")
        # The chip profiles' ConfigMap is mounted where TPUEMU_TOPOLOGY may name them.
        profiles = engine("exec", "tpuemu-worker-s0-1-worker", "ls", "/etc/tpuemu/profiles").stdout.split()
        self.assertEqual(profiles, ["v5p-slow-dcn.yaml"])
        assert_strangers_refused(self, self.network, "tpuemu-coordinator:50051", "tpuemu-worker-s0-1:8471")
        r = self.cli("bench", "collective", "--op", "all-gather", "--axes", "x,y", "--bytes", "1MiB", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(json.loads(r.stdout)["results"][0]["correct"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
