#!/usr/bin/env python3
"""The job store over the real binaries (issue 16): a coordinator killed with
SIGKILL in the middle of a training job, with jobs finished and queued, and
started again on the same data directory shows the finished jobs bit for bit,
marks the running one interrupted and runs the queued ones; a burst of
submissions from four concurrent clients, valid and invalid mixed, with the
coordinator killed during it, loses and duplicates nothing, and the SQLite
file passes its integrity check; a job with checkpoint_every and
max_restarts: 1 whose worker, or whose coordinator, is killed mid-run
resumes from its checkpoint and ends bit for bit as an uninterrupted run; a
cancelled job's checkpoints stay while it can resume and go with its record."""

import json
import os
import signal
import sqlite3
import threading
import time
import unittest

from cli_e2e_test import DP_JOB, Pod

TOPOLOGY = ["--topology", "v5p:2x4", "--chips-per-host", "4"]  # 2 workers


def job_text(name, steps, data_parallelism=-1):
    with open(DP_JOB) as f:
        text = f.read()
    return (text.replace("name: dp-small", f"name: {name}").replace("steps: 10", f"steps: {steps}")
            .replace("ici_data_parallelism: -1", f"ici_data_parallelism: {data_parallelism}"))


class JobStoreTest(Pod):
    def write_job(self, name, steps, **kw):
        path = os.path.join(self.home, f"{name}.yaml")
        with open(path, "w") as f:
            f.write(job_text(name, steps, **kw))
        return path

    def submit(self, path):
        r = self.cli("submit", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.split()[0]

    def status_json(self, job_id):
        r = self.cli("status", job_id, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def jobs(self):
        r = self.cli("jobs", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return {j["id"]: j for j in json.loads(r.stdout)["jobs"]}

    def kill_coordinator(self):
        pid = self.pids()[0]
        os.kill(pid, signal.SIGKILL)
        deadline = time.time() + 10
        while os.path.exists(f"/proc/{pid}") and time.time() < deadline:
            time.sleep(0.05)

    def restart_coordinator(self):
        r = self.cli("cluster", "restart-coordinator", "--timeout", "60")
        self.assertEqual(r.returncode, 0, r.stderr)

    def wait_finished(self, ids, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            jobs = self.jobs()
            if all(jobs[i]["state"] not in ("pending", "running") for i in ids):
                return jobs
            time.sleep(0.3)
        self.fail(f"{ids} did not finish within {timeout} s: {self.jobs()}")

    def integrity(self):
        db = sqlite3.connect(os.path.join(self.home, "jobs", "jobs.db"))
        try:
            return db.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            db.close()

    def test_kill9_mid_training_keeps_finished_interrupts_running_runs_queued(self):
        self.up(*TOPOLOGY)
        small = self.write_job("small", 3)
        finished = [self.submit(small) for _ in range(5)]
        self.wait_finished(finished)
        before = {i: self.status_json(i) for i in finished}
        long_id = self.submit(self.write_job("long", 100000))
        queued = [self.submit(small) for _ in range(3)]
        deadline = time.time() + 60
        while not json.loads(self.status_json(long_id))["steps"]:
            self.assertLess(time.time(), deadline, "the long job ran no step in 60 s")
            time.sleep(0.2)

        self.kill_coordinator()
        self.restart_coordinator()

        for i in finished:
            self.assertEqual(self.status_json(i), before[i], f"{i} changed across the restart")
        jobs = self.wait_finished(queued)
        for i in queued:
            self.assertEqual(jobs[i]["state"], "succeeded", jobs[i])
        interrupted = json.loads(self.status_json(long_id))
        self.assertEqual(interrupted["state"], "interrupted")
        self.assertIn("the coordinator stopped while it ran", interrupted["error"])
        self.assertGreater(len(interrupted["steps"]), 0, "the steps it had finished were lost")
        # Numbers are never given twice.
        self.assertEqual(self.submit(small), "job-10")
        self.assertEqual(self.integrity(), "ok")

    def test_sigterm_keeps_the_queue_and_the_running_job_for_the_next_coordinator(self):
        self.up(*TOPOLOGY)
        text = job_text("resumable", 100000) + "checkpoint_every: 5\nmax_restarts: 1\n"
        path = os.path.join(self.home, "resumable.yaml")
        with open(path, "w") as f:
            f.write(text)
        resumable = self.submit(path)
        # One of higher priority: the interrupted job still goes before it.
        r = self.cli("submit", self.write_job("small", 3), "--priority", "5")
        self.assertEqual(r.returncode, 0, r.stderr)
        queued = [r.stdout.split()[0], self.submit(self.write_job("small", 3))]
        deadline = time.time() + 60
        while json.loads(self.status_json(resumable)).get("checkpoint_step", 0) < 5:
            self.assertLess(time.time(), deadline, "no checkpoint in 60 s")
            time.sleep(0.1)
        # A coordinator that still runs is stopped with SIGTERM, then started again.
        self.restart_coordinator()
        jobs = self.jobs()
        for i in queued:
            self.assertEqual(jobs[i]["state"], "pending", jobs[i])  # not cancelled by the shutdown
        job = json.loads(self.status_json(resumable))
        self.assertEqual(job["restarts"], 1, job)
        self.assertIn("the coordinator restarted", job["restart_reason"])
        self.assertIn(job["state"], ("pending", "running"))
        # It goes first, from its checkpoint; then the queue.
        deadline = time.time() + 60
        while len(json.loads(self.status_json(resumable))["steps"]) < job["checkpoint_step"] + 3:
            self.assertLess(time.time(), deadline, "the resumed job ran no step in 60 s")
            time.sleep(0.1)
        self.assertEqual(json.loads(self.status_json(queued[0]))["state"], "pending")
        self.assertEqual(self.cli("cancel", resumable).returncode, 0)
        jobs = self.wait_finished(queued)
        for i in queued:
            self.assertEqual(jobs[i]["state"], "succeeded", jobs[i])

    def test_burst_from_four_clients_with_a_kill_loses_and_duplicates_nothing(self):
        # Every record kept, so that a missing one is a lost one (the default keeps 100 finished).
        self.env["TPUEMU_KEEP_FINISHED_JOBS"] = "1000"
        self.up(*TOPOLOGY)
        valid = self.write_job("valid", 1)
        invalid = self.write_job("invalid", 1, data_parallelism=3)  # 3 ways on 8 chips
        accepted, refused, unanswered = {}, [], []  # unanswered: the coordinator was down
        surprises = []  # what a client thread saw that the test does not expect
        lock = threading.Lock()

        def client(c):
            try:
                submit_all(c)
            except Exception as e:  # noqa: BLE001 -- reported by the main thread
                with lock:
                    surprises.append(repr(e))

        def submit_all(c):
            for i in range(50):
                path = invalid if i % 4 == 3 else valid
                while True:
                    r = self.cli("submit", path, "--json", timeout=60)
                    if r.returncode == 0:
                        job = json.loads(r.stdout)
                        with lock:
                            self.assertNotIn(job["id"], accepted)
                            accepted[job["id"]] = path
                        break
                    if "ici_data_parallelism=3" in r.stderr:
                        with lock:
                            refused.append(r.stderr)
                        break
                    # Down, or up but waiting for its workers: try again.
                    self.assertTrue("no coordinator answers" in r.stderr or "not ready" in r.stderr or
                                    "unavailable" in r.stderr.lower(), r.stderr)
                    with lock:
                        unanswered.append(path)
                    time.sleep(0.1)

        threads = [threading.Thread(target=client, args=(c,)) for c in range(4)]
        for t in threads:
            t.start()
        while len(accepted) < 60:
            time.sleep(0.05)
        self.kill_coordinator()
        self.assertEqual(self.integrity(), "ok")  # the file as the kill left it
        self.restart_coordinator()
        for t in threads:
            t.join()
        self.assertEqual(surprises, [])
        self.assertGreater(len(unanswered), 0, "the kill fell after the burst, not during it")

        invalid_per_client = sum(1 for i in range(50) if i % 4 == 3)
        self.assertEqual(len(refused), 4 * invalid_per_client)
        self.assertEqual(len(accepted), 4 * (50 - invalid_per_client))
        self.assertTrue(all(p == valid for p in accepted.values()))
        jobs = self.wait_finished(list(accepted), timeout=300)
        for job_id in accepted:
            self.assertIn(job_id, jobs, f"{job_id} was accepted and then lost")
            self.assertIn(jobs[job_id]["state"], ("succeeded", "interrupted"), jobs[job_id])
        # A submit the kill cut off may have been recorded without its answer
        # reaching the client: at most one per client.
        extra = set(jobs) - set(accepted)
        self.assertLessEqual(len(extra), 4, extra)
        self.assertEqual(len(jobs), len(set(jobs)))
        self.assertEqual(self.integrity(), "ok")


    def wait_checkpoint(self, job_id):
        deadline = time.time() + 60
        while json.loads(self.status_json(job_id)).get("checkpoint_step", 0) == 0:
            self.assertLess(time.time(), deadline, "no checkpoint within 60 s")
            time.sleep(0.1)

    def test_a_users_resume_leaves_max_restarts_to_lost_workers(self):
        self.up(*TOPOLOGY)
        job_id = self.submit(self.write("mine.yaml", job_text("mine", 100000) + "checkpoint_every: 2\nmax_restarts: 1\n"))
        self.wait_checkpoint(job_id)
        self.assertEqual(self.cli("cancel", job_id).returncode, 0)
        self.assertEqual(self.cli("resume", job_id).returncode, 0)
        job = json.loads(self.status_json(job_id))
        self.assertEqual((job["restarts"], job.get("automatic_restarts", 0)), (1, 0))
        deadline = time.time() + 60
        while json.loads(self.status_json(job_id))["state"] != "running":
            self.assertLess(time.time(), deadline, "the resumed job did not start in 60 s")
            time.sleep(0.1)
        # A lost worker: max_restarts' one restart is still there to take.
        os.kill(self.pids()[2], signal.SIGKILL)
        deadline = time.time() + 30
        while json.loads(self.status_json(job_id))["state"] != "pending":
            self.assertLess(time.time(), deadline, f"not restarted: {self.status_json(job_id)}")
            time.sleep(0.1)
        job = json.loads(self.status_json(job_id))
        self.assertEqual((job["restarts"], job["automatic_restarts"]), (2, 1))
        self.assertIn("restart 1 of 1 (max_restarts)", job["restart_reason"])
        self.assertEqual(self.cli("cancel", job_id).returncode, 0)

    def test_a_job_resumed_ahead_stays_ahead_through_another_restart(self):
        self.up(*TOPOLOGY)
        resumed = self.submit(self.write("ahead.yaml", job_text("ahead", 100000) + "checkpoint_every: 2\nmax_restarts: 2\n"))
        self.wait_checkpoint(resumed)
        r = self.cli("submit", self.write_job("urgent", 3), "--priority", "10")
        self.assertEqual(r.returncode, 0, r.stderr)
        urgent = r.stdout.split()[0]
        # Both wait for a worker that is gone, so the queue's order shows.
        self.kill_coordinator()
        os.kill(self.pids()[2], signal.SIGKILL)
        for _ in range(2):
            self.cli("cluster", "restart-coordinator", "--timeout", "5")  # not ready: a worker is gone
            positions = {i: json.loads(self.status_json(i))["queue_position"] for i in (resumed, urgent)}
            self.assertEqual(positions, {resumed: 1, urgent: 2})
        self.assertEqual(self.cli("cancel", resumed).returncode, 0)

    def test_checkpointed_job_resumes_after_a_killed_worker_and_a_killed_coordinator(self):
        self.up(*TOPOLOGY)
        text = job_text("ckpt", 40).replace("emb_dim: 256", "emb_dim: 512") + "checkpoint_every: 5\nmax_restarts: 1\n"
        path = os.path.join(self.home, "ckpt.yaml")
        with open(path, "w") as f:
            f.write(text)
        whole = self.cli("submit", path, "--wait", "--json", timeout=300)
        self.assertEqual(whole.returncode, 0, whole.stderr)
        whole = json.loads(whole.stdout)

        def after_steps(job_id, n):
            deadline = time.time() + 120
            while len(json.loads(self.status_json(job_id))["steps"]) < n:
                self.assertLess(time.time(), deadline, f"{job_id} did not reach step {n}")
                time.sleep(0.1)

        def assert_same_as_whole(job_id, reason):
            job = json.loads(self.status_json(job_id))
            self.assertEqual(job["state"], "succeeded", job.get("error"))
            self.assertEqual(job["restarts"], 1)
            self.assertIn(reason, job["restart_reason"])
            self.assertIn("from its checkpoint (steps 0-", job["restart_reason"])
            self.assertEqual([s["loss"] for s in job["steps"]], [s["loss"] for s in whole["steps"]])
            self.assertEqual(job["summary"]["param_l2"], whole["summary"]["param_l2"])

        # A worker killed: the job fails, waits for the worker, and goes on.
        killed_worker = self.submit(path)
        after_steps(killed_worker, 12)
        os.kill(self.pids()[2], signal.SIGKILL)
        # Straight from running to pending: a client following it never sees it fail.
        seen, deadline = [], time.time() + 30
        while not seen or seen[-1] != "pending":
            self.assertLess(time.time(), deadline, f"not queued again within 30 s: {seen}")
            seen.append(json.loads(self.status_json(killed_worker))["state"])
        self.assertNotIn("failed", seen)
        r = self.cli("cluster", "restart-worker", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.wait_finished([killed_worker], timeout=300)
        assert_same_as_whole(killed_worker, "was lost")

        # The coordinator killed: started again, it resumes the job rather than interrupting it.
        killed_coordinator = self.submit(path)
        after_steps(killed_coordinator, 12)
        self.kill_coordinator()
        self.restart_coordinator()
        self.wait_finished([killed_coordinator], timeout=300)
        assert_same_as_whole(killed_coordinator, "the coordinator restarted")
        # Its trace holds the steps this coordinator ran, and says so.
        r = self.cli("trace", killed_coordinator, "-o", os.path.join(self.home, "resumed.json"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("are not in it, as they ran before the coordinator's last restart", r.stdout + r.stderr)
        # Finished jobs leave no checkpoint behind.
        self.assertEqual(os.listdir(os.path.join(self.home, "checkpoints")), [])

    def test_a_cancelled_jobs_checkpoints_stay_while_it_can_resume_and_go_with_its_record(self):
        # One finished job's record kept: the next job to finish drops the cancelled one's;
        # its checkpoints go one sweep after a sweep that found it forgotten.
        self.env["TPUEMU_KEEP_FINISHED_JOBS"] = "1"
        self.env["TPUEMU_DROP_CHECKPOINTS_AFTER"] = "1s"
        self.up(*TOPOLOGY)
        job_id = self.submit(self.write("kept.yaml", job_text("kept", 100000) + "checkpoint_every: 2\n"))
        self.wait_checkpoint(job_id)
        self.assertEqual(self.cli("cancel", job_id).returncode, 0)
        number = job_id.split("-")[1]
        checkpoints = os.path.join(self.home, "checkpoints", f"job-{number}")
        # Each worker asks every 10 s which of its checkpoints may go: a
        # resumable job's stay.
        time.sleep(12)
        self.assertTrue(os.listdir(checkpoints), "a cancelled job's checkpoints went while it could resume")
        other = self.submit(self.write("other.yaml", job_text("other", 2)))
        self.wait_finished([other])
        self.assertIn("was dropped", self.cli("status", job_id).stderr)
        deadline = time.time() + 35
        while os.path.exists(checkpoints):
            self.assertLess(time.time(), deadline, f"{checkpoints} stayed after its job's record was dropped")
            time.sleep(0.2)
        logs = ""
        for name in os.listdir(os.path.join(self.home, "logs")):
            if name.startswith("worker"):
                with open(os.path.join(self.home, "logs", name)) as f:
                    logs += f.read()
        self.assertIn(f"deleted the checkpoints of job-{number}", logs)

    def test_resume_on_a_pod_of_another_shape_is_refused_and_changes_nothing(self):
        self.up(*TOPOLOGY)
        # FSDP over the pod's 8 chips: each chip's checkpoint holds an eighth of the weights.
        text = (job_text("moved", 100000, data_parallelism=1).replace("ici_fsdp_parallelism: 1", "ici_fsdp_parallelism: -1")
                + "checkpoint_every: 2\n")
        job_id = self.submit(self.write("moved.yaml", text))
        deadline = time.time() + 60
        while json.loads(self.status_json(job_id)).get("checkpoint_step", 0) == 0:
            self.assertLess(time.time(), deadline, "no checkpoint within 60 s")
            time.sleep(0.1)
        self.assertEqual(self.cli("cancel", job_id).returncode, 0)
        before = json.loads(self.status_json(job_id))
        self.assertIn("on v5p:2x4", before["checkpoint_layout"])
        done = before["checkpoint_step"]  # steps done; the step lines count from 0
        self.assertIn(f"checkpoint: steps 0-{done - 1} done (checkpoint_every: 2); `tpuemu resume` starts at step {done}",
                      self.cli("status", job_id).stdout)
        self.cli("cluster", "down")

        # Eight chips again, as two slices: the job plans, but its shards are another size.
        self.up("--topology", "v5p:2x2", "--slices", "2", "--chips-per-host", "4")
        r = self.cli("resume", job_id)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(f"{job_id}'s checkpoint (steps 0-{before['checkpoint_step'] - 1} done) was written by mesh", r.stderr)
        self.assertIn("this pod would run it as mesh data=dcn(2)", r.stderr)
        self.assertIn("submit the job file again to start from step 0", r.stderr)
        after = json.loads(self.status_json(job_id))
        self.assertEqual((after["state"], after.get("restarts", 0)), ("cancelled", 0))
        self.assertEqual(after["checkpoint_layout"], before["checkpoint_layout"])
        self.cli("cluster", "down")

        # Its own shape takes it back.
        self.up(*TOPOLOGY)
        r = self.cli("resume", job_id)
        self.assertEqual(r.returncode, 0, r.stderr)
        deadline = time.time() + 60
        while len(json.loads(self.status_json(job_id))["steps"]) <= len(before["steps"]):
            self.assertLess(time.time(), deadline, "the resumed job ran no step in 60 s")
            time.sleep(0.2)
        self.assertEqual(json.loads(self.status_json(job_id))["state"], "running")


if __name__ == "__main__":
    unittest.main()
