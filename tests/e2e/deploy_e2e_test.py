#!/usr/bin/env python3
"""The binaries as deployments start them, without containers: workers that
find their place from the TPU/MEGASCALE/StatefulSet environment or are
assigned one, refusals, health probes, SIGTERM, a restarted worker and a
restarted coordinator; and every command line and environment variable in
docker-compose.yml and the Kubernetes manifests, checked by the binaries
themselves (--check-config). Python standard library plus PyYAML."""

import atexit
import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "../..")
BIN = os.environ.get("TPUEMU_BIN", os.path.join(ROOT, "build/bin"))
sys.path.insert(0, os.path.join(ROOT, "tests/containers"))
import kube_pods  # noqa: E402

CLI11_PARSE_ERRORS = range(100, 120)  # CLI11's exit codes for a command line it refuses


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The pod's credentials, as a Secret would give them to every container
# (and the CLI the CA and admin token), made once for this file's tests.
CREDENTIALS = tempfile.mkdtemp(prefix="tpuemu-deploy-credentials-")
os.rmdir(CREDENTIALS)
subprocess.run([os.path.join(BIN, "tpuemu"), "credentials", "create", CREDENTIALS], check=True, capture_output=True)
atexit.register(shutil.rmtree, CREDENTIALS, True)


def clean_env(**extra):
    """The environment of a fresh container: no TPUEMU_, TPU_ or MEGASCALE_
    leftovers; the pod's credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TPUEMU_", "TPU_", "MEGASCALE_", "KUBERNETES_"))}
    env.update(TPUEMU_TLS_DIR=CREDENTIALS, TPUEMU_TLS_CA=f"{CREDENTIALS}/ca.pem",
               TPUEMU_TOKEN_FILE=f"{CREDENTIALS}/admin.token")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def with_hostname(hostname, argv):
    """argv in a UTS namespace of its own whose hostname is `hostname`."""
    unshare = ["unshare", "--uts"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--uts"]
    return [*unshare, "sh", "-c", 'hostname "$0" && exec "$@"', hostname, *argv]


class Processes(unittest.TestCase):
    def setUp(self):
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="tpuemu-deploy-")

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            p.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, argv, env, name):
        log = open(os.path.join(self.dir, name + ".log"), "w+")
        p = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        p.log = log
        self.procs.append(p)
        return p

    def log_of(self, p):
        p.log.flush()
        with open(p.log.name) as f:
            return f.read()

    def cli(self, *args, timeout=60):
        return subprocess.run([os.path.join(BIN, "tpuemu"), *args], env=clean_env(TPUEMU_HOME=self.dir),
                              capture_output=True, text=True, timeout=timeout)

    def wait_until(self, what, predicate, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return
            time.sleep(0.1)
        self.fail(f"timed out waiting for {what}")

    def stop(self, p, sig=signal.SIGTERM, within=10):
        t0 = time.time()
        p.send_signal(sig)
        p.wait(timeout=within)
        return time.time() - t0


class WorkerPlacesTest(Processes):
    """A two-slice pod (v5p:2x2, 2 slices, 2 chips per host: 4 workers) whose
    workers each find their place from a different source."""

    def start_coordinator(self, port):
        env = clean_env(TPUEMU_TOPOLOGY="v5p:2x2", TPUEMU_SLICES=2, TPUEMU_CHIPS_PER_HOST=2,
                        TPUEMU_LISTEN=f"127.0.0.1:{port}")
        return self.start([os.path.join(BIN, "tpuemu-coordinator")], env, "coordinator")

    def start_worker(self, name, args=(), **env):
        return self.start([os.path.join(BIN, "tpuemu-worker"), *args], clean_env(**env), name)

    def status(self, address):
        r = self.cli("cluster", "status", "--coordinator", address, "--json")
        return json.loads(r.stdout) if r.stdout else {}

    def test_places_from_every_source_refusals_health_and_restarts(self):
        port = free_port()
        addr = f"127.0.0.1:{port}"
        self.start_coordinator(port)
        self.wait_until("the coordinator to serve", lambda: self.cli("health", "--live", addr).returncode == 0)
        # Serving but not ready: no workers yet.
        not_ready = self.cli("health", addr, "--json")
        self.assertEqual(not_ready.returncode, 1)
        self.assertEqual(json.loads(not_ready.stdout)["status"], "NOT_SERVING")

        w00 = self.start_worker("w00", TPU_WORKER_ID=0, MEGASCALE_SLICE_ID=0, MEGASCALE_NUM_SLICES=2,
                                MEGASCALE_COORDINATOR_ADDRESS=addr)
        self.start_worker("w01", ["--slice", "0", "--host", "1", "--coordinator", addr])
        self.start(with_hostname("tpuemu-slice-1-0", [os.path.join(BIN, "tpuemu-worker")]),
                   clean_env(TPU_WORKER_HOSTNAMES="tpuemu-slice-1-0.tpuemu,tpuemu-slice-1-1.tpuemu",
                             MEGASCALE_SLICE_ID=1, TPUEMU_COORDINATOR=addr), "w10")
        # Nothing said: assigned the last free place. (Started last: an assigned
        # worker takes the first free place, which may be one another worker
        # means to claim; docs/deploy.md says not to mix the two in one slice.)
        self.wait_until("three workers", lambda: len(self.status(addr).get("workers", [])) == 3)
        self.start_worker("w11", TPUEMU_COORDINATOR=addr)
        self.wait_until("the pod to be ready", lambda: self.cli("health", addr).returncode == 0)
        places = {w["host"]: w for w in self.status(addr)["workers"]}
        self.assertEqual(sorted(places), [0, 1, 2, 3])
        self.assertEqual([places[h]["slice"] for h in range(4)], [0, 0, 1, 1])

        bench = self.cli("--coordinator", addr, "bench", "collective", "--op", "all-reduce", "--axes", "x,y,dcn",
                         "--bytes", "64KiB", "--json")
        self.assertEqual(bench.returncode, 0, bench.stderr)
        self.assertTrue(json.loads(bench.stdout)["results"][0]["correct"])

        # A second worker claiming a live worker's place: refused, naming both.
        twin = self.start_worker("twin", TPU_WORKER_ID=0, MEGASCALE_SLICE_ID=0, TPUEMU_COORDINATOR=addr)
        self.assertEqual(twin.wait(timeout=15), 2)
        log = self.log_of(twin)
        self.assertIn("slice 0 host 0", log)
        self.assertIn(places[0]["address"], log)
        self.assertIn("TPU_WORKER_ID=0", log)
        # A place outside the topology, and a pod of another size.
        for name, env, needle in [("far", {"TPU_WORKER_ID": 5}, "host 5 is outside its slice"),
                                  ("size", {"TPU_WORKER_ID": 0, "MEGASCALE_NUM_SLICES": 3},
                                   "MEGASCALE_NUM_SLICES=3")]:
            p = self.start_worker(name, TPUEMU_COORDINATOR=addr, **env)
            self.assertEqual(p.wait(timeout=15), 2, name)
            self.assertIn(needle, self.log_of(p))
        self.assertEqual(self.cli("health", addr).returncode, 0, "a refused worker must not disturb the pod")

        # SIGTERM: the worker drains and exits 0 at once; the pod is not ready
        # until a worker with the same identity comes back.
        self.assertLess(self.stop(w00), 8)
        self.assertEqual(w00.returncode, 0)
        self.wait_until("the pod to notice", lambda: self.cli("health", addr).returncode == 1)
        self.start_worker("w00-again", TPU_WORKER_ID=0, MEGASCALE_SLICE_ID=0, TPUEMU_COORDINATOR=addr)
        self.wait_until("the pod to be ready again", lambda: self.cli("health", addr).returncode == 0)
        bench = self.cli("--coordinator", addr, "bench", "collective", "--op", "all-gather", "--axes", "x,y",
                         "--bytes", "64KiB", "--json")
        self.assertEqual(bench.returncode, 0, bench.stderr)

        # The coordinator killed and started again on its address: every
        # worker registers again by itself, in the place it held.
        coordinator = self.procs[0]
        coordinator.kill()
        coordinator.wait()
        self.start_coordinator(port)
        self.wait_until("the workers to come back", lambda: self.cli("health", addr).returncode == 0, timeout=30)
        again = {w["host"]: w["address"] for w in self.status(addr)["workers"]}
        self.assertEqual(again[3], places[3]["address"], "the assigned worker kept its place")
        bench = self.cli("--coordinator", addr, "bench", "collective", "--op", "all-gather", "--axes", "dcn",
                         "--bytes", "64KiB", "--json")
        self.assertEqual(bench.returncode, 0, bench.stderr)

        coordinator = self.procs[-1]
        self.assertLess(self.stop(coordinator), 9)
        self.assertEqual(coordinator.returncode, 0)


def thp_mode():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return "unknown"


class HugePagesTest(Processes):
    """A worker asks malloc for transparent huge pages by restarting itself
    (same process) with glibc's tunable, unless told not to or told otherwise."""

    def tunables_of(self, name, **env):
        p = self.start_worker_bare(name, **env)
        self.wait_until("the worker's memory line", lambda: "malloc: " in self.log_of(p))
        self.assertIsNone(p.poll(), self.log_of(p))
        return self.log_of(p).split("malloc: GLIBC_TUNABLES=")[1].split(",")[0]

    def start_worker_bare(self, name, **env):
        # No coordinator answers at port 1: the worker keeps retrying, alive.
        return self.start([os.path.join(BIN, "tpuemu-worker"), "--slice", "0", "--host", "0",
                           "--coordinator", "127.0.0.1:1"], clean_env(**env), name)

    def test_the_tunable_is_added_kept_or_left_out(self):
        if thp_mode() != "madvise":
            self.skipTest(f"transparent huge pages are '{thp_mode()}' here, not 'madvise'")
        self.assertEqual(self.tunables_of("plain"), "glibc.malloc.hugetlb=1")
        self.assertEqual(self.tunables_of("others", GLIBC_TUNABLES="glibc.malloc.arena_max=4"),
                         "glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1")
        self.assertEqual(self.tunables_of("users", GLIBC_TUNABLES="glibc.malloc.hugetlb=0"), "glibc.malloc.hugetlb=0")
        self.assertEqual(self.tunables_of("opted-out", TPUEMU_HUGE_PAGES="0"), "(unset)")


