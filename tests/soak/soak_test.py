#!/usr/bin/env python3
"""Soak: one local pod of the real binaries (v5p:2x4, 2 chips per host, 4
workers) survives every bad input of issue 14 in one run, interleaved with
valid jobs, and ends with a job whose results equal one device's. No worker
is restarted, every process serves one port, and every process's memory
ends within 10% of where it was after a warm-up (valid jobs, a coordinator
restart, a big trace read back, a cancelled job).

Bounded: the whole run takes under a minute on 2 cores."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
BIN = os.environ.get("TPUEMU_BIN", os.path.join(ROOT, "build/bin"))
TPUEMU = os.path.join(BIN, "tpuemu")
HOSTILE = os.environ.get("HOSTILE_PEER", os.path.join(BIN, "hostile_peer"))
DP_JOB = os.path.join(ROOT, "examples/jobs/dp.yaml")


def listening_ports(pid):
    """The TCP ports process `pid` listens on."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


class SoakTest(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="tpuemu-soak-")
        self.addCleanup(shutil.rmtree, self.home, True)  # cleanups run last first: after `cluster down`
        # The coordinator keeps one finished job's record, so that what it keeps stays the same size
        # from job to job and any other growth shows (it keeps 100 by default, docs/jobs.md).
        # Workers give a job's memory back 2 s after it (30 s by default), so that what they hold
        # at the end is what they grew, not the last job's warm heap.
        self.env = dict(os.environ, TPUEMU_HOME=self.home, TPUEMU_KEEP_FINISHED_JOBS="1",
                        TPUEMU_KEEP_MEMORY_FOR="2")
        self.env.pop("TPUEMU_COORDINATOR", None)
        self.addCleanup(self.cli, "cluster", "down")
        r = self.cli("cluster", "up", "--local", "--topology", "v5p:2x4", "--chips-per-host", "2")
        self.assertEqual(r.returncode, 0, r.stderr)

    def cli(self, *args, timeout=120, stdin=None):
        return subprocess.run([TPUEMU, *args], env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=stdin)

    def pod(self):
        with open(os.path.join(self.home, "pod.json")) as f:
            return json.load(f)

    def workers(self):
        return json.loads(self.cli("cluster", "status", "--json").stdout)["workers"]

    def job_file(self, name, text):
        path = os.path.join(self.home, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def refused(self, result, *needles):
        self.assertEqual(result.returncode, 2, f"{result.stdout}\n{result.stderr}")
        for needle in needles:
            self.assertIn(needle, result.stderr)

    def submit(self, path, *args):
        r = self.cli("submit", path, "--json", *args, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def valid_job(self, reference):
        job = self.submit(DP_JOB, "--wait")
        self.assertEqual(job["state"], "succeeded", job.get("error"))
        # As the other end-to-end tests compare (DESIGN §6: the reduction order differs).
        self.assertEqual(len(job["steps"]), len(reference["steps"]))
        for got, want in zip(job["steps"], reference["steps"]):
            self.assertAlmostEqual(got["loss"], want["loss"], delta=1e-5 * want["loss"])
        self.assertAlmostEqual(job["summary"]["param_l2"], reference["param_l2"], delta=1e-5 * reference["param_l2"])

    def wait_state(self, job_id, states, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            job = json.loads(self.cli("status", job_id, "--json").stdout)
            if job["state"] in states:
                return job
            time.sleep(0.1)
        self.fail(f"{job_id} not {states} within {timeout} s")

    def wait_ready(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.cli("cluster", "status").returncode == 0:
                return
            time.sleep(0.2)
        self.fail(f"pod not ready within {timeout} s")

    def processes(self):
        """The coordinator's and workers' PIDs, as the pod file records them."""
        pod = self.pod()
        return [pod["coordinator_process"]["pid"]] + [w["pid"] for w in pod["workers"]]

    def hostile(self, *args):
        # A member of the pod (its certificate): what the pod's hardening must withstand from inside.
        r = subprocess.run([HOSTILE, *args], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, TPUEMU_TLS_DIR=os.path.join(self.home, "tls")))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        print(r.stdout.strip(), file=sys.stderr)

    def test_pod_survives_every_bad_input(self):
        reference = json.loads(self.cli("reference", DP_JOB, "--json").stdout)
        self.valid_job(reference)

        # 3. The coordinator killed; started again with the same arguments it comes back on its port
        # and the workers register again (its job store gives it the records back).
        os.kill(self.processes()[0], signal.SIGKILL)
        r = self.cli("cluster", "restart-coordinator", timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.valid_job(reference)
        # 6. A trace bigger than any message (about 100,000 spans, over 4 MiB) is read back whole.
        # Part of the warm-up: once such a trace was streamed, the coordinator stays about 3 MB
        # (15%) above where it was, in malloc's and gRPC's caches, though the record is gone.
        big_trace = self.job_file("big-trace.yaml", "ici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\n"
                                  "emb_dim: 32\nmlp_dim: 64\nnum_layers: 32\nglobal_batch_tokens: 64\nsteps: 10\n"
                                  "seed: 5\nopt_type: sgd\nlearning_rate: 20\n")
        job = self.submit(big_trace, "--wait")
        self.assertEqual(job["state"], "succeeded", job.get("error"))
        out = os.path.join(self.home, "trace.json")
        r = self.cli("trace", job["id"], "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            kept = json.load(f)["otherData"]["kept"]
        self.assertEqual((kept["steps"], kept["spans_dropped"]), (10, 0))
        self.assertGreater(os.path.getsize(out), 4 << 20)
        # Warm-up's last part: a running job cancelled, so that the baseline includes what any
        # first abort sets up once (threads, their malloc arenas, channels).
        with open(DP_JOB) as f:
            long_job = self.job_file("long.yaml", f.read().replace("steps: 10", "steps: 100000"))
        job_id = self.submit(long_job)["id"]
        self.wait_state(job_id, ["running"], 30)
        self.assertEqual(self.cli("cancel", job_id).returncode, 0)
        self.wait_state(job_id, ["cancelled"], 5)
        self.valid_job(reference)
        pids = self.processes()
        workers = pids[1:]
        baseline = {pid: rss_kib(pid) for pid in pids}

        # 1. A collective no host can hold: refused at submit with the figure and the limit.
        self.refused(self.cli("bench", "collective", "--op", "all-gather", "--axes", "x", "--bytes", "1024GiB"),
                     "1024GiB", "limit")
        # 5. Job files: a list or a map as a key, endless input, 50 MB.
        for text in ("[1, 2]: 3\n", "{a: 1}: 3\n"):
            path = self.job_file("key.yaml", text)
            self.refused(self.cli("submit", path), "key.yaml")
            self.refused(self.cli("reference", path), "key.yaml")
        self.refused(self.cli("submit", "/dev/zero", timeout=30), "/dev/zero")
        big = self.job_file("big.yaml", "# " + "x" * (50 << 20) + "\nsteps: 1\n")
        self.refused(self.cli("submit", big), "big.yaml", "at most 1048576 bytes (1MiB)")
        # 12. A chunk of one byte.
        self.refused(self.cli("matmul", "A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]", "--dims", "I=256,J=256,K=256",
                              "--chunk", "1B"), "--chunk 1B")
        self.valid_job(reference)

        # 9. Hostile peer frames to one worker: a payload declared as 1 TiB, then 300 frames of
        # 4 MiB for a job that does not exist. 8. Aborts for job numbers not issued yet (an
        # outsider does not know the worker's incarnation, so they are refused).
        address = self.workers()[1]["address"]
        self.hostile(address, "huge-frame")
        self.hostile(address, "unknown-frames", "300", str(4 << 20))
        self.hostile(address, "abort", *map(str, range(1, 50)))
        self.valid_job(reference)

        # 4. A heartbeat for a place from a registration that does not hold it: refused.
        self.hostile(self.pod()["coordinator"], "stale-heartbeat", "1")
        # 10. Every process serves on exactly one port.
        for pid in pids:
            self.assertEqual(len(listening_ports(pid)), 1, f"process {pid}: {listening_ports(pid)}")
        # 2. A worker stopped mid-job: the job fails within 5 s of the worker being declared lost.
        job_id = self.submit(long_job)["id"]
        self.wait_state(job_id, ["running"], 30)
        time.sleep(1)
        os.kill(workers[2], signal.SIGSTOP)
        try:
            stopped = time.time()
            job = self.wait_state(job_id, ["failed"], 3 + 5 + 2)
            print(f"\nstopped worker: job failed {time.time() - stopped:.2f} s after SIGSTOP: {job['error']}",
                  file=sys.stderr)
        finally:
            os.kill(workers[2], signal.SIGCONT)
        self.wait_ready()
        self.valid_job(reference)

        # 2. cancel ends a running job within 5 s, even with a worker stopped under it.
        job_id = self.submit(long_job)["id"]
        self.wait_state(job_id, ["running"], 30)
        time.sleep(1)
        os.kill(workers[3], signal.SIGSTOP)
        try:
            asked = time.time()
            self.assertEqual(self.cli("cancel", job_id).returncode, 0)
            job = self.wait_state(job_id, ["cancelled"], 5)
            print(f"cancel with a stopped worker: {job['state']} after {time.time() - asked:.2f} s", file=sys.stderr)
        finally:
            os.kill(workers[3], signal.SIGCONT)
        self.wait_ready()

        # The last job equals one device; no process was restarted; every process's memory is
        # within 10% of where it was after the warm-up.
        self.valid_job(reference)
        self.assertEqual(self.processes(), pids)
        self.assertEqual([p for p in pids if os.path.exists(f"/proc/{p}")], pids)
        ended = {pid: rss_kib(pid) for pid in pids}
        if any(ended[pid] >= 1.10 * baseline[pid] for pid in pids):
            # What a worker gives back once idle (2 s after a job here, again 2 s later:
            # worker/idle_release.h) is not growth. Measured at once, one run in eight saw the worker
            # that had just been stopped and resumed 23 MB above its warm-up.
            time.sleep(5)
            ended = {pid: min(ended[pid], rss_kib(pid)) for pid in pids}
        for pid in pids:
            print(f"pid {pid}: {baseline[pid]} KiB after the warm-up, {ended[pid]} KiB at the end", file=sys.stderr)
        for pid in pids:
            self.assertLess(ended[pid], 1.10 * baseline[pid], f"process {pid} grew")


if __name__ == "__main__":
    unittest.main(verbosity=2)
