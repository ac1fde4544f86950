"""setup.py's choice of building the CUDA library: with nvcc found unless
TORCHLEAN_BUILD_CUDA=0; =1 insists; anything else is an error. (The build itself is `make cuda`,
checked on GPU machines; here only the decision.)"""
import importlib.util
import os
import stat
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def setup_mod():
    spec = importlib.util.spec_from_file_location("tl_setup", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)      # setup() runs only under __main__
    return mod


@pytest.mark.parametrize("flag, nvcc, want", [("", "/x/nvcc", True), ("", None, False),
                                              ("0", "/x/nvcc", False), ("1", "/x/nvcc", True),
                                              ("0", None, False)])
def test_build_cuda_decision(setup_mod, flag, nvcc, want):
    assert setup_mod.build_cuda({"TORCHLEAN_BUILD_CUDA": flag}, nvcc) is want


def test_build_cuda_bad_flags(setup_mod):
    with pytest.raises(RuntimeError, match="TORCHLEAN_BUILD_CUDA=1 but no nvcc was found"):
        setup_mod.build_cuda({"TORCHLEAN_BUILD_CUDA": "1"}, None)
    with pytest.raises(ValueError, match="must be unset, empty, 0 or 1, got 'yes'"):
        setup_mod.build_cuda({"TORCHLEAN_BUILD_CUDA": "yes"}, "/x/nvcc")


def test_find_nvcc_looks_in_cuda_home(setup_mod, tmp_path):
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": str(tmp_path / "nowhere"), "CUDA_HOME": str(tmp_path)}
    assert setup_mod.find_nvcc(env) == str(nvcc)
    assert setup_mod.find_nvcc({"PATH": os.devnull, "CUDA_HOME": str(tmp_path / "none")}) is None
