#!/usr/bin/python3
# %% [markdown]
# # tpuemu from Python
# A notebook-style walk through a pod with the Python client (client/python/tpuemu). Cells are
# marked `# %%` (Jupyter, VS Code); as a script it runs top to bottom. First:
#
#     tpuemu cluster up --local --topology v5p:2x2 --slices 2 --chips-per-host 2
#     PYTHONPATH=build/python /usr/bin/python3 examples/python/first_steps.py

# %%
import tpuemu

pod = tpuemu.Pod()  # the local pod `cluster up` recorded ($TPUEMU_HOME), or Pod("HOST:PORT")
status = pod.status()
print(status["description"], "-", "ready" if status["ready"] else "not ready")

# %% [markdown]
# ## A training job, step by step
# The same keys as a job file (docs/jobs.md); the coordinator checks them as `tpuemu submit` does.

# %%
job = pod.submit({"name": "fsdp-from-python", "ici_fsdp_parallelism": -1, "emb_dim": 256, "mlp_dim": 1024,
                  "num_layers": 2, "global_batch_tokens": 512, "steps": 5, "seed": 1})
for step in pod.watch(job["id"]):
    print(f"step {step['step']}: loss {step['loss']:.6f}, {step['emulated_step_s'] * 1e6:.1f} us emulated, "
          f"MFU {step['mfu']:.1%}")
done = pod.job(job["id"])
print("mesh:", done["train_summary"]["mesh"], " |params|:", done["train_summary"]["param_l2"])
frame = tpuemu.steps_frame(done)  # a pandas DataFrame when pandas is there, else the list of dicts
print(frame[["loss", "emulated_step_s", "mfu"]] if hasattr(frame, "columns") else
      f"{len(frame)} steps as dicts (with pandas: a DataFrame)")

# %% [markdown]
# ## An all-gather sweep against the seed's formula

# %%
print(f"{'bytes':>10} {'emulated us':>12} {'predicted us':>13} {'ratio':>6}")
for size in (1 << 16, 1 << 20, 1 << 24):
    r = pod.bench_collective(op="all-gather", axes=("x", "y"), bytes=size)
    print(f"{size:>10} {r['emulated_s'] * 1e6:>12.2f} {r['predicted_s'] * 1e6:>13.2f} {r['ratio']:>6.3f}")
