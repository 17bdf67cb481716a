"""The OpenMP settings a service needs (issue 35): libgomp's short spin is set before torch
loads, and the event loop's thread never starts an OpenMP team of its own, so the encode
worker's team is the only one and its barriers spin instead of sleeping in the kernel."""

import os
import subprocess
import sys
import textwrap

import pytest

from disembed.cli import serve as serve_cli

CLEAN = {k: v for k, v in os.environ.items()
         if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_NUM_THREADS",
                      "DISEMBED_NUM_THREADS")}


def _python(code: str, **env: str) -> str:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env={**CLEAN, **env},
                          check=True, capture_output=True, text=True, timeout=120).stdout.strip()


def test_importing_disembed_changes_no_environment_variable():
    """Issue 45: ``import disembed`` set ``GOMP_SPINCOUNT`` in every process that imported
    it; only the command line may."""
    out = _python("""
        import os
        before = dict(os.environ)
        import disembed
        from disembed import _openmp
        print(_openmp.APPLIED, dict(os.environ) == before)""")
    assert out == "False True"


@pytest.mark.parametrize("argv, yes", [
    (["/usr/bin/python3", "-m", "disembed", "serve"], True),
    (["python", "-X", "dev", "-m", "disembed.cli", "encode"], True),
    (["/venv/bin/python", "/venv/bin/disembed", "serve", "--port", "8000"], True),
    (["python", "-c", "import disembed"], False),
    (["python", "my_script.py", "disembed"], False),
    (["python", "-m", "pytest", "tests"], False),
    (["python"], False),
])
def test_the_command_line_is_recognised(argv, yes):
    from disembed._openmp import is_command_line

    assert is_command_line(argv) is yes


def test_the_command_line_sets_the_spin_before_torch_loads():
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        sys.orig_argv = [sys.executable, "-m", "disembed", "info"]  # as the command line
        import disembed, os
        from disembed import _openmp
        print(_openmp.APPLIED, os.environ.get("GOMP_SPINCOUNT"))""")], env=CLEAN, check=True,
        capture_output=True, text=True, timeout=120).stdout.strip()
    assert out == "True 10000"  # APPLIED is False if torch loaded first: the spin came too late


@pytest.mark.parametrize("env, first, expected", [
    ({"GOMP_SPINCOUNT": "500"}, "", "False 500"),  # the user's own setting wins
    ({"OMP_WAIT_POLICY": "PASSIVE"}, "", "False None"),
    ({}, "import torch", "False None"),  # torch already loaded: setting it would be a lie
])
def test_the_spin_is_left_alone_when_set_or_too_late(env, first, expected):
    out = _python(f"""
        import os, sys
        sys.orig_argv = [sys.executable, "-m", "disembed", "info"]
        {first}
        import disembed
        from disembed import _openmp
        print(_openmp.APPLIED, os.environ.get("GOMP_SPINCOUNT"))""", **env)
    assert out == expected


def test_the_calling_thread_keeps_one_thread_and_a_worker_sets_its_own():
    out = _python("""
        import threading
        import torch
        from disembed.hardware import leave_torch_to_workers, set_torch_threads
        chosen = leave_torch_to_workers()
        seen = {}
        def worker():
            set_torch_threads(2)
            torch.ones(1 << 20).add_(1)  # a parallel op: the worker's own team
            seen["worker"] = torch.get_num_threads()
        thread = threading.Thread(target=worker)
        thread.start(); thread.join()
        print(chosen.threads, torch.get_num_threads(), seen["worker"])""",
                  DISEMBED_NUM_THREADS="2")
    assert out == "2 1 2"  # the process's choice is kept; the loading thread stays at one


def test_serve_leaves_torch_to_the_workers_before_it_loads_the_model(monkeypatch):
    calls = []

    class Loaded(Exception):
        pass

    def load_service(*args, **kwargs):
        calls.append("load")
        raise Loaded

    monkeypatch.setattr(serve_cli, "leave_torch_to_workers", lambda: calls.append("leave"))
    monkeypatch.setattr(serve_cli, "load_service", load_service)
    monkeypatch.setattr(serve_cli, "bind", lambda host, port: None)
    args = serve_cli.argparse.Namespace(api_key="k", host="127.0.0.1", port=0, model=None,
                                        encoder="hash:8", cache_dir=None, no_cache=True)
    with pytest.raises(Loaded):
        serve_cli.handle(args)
    assert calls == ["leave", "load"]
