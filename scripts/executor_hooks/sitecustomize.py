"""Aimed failures inside a sink's task, for scripts/chaos_executors.py: loaded into the executors'
Python workers through ``spark.executorEnv.PYTHONPATH``, never by the package.

``PYLOG_EXECUTOR_CHAOS`` names a directory shared by the driver and every executor (a path on
this machine: the cluster's hosts are loopback addresses of one machine). Every attempt of a
streaming sink task (``pylog-files`` or the ``pylog`` topic sink) appends a JSON line to
``attempts``: the sink, query, batch, partition, ``TaskContext.attemptNumber()``, host and pids,
so the test can show from the tasks' side which attempts ran.

``aims`` holds actions, one a line, that the driver adds one at a time. A first attempt
(``attemptNumber() == 0``) of a sink task takes the first pending action when it is in the middle
of its write: it has handed the first Arrow batch of its rows to the sink (the file sink wrote it
into an open part file; the topic sink produced it inside an open transaction) and asks for the
next. It appends the action, with where it struck, to ``struck`` and then:

  kill-worker     SIGKILLs its own Python worker: Spark fails the task attempt and retries it
  kill-executor   SIGKILLs the executor JVM that runs it (its Python daemon and workers go with
                  it when they notice); the attempt is lost with the executor and retried elsewhere
  stall [S]       sleeps up to S seconds (default 300) before it goes on: with spark.speculation
                  a copy of the task starts on another host, wins, and Spark kills this attempt
  slow [S]        makes that task slow on every attempt, as a task with more data than the
                  others is. The struck attempt waits there until a speculative copy of the task
                  is in the middle of its write too (the copy's sink has started: a topic sink
                  copy fenced it), then goes on while the copy, slow too, sleeps S seconds
                  (default 5) there

Every attempt that reaches the middle of its write appends a line to ``phases``
(``mid-write``), and an attempt that goes on after waiting another (``resumed``), with the time.
"""

import fcntl
import json
import os
import signal
import time

ACTIONS = ("kill-worker", "kill-executor", "stall", "slow")
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
STALL_S = 300.0
SLOW_S = 5.0

_DIR = os.environ.get("PYLOG_EXECUTOR_CHAOS")


def _parent(pid):
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def _executor_pid():
    """The executor JVM above this Python worker (worker -> daemon -> JVM), or None."""
    pid = os.getpid()
    for _ in range(3):
        pid = _parent(pid)
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            if EXECUTOR_CLASS.encode() in cmdline.read():
                return pid
    return None


def _task(sink):
    from pyspark import TaskContext

    context = TaskContext.get()
    batch = context.getLocalProperty("streaming.sql.batchId")
    return {
        "sink": sink,
        "query": context.getLocalProperty("sql.streaming.queryId"),
        "batch": int(batch) if batch is not None else None,
        "partition": context.partitionId(),
        "attempt": context.attemptNumber(),
        "host": os.environ.get("SPARK_LOCAL_IP"),
        "pid": os.getpid(),
        "executor_pid": _executor_pid(),
    }


def _append(name, line):
    with open(os.path.join(_DIR, name), "a") as out:
        out.write(line + "\n")


def _locked():
    lock = open(os.path.join(_DIR, "lock"), "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    return lock


def _take_aim(task):
    """The first pending action, taken by this attempt (and recorded as struck), or None."""
    if task["attempt"] != 0:
        return None
    with _locked():
        path = os.path.join(_DIR, "aims")
        try:
            with open(path) as aims:
                pending = [line.strip() for line in aims if line.strip()]
        except FileNotFoundError:
            return None
        if not pending:
            return None
        with open(path, "w") as aims:
            aims.writelines(line + "\n" for line in pending[1:])
        _append("struck", json.dumps(dict(task, action=pending[0], time=time.time())))
        return pending[0]


def _key(task):
    return [task["query"], task["batch"], task["partition"]]


def _lines(name):
    try:
        with open(os.path.join(_DIR, name)) as found:
            return [json.loads(line) for line in found if line.strip()]
    except FileNotFoundError:
        return []


def _phase(task, phase):
    _append("phases", json.dumps({"task": _key(task), "attempt": task["attempt"], "phase": phase, "time": time.time()}))


def _sleep(seconds, until=None):
    """Sleep ``seconds``, or less once ``until()`` is true."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (until and until()):
        time.sleep(0.2)


def _slow_seconds(task):
    """How long every later attempt of ``task`` sleeps mid-write, if an action made it slow."""
    for line in _lines("slow"):
        if line["task"] == _key(task):
            return line["seconds"]
    return None


def _copy_mid_write(task):
    return any(p["task"] == _key(task) and p["attempt"] > 0 and p["phase"] == "mid-write" for p in _lines("phases"))


def _act(action, task):
    name, _, argument = action.partition(" ")
    if name == "kill-worker":
        os.kill(os.getpid(), signal.SIGKILL)
    elif name == "kill-executor":
        executor = _executor_pid()
        if executor is None:
            raise RuntimeError("kill-executor: this Python worker runs under no executor JVM")
        os.kill(executor, signal.SIGKILL)
    elif name == "stall":
        _sleep(float(argument) if argument else STALL_S)
    elif name == "slow":
        _append("slow", json.dumps({"task": _key(task), "seconds": float(argument) if argument else SLOW_S}))
        _sleep(STALL_S, until=lambda: _copy_mid_write(task))
        _phase(task, "resumed")
    else:
        raise RuntimeError(f"unknown action {action!r}; the actions are {', '.join(ACTIONS)}")


def _watched(sink, iterator):
    task = _task(sink)
    _append("attempts", json.dumps(task))

    def batches():
        rows = iter(iterator)
        first = next(rows, None)
        if first is None:
            return
        yield first
        # The sink asks for more: the first batch is in its open file or transaction.
        _phase(task, "mid-write")
        action = _take_aim(task)
        if action is not None:
            _act(action, task)
        else:
            slow = _slow_seconds(task)
            if slow is not None:
                _sleep(slow)
        yield from rows

    return batches()


def _install():
    if not _DIR:
        return
    from kafka_spark.files.writers import FileStreamWriter
    from kafka_spark.topics.writers import TopicStreamWriter

    for sink, writer in (("files", FileStreamWriter), ("topic", TopicStreamWriter)):

        def write(self, iterator, _write=writer.write, _sink=sink):
            return _write(self, _watched(_sink, iterator))

        writer.write = write


_install()
