#!/usr/bin/env python3
"""`tpuemu bench collective --plot` and `tpuemu plot` on a real local pod: the SVG files parse,
hold the series and axes docs/plots names, one point per size or step with the job's own figures.

Reuses cli_e2e_test's Pod: its own TPUEMU_HOME, every process stopped."""

import json
import os
import sys
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(__file__))
from cli_e2e_test import DP_JOB, Pod  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"


def series(path):
    """{name: [(x, y), ...]} and the axes' labels, from a chart file."""
    root = ET.parse(path).getroot()
    self_check = root.tag == SVG + "svg"
    found = {}
    for g in root.iter(SVG + "g"):
        if g.get("class") == "series":
            found[g.get("data-series")] = [(float(c.get("data-x")), float(c.get("data-y")))
                                           for c in g.iter(SVG + "circle")]
    axes = {g.get("class"): g.get("data-label") for g in root.iter(SVG + "g") if g.get("class", "").startswith("axis")}
    return self_check, found, axes


class PlotTest(Pod):
    def test_a_sweep_and_a_jobs_steps_plot_with_their_figures(self):
        self.up("--topology", "v5p:2x2", "--slices", "2", "--chips-per-host", "2")
        out = os.path.join(self.home, "bw.svg")
        r = self.cli("bench", "collective", "--op", "all-gather", "--axes", "x,y", "--bytes", "64KiB,1MiB,4MiB",
                     "--plot", out, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        results = json.loads(r.stdout)["results"]
        ok, found, axes = series(out)
        self.assertTrue(ok)
        self.assertEqual(axes, {"axis x": "V, the array (bytes)", "axis y": "bus bandwidth (GB/s, emulated clock)"})
        self.assertEqual(set(found), {"emulated", "closed form (predicted_s)", "seed's rule of thumb"})
        self.assertEqual(found["emulated"], [(res["bytes"], res["emulated_busbw_gbps"]) for res in results])
        for (_, emulated), (_, predicted), res in zip(found["emulated"], found["closed form (predicted_s)"], results):
            self.assertAlmostEqual(predicted, emulated * res["ratio"], delta=1e-9 * predicted)

        r = self.cli("submit", DP_JOB, "--wait", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        job = json.loads(r.stdout)
        steps_svg = os.path.join(self.home, "steps.svg")
        r = self.cli("plot", job["id"], "-o", steps_svg)
        self.assertEqual(r.returncode, 0, r.stderr)
        ok, found, axes = series(steps_svg)
        self.assertTrue(ok)
        self.assertEqual(axes, {"axis x": "step", "axis y": "emulated time (us)"})
        self.assertIn("compute", found)
        self.assertEqual([y for _, y in found["emulated step"]], [s["emulated_step_s"] * 1e6 for s in job["steps"]])
        self.assertTrue(any(name.startswith("exposed ") for name in found), found.keys())

        # A collective job has no steps to plot: the error says what to use instead.
        r = self.cli("plot", results[0]["job"], "-o", steps_svg)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("bench collective", r.stderr)


if __name__ == "__main__":
    unittest.main()
