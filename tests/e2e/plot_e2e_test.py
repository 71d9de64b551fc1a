#!/usr/bin/env python3
"""`tpuemu bench collective --plot` and `tpuemu plot` on a real local pod: the SVG files parse,
hold the series and axes docs/plots names, one point per size or step with the job's own figures;
the same charts as PNG are PNG files of the SVG's size; other file names are refused up front.

Reuses cli_e2e_test's Pod: its own TPUEMU_HOME, every process stopped."""

import json
import os
import struct
import subprocess
import sys
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(__file__))
from cli_e2e_test import BIN, DP_JOB, Pod  # noqa: E402

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


def png_size(path):
    """(width, height) from a PNG file's IHDR chunk, after checking its signature."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path} is not a PNG file"
    return struct.unpack(">II", head[16:24])


def svg_size(path):
    root = ET.parse(path).getroot()
    return int(float(root.get("width"))), int(float(root.get("height")))


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

        # The same charts as PNG: a PNG file of the SVG's size in pixels, with more than a blank page in it.
        steps_png = os.path.join(self.home, "steps.png")
        r = self.cli("plot", job["id"], "-o", steps_png)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(png_size(steps_png), svg_size(steps_svg))
        self.assertGreater(os.path.getsize(steps_png), 10000)
        # The name's end in either case.
        upper_png = os.path.join(self.home, "STEPS.PNG")
        r = self.cli("plot", job["id"], "-o", upper_png)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(png_size(upper_png), svg_size(steps_svg))
        bw_png = os.path.join(self.home, "bw.png")
        r = self.cli("bench", "collective", "--op", "all-gather", "--axes", "x", "--bytes", "64KiB,1MiB", "--plot", bw_png)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(png_size(bw_png), svg_size(out))
        # Neither .svg nor .png: refused before anything runs, naming the flag.
        jobs_before = len(json.loads(self.cli("jobs", "--json").stdout)["jobs"])
        r = self.cli("bench", "collective", "--op", "all-gather", "--axes", "x", "--bytes", "1MiB", "--plot", "bw.jpg")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--plot bw.jpg", r.stderr)
        self.assertIn("FILE.png", r.stderr)
        self.assertEqual(len(json.loads(self.cli("jobs", "--json").stdout)["jobs"]), jobs_before)
        r = self.cli("plot", job["id"], "-o", "steps.pdf")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("-o steps.pdf", r.stderr)

        # A collective job has no steps to plot: the error says what to use instead.
        r = self.cli("plot", results[0]["job"], "-o", steps_svg)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("bench collective", r.stderr)


class SweepPlotTest(Pod):
    """The benchmarks' sweeps (bench/dp_boundary.cc, bench/pipeline_bubble.cc) drawn with --plot,
    on small sizes: the series docs/plots.md names, the seeds' formulas where they are exact."""

    def bench(self, name, *args):
        r = subprocess.run([os.path.join(BIN, name), *args], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_dp_boundary_and_pipeline_bubble_plot_their_sweeps(self):
        out = os.path.join(self.home, "dp.svg")
        self.bench("dp_boundary", "--plot", out, "256", "64,128,256")
        ok, found, axes = series(out)
        self.assertTrue(ok)
        self.assertEqual(axes, {"axis x": "B/X, tokens per chip", "axis y": "time per layer (us, emulated clock)"})
        self.assertEqual(set(found), {"backward matmuls (emulated)", "gradient all-reduce (emulated)",
                                      "seed: 8 (B/X) D F / C", "seed: 8 D F / W_ici"})
        self.assertEqual([x for x, _ in found["backward matmuls (emulated)"]], [64, 128, 256])
        # The seed's lines are its formulas with v5p's C = 4.59e14 flop/s and W_ici = 1.8e11 B/s;
        # the emulated matmuls grow with B/X (at D = 256 the chips' roofline is memory-bound, so not
        # on the seed's line: docs/benchmarks.md has the D = 3072 sweep, where they match).
        for x, seed in found["seed: 8 (B/X) D F / C"]:
            self.assertAlmostEqual(seed, 8 * x * 256 * 256 / 4.59e14 * 1e6, delta=1e-9 * seed)
        for _, seed in found["seed: 8 D F / W_ici"]:
            self.assertAlmostEqual(seed, 8 * 256 * 256 / 1.8e11 * 1e6, delta=1e-9 * seed)
        matmuls = [y for _, y in found["backward matmuls (emulated)"]]
        self.assertEqual(matmuls, sorted(matmuls))

        out = os.path.join(self.home, "bubble.png")
        printed = self.bench("pipeline_bubble", "--plot", out.replace(".png", ".svg"), "128", "512")
        ok, found, axes = series(out.replace(".png", ".svg"))
        self.assertTrue(ok)
        self.assertEqual(axes, {"axis x": "M, microbatches per step",
                                "axis y": "bubble (idle fraction of the stages' span)"})
        self.assertEqual(set(found), {"emulated, v5p", "emulated, 1e5x slower compute",
                                      "seeds' formula (S-1)/(M+S-1)", "formula with stage hops (v5p)"})
        self.assertEqual([m for m, _ in found["seeds' formula (S-1)/(M+S-1)"]], [1, 2, 4, 8, 16, 32])
        for (m, formula), (_, slow) in zip(found["seeds' formula (S-1)/(M+S-1)"],
                                           found["emulated, 1e5x slower compute"]):
            self.assertAlmostEqual(formula, 3 / (m + 3), delta=1e-12)
            self.assertAlmostEqual(slow, formula, delta=3e-3)  # transfers negligible: the formula holds
        self.assertIn("1f1b against the number of microbatches M", printed)
        # As PNG, the same chart's size.
        self.bench("pipeline_bubble", "--plot", out, "128", "512")
        self.assertEqual(png_size(out), svg_size(out.replace(".png", ".svg")))


if __name__ == "__main__":
    unittest.main()
