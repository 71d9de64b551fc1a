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
        # bandwidth of the first axis to FSDP": compute-bound, and first.
        best = out["plans"][0]
        self.assertEqual((best["strategy"], best["tensor"], best["comms_bound"]), ("FSDP+TP", 4, False), best)
        self.assertIn("sub-ring of 4", best["mesh"])

        text = self.cli(*Q3)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("choice: FSDP+TP, fsdp: y,z,x/4 (1024), tensor: x sub-ring of 4 (4)", text.stdout)
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

    def test_bad_input_is_refused_naming_it(self):
        for args, needle in [
            (["--model", "llama9", "--topology", "v5p:4x4", "--batch-tokens", "1M"], "neither a preset"),
            (["--model", "llama2-13b", "--topology", "v5p:4x4", "--batch-tokens", "0"], "--batch-tokens '0'"),
            (["--model", "llama2-13b", "--topology", "v5p:4x4", "--batch-tokens", "lots"], "--batch-tokens 'lots'"),
            (["--model", "llama2-13b", "--topology", "tpu9:4x4", "--batch-tokens", "1M"], "tpu9"),
        ]:
            r = self.cli("plan", *args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
            self.assertIn(needle, r.stderr, args)
        bad = os.path.join(self.home, "bad.yaml")
        with open(bad, "w") as f:
            f.write("model: llama2-13b\nbase_emb: 4096\n")
        r = self.cli("plan", "--model", bad, "--topology", "v5p:4x4", "--batch-tokens", "1M")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("key 'base_emb' is not a model key", r.stderr)


if __name__ == "__main__":
    unittest.main()
