"""The real-model target's llama-server: a cached binary is used only on a CPU that has every
instruction set the CPU it was built on had (a binary built with -march=native dies with SIGILL
elsewhere); otherwise the reason is named and it is built again for this CPU."""

from __future__ import annotations

import json

from devtools.real_model.llama_build import Build, cached, cpu_instruction_sets, llama_server

AVX512_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
flags\t\t: fpu vme sse sse2 ssse3 fma cx16 sse4_1 sse4_2 popcnt aes avx f16c bmi1 avx2 bmi2 avx512f avx512bw hypervisor
"""
AVX2_CPUINFO = AVX512_CPUINFO.replace(" avx512f avx512bw", "")
ARM_CPUINFO = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 crc32 atomics asimdhp sve\n"


def test_instruction_sets_are_read_from_cpuinfo_without_other_flags():
    assert cpu_instruction_sets(AVX512_CPUINFO) == {
        "sse", "sse2", "ssse3", "fma", "sse4_1", "sse4_2", "popcnt", "aes", "avx", "f16c", "bmi1", "avx2", "bmi2",
        "avx512f", "avx512bw",
    }
    assert cpu_instruction_sets(ARM_CPUINFO) == {"asimd", "aes", "asimdhp", "sve"}


def _cache(tmp_path, monkeypatch, built_on: str):
    monkeypatch.setenv("RATCHET_LLAMA_CACHE", str(tmp_path))
    (tmp_path / "llama-server").write_bytes(b"\x7fELF")
    (tmp_path / "build.json").write_text(json.dumps({
        "version": "0.3.36", "instruction_sets": sorted(cpu_instruction_sets(built_on)),
    }))


def test_a_binary_built_for_avx512_is_rebuilt_on_an_avx2_cpu_naming_what_is_missing(tmp_path, monkeypatch):
    _cache(tmp_path, monkeypatch, AVX512_CPUINFO)
    said, builds = [], []

    def build(directory, cpu):
        builds.append(cpu)
        return Build(directory / "llama-server", cpu, "0.3.36")

    llama_server(say=said.append, cpu=cpu_instruction_sets(AVX2_CPUINFO), build=build)
    assert builds == [cpu_instruction_sets(AVX2_CPUINFO)]
    [message] = said
    assert "avx512bw, avx512f" in message and "SIGILL" in message and "building one for this CPU" in message


def test_a_binary_is_used_as_cached_on_the_cpu_it_was_built_for_or_a_larger_one(tmp_path, monkeypatch):
    _cache(tmp_path, monkeypatch, AVX2_CPUINFO)
    refuse = lambda *_: (_ for _ in ()).throw(AssertionError("built again"))  # noqa: E731
    for cpu in (AVX2_CPUINFO, AVX512_CPUINFO):
        assert llama_server(say=print, cpu=cpu_instruction_sets(cpu), build=refuse) == tmp_path / "llama-server"
    assert cached(tmp_path).missing_here(cpu_instruction_sets(AVX2_CPUINFO)) == []


def test_an_empty_cache_builds(tmp_path, monkeypatch):
    monkeypatch.setenv("RATCHET_LLAMA_CACHE", str(tmp_path))
    said, builds = [], []
    llama_server(say=said.append, cpu=frozenset({"avx2"}),
                 build=lambda d, cpu: builds.append(cpu) or Build(d / "llama-server", cpu, "0.3.36"))
    assert builds == [frozenset({"avx2"})] and "building llama-server for this CPU" in said[0]
