#!/usr/bin/env python3
"""An example Relais connected worker in Python, standard library only.

It serves the add_company_to_crm definition (examples/definitions) over a
worker stream (DESIGN §10) in the Connect protocol over HTTP/1.1 with JSON,
which needs no generated code: Subscribe is one streaming POST, and
Heartbeat, Complete, Fail and Drain are plain JSON POSTs. It does what
examples/crmworker does in Go with the SDK: it adds companies to a CRM,
here an in-memory map, and reports whether each was created or already
there.

    RELAIS_URL=http://127.0.0.1:8080 RELAIS_TOKEN=<consumer token> python3 worker.py

SIGINT or SIGTERM drains the stream (no new tasks), lets the tasks in
flight finish and settle, and exits. It logs one JSON object a line on
stdout.

The Connect protocol, as this worker uses it (https://connectrpc.com/docs/protocol):
- a streaming call's request and response are framed: one flag byte, the
  message's length as 4 big-endian bytes, the JSON message; a frame with
  flag 0x02 ends the stream, its JSON holding {"error": {...}} when the
  stream failed (the HTTP status stays 200);
- a unary call is application/json both ways; a refusal is an HTTP error
  status with {"code", "message", "details"}, Relais's problem (its REST
  code, detail and pointers) in the details' "debug" member;
- messages are protobuf's JSON: bytes in base64 (inputs, outputs), 64-bit
  integers as strings (a heartbeat's sequence), durations as "60s".
"""
import base64
import http.client
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from urllib.parse import urlparse

SERVICE = "/relais.worker.v1.WorkerService/"

url = os.environ.get("RELAIS_URL")
token = os.environ.get("RELAIS_TOKEN")
if not url or not token:
    print("RELAIS_URL and RELAIS_TOKEN (a consumer token granted add_company_to_crm) are required", file=sys.stderr)
    sys.exit(2)
base = urlparse(url)
# Relais behind a proxy under a path (https://example.com/relais): the
# service is under it, as the Go SDK's URL takes it.
SERVICE = base.path.rstrip("/") + SERVICE
# One worker id per process: two processes sharing one replace each other's
# streams, and each replacement hands back what the other held, an attempt
# spent. Set WORKER_ID only to something unique, such as a pod name.
worker_id = os.environ.get("WORKER_ID") or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
# How many tasks run at once: the stream's credit.
concurrency = int(os.environ.get("CONCURRENCY", "4"))
# Stands in for a slow CRM call, in milliseconds.
crm_latency = int(os.environ.get("CRM_LATENCY_MS", "0")) / 1000

# Re-entrant: the signal handler may log while the main thread is logging.
log_lock = threading.RLock()


def log(event, **fields):
    line = {"time": datetime.now(timezone.utc).isoformat(), "event": event, "worker": worker_id, **fields}
    with log_lock:
        print(json.dumps(line), flush=True)


def connection(timeout):
    cls = http.client.HTTPSConnection if base.scheme == "https" else http.client.HTTPConnection
    return cls(base.hostname, base.port, timeout=timeout)


class Refused(Exception):
    """A call Relais refused: its Connect code and Relais's problem."""

    def __init__(self, error):
        self.code = error.get("code", "unknown")
        self.problem = {}
        for d in error.get("details", []):
            if d.get("type") == "relais.worker.v1.Problem":
                self.problem = d.get("debug", {})
        super().__init__(f"{self.code}: {self.problem.get('code', '')} {self.problem.get('detail', error.get('message', ''))}")

    def fields(self):
        return {"connect": self.code, "code": self.problem.get("code"), "detail": self.problem.get("detail", str(self)),
                "errors": [f"{e.get('path')}: {e.get('message')}" for e in self.problem.get("errors", [])]}


def call(method, message):
    """A unary call: its answer, or Refused."""
    c = connection(30)
    try:
        c.request("POST", SERVICE + method, json.dumps(message),
                  {"Authorization": "Bearer " + token, "Content-Type": "application/json", "Connect-Protocol-Version": "1"})
        r = c.getresponse()
        body = r.read()
    finally:
        c.close()
    answer = json.loads(body or b"{}")
    if r.status != 200:
        raise Refused(answer)
    return answer


# The CRM: normalised company name → CRM id.
crm = {}
crm_lock = threading.Lock()


def add_company(inputs):
    """The task. Looking the company up before creating it makes the task
    safe to run twice: a task redelivered after a crash finds the company
    its first attempt created and reports it existing."""
    time.sleep(crm_latency)
    key = str(inputs["company_name"]).strip().lower()
    with crm_lock:
        if key in crm:
            return {"result": "existing", "crm_id": crm[key], "matched_on": ["name"]}
        crm[key] = f"CRM-{len(crm) + 1:04d}"
        return {"result": "created", "crm_id": crm[key]}


