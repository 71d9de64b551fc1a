"""tpuemu's Python client: an emulated TPU pod's jobs from Python (client/python/tpuemu/pod.py).

Build the project (it generates the tpuemu.v1 stubs into build/python), then
    PYTHONPATH=build/python /usr/bin/python3 -c "import tpuemu; print(tpuemu.Pod().status())"
Needs Debian's python3-grpcio, python3-protobuf and python3-yaml (so Debian's /usr/bin/python3:
another python3 first on PATH may lack them); pandas is used when present.
"""

from tpuemu.pod import Pod, TpuemuError, default_address, steps_frame, to_dict

__all__ = ["Pod", "TpuemuError", "default_address", "steps_frame", "to_dict"]
