"""A tpuemu pod from Python: submit jobs, follow their steps, read results, as plain dicts.

    from tpuemu import Pod
    pod = Pod()                                  # the local pod `tpuemu cluster up` started
    job = pod.submit("examples/jobs/dp.yaml")    # or a dict of the job file's keys
    for step in pod.watch(job["id"]):
        print(step["step"], step["loss"], step["emulated_step_s"])
    print(pod.job(job["id"])["train_summary"]["param_l2"])

Everything goes over the coordinator's gRPC API (proto/tpuemu/v1), with the stubs the build
generates; a training job's file is read and checked by the coordinator, as the CLI reads one.
Messages become dicts field by field: numbers stay numbers (64-bit ones too), enums become their
lower-case names ("succeeded"); every number and string is there (0 or "" when unset), a nested
message only when the coordinator set it (a collective job has "result", a training job "steps").
"""

import json
import os

import grpc
import yaml

from tpuemu.v1 import collective_pb2, coordinator_pb2, matmul_pb2, services_pb2_grpc


class TpuemuError(Exception):
    """A call the coordinator refused or could not make: its gRPC code and message."""

    def __init__(self, code, message):
        super().__init__(f"{code.name.lower()}: {message}")
        self.code = code
        self.message = message


def to_dict(message):
    """A protobuf message as a plain dict (see the module's docstring)."""
    out = {}
    for field in message.DESCRIPTOR.fields:
        singular_message = field.type == field.TYPE_MESSAGE and field.label != field.LABEL_REPEATED
        if (singular_message or field.containing_oneof is not None) and not message.HasField(field.name):
            continue
        out[field.name] = _value(field, getattr(message, field.name))
    return out


def _value(field, value):
    if field.type == field.TYPE_MESSAGE:
        if field.message_type.GetOptions().map_entry:
            entry = field.message_type.fields_by_name["value"]
            return {k: _scalar(entry, v) for k, v in value.items()}
        if field.label == field.LABEL_REPEATED:
            return [to_dict(v) for v in value]
        return to_dict(value)
    if field.label == field.LABEL_REPEATED:
        return [_scalar(field, v) for v in value]
    return _scalar(field, value)


def _scalar(field, value):
    if field.type == field.TYPE_MESSAGE:
        return to_dict(value)
    if field.type == field.TYPE_ENUM:
        name = field.enum_type.values_by_number[value].name
        prefix = "JOB_STATE_"
        return name[len(prefix):].lower() if name.startswith(prefix) else name.lower()
    return value


def _local_pod():
    """What `tpuemu cluster up` recorded in $TPUEMU_HOME, or None."""
    home = os.environ.get("TPUEMU_HOME") or os.path.join(os.environ.get("HOME") or "/tmp", ".tpuemu")
    try:
        with open(os.path.join(home, "pod.json")) as f:
            return json.load(f)
    except OSError:
        return None


def default_address():
    """$TPUEMU_COORDINATOR, else the local pod `tpuemu cluster up` recorded in $TPUEMU_HOME."""
    if os.environ.get("TPUEMU_COORDINATOR"):
        return os.environ["TPUEMU_COORDINATOR"]
    pod = _local_pod()
    if pod is None:
        raise TpuemuError(grpc.StatusCode.NOT_FOUND,
                          "no pod recorded in $TPUEMU_HOME (or ~/.tpuemu): start one with `tpuemu cluster up "
                          "--local ...`, or give Pod() the coordinator's HOST:PORT")
    return pod["coordinator"]


