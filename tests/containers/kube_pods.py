#!/usr/bin/env python3
"""Turns rendered Kubernetes manifests (kubectl kustomize) into the Pods that
Kubernetes would create from them, for `podman kube play`, which runs Pods but
not StatefulSets, JobSets or Services.

Each pod keeps its template's containers as they are (image, command, ports,
probes, resources, security context, mounts) and gets what the controllers
and the kubelet would add:
- StatefulSet replica i: name and hostname `<set>-<i>`, subdomain the set's
  serviceName, labels apps.kubernetes.io/pod-index and
  statefulset.kubernetes.io/pod-name;
- JobSet replicated job r, job j, completion index p: name and hostname
  `<jobset>-<r>-<j>-<p>`, subdomain the JobSet's name, the annotations JobSet
  and the Indexed Job set (jobset.sigs.k8s.io/job-index,
  jobset.sigs.k8s.io/replicatedjob-replicas,
  batch.kubernetes.io/job-completion-index) and JOB_COMPLETION_INDEX;
- Deployment: one pod per replica named after the Service that selects it.
  Under podman a Service name does not resolve but a pod name does, so naming
  the only backend pod after its Service gives the Service's DNS name the
  same meaning (Kubernetes would name it <deployment>-<hash>-<suffix>);
- the variables the kubelet adds for Services: KUBERNETES_SERVICE_HOST and
  the rest for the API server always, and <NAME>_SERVICE_HOST, _PORT, ... for
  every Service with a cluster IP unless the pod sets enableServiceLinks:
  false (the addresses are placeholders: nothing here dials them);
- env as the kubelet resolves it: downward-API fieldRefs (metadata.name,
  namespace, labels['k'], annotations['k']), configMapKeyRef and
  envFrom.configMapRef from the rendered ConfigMaps, and $(VAR) references to
  variables defined earlier.
ConfigMaps and PersistentVolumeClaims are passed through for the pods' volumes.
A Secret volume becomes what the kubelet makes of it, a directory of the
Secret's files owned by root, group the pod's fsGroup, mode the volume's
defaultMode: a hostPath to a copy, made per pod in secrets/ beside OUTDIR, of the
directory given for that Secret's name (`--secret NAME=DIR`; the Secret
itself is made with `kubectl create secret generic NAME --from-file=DIR`,
outside the rendered manifests).
One difference: `ports` are dropped. In Kubernetes they are informational for
traffic between pods; podman 4.3's kube play publishes each containerPort on
the host (the second worker pod failed with "bind: address already in use").

Usage: kube_pods.py RENDERED.yaml OUTDIR [--secret=NAME=DIR ...]  -> OUTDIR/NN-<pod>.yaml, one per pod
"""

import copy
import os
import shutil
import re
import sys

import yaml

NAMESPACE = "default"


def selector_matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def field_ref(path, meta):
    if path == "metadata.name":
        return meta["name"]
    if path == "metadata.namespace":
        return NAMESPACE
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if m:
        return meta.get(m.group(1), {}).get(m.group(2), "")
    raise ValueError(f"fieldRef {path!r} is not supported by this converter")


