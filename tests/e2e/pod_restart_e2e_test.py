#!/usr/bin/env python3
"""A local pod's processes over its life: a coordinator killed and started
again (by hand with the command line it had, or with `cluster
restart-coordinator`) takes its pod back; `cluster down` signals only the
processes the pod file recorded, checked to be the same ones, plus workers
restarted by hand; `cluster restart-worker` records the new process."""

import json
import os
import signal
import subprocess
import time
import unittest

from cli_e2e_test import Pod, TPUEMU

TOPOLOGY = ["--topology", "v5p:2x4", "--chips-per-host", "2"]  # 4 workers
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../examples/jobs/dp.yaml")


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline") as f:
        return f.read().split("\0")[:-1]


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class PodRestartTest(Pod):
    def setUp(self):
        super().setUp()
        self.by_hand = []

    def tearDown(self):
        super().tearDown()
        for p in self.by_hand:
            if p.poll() is None:
                p.kill()
            p.wait()
            p.log.close()

    def start_by_hand(self, argv, log):
        """A process the user started from a shell: not in the pod file."""
        out = open(os.path.join(self.home, log), "w")
        p = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        p.log = out
        self.by_hand.append(p)
        return p

    def kill9(self, pid):
        os.kill(pid, signal.SIGKILL)
        deadline = time.time() + 10
        while running(pid) and time.time() < deadline:
            time.sleep(0.05)

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = self.cli("cluster", "status", "--json", timeout=30)
            if r.returncode == 0 and json.loads(r.stdout)["ready"]:
                return
            time.sleep(0.2)
        self.fail(f"the pod was not ready within {timeout} s: {r.stdout} {r.stderr}")

    def assert_runs_a_job(self):
        r = self.cli("submit", JOB, "--wait", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["state"], "succeeded")

    def test_coordinator_killed_and_started_by_hand_takes_its_pod_back(self):
        self.up(*TOPOLOGY)
        coordinator = self.pids()[0]
        argv = cmdline(coordinator)
        self.kill9(coordinator)
        # What a user does: the same command line again. It must listen where
        # the workers and the pod file expect it, not on a new port 0 picks.
        restarted = self.start_by_hand(argv, "coordinator-by-hand.log")
        self.wait_ready(timeout=30)
        self.assertEqual(json.loads(self.cli("cluster", "status", "--json").stdout)["registered_workers"], 4)
        self.assert_runs_a_job()
        # `cluster down` stops it too, and it records its running job as
        # interrupted, as the coordinator `cluster up` started would.
        job_id = self.submit_long_job()
        r = self.cli("cluster", "down")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1 started by hand", r.stdout)
        restarted.wait(timeout=15)
        self.up(*TOPOLOGY)  # its data directory is free again
        self.assertEqual(json.loads(self.cli("status", job_id, "--json").stdout)["state"], "interrupted")

    def test_restart_coordinator_records_it_and_the_pod_runs_jobs(self):
        self.up(*TOPOLOGY)
        before = self.pod_file()
        self.kill9(before["coordinator_process"]["pid"])
        r = self.cli("cluster", "restart-coordinator", "--timeout", "60")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("4/4 workers registered again", r.stdout)
        after = self.pod_file()
        self.assertEqual(after["coordinator"], before["coordinator"])
        new_pid = after["coordinator_process"]["pid"]
        self.assertNotEqual(new_pid, before["coordinator_process"]["pid"])
        self.assertTrue(running(new_pid))
        self.assert_runs_a_job()
        traced = os.path.join(self.home, "trace.json")
        self.assertEqual(self.cli("trace", "job-1", "-o", traced).returncode, 0)
        os.remove(traced)
        # A coordinator that still runs is stopped first, then started again;
        # the command returns once the pod is ready, not seconds later (a
        # client kept in gRPC's reconnect backoff from the calls made while the
        # port was closed saw it only after 15 s).
        t0 = time.time()
        r = self.cli("cluster", "restart-coordinator")
        took = time.time() - t0
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(running(new_pid))
        self.assertLess(took, 8, "restart-coordinator waited long after the pod was ready")
        # Traces are kept in memory: the job's is gone, which `trace` says rather than
        # writing an empty trace.
        r = self.cli("trace", "job-1", "-o", traced)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("job-1 has no spans kept: the coordinator keeps traces in memory", r.stderr)
        self.assertFalse(os.path.exists(traced))
        r = self.cli("trace", "job-1", "-o", "-")  # into a pipe: nothing, not an empty trace
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout, "")
        newest = self.pids()[0]
        self.assertEqual(self.cli("cluster", "down").returncode, 0)
        self.assertFalse(running(newest))

    def test_down_leaves_alone_a_process_that_got_a_recorded_pid(self):
        self.up(*TOPOLOGY)
        victim = self.pids()[2]
        self.kill9(victim)
        # PID reuse, staged: an unrelated process of ours where the pod file
        # says worker host 1 was.
        bystander = self.start_by_hand(["sleep", "300"], "sleep.log")
        path = os.path.join(self.home, "pod.json")
        with open(path) as f:
            state = json.load(f)
        state["workers"][1]["pid"] = bystander.pid
        with open(path, "w") as f:
            json.dump(state, f)
        r = self.cli("cluster", "down")
        self.assertEqual(r.returncode, 0, r.stderr)
        time.sleep(0.5)
        self.assertIsNone(bystander.poll(), "cluster down signalled a process that only had a recorded PID")
        self.assertIn("1 recorded process(es) had already exited", r.stdout)

    def test_restart_worker_records_the_new_process_and_down_stops_it(self):
        self.up(*TOPOLOGY)
        old = self.pids()[3]
        self.kill9(old)
        r = self.cli("cluster", "restart-worker", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        new = self.pids()[3]
        self.assertNotEqual(new, old)
        self.assertTrue(running(new))
        self.assert_runs_a_job()
        # A worker that still runs is stopped first.
        r = self.cli("cluster", "restart-worker", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(running(new))
        for host, needle in [("4", "HOST 4: the pod's hosts are 0 to 3"),
                             ("-1", "HOST: '-1': expected a whole number from 0 to 2147483647")]:
            r = self.cli("cluster", "restart-worker", "--", host)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(needle, r.stderr)
        newest = self.pids()[3]
        self.assertEqual(self.cli("cluster", "down").returncode, 0)
        self.assertFalse(running(newest))

    def test_restart_coordinator_with_a_worker_gone_says_the_coordinator_runs_and_which_worker_to_start(self):
        self.up(*TOPOLOGY)
        pids = self.pids()
        self.kill9(pids[2])  # worker host 1
        self.kill9(pids[0])
        r = self.cli("cluster", "restart-coordinator", "--timeout", "60")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("the coordinator restarted", r.stderr)
        self.assertIn("(HOST 1 in `tpuemu cluster status`) is not running", r.stderr)
        self.assertIn("tpuemu cluster restart-worker HOST", r.stderr)
        # It answers at once (it was said to have restarted), refusing jobs
        # until the worker is back, and saying how to bring it back.
        r = self.cli("submit", JOB)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("the pod is not ready", r.stderr)
        self.assertIn("cluster restart-worker HOST", r.stderr)
        r = self.cli("cluster", "restart-worker", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_runs_a_job()

    def test_restart_worker_refuses_while_a_job_runs_on_it_unless_forced(self):
        self.up(*TOPOLOGY)
        job_id = self.submit_long_job()
        r = self.cli("cluster", "restart-worker", "2")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(f"worker host 2 runs {job_id} (train): restarting it ends that", r.stderr)
        self.assertEqual(json.loads(self.cli("status", job_id, "--json").stdout)["state"], "running")
        r = self.cli("cluster", "restart-worker", "2", "--force")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(self.cli("status", job_id, "--json").stdout)["state"], "failed")

    def test_a_worker_restarted_by_hand_survives_restart_coordinator_and_down_stops_it(self):
        self.up(*TOPOLOGY)
        worker = self.pids()[2]
        argv = cmdline(worker)
        self.kill9(worker)
        by_hand = self.start_by_hand(argv, "worker-by-hand.log")
        self.wait_ready(timeout=30)
        # The coordinator restarted: the hand-started worker takes its place again, and
        # the recorded process it replaced being gone is no failure (it once was).
        r = self.cli("cluster", "restart-coordinator", "--timeout", "60")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_runs_a_job()
        r = self.cli("cluster", "down")
        self.assertEqual(r.returncode, 0, r.stderr)
        by_hand.wait(timeout=15)  # stopped by cluster down, not left running
        self.assertIn("1 started by hand", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
