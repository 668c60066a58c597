"""Python client for a cronstable coordinator's executor API (cronstable.v1.Executor).

from cronstable import Client, Job, Policy

client = Client("http://127.0.0.1:7400")
client.register([Job("charge-cards", "0 * * * *", "./charge.sh", policy=Policy.LEADER)])
with client.firing("charge-cards", scheduled_at) as f:
    if f.run:
        charge()
"""

from .client import Client, CoordinatorError, Firing, Watch
from .types import (
    Answer,
    CatchUp,
    CatchUpRun,
    ElectionMode,
    ElectionStamp,
    Goodbye,
    Handoff,
    Hello,
    Instruction,
    Job,
    JobSetChanged,
    Kind,
    ManualStart,
    Policy,
    Reason,
    Registration,
    ResumeRetry,
    RunDeferred,
    Verdict,
)

__all__ = [
    "Answer",
    "CatchUp",
    "CatchUpRun",
    "Client",
    "CoordinatorError",
    "ElectionMode",
    "ElectionStamp",
    "Firing",
    "Goodbye",
    "Handoff",
    "Hello",
    "Instruction",
    "Job",
    "JobSetChanged",
    "Kind",
    "ManualStart",
    "Policy",
    "Reason",
    "Registration",
    "ResumeRetry",
    "RunDeferred",
    "Verdict",
    "Watch",
]
