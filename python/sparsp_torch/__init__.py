"""sparsp_torch: record attention-sparsity patterns and measure attention kernels in PyTorch
pipelines, for the sparsp simulator. NumPy is required; PyTorch is optional (used when present).

- ``record(path, model=..., ...)``: context manager that records every attention call's block
  mask (see ``record.py``); ``python3 -m sparsp_torch record --help``.
- ``measure``: times attention and GEMMs and writes ``measured_compute`` entries into a
  topology; ``python3 -m sparsp_torch measure --help``.
"""
from .errors import InputError, NoDeviceError
from .layout import Layout, load_model
from .qk import qk_block_mask, pool_blocks, block_scores, select_topk, select_cdf, pack_bits, unpack_bits
from .record import record, Recorder
from .recording import RecordingWriter, read_recording

__all__ = ["InputError", "NoDeviceError", "Layout", "load_model", "qk_block_mask", "pool_blocks",
           "block_scores", "select_topk", "select_cdf", "pack_bits", "unpack_bits", "record",
           "Recorder", "RecordingWriter", "read_recording"]
__version__ = "0.1.0"
