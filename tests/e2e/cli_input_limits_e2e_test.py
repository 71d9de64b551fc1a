#!/usr/bin/env python3
"""Hostile input to the CLI, refused with exit 2 and a message naming what
was wrong, without a pod: job files whose keys are lists or maps, job files
larger than the 1 MiB limit (a huge file, /dev/zero), and absurd matmul
--chunk sizes (matmul's and a collective's)."""

import os
import shutil
import subprocess
import tempfile
import unittest

from cli_e2e_test import TPUEMU, Pod

LIMIT = 1 << 20  # docs/jobs.md: a job file holds at most 1 MiB


class JobFileTest(Pod):
    def assert_refused(self, path, *needles):
        for command in ("submit", "reference"):
            r = self.cli(command, path, timeout=30)
            self.assertEqual(r.returncode, 2, f"{command} {path}: {r.stderr}")
            for needle in (path, *needles):
                self.assertIn(needle, r.stderr, command)

    def test_keys_that_are_lists_or_maps_are_refused(self):
        for name, text in [("list-key.yaml", "[1, 2]: 3\n"), ("map-key.yaml", "{a: 1}: 2\n"),
                           ("late-list-key.yaml", "emb_dim: 8\nmlp_dim: 8\n? [x]\n: 1\n"),
                           ("null-key.yaml", "~: 3\n")]:
            self.assert_refused(self.write(name, text), "a key must be a plain name")
        self.assertIn("line 3", self.cli("reference", os.path.join(self.home, "late-list-key.yaml")).stderr)

    def test_job_files_over_the_limit_are_refused_before_reading_them_whole(self):
        big = self.write("big.yaml", "# padding\n" * ((5 << 20) // 10))
        self.assert_refused(big, f"{os.path.getsize(big)} bytes", f"at most {LIMIT} bytes")
        # Input of no known size is read only up to the limit.
        self.assert_refused("/dev/zero", "not a regular file", f"at most {LIMIT} bytes")

    def test_every_file_the_cli_reads_is_read_only_up_to_a_limit(self):
        # plan --model read /dev/zero until memory ran out; a CA file, 2 GB.
        r = self.cli("plan", "--model", "/dev/zero", "--topology", "v5p:2x4", "--batch-tokens", "1M", timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("model file '/dev/zero': more than the limit", r.stderr)
        self.env["TPUEMU_TLS_CA"] = "/dev/zero"
        r = self.cli("jobs", "--coordinator", "127.0.0.1:1", timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("TPUEMU_TLS_CA '/dev/zero': more than the limit", r.stderr)
        not_pem = self.write("ca.pem", "hello\n")
        self.env["TPUEMU_TLS_CA"] = not_pem
        r = self.cli("jobs", "--coordinator", "127.0.0.1:1", timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("not PEM", r.stderr)

    def test_a_credentials_file_that_cannot_be_read_is_named_by_the_flag_given_and_says_why(self):
        self.env.pop("TPUEMU_TLS_CA", None)
        missing = os.path.join(self.home, "missing.pem")
        r = self.cli("--tls-ca", missing, "jobs", "--coordinator", "127.0.0.1:1", timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"--tls-ca '{missing}': cannot read it: No such file or directory", r.stderr)
        # There but not this user's: permission, not "make credentials again" (a Kubernetes
        # pod without the Secret's fsGroup, a CLI user beside files made with --uid).
        if os.getuid() != 0:
            self.skipTest("needs root, to run the CLI as another user")
        shared = tempfile.mkdtemp(prefix="tpuemu-locked-")
        self.addCleanup(shutil.rmtree, shared, True)
        os.chmod(shared, 0o755)
        locked = os.path.join(shared, "locked.pem")
        with open(locked, "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\n")
        os.chmod(locked, 0o600)
        r = subprocess.run([TPUEMU, "--tls-ca", locked, "jobs", "--coordinator", "127.0.0.1:1"],
                           env={**self.env, "HOME": shared}, capture_output=True, text=True, timeout=30,
                           preexec_fn=lambda: (os.setgroups([]), os.setgid(65534), os.setuid(65534)))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"--tls-ca '{locked}': permission denied (owner uid 0, group 0, mode 0600)", r.stderr)
        self.assertIn("to uid 65534 group 65534", r.stderr)

    def test_a_job_file_at_the_limit_is_read(self):
        text = "emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nsteps: 1\n"
        path = self.write("padded.yaml", text + "#" * (LIMIT - len(text) - 1) + "\n")
        self.assertEqual(os.path.getsize(path), LIMIT)
        r = self.cli("reference", path, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)


class MatmulChunkTest(Pod):
    EXPR = ["A[I_X, J] * B[J, K] -> C[I, K]", "--dims", "I=64,J=64,K=64", "--plan-only", "--topology", "v5p:2x4"]

    def test_absurd_chunk_sizes_are_refused(self):
        for chunk in ("1B", "4095", "8MiB", "4098"):
            r = self.cli("matmul", *self.EXPR, "--chunk", chunk)
            self.assertEqual(r.returncode, 2, f"--chunk {chunk}: {r.stderr}")
            self.assertIn("--chunk", r.stderr)
            self.assertIn("between 4KiB and 4MiB", r.stderr)
        for chunk in ("4KiB", "4MiB", "64KiB"):
            r = self.cli("matmul", *self.EXPR, "--chunk", chunk)
            self.assertEqual(r.returncode, 0, f"--chunk {chunk}: {r.stderr}")


class CollectiveChunkTest(Pod):
    def bench(self, chunk, size="64KiB"):
        return self.cli("bench", "collective", "--op", "all-gather", "--axes", "x", "--bytes", size, "--chunk", chunk)

    def test_a_chunk_a_peer_stream_cannot_carry_is_refused_naming_the_flag(self):
        # A 16 MiB chunk once went out as a message past the peer streams' 8 MiB
        # limit, and every chip waited 2 minutes for it.
        self.up("--topology", "v5p:8", "--chips-per-host", "4")
        for chunk in ("1001", "512", "5MiB", "16MiB"):
            r = self.bench(chunk)
            self.assertNotEqual(r.returncode, 0, f"--chunk {chunk}: {r.stdout}")
            self.assertIn(f"--chunk {chunk}", r.stderr)
            self.assertIn("a multiple of 4 bytes from 1KiB to 4MiB allowed", r.stderr)
        r = self.bench("4MiB", size="16MiB")
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
