#!/usr/bin/env python3
"""Shape-only runs as a user starts them: a job with `values: none` on a pod
of worker processes (frames with no payload over gRPC and TLS) reports the
emulated figures of the same job with real values, and `tpuemu simulate`
prints them with no pod; one chip stands for all 4096 chips of a v5p slice;
a trace is written; bad input is refused with exit 2, saying why."""

import json
import os
import unittest

from cli_e2e_test import Pod

JOB = """name: fsdp-tp
ici_fsdp_parallelism: 2
ici_tensor_parallelism: 4
emb_dim: 256
mlp_dim: 1024
num_layers: 2
global_batch_tokens: 256
steps: 2
seed: 2
"""

# Seed 001's MLP block at LLaMA-2 13B's sizes (D 5120, F 13824, 40 layers),
# FSDP over y,z (256) and tensor parallelism over x (16), 4M tokens.
BIG = """name: llama2-13b-mlp
ici_fsdp_parallelism: 256
ici_tensor_parallelism: 16
emb_dim: 5120
mlp_dim: 13824
num_layers: 40
global_batch_tokens: 4194304
"""

# What every step reports on the emulated clock, and the bytes each chip sent.
EMULATED = ("emulated_step_s", "compute_s", "compute_split_s", "exposed_comm_s", "comm_s", "mfu",
            "tokens_per_s_emulated", "comm_bytes_per_chip", "memory_per_chip", "peak_activation_bytes")


