#!/usr/bin/env python3
"""`tpuemu plan` as a user runs it, no pod: seed 001's question 3 (LLaMA-2 13B,
3M tokens, a v5p slice of 4096 chips) answered in its terms, a model file that
overrides a preset, and bad input refused with exit 2 naming what was wrong."""

import json
import os
import unittest

from cli_e2e_test import Pod

Q3 = ["plan", "--model", "llama2-13b", "--topology", "v5p:16x16x16", "--batch-tokens", "3M"]


class PlanTest(Pod):
    def test_question_3_in_the_seeds_terms(self):
        r = self.cli(*Q3, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["chips"], 4096)
        self.assertEqual(round(out["ici_intensity"]), 2550)
        plans = {p["strategy"]: p for p in reversed(out["plans"])}  # the best of each strategy
        # "We can't use pure data parallelism": 130 GB of parameters and Adam.
        self.assertFalse(plans["DP"]["fits"])
        self.assertIn("does not fit", plans["DP"]["why"])
        # "we cannot do FSDP alone": it fits, but 3M < 850 x 4096 = 3.48M.
        self.assertTrue(plans["FSDP"]["fits"])
        self.assertTrue(plans["FSDP"]["comms_bound"])
        self.assertAlmostEqual(plans["FSDP"]["critical_batch_tokens"] / 3.48e6, 1, delta=0.01)
        # "small subrings of 4 chips of tensor parallelism and ... the remaining
        # bandwidth of the first axis to FSDP": priced by the links each group
        # has (a line of 4; FSDP's chips 4 apart share the axis four ways), just
        # communication-bound; sub-rings of 2 are compute-bound, and first.
        best = out["plans"][0]
        self.assertEqual((best["strategy"], best["tensor"], best["comms_bound"]), ("FSDP+TP", 2, False), best)
        self.assertIn("sub-ring of 2", best["mesh"])
        four = next(p for p in out["plans"] if "sub-ring of 4" in p["mesh"])
        self.assertAlmostEqual(four["tensor_links"], 2 / 3)
        self.assertAlmostEqual(four["data_links"], 2 + 1 / 4)
        self.assertTrue(four["comms_bound"])

        text = self.cli(*Q3)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("choice: FSDP+TP, fsdp: y,z,x/8 (2048), tensor: x sub-ring of 2 (2)", text.stdout)
        self.assertIn("Adam moments (2 x fp32) alone 104 GB", text.stdout)

    def test_a_model_file_overrides_its_preset(self):
        path = os.path.join(self.home, "half.yaml")
        with open(path, "w") as f:
            f.write("model: llama2-13b\nbase_num_decoder_layers: 20\n")
        r = self.cli("plan", "--model", path, "--topology", "v5p:4x4", "--batch-tokens", "1M", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        full = json.loads(self.cli("plan", "--model", "llama2-13b", "--topology", "v5p:4x4", "--batch-tokens", "1M",
                                   "--json").stdout)
        self.assertLess(json.loads(r.stdout)["params"], 0.6 * full["params"])

    def test_a_job_file_is_planned_as_the_model_it_trains(self):
        root = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
        args = ["--topology", "v5p:8x8x8", "--batch-tokens", "4M", "--json"]
        r = self.cli("plan", "--model", os.path.join(root, "examples/jobs/llama3-70b.yaml"), *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        preset = json.loads(self.cli("plan", "--model", "llama3-70b", *args).stdout)
        of_job = json.loads(r.stdout)
        self.assertEqual(of_job["params"], preset["params"])
        self.assertEqual(of_job["plans"], preset["plans"])
        # A job without attention is no whole transformer: refused, naming what it lacks.
        r = self.cli("plan", "--model", os.path.join(root, "examples/jobs/dp.yaml"), *args)
        self.assertEqual(r.returncode, 2)
        self.assertIn("dp.yaml: base_num_query_heads is missing", r.stderr)

    def test_verify_runs_the_meshes_a_job_can_hold(self):
        """LLaMA-3 8B on 4096 v5p chips: the planner's third, fourth and sixth meshes (FSDP and DP
        over x,y,z; FSDP over y,z with TP over x) run shape-only with one chip for all; their
        transfers take what the formulas say, and the sixth's step is longer by the activations'
        gathers the chips wait for (the formulas hide them behind the matmuls). Meshes no job can
        hold say why."""
        args = ["plan", "--model", "llama3-8b", "--topology", "v5p:16x16x16", "--batch-tokens", "4M", "--verify", "6"]
        r = self.cli(*args, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        plans = json.loads(r.stdout)["plans"]
        self.assertNotIn("verify", plans[6])
        ran = [p for p in plans[:6] if p["verify"]["ran"]]
        # Over x,y,z the power-of-two arrays split into three unequal axis parts (they were refused).
        self.assertEqual([p["mesh"] for p in ran],
                         ["fsdp: x,y,z (4096)", "data: x,y,z (4096)", "fsdp: y,z (256), tensor: x (16)"])
        for p in ran:
            self.assertAlmostEqual(p["verify"]["emulated_comm_s"] / p["verify"]["predicted_comms_s"], 1, delta=0.1)
        v = ran[2]["verify"]
        self.assertEqual(v["engine"], "one chip for all")
        self.assertIn("fsdp=y,z(256) tensor=x(16)", v["job_mesh"])
        self.assertAlmostEqual(v["emulated_comm_s"] / v["predicted_comms_s"], 1, delta=0.1)
        self.assertGreaterEqual(v["emulated_compute_s"], v["predicted_compute_s"])  # elementwise work and Adam too
        self.assertLess(v["emulated_compute_s"], 1.2 * v["predicted_compute_s"])
        self.assertGreater(v["emulated_step_s"], v["predicted_step_s"])
        self.assertIn("sub-ring", plans[0]["verify"]["why_not"])

        text = self.cli(*args)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("verify: the top 6 meshes' MLP blocks", text.stdout)
        self.assertIn("not run: a sub-ring of an axis is not a training mesh", text.stdout)
        # The batch each ran mesh holds: 4M tokens rounded to what splits over its shards.
        self.assertRegex(text.stdout, r"one chip for all, batch (4000000|3997696) tokens")

    def test_a_pipeline_is_planned_and_verified(self):
        """LLaMA-3 8B (32 layers) on 64 v5p chips: 4 stages along x, FSDP over y,z, M = 8
        microbatches. The bubble costs (S-1)/(M+S-1) of the step and the weights cross once per
        step; the emulated pod (every chip a thread: pipelines have no one-chip engine) runs the
        same mesh, its step within 15% of the formulas' and its transfers within 30%."""
        r = self.cli("plan", "--model", "llama3-8b", "--topology", "v5p:4x4x4", "--batch-tokens", "1M",
                     "--verify", "5", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        pp = [p for p in json.loads(r.stdout)["plans"] if p["strategy"] == "PP+FSDP"]
        self.assertEqual(len(pp), 1)
        p = pp[0]
        self.assertEqual((p["stages"], p["microbatches"], p["data"]), (4, 8, 16))
        self.assertAlmostEqual(p["mfu"], 8 / 11, places=9)
        self.assertIn("the bubble (S-1)/(M+S-1) idles 27% of the step", p["why"])
        v = p["verify"]
        self.assertTrue(v["ran"], v)
        self.assertEqual(v["engine"], "every chip")
        self.assertIn("pipeline=x(4)", v["job_mesh"])
        self.assertAlmostEqual(v["emulated_step_s"] / v["predicted_step_s"], 1, delta=0.15)
        self.assertAlmostEqual(v["emulated_comm_s"] / v["predicted_comms_s"], 1, delta=0.3)

    def test_bad_input_is_refused_naming_it(self):
        for args, needle in [
            (["--model", "llama9", "--topology", "v5p:4x4", "--batch-tokens", "1M"], "neither a preset"),
            (["--model", "llama2-13b", "--topology", "v5p:4x4", "--batch-tokens", "0"], "--batch-tokens '0'"),
            (["--model", "llama2-13b", "--topology", "v5p:4x4", "--batch-tokens", "lots"], "--batch-tokens 'lots'"),
            (["--model", "llama2-13b", "--topology", "v5p:4x4", "--batch-tokens", "1e30"], "from 1 to 1e12"),
            (["--model", "llama2-13b", "--topology", "v5p:4x4", "--batch-tokens", "1.5"], "in whole tokens"),
            (["--model", "/dev/zero", "--topology", "v5p:4x4", "--batch-tokens", "1M"], "more than the limit"),
            (["--model", "llama2-7b", "--topology", "v5p:1x1", "--batch-tokens", "1M"],
             "(4 is the default: give --chips-per-host N)"),
            (["--model", "llama2-13b", "--topology", "tpu9:4x4", "--batch-tokens", "1M"], "tpu9"),
            (["--model", self.home, "--topology", "v5p:4x4", "--batch-tokens", "1M"], "': a directory; give a preset"),
        ]:
            r = self.cli("plan", *args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
            self.assertIn(needle, r.stderr, args)
        bad = os.path.join(self.home, "bad.yaml")
        for text, needle in [
            ("model: llama2-13b\nbase_emb: 4096\n", "key 'base_emb' is not a model key"),
            # Lists and maps where a word goes crashed the CLI (a yaml-cpp conversion error, exit 134).
            ("model: [a, b]\n", "model: must be a single value, not a list, a map or empty"),
            ("[1, 2]: 3\n", "a key must be a word, not a list, a map or empty"),
            ("model: llama2-7b\nhead_dim: 64\nhead_dim: 128\n", "head_dim is given twice"),
            ("model: llama2-7b\nhead_dim: 1000000000000\n", "head_dim 1000000000000: must be from 1 to 65536"),
        ]:
            with open(bad, "w") as f:
                f.write(text)
            r = self.cli("plan", "--model", bad, "--topology", "v5p:4x4", "--batch-tokens", "1M")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(needle, r.stderr)


if __name__ == "__main__":
    unittest.main()
