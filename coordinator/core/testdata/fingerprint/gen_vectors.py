#!/usr/bin/env python3
"""Writes vectors.json: golden vectors for the job-set ID and the firing ID (scheme v1).

A second, independent implementation of the encoding documented in
coordinator/core/src/fingerprint.rs, so the checked-in IDs pin the *documented* encoding, not
whatever the Rust code happens to compute. tests/fingerprint.rs reads vectors.json, rebuilds
each job set as `JobSpec`s and checks the IDs.

Never regenerate this file to make a failing test pass: a changed v1 ID means nodes of
different versions stop agreeing, and Leader jobs stand down cluster-wide. A new encoding needs
a new prefix (v2:) and new vectors.

    python3 gen_vectors.py > vectors.json

Job fields in the JSON (missing means the JobSpec default): name, schedule, command, stdin
(string or null), clusterPolicy, timezone (string or null), environment (object), timeoutMs
(integer or null), retry {retries, backoffMs, maxBackoffMs}, concurrencyPolicy.
"""
import hashlib
import json
import struct

SET_DOMAIN = b"cronstable-job-set-v1\0"
FIRING_DOMAIN = b"cronstable-firing-v1\0"


def s(text):
    b = text.encode()
    return struct.pack(">Q", len(b)) + b


def opt(value, enc):
    return b"\x00" if value is None else b"\x01" + enc(value)


def ms(millis):
    return millis.to_bytes(16, "big")


def encode_job(job):
    retry = job.get("retry", {})
    env = job.get("environment", {})
    out = b"\x01" + s(job["name"])
    out += b"\x02" + s(job["schedule"].strip())
    out += b"\x03" + s(job["command"])
    out += b"\x04" + opt(job.get("stdin"), s)
    out += b"\x05" + s(job.get("clusterPolicy", "Leader"))
    out += b"\x06" + opt(job.get("timezone"), s)
    out += b"\x07" + struct.pack(">Q", len(env))
    # Python orders str by code point, which is UTF-8 byte order.
    for key in sorted(env):
        out += s(key) + s(env[key])
    out += b"\x08" + opt(job.get("timeoutMs"), ms)
    out += b"\x09" + struct.pack(">I", retry.get("retries", 0))
    out += ms(retry.get("backoffMs", 0)) + ms(retry.get("maxBackoffMs", 0))
    out += b"\x0a" + s(job.get("concurrencyPolicy", "Allow"))
    return out


def job_set_id(jobs):
    encoded = sorted(encode_job(j) for j in jobs)
    data = SET_DOMAIN + struct.pack(">Q", len(encoded))
    for e in encoded:
        data += struct.pack(">Q", len(e)) + e
    return "v1:" + hashlib.sha256(data).hexdigest()


def firing_id(set_id, job, at_ms):
    data = FIRING_DOMAIN + s(set_id) + s(job) + struct.pack(">q", at_ms)
    return "v1:" + hashlib.sha256(data).digest()[:16].hex()


FULL = {
    "name": "nightly-backup",
    "schedule": "30 2 * * *",
    "command": "/usr/local/bin/backup --all",
    "stdin": "line one\nline two\n",
    "clusterPolicy": "PreferLeader",
    "timezone": "Europe/Berlin",
    "environment": {"PATH": "/usr/bin:/bin", "MAILTO": "ops@example.invalid"},
    "timeoutMs": 3600000,
    "retry": {"retries": 3, "backoffMs": 30000, "maxBackoffMs": 600000},
    "concurrencyPolicy": "Forbid",
}
DEMO = [
    {"name": "tick-leader-only", "schedule": "* * * * *", "command": "date"},
    {"name": "tick-prefer-leader", "schedule": "*/5 * * * *", "command": "date",
     "clusterPolicy": "PreferLeader"},
    {"name": "rotate-local-logs", "schedule": "@daily", "command": "./rotate.sh",
     "clusterPolicy": "EveryNode"},
]
CASES = [
    ("empty job set", []),
    ("one job, every other field default", [{"name": "a", "schedule": "@daily", "command": "true"}]),
    ("schedule padded with whitespace (same ID as the case above)",
     [{"name": "a", "schedule": "  @daily\t", "command": "true"}]),
    ("empty stdin (differs from no stdin)",
     [{"name": "a", "schedule": "@daily", "command": "true", "stdin": ""}]),
    ("every field set", [FULL]),
    ("demo job set", DEMO),
    ("demo job set, reordered (same ID)", [DEMO[2], DEMO[0], DEMO[1]]),
    ("non-ASCII text everywhere",
     [{"name": "nächtlich", "schedule": "0 3 * * *", "command": "echo ünïcødé",
       "timezone": "America/São_Paulo", "environment": {"GRÜSSE": "grüß dich", "A": ""}}]),
    ("one job listed twice (a multiset)",
     [{"name": "a", "schedule": "@daily", "command": "true"},
      {"name": "a", "schedule": "@daily", "command": "true"}]),
    ("@reboot job with a zero timeout and Replace",
     [{"name": "warm-cache", "schedule": "@reboot", "command": "./warm.sh", "timeoutMs": 0,
       "concurrencyPolicy": "Replace", "clusterPolicy": "EveryNode"}]),
]

job_sets = [{"case": c, "jobs": jobs, "id": job_set_id(jobs)} for c, jobs in CASES]
demo_id = job_set_id(DEMO)
firings = [
    {"jobSetId": demo_id, "job": j, "scheduledAtUnixMs": t, "id": firing_id(demo_id, j, t)}
    for j, t in [("tick-leader-only", 1750000000000), ("tick-leader-only", 1750000060000),
                 ("tick-prefer-leader", 1750000000000), ("job/with spaces", -1), ("", 0)]
]
empty_id = job_set_id([])
firings.append({"jobSetId": empty_id, "job": "tick-leader-only", "scheduledAtUnixMs": 1750000000000,
                "id": firing_id(empty_id, "tick-leader-only", 1750000000000)})
print(json.dumps({"jobSets": job_sets, "firings": firings}, indent=2, ensure_ascii=False))
