"""Tests of sparsp_torch (NumPy only; the PyTorch test skips without torch).

Run: ``PYTHONPATH=python python3 -m unittest discover -s python/tests`` from the repository root.
``SPARSP_BIN`` names the sparsp binary for the cross-checks (they skip without it)."""
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import sparsp_torch as st  # noqa: E402
from sparsp_torch.errors import InputError  # noqa: E402

SPARSP = os.environ.get("SPARSP_BIN", "")
TINY = {"schema_version": 1, "name": "tiny", "latent": [2, 3, 5], "text_tokens": 7,
        "text_position": "start", "heads": 3, "head_dim": 16, "layers": 2, "hidden": 48,
        "mlp_hidden": 192, "dtype_bytes": 2, "steps": 2}


def run_sparsp(*args):
    return subprocess.run([SPARSP, *map(str, args)], capture_output=True, text=True)


class LayoutTest(unittest.TestCase):
    def test_raster_blocks(self):
        # HunyuanVideo 720p: 118,800 video tokens / 128 = 928 full blocks + one of 16 tokens,
        # then 256 text tokens = 2 blocks.
        L = st.Layout.from_model("hunyuanvideo-720p", 128, "raster")
        self.assertEqual(L.num_blocks, 931)
        self.assertEqual(L.tokens_in_block[928], 118800 - 928 * 128)
        self.assertEqual(L.tokens, 118800 + 256)

    def test_tile_blocks(self):
        # 30x48x80 in 6x8x8 tiles: 5*6*10 = 300 full tiles of 384 tokens = 3 blocks each.
        L = st.Layout.from_model("hunyuanvideo-sta", 128, "tile", (6, 8, 8))
        self.assertEqual(L.num_video_blocks, 900)
        self.assertEqual(L.num_blocks, 902)

    def test_partial_border_tiles_and_text_first(self):
        # latent 2x3x5, tile 2x2x2 (vol 8), block 4: tiles (t,h,w) counts 2*2*2=8, 2*2*2=8,
        # 2*2*1=4, 2*1*2=4, 2*1*2=4, 2*1*1=2 -> blocks 2,2,1,1,1,1; text 7 = [4, 3] first.
        L = st.Layout(latent=(2, 3, 5), text_tokens=7, text_position="start", block_tokens=4,
                      order="tile", tile=(2, 2, 2))
        self.assertEqual(L.tokens_in_block.tolist(), [4, 3, 4, 4, 4, 4, 4, 4, 4, 2])

    def test_block_must_divide_tile(self):
        with self.assertRaisesRegex(InputError, "does not divide the tile volume"):
            st.Layout((2, 3, 5), 0, "none", 3, "tile", (2, 2, 2))


class PoolAndSelectTest(unittest.TestCase):
    def test_pool_mean_in_token_order(self):
        x = np.array([[[1.0, 2.0], [3.0, 4.0], [10.0, -1.0]]], dtype=np.float32)
        p = st.pool_blocks(x, np.array([2, 1]))
        np.testing.assert_array_equal(p, [[[2.0, 3.0], [10.0, -1.0]]])

    def test_bf16_as_uint16(self):
        # bfloat16 1.5 = 0x3fc0 (float32 0x3fc00000)
        x = np.full((1, 2, 1), 0x3FC0, dtype=np.uint16)
        self.assertEqual(st.pool_blocks(x, np.array([2]))[0, 0, 0], 1.5)

    def test_nonfinite_is_an_error(self):
        x = np.array([[[np.inf]]], dtype=np.float32)
        with self.assertRaisesRegex(InputError, r"\[H=0,block=0\]"):
            st.pool_blocks(x, np.array([1]))

    def test_scores(self):
        q = np.array([[[1.0, 2.0, 0.0, 0.0]]])  # [H=1, nb=1, D=4]
        k = np.array([[[3.0, 1.0, 0.0, 0.0]]])
        self.assertEqual(st.block_scores(q, k)[0, 0, 0], np.float32(5.0 / 2.0))

    def test_topk_ties_to_lower_block(self):
        s = np.array([[0.5, 0.9, 0.5, 0.5, -0.0, 0.0]], dtype=np.float32)
        m = st.select_topk(s, 3)
        self.assertEqual(m[0].tolist(), [True, True, True, False, False, False])
        m = st.select_topk(np.array([[-0.0, 0.0, -1.0]], dtype=np.float32), 1)
        self.assertEqual(m[0].tolist(), [True, False, False])  # -0 == +0: the lower block

    def test_cdf_mass(self):
        # scores ln 3, 0, 0 -> p = 0.6, 0.2, 0.2
        s = np.array([[math.log(3.0), 0.0, 0.0]], dtype=np.float32)
        self.assertEqual(st.select_cdf(s, 0.5)[0].tolist(), [True, False, False])
        self.assertEqual(st.select_cdf(s, 0.7)[0].tolist(), [True, True, False])
        self.assertEqual(st.select_cdf(s, 1.0)[0].tolist(), [True, True, True])

    def test_pack_bits_little(self):
        m = np.zeros((1, 9), dtype=bool)
        m[0, [0, 3, 8]] = True
        p = st.pack_bits(m)
        self.assertEqual(p.tolist(), [[0b1001, 1]])
        np.testing.assert_array_equal(st.unpack_bits(p, 9), m)