# The lock asked for each task; the stream extends it while it lives.
LOCK_SECONDS = 60


def settle(method, message):
    """A Complete or a Fail, retried while it gets no answer (Relais
    restarting, a connection cut) or an unavailable one, until the task's
    lock would have lapsed: a stream that ended left the task locked to
    this worker, and a try whose answer was lost and the next are one
    settlement (Relais answers the replay as the first). Giving up at the
    first error would leave finished work to be done again."""
    give_up = time.monotonic() + LOCK_SECONDS
    delay = 0.25
    while True:
        try:
            return call(method, message)
        except Refused as err:
            if err.code not in ("unavailable", "resource_exhausted") or time.monotonic() + delay > give_up:
                raise
            error = str(err)
        except (OSError, http.client.HTTPException) as err:
            if time.monotonic() + delay > give_up:
                raise
            error = str(err)
        log("retrying", method=method, occurrence=message["occurrenceId"], error=error, retry_in=delay)
        time.sleep(delay)
        delay = min(delay * 2, 2)


running = {}  # occurrence id → threading.Event set when it is cancelled
running_lock = threading.Lock()
stopping = threading.Event()
# drained is set once a draining heartbeat was read while stopping: no
# assignment comes after it, so the worker closes when nothing runs.
drained = threading.Event()
stream_id = None
stream_conn = None  # the Subscribe connection being read


def close_if_done():
    """Closes the stream once drained with nothing running, which ends the
    read that waits for its next event."""
    with running_lock:
        done = drained.is_set() and not running
    conn = stream_conn
    sock = conn.sock if conn is not None else None  # read once: the main thread may close it
    if done and sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def run(assignment):
    """Runs one assignment and settles it, in a thread of its own: the loop
    reading the stream must go on acknowledging heartbeats while tasks
    run, or after three unacknowledged ones Relais ends the stream and
    offers the tasks to another worker."""
    occurrence = assignment["occurrenceId"]
    with running_lock:
        cancelled = running[occurrence]  # registered by the read loop
    try:
        inputs = json.loads(base64.b64decode(assignment["inputs"]))
        try:
            outputs = add_company(inputs)
        except Exception as err:  # the CRM failed: retryable, offered again later
            if cancelled.is_set():
                return
            res = settle("Fail", {"occurrenceId": occurrence, "workerId": worker_id, "errorCode": "CRM_UNAVAILABLE",
                                "message": str(err), "retryable": True, "retryDelay": "5s"})
            log("failed", occurrence=occurrence, status=res.get("status"), attempts_left=res.get("attemptsLeft"))
            return
        if cancelled.is_set():
            return  # Relais settled it (a stop, a deadline): nothing to report
        res = settle("Complete", {"occurrenceId": occurrence, "workerId": worker_id,
                                "outputs": base64.b64encode(json.dumps(outputs).encode()).decode()})
        log("completed", occurrence=occurrence, attempt=assignment.get("attempt"), result=outputs["result"],
            crm_id=outputs["crm_id"], route=res.get("route"))
    except Refused as err:
        # A settlement refused (its lock lost, the instance stopped, invalid
        # outputs): the problem says which.
        log("refused", occurrence=occurrence, **err.fields())
    except (OSError, http.client.HTTPException) as err:
        # No answer for as long as the lock lasts: Relais offers the task
        # again.
        log("unanswered", occurrence=occurrence, error=str(err))
    finally:
        with running_lock:
            running.pop(occurrence, None)
        close_if_done()


def read_frame(r):
    """One frame of a Connect stream: (flags, message)."""
    head = r.read(5)
    if len(head) < 5:
        raise EOFError("the stream closed without its end frame")
    flags, length = struct.unpack(">BI", head)
    body = r.read(length)
    if len(body) < length:
        raise EOFError("the stream closed within a frame")
    return flags, json.loads(body or b"{}")


def drain():
    """Asks for no more assignments; those held are finished."""
    log("draining", running=len(running))
    for attempt in range(3):
        try:
            call("Drain", {"streamId": stream_id})
            return
        except Refused as err:
            log("drain_refused", **err.fields())
            return
        except (OSError, http.client.HTTPException) as err:
            log("drain_unanswered", error=str(err), attempt=attempt + 1)
            time.sleep(1)


