# SPDX-License-Identifier: GPL-3.0-or-later
"""The driver's view of a GPU's memory while a process runs: the device's used bytes
sampled every few milliseconds from a thread, through NVML (libnvidia-ml.so.1, loaded
with ctypes: no Python package needed) or, where NVML cannot be loaded, by an
`nvidia-smi --query-gpu=memory.used -lms` child. bench/bench-real-networks.py starts
one around each measured process; the peak above the idle figure read just before it
started is that process's footprint as the driver sees it (its CUDA context included).

    with DriverMemory(0) as d:
        subprocess.run(...)
    d.idle, d.peak, d.peak_above_idle(), d.source   # bytes; "nvml", "nvidia-smi" or None
"""
import ctypes
import shutil
import subprocess
import threading
import time


class _MemoryInfo(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


def _nvml(index):
    """(library, handle) of GPU `index`, or None where NVML is missing or fails."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != 0:
            return None
        handle = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0:
            return None
        return lib, handle
    except (OSError, AttributeError):
        return None


def gpu_name(index=0):
    """The GPU's name as the driver gives it ("NVIDIA H100 80GB HBM3"), or None."""
    nvml = _nvml(index)
    if nvml is not None:
        buf = ctypes.create_string_buffer(96)
        if nvml[0].nvmlDeviceGetName(nvml[1], buf, ctypes.c_uint(96)) == 0:
            return buf.value.decode(errors="replace")
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader",
                              "-i", str(index)], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    return None


class DriverMemory:
    """Samples GPU `index`'s used memory while the `with` block runs."""

    def __init__(self, index=0, interval=0.01):
        self.index, self.interval = index, interval
        self.idle = self.peak = None
        self.source = None
        self._nvml = _nvml(index)
        self._stop = threading.Event()
        self._thread = self._smi = None

    def _used(self):
        info = _MemoryInfo()
        lib, handle = self._nvml
        if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(info)) != 0:
            return None
        return info.used

    def _note(self, used):
        if used is not None:
            self.peak = used if self.peak is None else max(self.peak, used)

    def _poll(self):
        while not self._stop.is_set():
            self._note(self._used())
            time.sleep(self.interval)

    def __enter__(self):
        if self._nvml is not None:
            self.source = "nvml"
            self.idle = self._used()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        elif shutil.which("nvidia-smi"):
            self.source = "nvidia-smi"
            query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                     "-i", str(self.index)]
            first = subprocess.run(query, capture_output=True, text=True).stdout.split()
            self.idle = int(first[0]) << 20 if first and first[0].isdigit() else None
            self._smi = subprocess.Popen(query + ["-lms", str(max(int(self.interval * 1000), 20))],
                                         stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        if self._smi is not None:
            self._smi.terminate()
            out, _ = self._smi.communicate()
            for word in out.split():
                if word.isdigit():
                    self._note(int(word) << 20)
        return False

    def peak_above_idle(self):
        if self.peak is None or self.idle is None:
            return None
        return max(self.peak - self.idle, 0)