class CheckConfigTest(Processes):
    def run_check(self, binary, args=(), env=None, hostname=None):
        argv = [os.path.join(BIN, binary), *args, "--check-config"]
        if hostname:
            argv = with_hostname(hostname, argv)
        return subprocess.run(argv, env=clean_env(**(env or {})), capture_output=True, text=True, timeout=30)

    def test_a_misspelt_variable_is_named(self):
        r = self.run_check("tpuemu-coordinator", env={"TPUEMU_TOPOLGY": "v5p:2x2", "TPUEMU_TOPOLOGY": "v5p:2x2"})
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("TPUEMU_TOPOLGY", r.stdout + r.stderr)
        r = self.run_check("tpuemu-worker", env={"TPUEMU_COORDINATOR": "c:1", "TPU_WORKER_ID": "x"})
        self.assertEqual(r.returncode, 2)
        self.assertIn("TPU_WORKER_ID='x'", r.stdout + r.stderr)
        r = self.run_check("tpuemu-worker", env={})
        self.assertEqual(r.returncode, 2)
        self.assertIn("no coordinator", r.stdout + r.stderr)
        ok = self.run_check("tpuemu-worker", env={"MEGASCALE_COORDINATOR_ADDRESS": "c", "TPU_WORKER_ID": "1"})
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("coordinator: c:50051", ok.stdout)

    def assert_a_time_setting(self, binary, base, flag, variable, label, read, refused, most):
        """A time read from `flag` or `variable`: `read` maps (flag or variable, text) to what
        --check-config prints after `label`; each of `refused` is refused, naming whichever said it."""
        for (how, text), shown in read.items():
            args, env = ([f"{flag}={text}"], base) if how == "flag" else ([], dict(base, **{variable: text}))
            ok = self.run_check(binary, args, env=env)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            self.assertIn(f"{label}: {shown}", ok.stdout)
        for value in refused:
            r = self.run_check(binary, env=dict(base, **{variable: value}))
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(f"{variable} '{value}': expected a time above 0 and at most {most}", r.stdout + r.stderr)
            r = self.run_check(binary, [f"{flag}={value}"], env=base)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(f"{flag} '{value}'", r.stdout + r.stderr)

    def test_the_heartbeat_timeout_from_flag_or_variable_and_what_is_refused(self):
        self.assert_a_time_setting("tpuemu-coordinator", {"TPUEMU_TOPOLOGY": "v5p:2x2"}, "--heartbeat-timeout",
                                   "TPUEMU_HEARTBEAT_TIMEOUT", "heartbeat timeout",
                                   {("variable", "45s"): "45s", ("flag", "0.5"): "500ms"}, ("0", "-1", "fast", "2h"),
                                   "1h")

    def test_how_long_a_worker_keeps_a_jobs_memory_from_flag_or_variable_and_what_is_refused(self):
        base = {"TPUEMU_COORDINATOR": "c:1", "TPU_WORKER_ID": "0"}
        ok = self.run_check("tpuemu-worker", env=base)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("keep memory for: 30s", ok.stdout)
        self.assert_a_time_setting("tpuemu-worker", base, "--keep-memory-for", "TPUEMU_KEEP_MEMORY_FOR",
                                   "keep memory for", {("variable", "2m"): "2m", ("flag", "0.5"): "500ms"},
                                   ("0", "-1", "never", "25h"), "24h")

    def test_the_peer_links_congestion_control_from_flag_or_variable_and_what_is_refused(self):
        base = {"TPUEMU_COORDINATOR": "c:1", "TPU_WORKER_ID": "0"}
        def first_line(name):
            with open(f"/proc/sys/net/ipv4/{name}") as f:
                return f.read().strip()
        default = first_line("tcp_congestion_control")
        # cubic where this process may use it, else the machine's default (with a warning).
        usable = first_line("tcp_available_congestion_control" if os.geteuid() == 0 else
                            "tcp_allowed_congestion_control").split()
        shown = {(): "cubic" if "cubic" in usable else f"the machine's default ({default})",
                 ("--peer-tcp-congestion", "system"): f"the machine's default ({default})",
                 ("--peer-tcp-congestion=reno",): "reno"}  # reno: always built in and allowed
        for args, control in shown.items():
            ok = self.run_check("tpuemu-worker", list(args), env=base)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            self.assertIn(f"peer TCP congestion control: {control}\n", ok.stdout)
        ok = self.run_check("tpuemu-worker", env=dict(base, TPUEMU_PEER_TCP_CONGESTION="reno"))
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("peer TCP congestion control: reno\n", ok.stdout)
        for args, variable, named in ((["--peer-tcp-congestion", "warp"], None, "--peer-tcp-congestion 'warp'"),
                                      ([], "warp", "TPUEMU_PEER_TCP_CONGESTION 'warp'")):
            env = dict(base, TPUEMU_PEER_TCP_CONGESTION=variable) if variable else base
            r = self.run_check("tpuemu-worker", args, env=env)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(named, r.stdout + r.stderr)
            self.assertIn("allowed here: ", r.stdout + r.stderr)

    def check_container(self, where, command, env, hostname=None):
        """A container's command as its image would run it, asked of the binary itself
        (the credentials' paths inside the container read as this machine's copy)."""
        binary, args = command[0], list(command[1:])
        inside = ("/run/secrets", "/etc/tpuemu/credentials")
        env = {k: CREDENTIALS + str(v)[len(p):] if str(v).startswith(inside) else v
               for k, v in env.items() for p in [next((i for i in inside if str(v).startswith(i)), "")]}
        if binary in ("tpuemu-coordinator", "tpuemu-worker"):
            r = self.run_check(binary, args, env, hostname)
            self.assertEqual(r.returncode, 0, f"{where}: {command} {env}\n{r.stdout}{r.stderr}")
        elif binary == "tpuemu":
            # The CLI's commands (a probe, --help): a refused command line exits 100-119.
            r = subprocess.run([os.path.join(BIN, "tpuemu"), *args] + (["--timeout", "0.2"] if "health" in args else []),
                               env=clean_env(**env), capture_output=True, text=True, timeout=30)
            self.assertNotIn(r.returncode, CLI11_PARSE_ERRORS, f"{where}: {command}\n{r.stderr}")
        else:
            self.fail(f"{where}: {binary} is not one of the image's binaries")

    def test_every_compose_command_and_variable(self):
        with open(os.path.join(ROOT, "docker-compose.yml")) as f:
            text = f.read()
        # ${VAR:-default} as compose reads it with nothing set.
        compose = yaml.safe_load(re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", text))
        for name, service in compose["services"].items():
            env = service.get("environment", {})
            self.check_container(f"compose {name}", service["command"], env)
            test = service.get("healthcheck", {}).get("test")
            if test:
                self.check_container(f"compose {name} healthcheck", test.split() if isinstance(test, str) else test[1:],
                                     env)

    def test_every_manifest_command_and_variable(self):
        for overlay in ("single-slice", "two-slice", "jobset"):
            rendered = subprocess.run(["kubectl", "kustomize", os.path.join(ROOT, "deploy/kubernetes/overlays", overlay)],
                                      capture_output=True, text=True, timeout=60)
            self.assertEqual(rendered.returncode, 0, f"{overlay} does not render:\n{rendered.stderr}")
            docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
            pods = kube_pods.pods_from(docs)
            self.assertGreaterEqual(len(pods), 3, overlay)
            for pod in pods:
                for c in pod["spec"]["containers"]:
                    env = {e["name"]: e["value"] for e in c["env"]}
                    where = f"{overlay} pod {pod['metadata']['name']}"
                    self.check_container(where, c["command"] + c.get("args", []), env, pod["spec"]["hostname"])
                    for probe in ("readinessProbe", "livenessProbe"):
                        self.check_container(f"{where} {probe}", c[probe]["exec"]["command"], env)


if __name__ == "__main__":
    unittest.main(verbosity=2)