class SimulateTest(Pod):
    def assert_same_emulated(self, got, want):
        self.assertEqual(len(got["steps"]), len(want["steps"]))
        for g, w in zip(got["steps"], want["steps"]):
            for key in EMULATED:
                if isinstance(w[key], dict):
                    self.assertEqual(g[key].keys(), w[key].keys(), key)
                    for k in w[key]:
                        self.assertAlmostEqual(g[key][k], w[key][k], delta=1e-9 * abs(w[key][k]), msg=f"{key} {k}")
                else:
                    self.assertAlmostEqual(g[key], w[key], delta=1e-9 * abs(w[key]), msg=key)

    def test_shape_only_on_a_pod_and_simulated_equal_real_values(self):
        self.up("--topology", "v5p:2x4")
        real_file = self.write("real.yaml", JOB)
        shape_file = self.write("shape.yaml", JOB + "values: none\n")
        real = self.cli("submit", real_file, "--wait", "--json")
        self.assertEqual(real.returncode, 0, real.stderr)
        shape = self.cli("submit", shape_file, "--wait", "--json")
        self.assertEqual(shape.returncode, 0, shape.stderr)
        real, shape = json.loads(real.stdout), json.loads(shape.stdout)
        self.assertGreater(real["steps"][0]["loss"], 0)
        self.assertIsNone(shape["steps"][0]["loss"])
        self.assertNotIn("param_l2", shape["summary"])
        self.assert_same_emulated(shape, real)

        text = self.cli("submit", shape_file, "--wait")
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("loss - (shape)", text.stdout)
        self.assertIn("shape-only: no values", text.stdout)

        # No pod needed: the real-values file, simulated, is the same job shape-only.
        sim = self.cli("simulate", real_file, "--topology", "v5p:2x4", "--json")
        self.assertEqual(sim.returncode, 0, sim.stderr)
        sim = json.loads(sim.stdout)
        self.assertEqual(sim["simulation"]["engine"], "every chip")
        self.assertIn("axis x (2 chips) does not wrap around", sim["simulation"]["why"])
        self.assertEqual(sim["state"], "succeeded")
        self.assertIsNone(sim["steps"][0]["loss"])
        self.assert_same_emulated(sim, real)

    def test_two_slices_simulated_as_the_pod_with_its_chips_per_host(self):
        """Over DCN a host's bandwidth is shared by its chips: simulate takes the pod's
        --chips-per-host (it used 4 whatever the pod had: 123 us against the pod's 72.7 us)."""
        self.up("--topology", "v5p:2x4", "--slices", "2", "--chips-per-host", "2")
        job = self.write("dp.yaml", JOB)
        real = self.cli("submit", job, "--wait", "--json")
        self.assertEqual(real.returncode, 0, real.stderr)
        sim = self.cli("simulate", job, "--topology", "v5p:2x4", "--slices", "2", "--chips-per-host", "2", "--json")
        self.assertEqual(sim.returncode, 0, sim.stderr)
        self.assert_same_emulated(json.loads(sim.stdout), json.loads(real.stdout))

    def test_one_chip_stands_for_a_4096_chip_slice(self):
        path = self.write("big.yaml", BIG)
        r = self.cli("simulate", path, "--topology", "v5p:16x16x16", "--json", timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["simulation"]["chips"], 4096)
        self.assertEqual(out["simulation"]["engine"], "one chip for all")
        self.assertLess(out["simulation"]["peak_rss_bytes"], 1 << 30)
        step = out["steps"][0]
        # Seed 001's table per layer and chip, bf16: FSDP 12 D F/T (N-1)/N, TP 8 B D (N-1)/N.
        d, f, layers, tokens, n_fsdp, n_tp = 5120, 13824, 40, 4194304, 256, 16
        self.assertEqual(step["comm_bytes_per_chip"]["fsdp"], 12 * d * f // n_tp * (n_fsdp - 1) // n_fsdp * layers)
        self.assertEqual(step["comm_bytes_per_chip"]["tensor"],
                         8 * tokens // n_fsdp * d * (n_tp - 1) // n_tp * layers)
        self.assertGreater(step["mfu"], 0.3)

        text = self.cli("simulate", path, "--topology", "v5p:16x16x16", timeout=300)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("(4096 chips), in this process: one chip stands for all", text.stdout)
        self.assertIn("FSDP: 12 D F/T (N-1)/N", text.stdout)

    def test_the_llama3_70b_example(self):
        example = os.path.join(os.path.dirname(__file__), "../../examples/jobs/llama3-70b.yaml")
        r = self.cli("simulate", example, "--topology", "v5p:8x16x32", "--json", timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["simulation"]["engine"], "one chip for all")
        step = out["steps"][0]
        # Seed 001's table for a block of P parameters, LLaMA's 3 MLP matrices
        # and attention's 2 D (Nq + Nkv) H: FSDP 6 P/T (N-1)/N per layer, bf16;
        # TP with full remat 5 gathers or reduce-scatters of B D per part, 20 B D bytes.
        # The vocabulary's per step (docs/jobs.md, "Vocabulary"), one microbatch:
        # FSDP 2 (2 + 3) V D/T (N-1)/N, TP 2 (4 B D + 3 B T) (N-1)/N.
        d, f, layers, n_fsdp, n_tp, nq, nkv, h, seq, v = 8192, 28672, 80, 512, 8, 64, 8, 128, 8192, 128256
        p = 3 * d * f + 2 * d * (nq + nkv) * h
        tokens = 4194304
        b = tokens // n_fsdp
        self.assertEqual(step["comm_bytes_per_chip"]["fsdp"], 6 * p // n_tp * (n_fsdp - 1) // n_fsdp * layers +
                         10 * d * v // n_tp * (n_fsdp - 1) // n_fsdp)
        self.assertEqual(step["comm_bytes_per_chip"]["tensor"],
                         20 * b * d * (n_tp - 1) // n_tp * layers + 2 * (4 * b * d + 3 * b * n_tp) * (n_tp - 1) // n_tp)
        # Model flops: 6 P per token, and attention's q k^T and p v (4 S Nq H forward) three times;
        # the vocabulary projection's 6 D V.
        self.assertEqual(out["summary"]["model_flops_per_step"],
                         (3 * (2 * p + 4 * seq * nq * h) * layers + 6 * d * v) * tokens)

    def test_trace_of_a_simulated_job(self):
        job = self.write("job.yaml", JOB.replace("ici_fsdp_parallelism: 2", "ici_fsdp_parallelism: 4"))
        out = os.path.join(self.home, "trace.json")
        r = self.cli("simulate", job, "--topology", "v5p:4x4", "--trace", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("the chip that stood for all", r.stdout)
        with open(out) as f:
            events = json.load(f)["traceEvents"]
        names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
        self.assertIn("chip 0", names)
        self.assertTrue(any(n.startswith("link 0->") for n in names), names)
        spans = [e for e in events if e["ph"] == "X"]
        self.assertTrue(any(e["name"].startswith("step 1: ") for e in spans))
        self.assertTrue(any("all-gather fsdp (" in e["name"] and "chunks)" in e["name"] for e in spans))

    def test_bad_input_is_refused_saying_why(self):
        job = self.write("job.yaml", JOB)
        cases = [
            (["simulate", job, "--topology", "v5p:2x4", "--engine", "one-chip"],
             "axis x (2 chips) does not wrap around"),
            (["simulate", job, "--topology", "v5p:2x4", "--engine", "fast"], "--engine"),
            (["simulate", job], "--topology is required"),
            (["simulate", job, "--topology", "v9:4"], "v9"),
            (["simulate", job, "--topology", "v5p:4x4"], "must be the chips per slice (16)"),
            (["simulate", self.write("ckpt.yaml", JOB + "checkpoint_every: 1\n"), "--topology", "v5p:2x4"],
             "checkpoint_every: 1: a shape-only job"),
            (["reference", self.write("shape.yaml", JOB + "values: none\n")], "tpuemu simulate"),
            # A thread per chip has a ceiling; refused at once, not after gigabytes of set-up.
            (["simulate", self.write("wide.yaml", "name: wide\nici_data_parallelism: -1\nici_fsdp_parallelism: 1\n"
                                     "emb_dim: 128\nmlp_dim: 1024\nnum_layers: 1\nglobal_batch_tokens: 8192\nsteps: 1\n"),
              "--topology", "v5p:16x16x32", "--engine", "every-chip"], "at most 4096"),
            # A job that does not fit is said as such first, naming the file.
            (["simulate", job, "--topology", "v5p:16x16x32", "--engine", "every-chip"],
             f"{job}: ici_data_parallelism=1"),
            (["simulate", job, "--topology", "v5p:2x4", "--trace", ""], "--trace: '': give the file to write"),
        ]
        for args, needle in cases:
            r = self.cli(*args)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(needle, r.stderr, args)
            self.assertNotIn("Traceback", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.home, "pod.json")))
        # The job's own refusal names the file the user edits, as `submit` does, not the job's name.
        r = self.cli("simulate", job, "--topology", "v5p:4x4")
        self.assertTrue(r.stderr.startswith(f"error: {job}: "), r.stderr)


if __name__ == "__main__":
    unittest.main()
