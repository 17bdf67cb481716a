"""The capability probe: flags from cpuinfo, calibration, the per-machine cache."""

import json

import pytest

from disembed.hardware import Capabilities, cpu, probe
from disembed.hardware import calibrate as probe_module

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 amx_tile amx_bf16

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 amx_tile amx_bf16

processor\t: 2
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t\t: 1
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 amx_tile amx_bf16
"""
ARM = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes sha2 asimddp sve sve2 bf16 i8mm
CPU implementer\t: 0x41
"""


@pytest.fixture
def cpuinfo(tmp_path):
    def write(text):
        path = tmp_path / "cpuinfo"
        path.write_text(text)
        return str(path)
    return write


def test_x86_flags_model_and_cores(cpuinfo, monkeypatch):
    path = cpuinfo(X86)
    assert cpu.cpu_model(path) == "Intel(R) Xeon(R) Platinum 8480+"
    assert cpu.cpu_flags(path) == ("amx_bf16", "amx_tile", "avx", "avx2", "avx512_bf16",
                                   "avx512_vnni", "avx512bw", "avx512f", "fma")
    monkeypatch.setattr(cpu, "available_cpus", lambda: {0, 1, 2})
    assert cpu.physical_cores(path) == 2  # processors 0 and 1 are one core's two threads
    monkeypatch.setattr(cpu, "available_cpus", lambda: {2})
    assert cpu.physical_cores(path) == 1  # affinity counts


def test_arm_features_and_missing_cpuinfo(cpuinfo, tmp_path, monkeypatch):
    assert cpu.cpu_flags(cpuinfo(ARM)) == ("asimd", "asimddp", "bf16", "i8mm", "sve", "sve2")
    missing = str(tmp_path / "nope")
    assert cpu.cpu_flags(missing) == ()
    assert cpu.cpu_model(missing)  # platform's answer, never empty
    monkeypatch.setattr(cpu, "available_cpus", lambda: {0, 1, 2, 3})
    assert cpu.physical_cores(missing) == 4


def fake_caps(fp32=100.0, bf16=20.0, flags=("avx2",)) -> Capabilities:
    return Capabilities(cpu_model="Test CPU", machine="x86_64", flags=flags, torch_isa="AVX2",
                        physical_cores=2, threads=2, fp32_gflops=fp32, bf16_gflops=bf16,
                        int8_gops=None, calibration_seconds=0.1, load_average=0.5,
                        measured_utc="2026-01-01T00:00:00+00:00", torch_version="x")


def test_bf16_is_chosen_by_measurement_not_by_flags():
    assert not fake_caps(bf16=20.0, flags=("avx512_bf16",)).bf16_faster  # flag, but slow
    assert fake_caps(bf16=400.0, flags=("avx512_bf16",)).bf16_faster
    assert fake_caps(bf16=400.0, flags=("avx512_bf16",)).bf16_native
    assert not fake_caps(bf16=110.0).bf16_faster  # within noise of float32
    d = fake_caps().to_dict()
    assert Capabilities.from_dict(json.loads(json.dumps(d))) == fake_caps()


def test_probe_measures_once_then_reads_the_cache(tmp_path, monkeypatch, caplog):
    calls = []

    def measure():
        calls.append(1)
        return fake_caps(fp32=50.0 + len(calls))

    monkeypatch.setattr(probe_module, "measure", measure)
    first = probe(tmp_path)
    assert calls == [1] and first.fp32_gflops == 51.0
    path = probe_module.cache_path(tmp_path)
    assert json.loads(path.read_text())["fp32_gflops"] == 51.0
    probe_module._cached_probe.cache_clear()  # a new process: read from disk
    assert probe(tmp_path).fp32_gflops == 51.0 and calls == [1]
    assert probe(tmp_path, refresh=True).fp32_gflops == 52.0 and len(calls) == 2
    path.write_text('{"cpu_model": "half a record')  # corrupt: measured again, warned
    probe_module._cached_probe.cache_clear()
    assert probe(tmp_path).fp32_gflops == 53.0
    assert "unreadable" in caplog.text
    assert json.loads(path.read_text())["fp32_gflops"] == 53.0


def test_measure_gives_positive_speeds_quickly():
    caps = probe_module.measure()
    assert caps.fp32_gflops > 0 and caps.bf16_gflops > 0
    assert caps.int8_gops is None or caps.int8_gops > 0
    assert caps.calibration_seconds < 10  # ~0.3 s; generous for a loaded machine
    assert caps.threads >= 1 and caps.physical_cores >= 1
    json.dumps(caps.to_dict())
