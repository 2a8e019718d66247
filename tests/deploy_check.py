# SPDX-License-Identifier: MIT
"""Checks deploy/ against what deploy/README.md and README.md say (run by tests/cli_deploy.sh).

usage: deploy_check.py SOURCE_DIR
Prints one "ok   NAME" or "FAIL NAME" line per check and, for the manifests' ddpc commands, one
"plan CONFIG NPROC KEY=VALUE..." line that the shell test feeds to `ddpc plan`, which rejects
any key the trainer does not know. Exit status 1 when a check failed.
"""
import os
import re
import sys

import yaml

src = sys.argv[1]
failed = 0
plans = []


def check(name, cond, detail=""):
    global failed
    print(("ok   " if cond else "FAIL ") + name)
    if not cond:
        failed += 1
        if detail:
            print("    " + str(detail))


def version():
    text = open(os.path.join(src, "include/ddpc/version.h")).read()
    parts = [re.search(r"#define DDPC_VERSION_%s (\d+)" % p, text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def config_args(name, cmd, nproc):
    """cmd = ddpc train CONFIG key=value...: the config is one the package installs."""
    i = cmd.index("ddpc")
    ok = cmd[i + 1] == "train" and cmd[i + 2].startswith("/usr/share/ddpc/configs/")
    check(name + ": runs ddpc train on an installed config", ok, cmd)
    if ok:
        local = os.path.join(src, "configs", os.path.basename(cmd[i + 2]))
        check(name + ": the config exists in configs/", os.path.isfile(local), local)
        plans.append("plan %s %d %s" % (local, nproc, " ".join(cmd[i + 3:])))


VERSION = version()

# ---- k8s/indexed-job.yaml -------------------------------------------------------------------
docs = list(yaml.safe_load_all(open(os.path.join(src, "deploy/k8s/indexed-job.yaml"))))
kinds = [d["kind"] for d in docs]
check("indexed-job: a Service and a Job", kinds == ["Service", "Job"], kinds)
svc, job = docs
name = job["metadata"]["name"]
spec = job["spec"]
pod = spec["template"]["spec"]
c = pod["containers"][0]
env = env_of(c)
world = int(env["WORLD_SIZE"]["value"])
check("indexed-job: the Service is headless and publishes unready pods",
      svc["spec"].get("clusterIP") == "None"
      and svc["spec"].get("publishNotReadyAddresses") is True)
check("indexed-job: the Service selects the Job's pods",
      svc["spec"]["selector"] == {"job-name": name}, svc["spec"]["selector"])
check("indexed-job: Indexed, completions = parallelism = WORLD_SIZE",
      spec["completionMode"] == "Indexed" and spec["completions"] == world
      and spec["parallelism"] == world, (spec["completions"], spec["parallelism"], world))
check("indexed-job: pods are in the Service's subdomain, never restarted in place",
      pod["subdomain"] == svc["metadata"]["name"] and pod["restartPolicy"] == "Never")
check("indexed-job: RANK is the completion index",
      env["RANK"].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
      == "metadata.annotations['batch.kubernetes.io/job-completion-index']", env["RANK"])
check("indexed-job: one rank per pod (LOCAL_RANK 0, LOCAL_WORLD_SIZE 1)",
      env["LOCAL_RANK"]["value"] == "0" and env["LOCAL_WORLD_SIZE"]["value"] == "1")
check("indexed-job: MASTER_ADDR is pod 0's DNS name",
      env["MASTER_ADDR"]["value"] == "%s-0.%s" % (name, svc["metadata"]["name"]),
      env["MASTER_ADDR"])
port = int(env["MASTER_PORT"]["value"])
check("indexed-job: MASTER_PORT is the Service's and the container's port",
      port == svc["spec"]["ports"][0]["port"] == c["ports"][0]["containerPort"])
check("indexed-job: OMP_NUM_THREADS = the CPU request",
      env["OMP_NUM_THREADS"]["value"] == str(c["resources"]["requests"]["cpu"]))
check("indexed-job: image ddpc:" + VERSION, c["image"] == "ddpc:" + VERSION, c["image"])
check("indexed-job: ddpc train directly, no launcher",
      c["command"][:2] == ["ddpc", "train"] and "run" not in c["command"][:2], c["command"])
config_args("indexed-job", c["command"], world)

# ---- k8s/mpijob.yaml ------------------------------------------------------------------------
m = yaml.safe_load(open(os.path.join(src, "deploy/k8s/mpijob.yaml")))
check("mpijob: a Kubeflow MPIJob v2beta1",
      m["apiVersion"] == "kubeflow.org/v2beta1" and m["kind"] == "MPIJob")
ms = m["spec"]
launcher = ms["mpiReplicaSpecs"]["Launcher"]
worker = ms["mpiReplicaSpecs"]["Worker"]
lc = launcher["template"]["spec"]["containers"][0]
wc = worker["template"]["spec"]["containers"][0]
cmd = lc["command"]
check("mpijob: OpenMPI, one launcher", ms["mpiImplementation"] == "OpenMPI"
      and launcher["replicas"] == 1)
check("mpijob: the launcher runs mpirun", cmd[0] == "mpirun", cmd)
np_ = int(cmd[cmd.index("-np") + 1])
check("mpijob: -np = Worker replicas x slotsPerWorker",
      np_ == worker["replicas"] * ms["slotsPerWorker"], (np_, worker["replicas"]))
threads = [a for a in cmd if a.startswith("OMP_NUM_THREADS=")]
check("mpijob: -x OMP_NUM_THREADS = the worker's CPU request",
      threads == ["OMP_NUM_THREADS=%s" % wc["resources"]["requests"]["cpu"]]
      and cmd[cmd.index(threads[0]) - 1] == "-x", threads)
check("mpijob: workers run sshd", wc["command"] == ["/usr/sbin/sshd", "-De"], wc["command"])
check("mpijob: images ddpc-mpi:" + VERSION,
      lc["image"] == wc["image"] == "ddpc-mpi:" + VERSION, (lc["image"], wc["image"]))
config_args("mpijob", cmd, np_)

# ---- Dockerfile = README.md's Install steps -------------------------------------------------
readme = open(os.path.join(src, "README.md")).read()
install = re.search(r"^## Install\n\n```sh\n(.*?)```", readme, re.S | re.M)
check("README.md has an Install section with a command block", install is not None)
steps = [re.sub(r"\s+#.*$", "", l).strip() for l in install.group(1).splitlines()]
steps = [s for s in steps if s]
# Instructions with their continuation lines joined ("a && \\\n    b" is "a && b").
dockerfile = re.sub(r"\s*\\\n\s*", " ", open(os.path.join(src, "deploy/Dockerfile")).read())
stages = {}
stage = None
for line in dockerfile.splitlines():
    line = line.strip()
    if line.startswith("FROM "):
        words = line.split()
        stage = words[3] if len(words) == 4 and words[2] == "AS" else None
        stages[stage] = {"from": words[1], "run": []}
    elif line.startswith("RUN "):
        stages[stage]["run"].append(line[4:].strip())
check("Dockerfile: stages build, runtime, mpi, default", list(stages) == ["build", "runtime", "mpi",
      "default"], list(stages))
check("Dockerfile: the last stage (docker build's default target) is the runtime image",
      stages["default"] == {"from": "runtime", "run": []}, stages.get("default"))
check("Dockerfile: build and runtime start from debian:12",
      stages["build"]["from"] == stages["runtime"]["from"] == "debian:12")
# A step that ran apt removes apt's package lists after it, which the image need not carry.
CLEAN = " && rm -rf /var/lib/apt/lists/*"
runs = stages["build"]["run"] + stages["runtime"]["run"]
for r in runs + stages["mpi"]["run"]:
    if "apt-get" in r or "scripts/setup" in r:
        check("Dockerfile: '%s' removes apt's lists" % r[:40], CLEAN in r, r)
runs = [r.replace(CLEAN, "") for r in runs]
check("Dockerfile: its build and runtime RUN steps are README.md's Install commands",
      runs == steps, "Dockerfile %s\n    README %s" % (runs, steps))
check("Dockerfile: the build stage installs the build's packages only (no --test)",
      stages["build"]["run"][0].startswith("./scripts/setup ") and
      "--test" not in stages["build"]["run"][0], stages["build"]["run"])
check("Dockerfile: the runtime stage installs only the package (no scripts/setup, no compiler)",
      not any("scripts/setup" in r or "build-essential" in r or "make" in r.split()
              for r in stages["runtime"]["run"]), stages["runtime"]["run"])
deploy_readme = open(os.path.join(src, "deploy/README.md")).read()
check("Dockerfile: the mpi stage's one RUN is the step deploy/README.md states",
      len(stages["mpi"]["run"]) == 1 and "`%s`" % stages["mpi"]["run"][0] in deploy_readme,
      stages["mpi"]["run"])

for p in plans:
    print(p)
sys.exit(1 if failed else 0)