def subscribe():
    """Reads one stream until it ends; returns True when the worker should
    stop (drained and done), raises Refused or OSError when it failed."""
    global stream_id, stream_conn
    message = json.dumps({"workerId": worker_id, "maxInFlight": concurrency, "lockDuration": f"{LOCK_SECONDS}s",
                          "subscriptions": [{"definition": "add_company_to_crm", "revisions": [1]}]}).encode()
    # No read timeout below the heartbeat's: one arrives every interval.
    c = stream_conn = connection(120)
    try:
        c.request("POST", SERVICE + "Subscribe", struct.pack(">BI", 0, len(message)) + message,
                  {"Authorization": "Bearer " + token, "Content-Type": "application/connect+json",
                   "Connect-Protocol-Version": "1"})
        r = c.getresponse()
        if r.status != 200:
            raise Refused({"code": f"http {r.status}", "message": r.read(500).decode(errors="replace")})
        while True:
            try:
                flags, event = read_frame(r)
            except (OSError, EOFError, http.client.HTTPException):
                if drained.is_set() and not running:
                    return True  # closed by close_if_done
                raise
            if flags & 0x02:
                if "error" in event:
                    raise Refused(event["error"])
                return stopping.is_set()
            if "heartbeat" in event:
                hb = event["heartbeat"]
                if stream_id != hb.get("streamId"):
                    stream_id = hb.get("streamId")
                    log("subscribed", stream=stream_id, heartbeat=hb.get("interval"))
                    # Three heartbeats without one means the stream is gone.
                    interval = float(str(hb.get("interval", "10s")).rstrip("s") or 10)
                    if c.sock is not None:
                        c.sock.settimeout(max(3 * interval, 5))
                    if stopping.is_set():
                        threading.Thread(target=drain, daemon=True).start()
                # Acknowledged in a thread: the loop never stops reading.
                ack = {"streamId": hb["streamId"], "sequence": hb.get("sequence", "0")}
                threading.Thread(target=acknowledge, args=(ack,), daemon=True).start()
                if hb.get("draining") and stopping.is_set():
                    # No assignment comes after a draining heartbeat: close
                    # once the tasks in hand are settled, reading on (and
                    # acknowledging heartbeats) meanwhile.
                    drained.set()
                    with running_lock:
                        if not running:
                            return True
            elif "assignment" in event:
                assignment = event["assignment"]
                # Registered before its thread starts: a draining heartbeat
                # read next must find it running.
                with running_lock:
                    running[assignment["occurrenceId"]] = threading.Event()
                threading.Thread(target=run, args=(assignment,), daemon=True).start()
            elif "cancellation" in event:
                cancel = event["cancellation"]
                log("cancelled", occurrence=cancel["occurrenceId"], reason=cancel.get("reason"))
                with running_lock:
                    flag = running.get(cancel["occurrenceId"])
                if flag:
                    flag.set()
    finally:
        c.close()


def acknowledge(ack):
    try:
        call("Heartbeat", ack)
    except (Refused, OSError, http.client.HTTPException) as err:
        log("heartbeat_refused", error=str(err))


def on_signal(signum, _frame):
    # Only a flag and a thread here: the main thread may be anywhere.
    if stopping.is_set():
        return
    stopping.set()
    threading.Thread(target=stop, args=(signal.Signals(signum).name,), daemon=True).start()


def stop(name):
    log("stopping", signal=name, running=len(running))
    if stream_id is None:
        # Between streams: a stream that ends hands back what it held, so
        # the tasks still running from the last one cannot settle; the
        # main loop exits at its next turn.
        return
    drain()


signal.signal(signal.SIGINT, on_signal)
signal.signal(signal.SIGTERM, on_signal)

# The stream is subscribed again after it ends for a reason worth a retry
# (the replica shut down or restarted, the connection dropped); a refusal
# that will not change (a bad token, no grant, another process with this
# worker id) ends the worker.
RETRIED = {"unavailable", "resource_exhausted", "deadline_exceeded", "unknown", "internal", "aborted"}
backoff = 0.5
status = 0
while not stopping.is_set():
    stream_id = None
    try:
        if subscribe():
            break
    except Refused as err:
        log("stream_ended", **err.fields())
        if err.code not in RETRIED:
            status = 1
            break
    except (OSError, EOFError, http.client.HTTPException) as err:
        log("stream_ended", error=str(err))
    if stopping.is_set():
        break
    # A stream that was up starts the backoff again.
    backoff = 0.5 if stream_id else min(backoff * 2, 10)
    stopping.wait(backoff)  # a signal ends the wait
log("stopped", running=len(running))
sys.exit(status)
