#!/usr/bin/python3
"""The Python client (client/python/tpuemu) against a real local pod: a training job submitted as
a dict and followed step by step, a collective, a bad job and a cancel, each compared with what
`tpuemu status --json` says of the same job. Runs on Debian's python3 (its python3-grpcio and
python3-protobuf), with the stubs the build generated in build/python.

Reuses cli_e2e_test's Pod: its own TPUEMU_HOME, every process stopped."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.environ["TPUEMU_BIN"], "..", "python"))
from cli_e2e_test import Pod  # noqa: E402

import tpuemu  # noqa: E402

JOB = {
    "name": "from-python", "ici_fsdp_parallelism": -1, "emb_dim": 64, "mlp_dim": 256, "num_layers": 2,
    "global_batch_tokens": 256, "steps": 4, "seed": 3, "opt_type": "adam", "learning_rate": 0.01,
}


class PythonClientTest(Pod):
    def status_json(self, job_id):
        r = self.cli("status", job_id, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_jobs_from_python_are_the_pods_jobs(self):
        self.up("--topology", "v5p:2x2", "--slices", "2", "--chips-per-host", "2")
        os.environ["TPUEMU_HOME"] = self.home  # Pod() finds the pod `cluster up` recorded
        os.environ.pop("TPUEMU_COORDINATOR", None)
        with tpuemu.Pod() as pod:
            status = pod.status()
            self.assertTrue(status["ready"])
            self.assertEqual(len(status["workers"]), 4)

            # A training job as a dict, its steps as they finish.
            job = pod.submit(JOB)
            steps = list(pod.watch(job["id"]))
            done = pod.job(job["id"])
            cli = self.status_json(job["id"])
            self.assertEqual(done["state"], "succeeded")
            self.assertEqual([s["step"] for s in steps], [0, 1, 2, 3])
            self.assertEqual([s["loss"] for s in steps], [s["loss"] for s in cli["steps"]])
            self.assertEqual([s["emulated_step_s"] for s in steps], [s["emulated_step_s"] for s in cli["steps"]])
            self.assertEqual(done["train_summary"]["param_l2"], cli["summary"]["param_l2"])
            self.assertEqual(len(tpuemu.steps_frame(done)), 4)  # a DataFrame with pandas, else the list

            # A collective: its result as the CLI shows it; axes and bytes also as the CLI takes them.
            result = pod.bench_collective(op="all-reduce", axes=("x", "dcn"), bytes=1 << 20)
            self.assertTrue(result["correct"])
            listed = pod.jobs()
            self.assertEqual(result["job"], listed[-1]["id"])
            gathered = self.status_json(result["job"])
            self.assertEqual(result["emulated_s"], gathered["result"]["emulated_s"])
            self.assertEqual(result["busbw_gbps"], gathered["result"]["busbw_gbps"])
            self.assertEqual([j["id"] for j in listed],
                             [j["id"] for j in json.loads(self.cli("jobs", "--json").stdout)["jobs"]])
            again = pod.bench_collective(op="all-reduce", axes="x,dcn", bytes="1MiB")
            self.assertEqual(again["emulated_s"], result["emulated_s"])
            number = int(again["job"][len("job-"):])
            self.assertEqual(pod.job(number)["id"], again["job"])  # the number alone, as the CLI takes it
            for bad in ({"dtype": "fp8"}, {"bytes": "8 MiB"}, {"bytes": "lots"}):
                with self.assertRaises(tpuemu.TpuemuError) as refused:
                    pod.bench_collective(**bad)
                self.assertEqual(refused.exception.code.name, "INVALID_ARGUMENT", bad)
                self.assertIn(next(iter(bad)), refused.exception.message)

            # A sharded matmul in the seeds' notation, checked against one device by the pod.
            product = pod.matmul("A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]", "I=64,J=32,K=64")
            self.assertTrue(product["correct"])
            self.assertEqual(product["emulated_s"], self.status_json(pod.jobs()[-1]["id"])["result"]["emulated_s"]["total"])

            # A bad job is refused naming the key, as `tpuemu submit` would.
            with self.assertRaises(tpuemu.TpuemuError) as refused:
                pod.submit(dict(JOB, ici_data_parallelism=3))
            self.assertIn("ici_data_parallelism", refused.exception.message)
            self.assertEqual(refused.exception.code.name, "INVALID_ARGUMENT")

            # Not a job: said as the caller's error, not a Python one from the stubs.
            for bad in (["a"], {"priority": 10**12}):
                with self.assertRaises(tpuemu.TpuemuError) as refused:
                    pod.submit(bad) if isinstance(bad, list) else pod.submit(JOB, **bad)
                self.assertEqual(refused.exception.code.name, "INVALID_ARGUMENT")
            # One line of YAML is the file's text, not a path.
            with self.assertRaises(tpuemu.TpuemuError) as refused:
                pod.submit("emb_dim: 8")
            self.assertIn("mlp_dim: missing", refused.exception.message)
            # A missing file is missing, even with a colon in its path.
            with self.assertRaises(tpuemu.TpuemuError) as refused:
                pod.submit("C:/no/such/dp.yaml")
            self.assertEqual(refused.exception.code.name, "NOT_FOUND")
            # --dims as a dict.
            self.assertTrue(pod.matmul("A[I_X, J] * B[J, K] -> C[I_X, K]", {"I": 8, "J": 8, "K": 8})["correct"])

            # A job file by path.
            path = os.path.join(self.home, "job.yaml")
            with open(path, "w") as f:
                f.write("".join(f"{k}: {v}\n" for k, v in dict(JOB, steps=1).items()))
            self.assertEqual(pod.submit(path, wait=True)["state"], "succeeded")

            # A cancel.
            long = pod.submit(dict(JOB, steps=100000), priority=2)
            self.assertEqual(long["priority"], 2)
            next(pod.watch(long["id"]))
            # A collective queued behind it, waited for with a timeout: the wait ends, and the
            # job, whose result was for that call, is cancelled rather than left to run later.
            with self.assertRaises(tpuemu.TpuemuError) as late:
                pod.bench_collective(axes="x", bytes="64KiB", timeout_s=1)
            self.assertEqual(late.exception.code.name, "DEADLINE_EXCEEDED")
            self.assertIn("was cancelled", late.exception.message)
            self.assertEqual(pod.jobs()[-1]["state"], "cancelled")
            with self.assertRaises(tpuemu.TpuemuError) as late:  # a bare wait leaves the job alone
                pod.wait(long["id"], timeout_s=0.5)
            self.assertEqual(late.exception.code.name, "DEADLINE_EXCEEDED")
            self.assertEqual(pod.job(long["id"])["state"], "running")
            pod.cancel(long["id"])
            self.assertEqual(pod.wait(long["id"])["state"], "cancelled")
            self.assertEqual(self.status_json(long["id"])["state"], "cancelled")
            # Resumed, as `tpuemu resume` does; a job that succeeded is not.
            self.assertIn(pod.resume(long["id"])["state"], ("pending", "running"))
            pod.cancel(long["id"])
            self.assertEqual(pod.wait(long["id"])["state"], "cancelled")
            with self.assertRaises(tpuemu.TpuemuError) as refused:
                pod.resume(job["id"])
            self.assertIn("submit its job file again", refused.exception.message)

            # No pod: said as the CLI says it, with what to do.
            self.assertEqual(self.cli("cluster", "down").returncode, 0)
            with self.assertRaises(tpuemu.TpuemuError) as gone:
                pod.status()
            self.assertEqual(gone.exception.code.name, "UNAVAILABLE")
            self.assertIn("is the pod running?", gone.exception.message)


if __name__ == "__main__":
    unittest.main()
