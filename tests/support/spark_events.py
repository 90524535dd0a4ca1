"""Spark's own record of task attempts, read from an application's event log: which attempt of
which task ran where, whether it was a speculative copy, and how it ended.

An application writes the log when started with :data:`EVENT_LOG_CONF` (``spark.eventLog.dir``
set to a directory of the caller's): uncompressed JSON lines, one file per application, not
rolled (Spark 4's defaults are zstd and rolling). Read it once the application has stopped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

#: Spark settings that make an application write a log :func:`task_attempts` reads (plus
#: ``spark.eventLog.dir``).
EVENT_LOG_CONF = {
    "spark.eventLog.enabled": "true",
    "spark.eventLog.compress": "false",
    "spark.eventLog.rolling.enabled": "false",
}


@dataclass(frozen=True)
class TaskAttempt:
    """One attempt of one task, as its SparkListenerTaskEnd event tells it."""

    stage: int
    index: int  # the task's partition in its stage: what TaskContext.partitionId() says
    attempt: int  # TaskContext.attemptNumber()
    speculative: bool
    executor: str
    host: str
    reason: str  # "Success", "ExceptionFailure", "ExecutorLostFailure", "TaskKilled", "TaskCommitDenied", ...
    query_id: str | None  # the streaming query of its job, if any
    batch_id: int | None  # the micro-batch of its job, if any
    job_group: str | None  # SparkContext.setJobGroup's id for its job, if any

    @property
    def succeeded(self) -> bool:
        return self.reason == "Success"


def event_log_file(directory: str | os.PathLike[str], app_id: str) -> Path:
    """The finished log of application ``app_id`` in ``directory``."""
    path = Path(directory) / app_id
    if not path.exists():
        found = sorted(p.name for p in Path(directory).iterdir())
        raise FileNotFoundError(
            f"no event log {path} (found {found}); start the application with {EVENT_LOG_CONF} and "
            "spark.eventLog.dir, and stop it before reading its log"
        )
    return path


def task_attempts(directory: str | os.PathLike[str], app_id: str) -> list[TaskAttempt]:
    """Every task attempt the application ran to its end, in the order they ended."""
    stage_jobs: dict[int, dict[str, str]] = {}
    attempts = []
    with open(event_log_file(directory, app_id), encoding="utf-8") as log:
        for line in log:
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerJobStart":
                properties = event.get("Properties") or {}
                for stage in event.get("Stage IDs", []):
                    stage_jobs[stage] = properties
            elif kind == "SparkListenerTaskEnd":
                info = event["Task Info"]
                properties = stage_jobs.get(event["Stage ID"], {})
                batch = properties.get("streaming.sql.batchId")
                attempts.append(
                    TaskAttempt(
                        stage=event["Stage ID"],
                        index=info.get("Partition ID", info["Index"]),
                        attempt=info["Attempt"],
                        speculative=info["Speculative"],
                        executor=info["Executor ID"],
                        host=info["Host"],
                        reason=event["Task End Reason"]["Reason"],
                        query_id=properties.get("sql.streaming.queryId"),
                        batch_id=int(batch) if batch is not None else None,
                        job_group=properties.get("spark.jobGroup.id"),
                    )
                )
    return attempts
