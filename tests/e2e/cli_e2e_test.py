#!/usr/bin/env python3
"""End-to-end tests: the real tpuemu, tpuemu-coordinator and tpuemu-worker
binaries, started the way a user starts them, on 127.0.0.1.

Every test gets its own TPUEMU_HOME and stops every process it started."""

import json
import socket
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

BIN = os.environ.get("TPUEMU_BIN", os.path.join(os.path.dirname(__file__), "../../build/bin"))
TPUEMU = os.path.join(BIN, "tpuemu")
DP_JOB = os.path.join(os.path.dirname(__file__), "../../examples/jobs/dp.yaml")
ONE_SLICE_JOB = os.path.join(os.path.dirname(__file__), "../../examples/jobs/one-slice.yaml")


class Pod(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="tpuemu-e2e-")
        self.addCleanup(shutil.rmtree, self.home, True)  # after tearDown's `cluster down`
        self.env = dict(os.environ, TPUEMU_HOME=self.home)
        self.env.pop("TPUEMU_COORDINATOR", None)

    def tearDown(self):
        self.cli("cluster", "down")
        state = os.path.join(self.home, "pod.json")
        self.assertFalse(os.path.exists(state), "cluster down left its state behind")

    def cli(self, *args, timeout=120):
        return subprocess.run([TPUEMU, *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def write(self, name, text):
        """A file in this test's home; its path."""
        path = os.path.join(self.home, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def up(self, *args):
        r = self.cli("cluster", "up", "--local", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def pod_file(self):
        with open(os.path.join(self.home, "pod.json")) as f:
            return json.load(f)

    def pids(self):
        """The coordinator's, then the workers' by host."""
        state = self.pod_file()
        return [state["coordinator_process"]["pid"]] + [w["pid"] for w in state["workers"]]

    def submit_long_job(self):
        """examples/jobs/dp.yaml for 100000 steps, submitted; its id once its first step is done."""
        long_job = os.path.join(self.home, "long.yaml")
        with open(DP_JOB) as f, open(long_job, "w") as g:
            g.write(f.read().replace("steps: 10", "steps: 100000"))
        r = self.cli("submit", long_job)
        self.assertEqual(r.returncode, 0, r.stderr)
        job_id = r.stdout.split()[0]
        deadline = time.time() + 60
        while time.time() < deadline:
            if json.loads(self.cli("status", job_id, "--json").stdout)["steps"]:
                return job_id
            time.sleep(0.2)
        self.fail("the job ran no step in 60 s")

    def paced_all_reduce(self):
        """A pod of 4 workers (v5p:8) running an 8 MiB all-reduce paced to last seconds: a job to
        interrupt. The running `tpuemu bench` process."""
        self.up("--topology", "v5p:8", "--chips-per-host", "2", "--time-scale", "20000")
        bench = subprocess.Popen([TPUEMU, "bench", "collective", "--op", "all-reduce", "--axes", "x",
                                  "--bytes", "8MiB"], env=self.env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        self.assertIsNone(bench.poll(), "the collective ended before it could be interrupted")
        return bench

    def assert_fails(self, result, *needles):
        self.assertNotEqual(result.returncode, 0, result.stdout)
        for needle in needles:
            self.assertIn(needle, result.stderr)

    def assert_job_files_refused(self, cases):
        """Each (job file text, error needle): submit refuses it with exit 2."""
        bad = os.path.join(self.home, "bad.yaml")
        for text, needle in cases:
            with open(bad, "w") as f:
                f.write(text)
            r = self.cli("submit", bad)
            self.assert_fails(r, needle)
            self.assertEqual(r.returncode, 2, r.stderr)


class ClusterLifecycleTest(Pod):
    def test_a_failed_start_shows_its_own_log_lines_only(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = str(taken.getsockname()[1])
            self.up("--topology", "v5p:2x2", "--chips-per-host", "2")
            self.cli("cluster", "down")
            r = self.cli("cluster", "up", "--local", "--topology", "v5p:2x2", "--chips-per-host", "2", "--http-port",
                         port)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"cannot serve HTTP on 127.0.0.1:{port}", r.stderr)
        # The first pod's lines (the same log file) are not shown: they came first, and hid the reason.
        self.assertNotIn("pod ready", r.stderr)


    def test_up_bench_status_down(self):
        self.up("--topology", "v5e:4x4")
        status = json.loads(self.cli("cluster", "status", "--json").stdout)
        self.assertTrue(status["ready"])
        self.assertEqual(status["registered_workers"], 4)
        self.assertEqual(status["chips"], 16)
        # A worker answers the pod's own credentials; with only its CA it closes the
        # connection, and `health` says why rather than gRPC's bare "Socket closed".
        worker = status["workers"][0]["address"]
        self.assertEqual(self.cli("health", worker).returncode, 0)
        env = dict(self.env, TPUEMU_TLS_CA=os.path.join(self.pod_file()["tls_dir"], "ca.pem"))
        r = subprocess.run([TPUEMU, "health", worker, "--json"], env=env, capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("TPUEMU_TLS_DIR", json.loads(r.stdout)["hint"])
        # A name that does not resolve (or, with no DNS at hand, no answer in time) says what to try too.
        r = subprocess.run([TPUEMU, "health", "nosuchhost.invalid:50051", "--json", "--timeout", "5"],
                           env=dict(self.env, TPUEMU_INSECURE="1"), capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(json.loads(r.stdout)["hint"], "does not resolve|no answer within --timeout")
        # --token-file wins over the TPUEMU_TOKEN it defaults to (another pod's, say).
        env = dict(self.env, TPUEMU_TOKEN="another-pods-token")
        token = ["--token-file", os.path.join(self.pod_file()["tls_dir"], "admin.token")]
        self.assertNotEqual(subprocess.run([TPUEMU, "jobs"], env=env, capture_output=True, timeout=30).returncode, 0)
        r = subprocess.run([TPUEMU, *token, "jobs"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        # The local pod by the other name of its address: its credentials still apply.
        port = self.pod_file()["coordinator"].rsplit(":", 1)[1]
        r = self.cli("--coordinator", f"localhost:{port}", "jobs", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        # The 4 workers share this machine's cores for multiplying (--matmuls-at-once): each
        # names its machine when it registers, and once configured takes a quarter of the
        # CPUs it may use (fewer under a CPU quota), at least 1.
        share = max(1, len(os.sched_getaffinity(0)) // 4)
        for w in self.pod_file()["workers"]:
            with open(os.path.join(self.pod_file()["log_dir"], f"worker-s{w['slice']}-h{w['host']}.log")) as f:
                said = re.search(r"chips multiply (\d+) at a time: (\d+) worker\(s\) of the pod share this machine",
                                 f.read())
            self.assertIsNotNone(said, "a worker did not log its share")
            self.assertEqual(said.group(2), "4", said.group(0))
            self.assertTrue(1 <= int(said.group(1)) <= share, said.group(0))

        r = self.cli("bench", "collective", "--op", "all-gather", "--axes", "x", "--bytes", "64KiB,8MiB", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        results = json.loads(r.stdout)["results"]
        self.assertEqual(len(results), 2)
        for res in results:
            for key in ("op", "axes", "n", "bytes", "algorithm", "emulated_s", "predicted_s", "ratio", "wall_s",
                        "algbw_gbps", "busbw_gbps", "link_bytes", "correct"):
                self.assertIn(key, res)
            self.assertTrue(res["correct"])
            self.assertEqual(res["n"], 4)
            self.assertEqual(res["algorithm"], "line")  # v5e wraps only an axis of 16
        # Line all-gather of 8 MiB over 4 chips: the rightmost link carries 3 shards.
        big = results[1]
        self.assertEqual(max(l["bytes"] for l in big["link_bytes"]), 3 * (8 << 20) // 4)
        self.assertAlmostEqual(big["ratio"], 1.0, delta=0.05)
        # The seed's rule for a line (its v5e example): 3 hops of a quarter of V.
        self.assertAlmostEqual(big["seed_formula_s"], 3 * (8 << 20) / 4 / 4.5e10, delta=1e-9)
        self.assertAlmostEqual(big["seed_ratio"], big["emulated_s"] / big["seed_formula_s"], delta=1e-9)
        # `status` in text says what the collective did (it showed only the workers' memory).
        status = self.cli("status", big["job"])
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertIn("all-gather of 8MiB over x (4 chips, line): emulated", status.stdout)
        self.assertIn("result: correct; wall", status.stdout)

        table = self.cli("bench", "collective", "--op", "all-reduce", "--axes", "x,y", "--bytes", "1MiB")
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertIn("all-reduce", table.stdout)
        self.assertIn("yes", table.stdout)
        self.assertIn("seed_us", table.stdout)

    def test_matmuls_at_once_from_the_environment_reaches_every_worker(self):
        self.env["TPUEMU_MATMULS_AT_ONCE"] = "3"
        self.up("--topology", "v5e:2x2")
        for w in self.pod_file()["workers"]:
            with open(os.path.join(self.pod_file()["log_dir"], f"worker-s{w['slice']}-h{w['host']}.log")) as f:
                log = f.read()
            self.assertIn("chips multiply 3 at a time", log)
            self.assertNotIn("worker(s) of the pod share", log, "the machine's share overrode the variable")

    def test_second_up_over_a_running_pod_is_refused(self):
        self.up("--topology", "v5e:2x2")
        pids = self.pids()
        self.assert_fails(self.cli("cluster", "up", "--local", "--topology", "v5e:2x2"), "already running")
        self.assertEqual(self.pids(), pids, "the running pod's state was overwritten")
        self.assertEqual(self.cli("cluster", "status").returncode, 0)

    def test_down_stops_every_process(self):
        self.up("--topology", "v5e:4x2", "--chips-per-host", "2")
        pids = self.pids()
        self.assertEqual(len(pids), 5)
        self.assertEqual(self.cli("cluster", "down").returncode, 0)
        time.sleep(0.2)
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    self.assertEqual(f.read().split()[2], "Z", f"process {pid} still running")
            except FileNotFoundError:
                pass


class BadInputTest(Pod):
    def test_no_pod_running(self):
        self.assert_fails(self.cli("cluster", "status"), "no pod is running")
        self.assert_fails(self.cli("bench", "collective", "--op", "all-gather", "--axes", "x", "--bytes", "1MiB"),
                          "no pod is running")

    def test_bad_topologies_start_nothing(self):
        for args, needle in [
            (["--topology", "v5e4x4"], "expected CHIP:SHAPE"),
            (["--topology", "v7:4x4"], "allowed: v4, v5e, v5e-measured, v5p, v6e"),
            (["--topology", "v5e:4x4x4"], "1 to 2 dimensions"),
            (["--topology", "v5e:4x4", "--chips-per-host", "3"], "--chips-per-host '3'"),
            (["--topology", "v5p:3"], "--chips-per-host '4': must divide the 3 chips of slice 3 (4 is the default"),
            (["--topology", "v5e:4x4", "--time-scale", "-1"], "--time-scale"),
            (["--topology", "v5e:4x4", "--heartbeat-timeout", "0"], "--heartbeat-timeout '0': expected a time above 0"),
            (["--topology", "v5e:4x4", "--heartbeat-timeout", "-2"], "--heartbeat-timeout '-2'"),
            (["--topology", "v5e:4x4", "--heartbeat-timeout", "soon"], "--heartbeat-timeout 'soon'"),
            (["--topology", "v5e:4x4", "--heartbeat-timeout", "2h"], "at most 1h"),
            (["--topology", "v5e:4x4", "--keep-memory-for", "0"], "--keep-memory-for '0': expected a time above 0"),
            (["--topology", "v5e:4x4", "--keep-memory-for", "25h"], "at most 24h"),
            (["--topology", "v5e:4x4", "--keep-memory-for", "later"], "--keep-memory-for 'later'"),
        ]:
            self.assert_fails(self.cli("cluster", "up", "--local", *args), needle)
            self.assertFalse(os.path.exists(os.path.join(self.home, "pod.json")))

    def test_bad_bench_arguments(self):
        self.up("--topology", "v5e:4x4")
        cases = [
            (["--op", "all-sum", "--axes", "x", "--bytes", "1MiB"], "allowed: all-gather, reduce-scatter"),
            (["--op", "all-gather", "--axes", "w", "--bytes", "1MiB"], "unknown axis 'w'"),
            (["--op", "all-gather", "--axes", "z", "--bytes", "1MiB"], "has no axis z"),
            (["--op", "all-gather", "--axes", "dcn", "--bytes", "1MiB"], "--slices 2"),
            (["--op", "all-gather", "--axes", "x", "--bytes", "1002"], "use a multiple of 8 bytes"),
            (["--op", "all-gather", "--axes", "x", "--bytes", "12XB"], "--bytes '12XB'"),
            (["--op", "all-gather", "--axes", "x", "--bytes", "1MiB", "--algorithm", "bi-ring"], "no wraparound"),
            (["--op", "all-gather", "--axes", "x", "--bytes", "1MiB", "--dtype", "fp8"], "--dtype 'fp8'"),
            (["--op", "all-gather", "--axes", "x", "--bytes", "1MiB", "--seed", "-1"], "--seed: '-1': expected a whole"),
            (["--op", "all-gather", "--axes", "x", "--bytes", "1MiB", "--seed", "1" + "0" * 20], "from 0 to 2^64 - 1"),
        ]
        for args, needle in cases:
            r = self.cli("bench", "collective", *args)
            self.assert_fails(r, needle)
            self.assertEqual(r.returncode, 2, f"{args}: bad input should exit 2")
        # Still usable afterwards.
        r = self.cli("bench", "collective", "--op", "all-gather", "--axes", "x", "--bytes", "64KiB")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_usage_errors_exit_2_and_an_unknown_command_is_named(self):
        for args, needle in [
            ([], "tpuemu needs a command: cluster, bench"),
            (["cluster"], "tpuemu cluster needs a command: up, status, down"),
            (["cluster", "stauts"], "unknown command 'stauts' for tpuemu cluster; the commands are: up, status"),
            (["bogus"], "unknown command 'bogus'; the commands are: cluster, bench"),
            (["--coordinator", "127.0.0.1:1", "--insecure", "sumbit"], "unknown command 'sumbit'"),
            (["status"], "job is required"),
            (["jobs", "--bogus"], "--bogus"),
            (["jobs", "--state", "done"], "--state: done not in"),
            (["submit", "--priority", "high", "job.yaml"], "--priority"),
            (["--coordinator", "127.0.0.1:99999", "jobs"], "expected HOST:PORT with a port from 1 to 65535"),
            (["health", "nonsense"], "'nonsense': expected HOST:PORT"),
            (["cluster", "up", "--local", "--topology", "v5p:2x4", "--time-scale", "nan"], "--time-scale nan"),
            (["cluster", "restart-worker", "2", "--timeout", "-5"], "--timeout: '-5': expected a number of seconds"),
            (["fault", "3", "--straggler", "1@2", "--from-step", "-1"],
             "--from-step: '-1': expected a whole number from 0"),
            (["fault", "3", "--straggler", "1@2", "--from-step", "99999999999"],
             "--from-step: '99999999999': expected a whole number from 0 to 2147483647"),
            (["credentials", "create", "new", "--uid", "-5"], "--uid"),
            # An output file that cannot be written is refused before anything runs.
            (["plot", "1", "-o", "/nonexistent/p.svg"], "-o /nonexistent/p.svg: there is no directory /nonexistent"),
            (["bench", "collective", "--op", "all-gather", "--axes", "x", "--bytes", "64KiB", "--plot", "/"],
             "--plot /: a chart is written as SVG or PNG"),
            (["bench", "collective", "--op", "all-gather", "--axes", "x", "--bytes", "64KiB", "--plot",
              "/nonexistent/x.svg"], "there is no directory /nonexistent"),
        ]:
            r = self.cli(*args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
            self.assertIn(needle, r.stderr, args)
        self.assertEqual(self.cli("--help").returncode, 0)
        r = self.cli("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^tpuemu \d+\.\d+\.\d+ \(gRPC \d+\.\d+")

    def test_help_teaches(self):
        r = self.cli("bench", "collective", "--help")
        self.assertEqual(r.returncode, 0)
        for word in ("--op", "--axes", "--bytes", "--algorithm", "--json", "Example"):
            self.assertIn(word, r.stdout)
        self.assertIn("--time-scale", self.cli("cluster", "up", "--help").stdout)


class MatmulTest(Pod):
    def test_matmul_runs_explains_and_reports_json(self):
        self.up("--topology", "v5p:2x4")
        r = self.cli("matmul", "A[I_X, J_Y] * B[J_X, K_Y] -> C[I_X, K_Y]", "--dims", "I=256,J=512,K=128", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        for key in ("plan", "comm_bytes", "flops_per_chip", "emulated_s", "predicted_s", "wall_s", "max_rel_err",
                    "correct", "why", "alternatives", "worker_memory"):
            self.assertIn(key, res)
        self.assertEqual(len(res["worker_memory"]), 2)  # v5p:2x4, 4 chips per host
        self.assertTrue(res["correct"])
        self.assertLessEqual(res["max_rel_err"], 1e-5)
        self.assertEqual(res["flops_per_chip"], 2 * 256 * 512 * 128 // 8)  # no duplicated work
        self.assertEqual([s["step"] for s in res["plan"]],
                         ["AllGather_Y A[I_X, J_Y] -> A[I_X, J]", "AllGather_X B[J_X, K_Y] -> B[J, K_Y]",
                          "A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]"])
        self.assertEqual(res["plan"][0]["collective"], "AllGather")
        self.assertEqual(res["plan"][0]["physical_axes"], ["y"])
        # Seed rule: a bf16 AllGather of V over N chips sends V (N-1)/N per chip.
        self.assertEqual(res["comm_bytes"]["y"], 2 * 128 * 512 * 3 // 4)
        self.assertEqual(res["comm_bytes"]["x"], 2 * 512 * 32 // 2)
        self.assertAlmostEqual(res["emulated_s"]["total"],
                               res["emulated_s"]["compute"] + res["emulated_s"]["communication"], places=12)

        explain = self.cli("matmul", "A[I, J_X] * B[J, K] -> C[I, K]", "--dims", "I=64,J=4096,K=8", "--explain",
                           "--mesh", "X=y")
        self.assertEqual(explain.returncode, 0, explain.stderr)
        self.assertIn("why: chose", explain.stdout)
        self.assertIn("AllReduce_X C[I, K]{U_X} -> C[I, K]", explain.stdout)
        self.assertIn("alternative 1", explain.stdout)
        self.assertIn("result: correct", explain.stdout)
        self.assertIn("worker memory: peak", explain.stdout)

    def test_bad_matmul_arguments(self):
        self.up("--topology", "v5p:2x4")
        cases = [
            (["A[I_X, J * B[J, K] -> C[I, K]", "--dims", "I=8,J=8,K=8"], "expected ',' or ']'"),
            (["A[I_X, J_X] * B[J, K] -> C[I, K]", "--dims", "I=8,J=8,K=8"], "forbidden sharding"),
            (["A[I_W, J] * B[J, K] -> C[I, K]", "--dims", "I=8,J=8,K=8"], "axis W is not in the mesh"),
            (["A[I_Y, J] * B[J, K] -> C[I_Y, K]", "--dims", "I=6,J=8,K=8"], "does not split evenly"),
            (["A[I, J] * B[J, K] -> C[I, K]", "--dims", "I=8,A.J=8,B.J=4,K=8"], "has size 8 in A but 4 in B"),
            (["A[I, J] * B[J, K] -> C[I, L]", "--dims", "I=8,J=8,K=8,L=8"], "output dimension L is in neither"),
            (["A[I, J] * B[J, K] -> C[I, K]", "--dims", "I=8,J=8,K=8", "--mesh", "X=w"], "--mesh"),
            (["A[I, J] * B[J, K] -> C[I, K]", "--dims", "I=8,J=8,K=8", "--values", "gauss"], "--values 'gauss'"),
            (["A[I, J] * B[J, K] -> C[I, K]", "--dims", "I=8,J=8,K=8", "--slices", "3"], "--slices 3: only with --topology"),
        ]
        for args, needle in cases:
            r = self.cli("matmul", *args)
            self.assert_fails(r, needle)
            self.assertEqual(r.returncode, 2, f"{args}: bad input should exit 2")
        self.assertIn("^", self.cli("matmul", *cases[0][0]).stderr)
        jobs = self.cli("matmul", "A[I, J] * B[J, K] -> C[I, K]", "--dims", "I=8,J=8,K=8")
        self.assertEqual(jobs.returncode, 0, jobs.stderr)  # still usable

    def test_plan_only_needs_no_pod(self):
        r = self.cli("matmul", "A[I, J_X] * B[J_X, K] -> C[I_X, K]", "--dims", "I=64,J=64,K=64", "--plan-only",
                     "--topology", "v5p:8", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        self.assertEqual(res["plan"][1]["step"], "ReduceScatter_{X,I} C[I, K]{U_X} -> C[I_X, K]")
        self.assertNotIn("correct", res)  # nothing ran
        self.assertIn("--plan-only", self.cli("matmul", "--help").stdout)


class ReferenceTest(Pod):
    def test_reference_trains_on_one_device(self):
        job = os.path.join(os.path.dirname(__file__), "../../examples/jobs/dp.yaml")
        r = self.cli("reference", job, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        self.assertEqual(res["name"], "dp-small")
        losses = [s["loss"] for s in res["steps"]]
        self.assertEqual(len(losses), 10)
        self.assertLess(losses[-1], 0.6 * losses[0])
        # Its standard error is quiet: the BLIS kernels it chose are logged with --verbose only
        # (a loaded machine may see a progress line after 5 s).
        self.assertEqual([l for l in r.stderr.splitlines() if not l.startswith("... ")], [])
        verbose = self.cli("--verbose", "reference", job, "--json")
        self.assertIn("BLIS kernels:", verbose.stderr)
        again = json.loads(verbose.stdout)
        self.assertEqual(again, res)  # deterministic, bit for bit
        # After the command too (it was refused there): a command passes on what it does not take.
        after = self.cli("reference", job, "--json", "--verbose")
        self.assertEqual(after.returncode, 0, after.stderr)
        self.assertIn("BLIS kernels:", after.stderr)
        # A BLIS_ARCH_TYPE BLIS would abort on (or a kernel this CPU cannot run, SIGILL) is
        # dropped with a warning, not left to kill the command at its first multiply.
        env = dict(self.env, BLIS_ARCH_TYPE="999")
        bad = subprocess.run([TPUEMU, "reference", job, "--json"], env=env, capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(bad.returncode, 0, bad.stderr)
        self.assertIn("BLIS_ARCH_TYPE=999", bad.stderr)
        self.assertIn("ignored", bad.stderr)
        self.assertEqual(json.loads(bad.stdout), res)

    def test_bad_job_files(self):
        path = os.path.join(self.home, "bad.yaml")
        for text, needle in [("emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nlearning_rat: 1\n",
                              "did you mean learning_rate"),
                             ("emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nopt_type: lion\n",
                              "opt_type: 'lion': allowed: adam, sgd"),
                             ("emb_dim: 8\nmlp_dim: 8\n", "global_batch_tokens: missing"),
                             # Not UTF-8: `reference --json` aborted in the JSON writer after the
                             # whole job, `submit` printed "error: " and nothing else.
                             (b"name: \xff\xfe\nemb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n",
                              "name: not valid UTF-8 text")]:
            with open(path, "wb") as f:
                f.write(text if isinstance(text, bytes) else text.encode())
            r = self.cli("reference", path)
            self.assert_fails(r, needle, "bad.yaml")
            self.assertEqual(r.returncode, 2)
        self.assert_fails(self.cli("reference", os.path.join(self.home, "missing.yaml")), "cannot read")


class TrainJobTest(Pod):
    JOB = DP_JOB

    def test_submit_wait_json_equals_the_reference_and_status(self):
        self.up("--topology", "v5p:2x4")
        r = self.cli("submit", self.JOB, "--wait", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        job = json.loads(r.stdout)
        self.assertEqual(job["state"], "succeeded")
        self.assertEqual(len(job["steps"]), 10)
        reference = json.loads(self.cli("reference", self.JOB, "--json").stdout)
        for got, want in zip(job["steps"], reference["steps"]):
            self.assertAlmostEqual(got["loss"], want["loss"], delta=1e-5 * want["loss"])
            for key in ("emulated_step_s", "compute_s", "exposed_comm_s", "mfu", "tokens_per_s_emulated",
                        "tokens_per_s_wall", "comm_bytes_per_chip", "memory_per_chip", "host_lag_s"):
                self.assertIn(key, got)
        self.assertAlmostEqual(job["summary"]["param_l2"], reference["param_l2"], delta=1e-5 * reference["param_l2"])
        # Seed 001's table: DP sends 8 D F (N-1)/N bf16 bytes per layer per chip.
        self.assertEqual(job["steps"][0]["comm_bytes_per_chip"]["data"], 8 * 256 * 1024 * 7 // 8 * 2)
        status = json.loads(self.cli("status", job["id"], "--json").stdout)
        self.assertEqual(status, job)
        # In text too, the final parameters' norm (only `watch` and `submit --wait` said it).
        self.assertIn(f"final parameters L2 {job['summary']['param_l2']:.9g}", self.cli("status", job["id"]).stdout)
        jobs = json.loads(self.cli("jobs", "--json").stdout)["jobs"]
        self.assertEqual([j["id"] for j in jobs], [job["id"]])
        out = os.path.join(self.home, "trace.json")
        r = self.cli("trace", job["id"], "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            trace = json.load(f)
        names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
        self.assertTrue({f"chip {i}" for i in range(8)} <= names)
        self.assertTrue(any(n.startswith("link ") for n in names))
        self.assertTrue(any(e["ph"] == "X" and "all-reduce data" in e["name"] for e in trace["traceEvents"]))

    def test_a_llama_model_equals_the_reference_and_bad_heads_are_refused(self):
        """Token ids, attention, a gated MLP and a vocabulary-parallel cross-entropy over real gRPC
        (FSDP x TP): every step's loss and the final parameters equal one device's; tensor
        parallelism that would split a key-value head or the vocabulary is refused at submit,
        naming the key and what to do."""
        self.up("--topology", "v5p:2x4")
        job_file = os.path.join(os.path.dirname(__file__), "../../examples/jobs/llama-block.yaml")
        r = self.cli("submit", job_file, "--wait", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        job = json.loads(r.stdout)
        self.assertEqual(job["state"], "succeeded")
        reference = json.loads(self.cli("reference", job_file, "--json").stdout)
        self.assertEqual(len(job["steps"]), len(reference["steps"]))
        for got, want in zip(job["steps"], reference["steps"]):
            self.assertAlmostEqual(got["loss"], want["loss"], delta=1e-5 * want["loss"])
        self.assertAlmostEqual(job["summary"]["param_l2"], reference["param_l2"], delta=1e-5 * reference["param_l2"])
        # Attention doubles TP's bytes: 16 B D (N-1)/N per layer, B = 128 tokens per FSDP shard, bf16;
        # the vocabulary adds 2 (4 B D + 3 B T) (N-1)/N per step (docs/jobs.md, "Vocabulary").
        self.assertEqual(job["steps"][0]["comm_bytes_per_chip"]["tensor"],
                         (16 * 128 * 64 * 2 + 2 * (4 * 128 * 64 + 3 * 128 * 4)) * 3 // 4)
        with open(job_file) as f:
            text = f.read()
        self.assert_job_files_refused([
            (text.replace("ici_tensor_parallelism: 4", "ici_tensor_parallelism: 8").replace(
                "ici_fsdp_parallelism: 2", "ici_fsdp_parallelism: 1"),
             "base_num_kv_heads: 4 does not split over the 8 tensor shards"),
            (text.replace("max_target_length: 16", "max_target_length: 256"),
             "each chip's share of a microbatch is 128 tokens"),
            (text.replace("vocab_size: 256", "vocab_size: 250"), "vocab_size: 250 does not split over the 4 tensor shards"),
        ])

    def test_a_trace_bigger_than_any_message_is_written_whole(self):
        """32 layers, 20 steps on 8 chips: about 200,000 spans, over 8 MiB as protobuf, more than a
        gRPC message takes; `trace` reads them in pieces and writes every one."""
        self.up("--topology", "v5p:2x4", "--chips-per-host", "2")
        job_file = os.path.join(self.home, "big.yaml")
        with open(job_file, "w") as f:
            f.write("ici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\nemb_dim: 32\nmlp_dim: 64\nnum_layers: 32\n"
                    "global_batch_tokens: 64\nsteps: 20\nseed: 5\nopt_type: sgd\nlearning_rate: 20\n")
        r = self.cli("submit", job_file, "--wait", "--json", timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        job = json.loads(r.stdout)
        out = os.path.join(self.home, "trace.json")
        r = self.cli("trace", job["id"], "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            trace = json.load(f)
        spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        kept = trace["otherData"]["kept"]
        self.assertEqual(kept["spans"], len(spans))
        self.assertGreater(len(spans), 150_000)  # at about 57 bytes each, over 8 MiB of protobuf
        self.assertEqual((kept["steps"], kept["first_kept_step"], kept["last_kept_step"], kept["spans_dropped"]),
                         (20, 0, 19, 0))
        self.assertEqual({e["name"].split(":")[0] for e in spans}, {f"step {i}" for i in range(20)})
        self.assertIn(f"wrote {len(spans)} spans of {job['id']}", r.stdout)
        self.assertFalse(os.path.exists(out + ".tmp"))
        # `-o -`: the same trace on standard output, what was written on standard error.
        piped = self.cli("trace", job["id"], "-o", "-")
        self.assertEqual(piped.returncode, 0, piped.stderr)
        self.assertEqual(json.loads(piped.stdout), trace)
        self.assertIn(f"wrote {len(spans)} spans of {job['id']} to standard output", piped.stderr)
        # A directory is no file to write it to (it said "renaming '....tmp' failed").
        r = self.cli("trace", job["id"], "-o", self.home)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"-o {self.home}: is a directory", r.stderr)
        # The job and the list read back too.
        self.assertEqual(json.loads(self.cli("status", job["id"], "--json").stdout), job)
        # Its number alone names it too.
        self.assertEqual(json.loads(self.cli("status", job["id"].split("-")[1], "--json").stdout), job)
        self.assertEqual([j["id"] for j in json.loads(self.cli("jobs", "--json").stdout)["jobs"]], [job["id"]])

    def test_one_slice_jobs_run_at_once_and_a_lost_worker_ends_only_its_slices_job(self):
        self.up("--topology", "v5p:2x2", "--slices", "2", "--chips-per-host", "2")
        endless = os.path.join(self.home, "endless.yaml")
        with open(ONE_SLICE_JOB) as f, open(endless, "w") as g:
            g.write(f.read().replace("steps: 200", "steps: 100000"))
        ids = []
        for _ in range(2):
            r = self.cli("submit", endless)
            self.assertEqual(r.returncode, 0, r.stderr)
            ids.append(r.stdout.split()[0])

        def job(i):
            return json.loads(self.cli("status", i, "--json").stdout)

        def last_step(i):
            steps = job(i).get("steps")
            return steps[-1]["step"] if steps else -1

        def runs_on(i, steps=3):
            """Job i still running after `steps` more steps."""
            start, deadline = last_step(i), time.time() + 60
            while last_step(i) < start + steps:
                self.assertLess(time.time(), deadline, f"{i} did not go on")
                time.sleep(0.1)
            self.assertEqual(job(i)["state"], "running")

        for i in ids:
            runs_on(i, 1)
        jobs = {j["id"]: j for j in json.loads(self.cli("jobs", "--json").stdout)["jobs"]}
        self.assertEqual([jobs[i]["placement"]["text"] for i in ids], ["slice 0", "slice 1"])
        self.assertLess(max(jobs[i]["started_unix_s"] for i in ids), time.time())
        self.assertIn("slice 1", self.cli("jobs").stdout)
        self.assertIn("runs on slice 1", self.cli("status", ids[1]).stdout)

        # Slice 1's first worker killed: its job fails naming it, slice 0's runs on.
        killed = time.time()
        os.kill(self.pids()[3], signal.SIGKILL)
        deadline = time.time() + 30
        while job(ids[1])["state"] == "running":
            self.assertLess(time.time(), deadline)
            time.sleep(0.1)
        lost = job(ids[1])
        self.assertEqual(lost["state"], "failed")
        self.assertIn("worker host 2", lost["error"])
        self.assertLess(lost["finished_unix_s"] - killed, 5)
        runs_on(ids[0])
        # Back at a new address: every worker is told, and slice 0's job still runs on.
        r = self.cli("cluster", "restart-worker", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        runs_on(ids[0])

        # A whole-pod job waits for slice 0, saying so, and runs once it is free.
        r = self.cli("submit", DP_JOB)
        self.assertEqual(r.returncode, 0, r.stderr)
        queued = r.stdout.split()[0]
        self.assertIn(f"waiting for the whole pod, while {ids[0]} on slice 0 runs", self.cli("status", queued).stdout)
        self.assertEqual(self.cli("cancel", ids[0]).returncode, 0)
        r = self.cli("watch", queued)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ran on slice 0", self.cli("status", ids[0]).stdout)
        self.assertEqual(job(queued)["placement"]["text"], "whole pod")
        # The example as it is, against its one-device reference.
        r = self.cli("submit", ONE_SLICE_JOB, "--wait", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        done = json.loads(r.stdout)
        reference = json.loads(self.cli("reference", ONE_SLICE_JOB, "--json").stdout)
        self.assertEqual(done["placement"]["text"], "slice 0")
        self.assertAlmostEqual(done["summary"]["param_l2"], reference["param_l2"], delta=1e-5 * reference["param_l2"])

    def test_multislice_jobs_share_an_oversubscribed_dcn_fabric(self):
        """cluster up --dcn-oversubscription 2: two jobs on one host of each slice halve each
        other's DCN links while both run, exactly as the job alone with slow_link dcn@0.5."""
        self.up("--topology", "v5p:2x2", "--slices", "2", "--chips-per-host", "2", "--dcn-oversubscription", "2")
        self.assertIn("DCN fabric 2:1 oversubscribed", self.cli("cluster", "status").stdout)
        half = ("num_slices: 2\ntopology: v5p:2x1\ndcn_data_parallelism: -1\nici_fsdp_parallelism: -1\n"
                "emb_dim: 64\nmlp_dim: 256\nnum_layers: 2\nglobal_batch_tokens: 128\nseed: 5\nsteps: 4\n")

        def run(path):
            r = self.cli("submit", path, "--wait", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            return json.loads(r.stdout)

        alone = run(self.write("half.yaml", half))
        slowed = run(self.write("slowed.yaml", half + "faults:\n  - slow_link: dcn@0.5\n"))
        r = self.cli("submit", self.write("long.yaml", half.replace("steps: 4", "steps: 100000")))
        self.assertEqual(r.returncode, 0, r.stderr)
        long_id = r.stdout.split()[0]
        deadline = time.time() + 60
        while not json.loads(self.cli("status", long_id, "--json").stdout).get("steps"):
            self.assertLess(time.time(), deadline, "the long job did not start")
            time.sleep(0.1)
        shared = run(os.path.join(self.home, "half.yaml"))
        self.assertEqual(json.loads(self.cli("status", long_id, "--json").stdout)["state"], "running")
        self.assertEqual(self.cli("cancel", long_id).returncode, 0)
        for got, want, fast in zip(shared["steps"], slowed["steps"], alone["steps"]):
            self.assertEqual(got["loss"], fast["loss"])
            self.assertEqual(got["emulated_step_s"], want["emulated_step_s"])
            self.assertGreater(got["emulated_step_s"], fast["emulated_step_s"])
            self.assertEqual(got["faults"], [f"links dcn at 1/2 bandwidth: the DCN fabric of slice 0 "
                                             f"(2:1 oversubscribed), shared with {long_id}"])
        self.assertEqual(alone["steps"][0].get("faults", []), [])
        self.assertIn(f"shared with {long_id}", self.cli("status", shared["id"]).stdout)

    def test_cancel_stops_within_a_step_and_the_pod_runs_the_next_job(self):
        self.up("--topology", "v5p:2x4")
        job_id = self.submit_long_job()
        start = time.time()
        r = self.cli("cancel", job_id)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cancelled", r.stdout)
        self.assertLess(time.time() - start, 5)
        r = self.cli("submit", self.JOB, "--wait")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("step    9", r.stdout)
        # A job that has ended on its own stays as it is, and the cancel says it did nothing.
        done = [j["id"] for j in json.loads(self.cli("jobs", "--json").stdout)["jobs"] if j["state"] == "succeeded"]
        r = self.cli("cancel", done[0])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(f"{done[0]} has already ended (succeeded): nothing to cancel", r.stderr)
        self.assertEqual(json.loads(self.cli("status", done[0], "--json").stdout)["state"], "succeeded")
        r = self.cli("cancel", job_id)  # cancelled above
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(f"{job_id} has already ended (cancelled)", r.stderr)
        # A malformed id is a usage error; a well-formed one that names no job, a failure.
        for bad in ("job-", "JOB-7", " 7", "job-x"):
            r = self.cli("status", bad)
            self.assertEqual(r.returncode, 2, f"{bad!r}: {r.stderr}")
            self.assertIn("expected a job id such as job-3", r.stderr)
        self.assertEqual(self.cli("status", "job-999").returncode, 1)
        # Leading zeros name the same job (they read as a dropped record).
        number = done[0].split("-")[1]
        for same in (f"job-0{number}", f"00{number}"):
            r = self.cli("status", same, "--json")
            self.assertEqual(r.returncode, 0, f"{same}: {r.stderr}")
            self.assertEqual(json.loads(r.stdout)["id"], done[0])

    def test_bad_job_files_are_refused(self):
        self.up("--topology", "v5p:2x4")
        self.assert_job_files_refused([
            ("emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nsteps: 1\nici_data_parallelism: 3\n",
             "must divide the chips per slice (8)"),
            ("emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 12\n", "does not split over the 8"),
            ("emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nstep: 3\n", "did you mean steps"),
            ("emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\ntopology: v5e:4x4\n", "the pod is v5p:2x4")])
        # What the pod refuses names the file (not the job's name, or "job"), and a flag as a flag.
        bad = os.path.join(self.home, "bad.yaml")
        for text, needle in [("emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nhbm_bytes: 1\n",
                              f"error: {bad}: out of memory: each chip needs"),
                             ("name: mine\nemb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nnum_chips: 3\n",
                              f"error: {bad}: num_chips: 3: no block of whole hosts"),
                             ("emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nfaults:\n  - kill_worker: 9 at 0\n",
                              f"error: {bad}: faults: kill_worker")]:
            with open(bad, "w") as f:
                f.write(text)
            r = self.cli("submit", bad)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(needle, r.stderr)
        r = self.cli("submit", "--priority", "1001", self.JOB)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--priority: '1001': expected a whole number from -1000 to 1000", r.stderr)
        self.assertEqual(json.loads(self.cli("jobs", "--json").stdout)["jobs"], [])

    def test_pipeline_job_reports_its_bubble_and_equals_the_reference(self):
        self.up("--topology", "v5p:2x4")
        job_file = os.path.join(os.path.dirname(__file__), "../../examples/jobs/pipeline.yaml")
        r = self.cli("submit", job_file, "--wait", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        job = json.loads(r.stdout)
        self.assertEqual(job["state"], "succeeded")
        self.assertEqual(job["summary"]["pipeline"],
                         {"schedule": "1f1b", "stages": 4, "microbatches": 8, "repeats": 1})
        reference = json.loads(self.cli("reference", job_file, "--json").stdout)
        for got, want in zip(job["steps"], reference["steps"]):
            self.assertAlmostEqual(got["loss"], want["loss"], delta=1e-5 * want["loss"])
            self.assertAlmostEqual(got["bubble_formula"], 3 / 11)
            # Transfers only add idle time to the formula's.
            self.assertGreater(got["bubble_fraction"], 0.9 * got["bubble_formula"])
            self.assertLess(got["bubble_fraction"], 1)
            # 1F1B: the first stage holds 4 microbatches of 2 layers' inputs
            # [32, 256] and pre-activations [32, 1024], bf16.
            self.assertEqual(got["peak_activation_bytes"], 4 * 2 * 32 * (256 + 1024) * 2)
            self.assertGreater(got["comm_bytes_per_chip"]["pipeline"], 0)
        r = self.cli("submit", job_file, "--wait")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("bubble", r.stdout)
        self.assertIn("formula 27.3%", r.stdout)
        self.assert_job_files_refused([
            ("ici_pipeline_parallelism: 4\nemb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n"
             "num_layers: 4\npipeline_schedule: circular\nnum_pipeline_microbatches: 2\n", "fewer than the 4 stages"),
            ("ici_pipeline_parallelism: 4\nemb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n"
             "num_layers: 4\nnum_pipeline_microbatches: 3\n", "does not split into 3 microbatches"),
            ("ici_pipeline_parallelism: 3\nemb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n",
             "must divide the chips per slice (8)")])


class WorkerMemoryTest(Pod):
    """A worker gives back what a job took (issue 21): its resident memory (VmRSS) after each job is
    within 10% of its idle size, measured once the pod is up (its peer connections open); the job's
    result reports every worker's peak. A worker gives memory back, and closes its peer connections
    with their read buffers, once it has had no job for --keep-memory-for (2 s here, 30 s by
    default), and again 2 s later for the buffers its peers' closing frees (worker/idle_release.h);
    each check waits up to 10 s for it. The next job opens the connections again (the second
    round)."""

    def rss(self, pid):
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))

    def assert_back_to_idle(self, idle, what):
        for pid, before in idle.items():
            deadline = time.monotonic() + 10
            while (now := self.rss(pid)) > before * 1.1 and time.monotonic() < deadline:
                time.sleep(0.2)
            self.assertLessEqual(now, before * 1.1,
                                 f"after {what} and 10 s more: worker {pid} holds {now >> 20} MiB, idle it held {before >> 20} MiB")

    def up_and_measure_idle(self, *keep_memory_for):
        """A v5p:2x4 pod (with `cluster up` flags for how long workers keep a job's memory); the
        workers' idle VmRSS."""
        self.up("--topology", "v5p:2x4", "--chips-per-host", "4", *keep_memory_for)
        time.sleep(1)
        return {pid: self.rss(pid) for pid in self.pids()[1:]}

    def dp_job(self):
        """The example DP job, grown to hundreds of MiB per worker, 2 steps."""
        job = os.path.join(self.home, "dp_mem.yaml")
        with open(DP_JOB) as f, open(job, "w") as g:
            g.write(f.read().replace("emb_dim: 256", "emb_dim: 512").replace("mlp_dim: 1024", "mlp_dim: 2048")
                    .replace("num_layers: 2", "num_layers: 4").replace("global_batch_tokens: 512",
                                                                       "global_batch_tokens: 2048")
                    .replace("steps: 10", "steps: 2"))
        return job

    def test_memory_returns_near_idle_after_each_job_and_each_workers_peak_is_reported(self):
        self.env["TPUEMU_KEEP_MEMORY_FOR"] = "2"  # what `cluster up` leaves alone reaches the workers
        idle = self.up_and_measure_idle()
        job = self.dp_job()
        for round in range(2):  # the second job finds the first one's memory given back too
            r = self.cli("submit", job, "--wait", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            memory = json.loads(r.stdout)["worker_memory"]
            self.assertEqual([m["host"] for m in memory], [0, 1])
            for m in memory:
                # 4 chips' weights, Adam moments, activations and gradients: hundreds of MiB.
                self.assertGreater(m["peak_bytes"], 200 << 20, m)
            self.assert_back_to_idle(idle, f"training job {round + 1}")
        r = self.cli("bench", "collective", "--op", "all-gather", "--axes", "x,y", "--bytes", "8MiB", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        memory = json.loads(r.stdout)["results"][0]["worker_memory"]
        self.assertEqual(len(memory), 2)
        # Every chip holds the whole 8 MiB array in f32 (16 MiB), 4 chips per worker.
        self.assertGreater(min(m["peak_bytes"] for m in memory), 64 << 20)
        self.assert_back_to_idle(idle, "an 8 MiB all-gather")
        status = self.cli("status", "job-1")
        self.assertIn("worker memory: peak", status.stdout)
        self.assert_cluster_status_shows_idle_memory(idle)

    def test_a_finished_jobs_memory_stays_for_keep_memory_for_then_goes_back(self):
        """A job that comes within --keep-memory-for of the last one finds its memory warm: the
        workers of `cluster up --keep-memory-for 8s` still hold it 4 s after the job, and give it
        back after the 8 s."""
        idle = self.up_and_measure_idle("--keep-memory-for", "8s")
        r = self.cli("submit", self.dp_job(), "--wait", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        time.sleep(4)
        for pid, before in idle.items():
            self.assertGreater(self.rss(pid), before + (100 << 20), f"worker {pid} gave the job's memory back early")
        self.assert_back_to_idle(idle, "a job kept for 8 s and a check 4 s after it")

    def assert_cluster_status_shows_idle_memory(self, idle):
        """cluster status shows each worker's resident memory from its heartbeats: back near idle."""
        limit = max(idle.values()) * 1.1
        deadline = time.monotonic() + 10
        while True:
            r = self.cli("cluster", "status", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            shown = [w["resident_bytes"] for w in json.loads(r.stdout)["workers"]]
            if all(b is not None and 0 < b <= limit for b in shown) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(len(shown), 2)
        for b in shown:
            self.assertIsNotNone(b, "a worker's memory not known after its heartbeats")
            self.assertGreater(b, 1 << 20)
            self.assertLessEqual(b, limit, f"cluster status shows {b >> 20} MiB; idle workers held at most {int(limit) >> 20}")
        table = self.cli("cluster", "status").stdout
        self.assertIn("MEMORY", table)
        self.assertRegex(table, r"\byes\s+\d+ MiB\s")


class WorkerFailureTest(Pod):
    def test_killed_worker_fails_the_job_naming_it_within_5s(self):
        bench = self.paced_all_reduce()
        victim = self.pids()[3]  # coordinator, then workers of hosts 0, 1, 2, ...
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        out, err = bench.communicate(timeout=30)
        elapsed = time.monotonic() - killed_at
        self.assertNotEqual(bench.returncode, 0)
        self.assertIn("worker host 2", err)
        print(f"\nkilled worker: {err.strip()}", file=sys.stderr)
        # What the coordinator saw: the connection, not missing heartbeats.
        self.assertIn("connection to it was reset or closed", err)
        self.assertNotIn("heartbeat", err)
        self.assertLess(elapsed, 5.0)
        status = json.loads(self.cli("cluster", "status", "--json").stdout)
        dead = [w for w in status["workers"] if not w["alive"]]
        self.assertEqual([w["host"] for w in dead], [2])

    def test_a_worker_killed_between_jobs_is_lost_at_once_not_after_the_heartbeat_timeout(self):
        self.up("--topology", "v5e:4x2", "--chips-per-host", "2", "--heartbeat-timeout", "30s")
        status = json.loads(self.cli("cluster", "status", "--json").stdout)
        self.assertEqual(status["heartbeat_timeout_s"], 30)
        self.assertTrue(all(w["alive"] and not w["slow"] for w in status["workers"]), status)
        victim = self.pids()[2]  # host 1
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        while time.monotonic() - killed_at < 30:
            status = json.loads(self.cli("cluster", "status", "--json").stdout)
            if not status["ready"]:
                break
            time.sleep(0.1)
        elapsed = time.monotonic() - killed_at
        self.assertEqual([w["host"] for w in status["workers"] if not w["alive"]], [1])
        self.assertLess(elapsed, 3.0, "lost by its connection, not after 30 s without heartbeats")
        table = self.cli("cluster", "status")
        self.assertIn("heartbeats:  30 s timeout", table.stdout)
        self.assertRegex(table.stdout, r"\n1 +0 +127\.0\.0\.1:\d+ +NO ")


if __name__ == "__main__":
    unittest.main(verbosity=2)