class RecordingTest(unittest.TestCase):
    def test_roundtrip_and_step_counting(self):
        L = st.Layout((1, 2, 4), 0, "none", 2)  # 4 blocks
        rng = np.random.default_rng(1)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "r.npz"
            masks = rng.random((2, 3, 2, 4, 4)) < 0.4  # [S, L, H, Qb, Kb]
            with st.record(path, layout=L, layers_per_step=3) as rec:
                for s in range(2):
                    for l in range(3):
                        x = rng.standard_normal((2, 8, 4)).astype(np.float32)
                        rec.observe(x, x, bool_mask=np.kron(masks[s, l], np.ones((2, 2))) > 0)
            side, steps = st.read_recording(path)
            self.assertEqual((side["steps"], side["layers"], side["heads"], side["blocks"]),
                             (2, 3, 2, 4))
            np.testing.assert_array_equal(np.stack(list(steps)), masks)

    def test_no_attention_calls_is_an_error(self):
        L = st.Layout((1, 2, 4), 0, "none", 2)
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(InputError, "no attention calls"):
                with st.record(Path(d) / "r.npz", layout=L) as rec:
                    rec.observe(np.zeros((1, 5, 4)), np.zeros((1, 5, 4)))  # 5 tokens: skipped
            self.assertEqual(list(Path(d).iterdir()), [])  # nothing left behind