def expand(value, env):
    """Kubernetes' $(VAR) expansion: defined variables are replaced, $$ escapes."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), value)


def resolve_env(container, meta, configmaps):
    env = {}
    for source in container.pop("envFrom", []) or []:
        ref = source.get("configMapRef")
        if ref is None:
            raise ValueError(f"envFrom {source} is not supported by this converter")
        env.update(configmaps[ref["name"]])
    for var in container.get("env", []) or []:
        if "value" in var:
            env[var["name"]] = expand(str(var["value"]), env)
        elif "fieldRef" in var.get("valueFrom", {}):
            env[var["name"]] = field_ref(var["valueFrom"]["fieldRef"]["fieldPath"], meta)
        elif "configMapKeyRef" in var.get("valueFrom", {}):
            ref = var["valueFrom"]["configMapKeyRef"]
            env[var["name"]] = configmaps[ref["name"]][ref["key"]]
        else:
            raise ValueError(f"env {var} is not supported by this converter")
    container["env"] = [{"name": k, "value": v} for k, v in env.items()]


def service_env(name, ip, ports):
    """The variables the kubelet gives pods for one Service (docker links style)."""
    prefix = name.upper().replace("-", "_")
    env = {f"{prefix}_SERVICE_HOST": ip, f"{prefix}_SERVICE_PORT": str(ports[0]["port"]),
           f"{prefix}_PORT": f"tcp://{ip}:{ports[0]['port']}"}
    for port in ports:
        proto = port.get("protocol", "TCP")
        if "name" in port:
            env[f"{prefix}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(port["port"])
        base = f"{prefix}_PORT_{port['port']}_{proto}"
        env.update({base: f"{proto.lower()}://{ip}:{port['port']}", f"{base}_PROTO": proto.lower(),
                    f"{base}_PORT": str(port["port"]), f"{base}_ADDR": ip})
    return env


def service_links(services, pod_spec):
    env = service_env("kubernetes", "10.96.0.1", [{"name": "https", "port": 443}])
    if pod_spec.get("enableServiceLinks", True):
        for n, svc in enumerate(services):
            if svc["spec"].get("clusterIP") != "None":
                env.update(service_env(svc["metadata"]["name"], f"10.96.1.{n + 1}", svc["spec"]["ports"]))
    return env


def make_pod(template, name, subdomain=None, labels=None, annotations=None, extra_env=None, configmaps=None,
             services=()):
    meta = copy.deepcopy(template.get("metadata", {}))
    meta["name"] = name
    meta.setdefault("labels", {}).update(labels or {})
    meta.setdefault("annotations", {}).update(annotations or {})
    spec = copy.deepcopy(template["spec"])
    spec["hostname"] = name
    if subdomain:
        spec["subdomain"] = subdomain
    added = dict(service_links(services, spec), **(extra_env or {}))
    for c in spec["containers"]:
        c.pop("ports", None)
        c["env"] = [{"name": k, "value": v} for k, v in added.items()] + (c.get("env") or [])
        resolve_env(c, meta, configmaps)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def pods_from(docs):
    configmaps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    services = [d for d in docs if d["kind"] == "Service"]
    pods = []
    for d in docs:
        kind, name = d["kind"], d["metadata"]["name"]
        if kind == "StatefulSet":
            for i in range(d["spec"].get("replicas", 1)):
                pods.append(make_pod(d["spec"]["template"], f"{name}-{i}", subdomain=d["spec"]["serviceName"],
                                     labels={"apps.kubernetes.io/pod-index": str(i),
                                             "statefulset.kubernetes.io/pod-name": f"{name}-{i}"},
                                     configmaps=configmaps, services=services))
        elif kind == "Deployment":
            labels = d["spec"]["template"]["metadata"]["labels"]
            svc = [s["metadata"]["name"] for s in services if selector_matches(s["spec"].get("selector"), labels)]
            if len(svc) != 1 or d["spec"].get("replicas", 1) != 1:
                raise ValueError(f"Deployment {name}: expected one replica behind one Service, got {svc}")
            pods.append(make_pod(d["spec"]["template"], svc[0], configmaps=configmaps, services=services))
        elif kind == "JobSet":
            for rjob in d["spec"]["replicatedJobs"]:
                job = rjob["template"]["spec"]
                for j in range(rjob.get("replicas", 1)):
                    for p in range(job.get("completions", 1)):
                        pod = f"{name}-{rjob['name']}-{j}-{p}"
                        pods.append(make_pod(job["template"], pod, subdomain=name,
                                             labels={"jobset.sigs.k8s.io/jobset-name": name,
                                                     "jobset.sigs.k8s.io/replicatedjob-name": rjob["name"]},
                                             annotations={"jobset.sigs.k8s.io/job-index": str(j),
                                                          "jobset.sigs.k8s.io/replicatedjob-replicas":
                                                              str(rjob.get("replicas", 1)),
                                                          "batch.kubernetes.io/job-completion-index": str(p)},
                                             extra_env={"JOB_COMPLETION_INDEX": str(p)},
                                             configmaps=configmaps, services=services))
        elif kind not in ("ConfigMap", "Service", "PersistentVolumeClaim"):
            raise ValueError(f"{kind} {name}: not a kind this converter knows")
    return pods


def volume_sources(pod, docs):
    """The ConfigMaps and claims a pod's volumes name, to play with it."""
    wanted = set()
    for v in pod["spec"].get("volumes", []) or []:
        if "configMap" in v:
            wanted.add(("ConfigMap", v["configMap"]["name"]))
        if "persistentVolumeClaim" in v:
            wanted.add(("PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"]))
    return [d for d in docs if (d["kind"], d["metadata"]["name"]) in wanted]


def mount_secrets(pod, secrets, outdir):
    """Secret volumes as the kubelet writes them: a directory of the Secret's
    files, owned by root, group the pod's fsGroup (root without one), mode the
    volume's defaultMode (0644 unless given). A pod whose user is neither
    cannot read a 0440 Secret, as on a real cluster."""
    group = (pod["spec"].get("securityContext") or {}).get("fsGroup", 0)
    for v in pod["spec"].get("volumes", []) or []:
        if "secret" in v:
            secret = v.pop("secret")
            name = secret["secretName"]
            if name not in secrets:
                raise ValueError(f"secret {name}: give its files' directory with --secret {name}=DIR")
            written = os.path.join(os.path.dirname(os.path.abspath(outdir)), "secrets",
                                   f"{pod['metadata']['name']}-{v['name']}")
            shutil.rmtree(written, ignore_errors=True)
            os.makedirs(written)
            for entry in os.listdir(secrets[name]):
                if entry == "ca-key.pem":
                    continue  # left out of the Secret, as docs/deploy.md makes it
                target = os.path.join(written, entry)
                shutil.copyfile(os.path.join(secrets[name], entry), target)
                os.chown(target, 0, group)
                os.chmod(target, secret.get("defaultMode", 0o644))
            os.chmod(written, 0o755)
            v["hostPath"] = {"path": written, "type": "Directory"}


def main(rendered, outdir, *options):
    secrets = {}
    for option in options:
        name, _, path = option.removeprefix("--secret=").partition("=")
        secrets[name] = os.path.abspath(path)
    with open(rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    os.makedirs(outdir, exist_ok=True)
    pods = pods_from(docs)
    for pod in pods:
        mount_secrets(pod, secrets, outdir)
    # The coordinator (a Deployment's pod) first: workers wait for it anyway.
    pods.sort(key=lambda p: p["metadata"]["labels"].get("app.kubernetes.io/component") != "coordinator")
    for n, pod in enumerate(pods):
        with open(os.path.join(outdir, f"{n:02d}-{pod['metadata']['name']}.yaml"), "w") as f:
            yaml.safe_dump_all(volume_sources(pod, docs) + [pod], f, sort_keys=False)
    for pod in pods:
        print(pod["metadata"]["name"])


if __name__ == "__main__":
    main(*sys.argv[1:])
