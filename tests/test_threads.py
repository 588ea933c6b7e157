"""Thread safety: fastonnx.export may be called from several threads; exports run one at a time
(tracing uses PyTorch's process-wide state, the conversion holds the GIL anyway), and each
writes exactly the file it would write alone."""

from __future__ import annotations

import threading

import torch

import fastonnx
from fastonnx.frontends import choice as _choice


def _models():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten())
    return [(mlp, (torch.randn(2, 8),)), (conv, (torch.randn(1, 3, 6, 6),))]


def _run_together(jobs) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(len(jobs))

    def run(job):
        start.wait()
        try:
            job()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_two_threads_write_the_same_files_as_one_after_the_other(tmp_path):
    models = _models()
    alone = []
    for i, (model, args) in enumerate(models):
        fastonnx.export(model, args, str(tmp_path / f"alone{i}.onnx"))
        alone.append((tmp_path / f"alone{i}.onnx").read_bytes())

    def exports(i):
        model, args = models[i]
        return lambda: [fastonnx.export(model, args, str(tmp_path / f"thread{i}_{k}.onnx")) for k in range(3)]

    assert _run_together([exports(0), exports(1)]) == []
    for i in range(2):
        for k in range(3):
            assert (tmp_path / f"thread{i}_{k}.onnx").read_bytes() == alone[i]


def test_one_module_from_two_threads():
    """Tracing switches the module to eval mode and back: two threads must not interleave that."""
    model, args = _models()[1]
    model.train()
    expected = fastonnx.export(model, args).to_bytes()
    results: list[bytes] = []
    assert _run_together([lambda: results.append(fastonnx.export(model, args).to_bytes())] * 2) == []
    assert results == [expected, expected]
    assert all(m.training for m in model.modules())


def test_exports_run_one_at_a_time(monkeypatch):
    inside, most = 0, 0
    lock = threading.Lock()
    real_trace = _choice.trace_requested

    def counting_trace(*a, **k):
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        try:
            return real_trace(*a, **k)
        finally:
            with lock:
                inside -= 1

    monkeypatch.setattr(_choice, "trace_requested", counting_trace)
    model, args = _models()[0]
    assert _run_together([lambda: fastonnx.export(model, args)] * 3) == []
    assert most == 1
