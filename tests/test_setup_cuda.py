"""setup.py's choice of building the CUDA library: with nvcc found and a GPU driver present unless
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


DRIVER = "/proc/driver/nvidia exists"


@pytest.mark.parametrize("flag, nvcc, driver, want, why", [
    ("", "/x/nvcc", DRIVER, True, "stub and CUDA: nvcc found (/x/nvcc) and a GPU driver"),
    ("", "/x/nvcc", None, False, "stub only: nvcc found (/x/nvcc) but no GPU driver"),
    ("", None, DRIVER, False, "stub only: no nvcc found"),
    ("", None, None, False, "stub only: no nvcc found"),
    ("0", "/x/nvcc", DRIVER, False, "stub only: TORCHLEAN_BUILD_CUDA=0"),
    ("0", None, None, False, "stub only: TORCHLEAN_BUILD_CUDA=0"),
    ("1", "/x/nvcc", None, True, "stub and CUDA: TORCHLEAN_BUILD_CUDA=1 (nvcc: /x/nvcc)"),
    ("1", "/x/nvcc", DRIVER, True, "stub and CUDA: TORCHLEAN_BUILD_CUDA=1"),
])
def test_build_cuda_decision(setup_mod, flag, nvcc, driver, want, why):
    got, line = setup_mod.build_cuda({"TORCHLEAN_BUILD_CUDA": flag}, nvcc, driver)
    assert got is want and line.startswith(why) and "\n" not in line


def test_build_cuda_bad_flags(setup_mod):
    with pytest.raises(RuntimeError, match="TORCHLEAN_BUILD_CUDA=1 but no nvcc was found"):
        setup_mod.build_cuda({"TORCHLEAN_BUILD_CUDA": "1"}, None, DRIVER)
    with pytest.raises(ValueError, match="must be unset, empty, 0 or 1, got 'yes'"):
        setup_mod.build_cuda({"TORCHLEAN_BUILD_CUDA": "yes"}, "/x/nvcc", DRIVER)


def test_gpu_driver_sees_nvidia_smi_on_path(setup_mod, tmp_path):
    """On a machine without /proc/driver/nvidia, an nvidia-smi on PATH is the driver's sign."""
    if os.path.isdir("/proc/driver/nvidia"):
        pytest.skip("this machine has a GPU driver")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    assert setup_mod.gpu_driver({"PATH": str(tmp_path)}) == f"{smi} exists"


def test_find_nvcc_looks_in_cuda_home(setup_mod, tmp_path):
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": str(tmp_path / "nowhere"), "CUDA_HOME": str(tmp_path)}
    assert setup_mod.find_nvcc(env) == str(nvcc)
    assert setup_mod.find_nvcc({"PATH": os.devnull, "CUDA_HOME": str(tmp_path / "none")}) is None