@unittest.skipUnless(SPARSP, "SPARSP_BIN not set")
class CrossCheckTest(unittest.TestCase):
    """The Python masks equal `sparsp pattern gen --q/--k` bit for bit, and sparsp reads a
    recording with the densities NumPy computes."""

    def _check(self, kind, dtype, extra):
        rng = np.random.default_rng(7)
        L = st.Layout.from_model(TINY, 4, "tile", (2, 2, 2))
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            (d / "tiny.json").write_text(json.dumps(TINY))
            shape = (TINY["heads"], L.tokens, TINY["head_dim"])
            q = rng.standard_normal(shape).astype(np.float32) * 2
            k = rng.standard_normal(shape).astype(np.float32) * 2
            if dtype == "bf16":
                q = (q.view(np.uint32) >> 16).astype(np.uint16)
                k = (k.view(np.uint32) >> 16).astype(np.uint16)
            np.save(d / "q.npy", q)
            np.save(d / "k.npy", k)
            r = run_sparsp("pattern", "gen", "--model", d / "tiny.json", "--kind", kind,
                           "--block", 4, "--order", "tile", "--tile", "2,2,2", "--q", d / "q.npy",
                           "--k", d / "k.npy", *extra, "-o", d / "out.npy")
            self.assertEqual(r.returncode, 0, r.stderr)
            ref = np.load(d / "out.npy")  # [L, H, Qb, Kb]
            args = dict(topk=3) if kind == "topk" else dict(threshold=0.8)
            mine = st.qk_block_mask(q, k, L.tokens_in_block, kind, **args)
            np.testing.assert_array_equal(ref[0], mine)

    def test_topk_float32(self):
        self._check("topk", "f32", ["--topk", 3])

    def test_cdf_bf16(self):
        self._check("cdf", "bf16", ["--threshold", 0.8])

    def test_sparsp_reads_a_recording(self):
        rng = np.random.default_rng(3)
        L = st.Layout.from_model(TINY, 4, "tile", (2, 2, 2))
        nb = L.num_blocks
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            (d / "tiny.json").write_text(json.dumps(TINY))
            masks = rng.random((2, 2, 3, nb, nb)) < 0.3
            L.model_name = None  # as record() does for a model given as a path
            w = st.RecordingWriter(d / "r.npz", L, 3, 16, {"kind": "mask"})
            for s in range(2):
                for l in range(2):
                    w.add(s, l, masks[s, l])
            w.close()
            # a model given as a path is not named in the sidecar: sparsp reads the sidecar's
            # own fields, no --model needed
            self.assertIsNone(json.loads((d / "r.npz.json").read_text())["model"])
            r = run_sparsp("pattern", "stats", d / "r.npz", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertAlmostEqual(json.loads(r.stdout)["density"], masks.mean(), places=12)
            r = run_sparsp("pattern", "stats", d / "r.npz", "--model", d / "tiny.json", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            stats = json.loads(r.stdout)
            self.assertAlmostEqual(stats["density"], masks.mean(), places=12)
            # a truncated sidecar is refused with the file named
            (d / "r.npz.json").write_text('{"format": "sparsp-recording"')
            r = run_sparsp("pattern", "stats", d / "r.npz", "--model", d / "tiny.json")
            self.assertEqual(r.returncode, 2)
            self.assertIn("r.npz.json", r.stderr)


def run_cli(*args, cwd=None, extra_path=""):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parent.parent), extra_path) if p))
    return subprocess.run([sys.executable, "-m", "sparsp_torch", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd)


class CliTest(unittest.TestCase):
    """One-line errors; exit 2 on bad input, 1 when a GPU is needed and absent."""

    def assert_one_line(self, r, code, text):
        self.assertEqual(r.returncode, code, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(text, r.stderr)

    def test_unknown_kernel(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "t.json").write_text("{}")
            r = run_cli("measure", "--topology", Path(d) / "t.json", "-o", Path(d) / "o.json",
                        "--model", "hunyuanvideo-720p", "--kernels", "fa9")
            self.assert_one_line(r, 2, "unknown kernel 'fa9' (valid: fa2, cudnn")

    def test_output_equal_to_input(self):
        with tempfile.TemporaryDirectory() as d:
            t = Path(d) / "t.json"
            t.write_text("{}")
            r = run_cli("measure", "--topology", t, "-o", t, "--model", "hunyuanvideo-720p")
            self.assert_one_line(r, 2, "would overwrite an input")
            self.assertEqual(t.read_text(), "{}")
            np.save(Path(d) / "q.npy", np.zeros((1, 4, 2), np.float32))
            r = run_cli("record", "--q", Path(d) / "q.npy", "--k", Path(d) / "q.npy", "--model",
                        "hunyuanvideo-720p", "-o", Path(d) / "q.npy")
            self.assert_one_line(r, 2, "would overwrite an input")

    def test_bad_selection_values(self):
        with tempfile.TemporaryDirectory() as d:
            np.save(Path(d) / "q.npy", np.zeros((24, 256, 128), np.float32))
            for flag, val in (("--density", "-1"), ("--topk", "-3"), ("--density", "nan"),
                              ("--threshold", "0")):
                r = run_cli("record", "--q", Path(d) / "q.npy", "--k", Path(d) / "q.npy",
                            "--model", "hunyuanvideo-720p", flag, val, "-o", Path(d) / "r.npz")
                self.assert_one_line(r, 2, flag.lstrip("-"))

    def test_q_dump_that_does_not_fit_names_the_dump(self):
        # hunyuanvideo-720p has 119,056 tokens (patterns/README); a 256-token Q is the fault,
        # and the message names that dump, not the output (it used to name r.npz).
        with tempfile.TemporaryDirectory() as d:
            q = Path(d) / "q.npy"
            np.save(q, np.zeros((24, 256, 128), np.float32))
            r = run_cli("record", "--q", q, "--k", q, "--model", "hunyuanvideo-720p",
                        "-o", Path(d) / "r.npz")
            self.assert_one_line(r, 2, f"{q}: Q dump of shape [24, 256, 128] does not fit")
            self.assertNotIn("r.npz", r.stderr)
            self.assertFalse(any(p.name.startswith("r.npz") for p in Path(d).iterdir()))

    def test_pipeline_without_attention(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "noattn.py").write_text("def main():\n    return 1\n")
            r = run_cli("record", "--run", "noattn:main", "--model", "hunyuanvideo-720p", "-o",
                        Path(d) / "r.npz", extra_path=d)
            self.assert_one_line(r, 2, "made no attention calls")
            self.assertFalse(any(p.name.startswith("r.npz") for p in Path(d).iterdir()))

    def test_measure_without_gpu_exits_1(self):
        try:
            import torch as _t
            if _t.cuda.is_available():
                self.skipTest("a GPU is present")
        except ImportError:
            pass
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "t.json").write_text("{}")
            r = run_cli("measure", "--topology", Path(d) / "t.json", "-o", Path(d) / "o.json",
                        "--model", "hunyuanvideo-720p")
            self.assert_one_line(r, 1, "needs")
            self.assertFalse((Path(d) / "o.json").exists())


try:
    import torch
except ImportError:
    torch = None


@unittest.skipUnless(torch is not None, "PyTorch is not installed")
class TorchRecordTest(unittest.TestCase):
    def test_tiny_dit_stack_on_cpu(self):
        torch.manual_seed(0)
        L = st.Layout.from_model(TINY, 4, "tile", (2, 2, 2))
        N, H, D = L.tokens, TINY["heads"], TINY["head_dim"]
        blocks = [torch.nn.Linear(H * D, 3 * H * D) for _ in range(TINY["layers"])]

        def pipeline(x):
            for _ in range(2):  # steps
                for lin in blocks:
                    q, k, v = lin(x).view(1, N, 3, H, D).permute(2, 0, 3, 1, 4)
                    o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
                    x = x + o.transpose(1, 2).reshape(1, N, H * D)
            return x

        x0 = torch.randn(1, N, H * D)
        with tempfile.TemporaryDirectory() as d:
            f = torch.nn.functional.scaled_dot_product_attention
            with torch.no_grad(), st.record(Path(d) / "r.npz", model=TINY, block_tokens=4,
                                            order="tile", tile=(2, 2, 2), topk=3) as rec:
                pipeline(x0)
            self.assertIs(torch.nn.functional.scaled_dot_product_attention, f)  # restored
            side, steps = st.read_recording(Path(d) / "r.npz")
            self.assertEqual((side["steps"], side["layers"]), (2, 2))
            for m in steps:
                self.assertTrue((m.sum(-1) == 3).all())

    def test_flex_block_mask_is_recorded_as_given(self):
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        except ImportError:
            self.skipTest("FlexAttention is not available")
        # 2 x 2 x 8 latent, no text: 32 tokens in raster order, layout blocks of 8 tokens; the
        # FlexAttention mask has 16-token blocks, so each of its blocks covers 2 layout blocks.
        L = st.Layout((2, 2, 8), 0, "none", 8)
        N, H, D = 32, 2, 16

        def causal(b, h, q, kv):
            return q >= kv
        bm = create_block_mask(causal, 1, H, N, N, device="cpu", BLOCK_SIZE=16)
        q = torch.randn(1, H, N, D)
        with tempfile.TemporaryDirectory() as d:
            with torch.no_grad(), st.record(Path(d) / "r.npz", layout=L, layers_per_step=1):
                import torch.nn.attention.flex_attention as fa
                fa.flex_attention(q, q, q, block_mask=bm)
            self.assertIs(fa.flex_attention, flex_attention)  # restored
            _, steps = st.read_recording(Path(d) / "r.npz")
            m = next(steps)[0]  # [H, 4, 4]
        # Flex blocks (0,0) partial, (1,0) full, (1,1) partial, (0,1) empty: layout block pairs
        # inside an active Flex block are active (any token pair), so rows 0-1 see blocks 0-1,
        # rows 2-3 see blocks 0-3.
        want = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]], dtype=bool)
        for h in range(H):
            np.testing.assert_array_equal(m[h], want)


if __name__ == "__main__":
    unittest.main()
