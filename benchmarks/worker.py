"""One exporter on one model in a process of its own (so its peak RSS is its own): a warm-up
call, then N timed calls, each writing into a fresh directory after the previous one's is
deleted and synced. Prints one JSON line.

    python -m benchmarks.worker MODEL METHOD RUNS TMPDIR
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import os
import resource
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

from .methods import METHODS
from .models import build


def _onnx_nodes(path: Path) -> int:
    """Nodes of the main graph and of the local functions it calls."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return len(model.graph.node) + sum(len(f.node) for f in model.functions)


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> None:
    name, method, runs, tmp = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    logging.disable(logging.WARNING)  # torch.onnx logs a line per op it has no symbolic for
    fn, _ = METHODS[method]
    # Every worker loads the same libraries before measuring, so peak RSS compares what each
    # export allocates, not which modules it imported.
    import onnx  # noqa: F401
    import torch.onnx  # noqa: F401

    import fastonnx  # noqa: F401

    model, args = build(name)
    rss_after_build = _peak_rss()
    weights = sum(t.numel() * t.element_size() for t in {t.data_ptr(): t for t in model.state_dict().values()}.values())
    times, extras = [], []
    last_out, onnx_path = None, None
    try:
        for i in range(runs + 1):
            # Every call starts from the same state: the previous call's file deleted (so its
            # pages are free again, not a second model's worth held in the page cache) and
            # nothing left to write back (sync), whatever the previous call wrote.
            if last_out is not None:
                shutil.rmtree(last_out)
            os.sync()
            out = Path(tempfile.mkdtemp(dir=tmp))
            gc.collect()
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                extra = fn(model, args, out)
                elapsed = time.perf_counter() - t0
            onnx_path = extra.pop("onnx_path", None)
            last_out = out
            if i:  # the first call warms up
                times.append(elapsed)
                extras.append(extra)
    except Exception as e:  # noqa: BLE001 - reported to the driver, which decides
        first = (str(e).strip().splitlines() or [""])[0][:200]
        print(json.dumps({"error": f"{type(e).__name__}: {first}", "traceback": traceback.format_exc()[-3000:]}))
        return
    # Peak RSS is read before the model is parsed back to count its nodes: onnx.load holds the
    # weights of a single-file model in memory, which no exporter does.
    peak_rss = _peak_rss()
    if onnx_path is not None:
        nodes = _onnx_nodes(onnx_path)
        for extra in extras:
            extra["nodes"] = nodes
    shutil.rmtree(last_out)
    print(json.dumps({"times": times, "extras": extras, "peak_rss": peak_rss, "rss_after_build": rss_after_build,
                      "weights": weights}))

if __name__ == "__main__":
    main()