def _read(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise TpuemuError(grpc.StatusCode.NOT_FOUND, f"{what} '{path}': {e.strerror}") from None


# As the CLI's (services/server.h): a call open for hours hears of a coordinator that froze or a
# network path that died within 30 s, instead of waiting for ever.
_KEEPALIVE = [("grpc.keepalive_time_ms", 20000), ("grpc.keepalive_timeout_ms", 10000),
              ("grpc.http2.max_pings_without_data", 0)]


def _channel(address, ca, token, insecure):
    """The channel as the CLI makes it (client/client_security.h): plaintext only when asked
    (or the local pod was started so), else TLS checked against the pod's CA for the name
    tpuemu-cluster, with the token on every call."""
    env = os.environ
    local = _local_pod()
    local = local if local and local.get("coordinator") == address else None
    if insecure or env.get("TPUEMU_INSECURE") in ("1", "true", "yes") or (local and not local.get("tls_dir")):
        return grpc.insecure_channel(address, options=_KEEPALIVE)
    ca = ca or env.get("TPUEMU_TLS_CA") or (local and os.path.join(local["tls_dir"], "ca.pem"))
    if not ca:
        raise TpuemuError(grpc.StatusCode.FAILED_PRECONDITION,
                          f"the coordinator at {address}: no CA to check it against; give Pod(ca=...) or set "
                          "TPUEMU_TLS_CA to the pod's ca.pem, or insecure=True for a pod started with --insecure")
    if token is None:
        token_file = env.get("TPUEMU_TOKEN_FILE") or (local and os.path.join(local["tls_dir"], "admin.token"))
        token = env.get("TPUEMU_TOKEN") or (token_file and _read(token_file, "token file").decode().strip())
    credentials = grpc.ssl_channel_credentials(root_certificates=_read(ca, "CA"))
    if token:
        credentials = grpc.composite_channel_credentials(credentials, grpc.access_token_call_credentials(token))
    return grpc.secure_channel(address, credentials,
                               options=[("grpc.ssl_target_name_override", "tpuemu-cluster")] + _KEEPALIVE)


TERMINAL = ("succeeded", "failed", "cancelled", "interrupted")


class Pod:
    """A running pod's coordinator at `address` (HOST:PORT; default: default_address()).

    Reached as the CLI reaches it: TLS checked against `ca` (a path; default $TPUEMU_TLS_CA, else
    the local pod's), presenting `token` (default $TPUEMU_TOKEN, else the file $TPUEMU_TOKEN_FILE,
    else the local pod's admin token); plaintext with insecure=True (or $TPUEMU_INSECURE=1) for a
    pod started with --insecure. docs/security.md.
    """

    def __init__(self, address=None, timeout_s=30, ca=None, token=None, insecure=False):
        self.address = address or default_address()
        self.timeout_s = timeout_s
        self._channel = _channel(self.address, ca, token, insecure)
        self._stub = services_pb2_grpc.CoordinatorServiceStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request, timeout_s=None):
        try:
            return method(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as e:
            raise self._error(e) from None

    def _error(self, e):
        """A gRPC error as a TpuemuError; one reaching no coordinator says what to do, as the CLI's."""
        if e.code() != grpc.StatusCode.UNAVAILABLE:
            return TpuemuError(e.code(), e.details())
        return TpuemuError(e.code(), f"no coordinator answers at {self.address} ({e.details()}): is the pod running? "
                           "`tpuemu cluster status` says (a local pod whose coordinator stopped: `tpuemu cluster "
                           "restart-coordinator`; a pod started with --insecure needs Pod(insecure=True))")

    # ---- the pod ----------------------------------------------------------------------------
    def status(self):
        """The pod: topology, workers (alive, memory), readiness; as `tpuemu cluster status`."""
        return to_dict(self._call(self._stub.GetClusterStatus, coordinator_pb2.ClusterStatusRequest()))

    # ---- jobs -------------------------------------------------------------------------------
    def submit(self, job, priority=0, wait=False):
        """Submits a training job: a dict of job file keys, a path to a job file, or its YAML text.

        Returns the job as the coordinator took it (its "id", "state", ...), or with wait=True
        as it finished. A bad job raises TpuemuError naming the key, as `tpuemu submit` would.
        """
        if isinstance(job, dict):
            text = yaml.safe_dump(job)
        elif not isinstance(job, (str, os.PathLike)):
            raise TpuemuError(grpc.StatusCode.INVALID_ARGUMENT, f"job: a {type(job).__name__}; give a job file's "
                              "path, its text, or a dict of its keys")
        elif not os.path.exists(job) and any(c in str(job) for c in ("\n", "{", ": ")):
            text = str(job)  # the file's text ("name: x" is no file's name; "C:/jobs/dp.yaml" may be)
        else:
            try:
                with open(job) as f:
                    text = f.read()
            except OSError as e:
                raise TpuemuError(grpc.StatusCode.NOT_FOUND, f"{job}: {e.strerror}; give a job file's path, "
                                  "its text, or a dict of its keys") from None
        request = _request(coordinator_pb2.SubmitJobRequest, train_yaml=text, priority=priority)
        return self._submitted(request, wait)

    def bench_collective(self, op="all-gather", axes=("x",), bytes=8 << 20, algorithm="auto", dtype="bf16",
                         seed=1, num_slices=0, timeout_s=None):
        """Runs one collective and returns its result: emulated_s, predicted_s, busbw, links...,
        and "job", its id. As `tpuemu bench collective` takes them: axes ("x", "y") or "x,y";
        bytes 1048576 or "1MiB".

        num_slices: run on that many of the pod's slices, beside jobs on the others (0: all).
        timeout_s: how long to wait for it, queued and running (None: until it ends). A wait that
        ends otherwise (the timeout, Ctrl-C) cancels the job, as the CLI's does: its result was
        for this call."""
        spec = _request(collective_pb2.CollectiveSpec, op=op, axes=_axes(axes), bytes=_bytes(bytes),
                        algorithm=algorithm, dtype_bytes=_dtype_bytes(dtype), seed=seed, num_slices=num_slices)
        return self._run(coordinator_pb2.SubmitJobRequest(collective=spec), "result", timeout_s)

    def matmul(self, expr, dims, mesh="", dtype="bf16", values="uniform", seed=1, timeout_s=None):
        """Runs one sharded matmul in the seeds' notation and returns its result (plan, times, check)
        and "job", its id; timeout_s as bench_collective's.

        dims: the sizes as `tpuemu matmul --dims` takes them, "I=256,J=256,K=256", or a dict
        {"I": 256, ...}; mesh likewise ("X=x,Y=y", or {"X": "x", ...})."""
        def csv(v):
            return ",".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else v
        spec = _request(matmul_pb2.MatmulSpec, expr=expr, dims=csv(dims), mesh=csv(mesh),
                        dtype_bytes=_dtype_bytes(dtype), values=values, seed=seed)
        return self._run(coordinator_pb2.SubmitJobRequest(matmul=spec), "matmul_result", timeout_s)

    def job(self, job_id):
        """A job as the coordinator records it: state, steps, results, placement, queue place.
        job_id: "job-3", or 3 (as the CLI takes it)."""
        return to_dict(self._call(self._stub.GetJob, coordinator_pb2.GetJobRequest(id=_job_id(job_id))))

    def jobs(self):
        """Every job the coordinator keeps, oldest first."""
        out = []
        try:
            for piece in self._stub.StreamJobs(coordinator_pb2.ListJobsRequest(), timeout=self.timeout_s):
                out.extend(to_dict(j) for j in piece.jobs)
        except grpc.RpcError as e:
            raise self._error(e) from None
        return out

    def watch(self, job_id, timeout_s=None):
        """Yields the job's steps (dicts) as they finish, until it ends; then pod.job(id) has the rest.

        timeout_s: raise TpuemuError (deadline_exceeded) if it has not ended by then, the job
        left as it is (None: wait as long as it takes, as `tpuemu watch` does)."""
        job_id = _job_id(job_id)
        seen = 0
        try:
            for event in self._stub.WatchJob(coordinator_pb2.WatchJobRequest(id=job_id), timeout=timeout_s):
                job = event.job
                first = job.steps_dropped
                for k in range(max(seen, first), first + len(job.steps)):
                    yield to_dict(job.steps[k - first])
                seen = max(seen, first + len(job.steps))
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise TpuemuError(e.code(), f"{job_id} has not ended within {timeout_s} s (pod.job(\"{job_id}\") "
                                  "says whether it is queued or running; pod.cancel stops it)") from None
            raise self._error(e) from None

    def wait(self, job_id, timeout_s=None):
        """The job once it has ended; timeout_s as watch's."""
        for _ in self.watch(job_id, timeout_s):
            pass
        return self.job(job_id)

    def cancel(self, job_id):
        """Asks the job to stop; returns it. One that has already ended comes back as it is (its
        "state" says how it ended), so that a cancel can be repeated."""
        return to_dict(self._call(self._stub.CancelJob, coordinator_pb2.CancelJobRequest(id=_job_id(job_id))))

    def resume(self, job_id, wait=False):
        """Runs a failed, cancelled or interrupted training job again from its latest checkpoint (from
        step 0 without one), as `tpuemu resume`; returns it, or with wait=True as it ended."""
        job = to_dict(self._call(self._stub.ResumeJob, coordinator_pb2.ResumeJobRequest(id=_job_id(job_id))))
        return self.wait(job["id"]) if wait else job

    def _submitted(self, request, wait):
        job = to_dict(self._call(self._stub.SubmitJob, request))
        return self.wait(job["id"]) if wait else job

    def _cancel_own(self, job_id):
        """Cancels a job whose result was for a call that gave up on it: (the job or None, what happened).
        Briefly: the user may be pressing Ctrl-C, or the coordinator be gone."""
        try:
            job = to_dict(self._call(self._stub.CancelJob, coordinator_pb2.CancelJobRequest(id=job_id),
                                     min(self.timeout_s, 5)))
        except TpuemuError as refused:
            return None, f"{job_id} could not be cancelled ({refused.message}): `tpuemu cancel {job_id}` stops it"
        state = job.get("state")
        if state in TERMINAL and state != "cancelled":
            return job, f"it had ended ({state})"
        return job, "it was cancelled: its result was for this call"

    def _run(self, request, field, timeout_s):
        """Submits a job whose result is for this call, waits for it, and returns the result."""
        job_id = self._submitted(request, False)["id"]
        try:
            job = self.wait(job_id, timeout_s)
        except BaseException as e:  # the timeout, Ctrl-C, a lost coordinator: nobody else wants the job
            job, outcome = self._cancel_own(job_id)
            if not isinstance(e, TpuemuError):
                raise
            if job and job.get("state") == "succeeded":
                return dict(job[field], job=job_id)  # it ended as the wait did
            why = f"{job_id} has not ended within {timeout_s} s" if e.code == grpc.StatusCode.DEADLINE_EXCEEDED \
                else e.message
            raise TpuemuError(e.code, f"{why}; {outcome}") from None
        if job.get("state") != "succeeded":
            raise TpuemuError(grpc.StatusCode.ABORTED, f"{job['id']} {job.get('state')}: {job.get('error', '')}")
        return dict(job[field], job=job_id)


def _request(message, **fields):
    """A request message; a field of the wrong type or range is the caller's error, said as one."""
    try:
        return message(**fields)
    except (TypeError, ValueError) as e:
        raise TpuemuError(grpc.StatusCode.INVALID_ARGUMENT, f"{message.DESCRIPTOR.name}: {e}") from None


def _dtype_bytes(dtype):
    sizes = {"bf16": 2, "f32": 4}
    if dtype not in sizes:
        raise TpuemuError(grpc.StatusCode.INVALID_ARGUMENT, f"dtype {dtype!r}: allowed: bf16, f32")
    return sizes[dtype]


def _job_id(job_id):
    """ "job-3" as it is; 3 or "3" as "job-3", as the CLI takes them."""
    whole = isinstance(job_id, int) and not isinstance(job_id, bool)
    return f"job-{job_id}" if whole or (isinstance(job_id, str) and job_id.isdigit()) else job_id


def _axes(axes):
    """("x", "y"), or "x,y" as the CLI's --axes takes it."""
    if isinstance(axes, str):
        return [a.strip() for a in axes.split(",")]
    return list(axes)


# As the CLI reads --bytes (core/base/units.cc); the coordinator checks the range.
_UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1000, "MB": 10**6, "GB": 10**9,
          "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _bytes(size):
    """1048576, or "1MiB" as the CLI's --bytes takes it."""
    if isinstance(size, str):
        number = size.rstrip("BKMGi")
        if number.isdigit() and size[len(number):] in _UNITS:
            return int(number) * _UNITS[size[len(number):]]
        raise TpuemuError(grpc.StatusCode.INVALID_ARGUMENT, f"bytes {size!r}: a whole number of bytes, or one "
                          "with a unit like 64KiB, 8MiB or 1GiB (B, KiB, MiB, GiB, KB, MB, GB)")
    return size


def steps_frame(job):
    """A training job's steps as a pandas DataFrame, one row per step (a list of dicts without pandas)."""
    steps = job.get("steps", [])
    try:
        import pandas
    except ImportError:
        return steps
    return pandas.DataFrame(steps).set_index("step") if steps else pandas.DataFrame()
