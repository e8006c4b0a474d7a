#!/usr/bin/env python3
"""An example Relais worker in Python over the REST pull protocol (long
polling), standard library only: the simplest worker to write in any
language, two HTTP calls and a timer.

It serves the add_company_to_crm definition (examples/definitions) as
examples/crmworker does in Go with the SDK: it adds companies to a CRM,
here an in-memory map, and reports whether each was created or already
there. It does what "A worker in any language" (docs/pull-protocol.md)
asks:

- fetch-and-lock with a long wait, a worker_id unique to the process and a
  fresh request_id per fetch (the same one again after a lost answer);
- run each task in a thread, extending its lock at half its length; a 409
  to an extension means the task is no longer this worker's (stopped,
  past its deadline, lock lost): drop it and report nothing;
- complete it, or report its failure: a BusinessError (the task cannot
  succeed: the process's on_error routes its code) is not retried, any
  other exception is (while attempts are left); outputs the contract
  refuses fail the task, not retried. A settlement that got no answer is
  sent again (an identical replay is answered as the first), naming its
  attempt, so that it never settles a later attempt of the same task;
- back off on 429 and 503 as Retry-After says, on other 5xx (a proxy's
  error page too) and on network errors; stop on 400, 401, 403 and 404,
  which retrying will not change;
- on SIGINT or SIGTERM, stop fetching (closing the waiting fetch's
  connection releases what it claimed), finish the tasks in hand, exit 0.

    RELAIS_URL=http://127.0.0.1:8080 RELAIS_TOKEN=<consumer token> python3 worker.py

Delivery is at least once: a task whose lock lapsed (a worker paused
longer than its lock) is offered again, so the work must be safe to do
twice. Here the CRM is looked up before a company is created; a service
that sends an email or charges a card keys what it does by the
occurrence id. It logs one JSON object a line on stdout.
"""
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from urllib.parse import urlparse

# What this worker serves. To port it to your definition, change DEFINITION
# and handle (below add_company, which it names): the rest is the protocol.
DEFINITION = "add_company_to_crm"
WAIT_SECONDS = 20  # the fetch's long poll; its HTTP read timeout is longer

url = os.environ.get("RELAIS_URL")
token = os.environ.get("RELAIS_TOKEN")
if not url or not token:
    print(f"RELAIS_URL and RELAIS_TOKEN (a consumer token granted {DEFINITION}) are required", file=sys.stderr)
    sys.exit(2)
base = urlparse(url)
# Relais behind a proxy under a path (https://example.com/relais): the
# routes are under it, as the Go SDK's URL takes them.
prefix = base.path.rstrip("/")
# Unique to the process: two processes with one worker id would settle each
# other's tasks.
worker_id = os.environ.get("WORKER_ID") or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
concurrency = int(os.environ.get("CONCURRENCY", "4"))
lock_seconds = int(os.environ.get("LOCK_SECONDS", "30"))
# Stands in for a slow CRM call, in milliseconds.
crm_latency = int(os.environ.get("CRM_LATENCY_MS", "0")) / 1000

log_lock = threading.RLock()  # re-entrant: the signal handler may log


def log(event, **fields):
    line = {"time": datetime.now(timezone.utc).isoformat(), "event": event, "worker": worker_id, **fields}
    with log_lock:
        print(json.dumps(line), flush=True)


class Refused(Exception):
    """An answer other than 2xx: its status, Relais's problem, and how long
    Retry-After asks to wait."""

    def __init__(self, status, problem, retry_after):
        self.status, self.problem, self.retry_after = status, problem, retry_after
        super().__init__(f"{status} {problem.get('code')}: {problem.get('detail')}")

    def fields(self):
        return {"status": self.status, "code": self.problem.get("code"), "detail": self.problem.get("detail"),
                "errors": [f"{e.get('path')}: {e.get('message')}" for e in self.problem.get("errors", [])]}


fetching = None  # the connection of the fetch waiting, closed on a signal


def post(path, body, timeout=30, hold=False):
    """POSTs body as JSON; returns the decoded answer or raises Refused
    (an answer) or OSError/HTTPException (none)."""
    global fetching
    cls = http.client.HTTPSConnection if base.scheme == "https" else http.client.HTTPConnection
    c = cls(base.hostname, base.port, timeout=timeout)
    try:
        if hold:
            # Connected, then held, then stopping checked: a SIGTERM
            # before the hold would otherwise find no socket to shut, and
            # the fetch would wait its whole wait.
            c.connect()
            fetching = c
            if stopping.is_set():
                raise OSError("stopping")
        c.request("POST", prefix + "/api/v1/pull" + path, json.dumps(body),
                  {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
    finally:
        if hold:
            fetching = None
        c.close()
    try:
        answer = json.loads(data or b"{}")
    except ValueError:
        # Not Relais's answer: a proxy's error page, say.
        if r.status < 300:
            raise http.client.HTTPException(f"{r.status} answer that is not JSON")
        answer = {"code": f"http_{r.status}", "detail": data[:200].decode("utf-8", "replace")}
    if r.status >= 300:
        raise Refused(r.status, answer, float(r.getheader("Retry-After") or 1))
    return answer


class BusinessError(Exception):
    """A task that cannot succeed, whatever the retries: reported as a
    failure with its code, not retried."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


# The CRM: normalised company name → CRM id.
crm = {}
crm_lock = threading.Lock()


def add_company(inputs):
    """The task, safe to do twice: a redelivered task finds the company its
    first attempt created and reports it existing."""
    time.sleep(crm_latency)
    key = str(inputs["company_name"]).strip().lower()
    if not key:
        raise BusinessError("BLANK_NAME", "the company name is blank")
    with crm_lock:
        if key in crm:
            return {"result": "existing", "crm_id": crm[key], "matched_on": ["name"]}
        crm[key] = f"CRM-{len(crm) + 1:04d}"
        return {"result": "created", "crm_id": crm[key]}


# The handler: the task's inputs (JSON decoded: a JSON number with a
# fraction arrives as a float; parse_float=decimal.Decimal in post's
# json.loads keeps amounts of money exact, and the handler then returns
# them as JSON can carry them, str() for a text output or int() of cents)
# → its outputs, or a BusinessError. Outputs JSON cannot carry fail the
# task as a handler error.
handle = add_company


slots = threading.BoundedSemaphore(concurrency)  # a slot per task in hand
stopping = threading.Event()


def keep_lock(occurrence, attempt, done, lost):
    """Extends the lock at half its length until done; a refusal sets lost."""
    while not done.wait(lock_seconds / 2):
        try:
            post(f"/occurrences/{occurrence}/extend", {"worker_id": worker_id, "attempt": attempt, "lock_duration": f"PT{lock_seconds}S"})
        except Refused as err:
            if err.status == 409:  # stopped, past its deadline, or no longer this worker's
                lost.append(err)
                return
        except (OSError, http.client.HTTPException):
            pass  # the next one may get through before the lock ends


def run(task):
    occurrence = task["id"]
    done, lost = threading.Event(), []
    keeper = threading.Thread(target=keep_lock, args=(occurrence, task["attempt"], done, lost), daemon=True)
    keeper.start()
    try:
        outputs, failure = None, None
        try:
            outputs = handle(task["inputs"])
            json.dumps(outputs)  # a Decimal, a set: a bug, reported as one rather than lost
        except BusinessError as err:
            failure = {"error_code": err.code, "message": str(err), "retryable": False}
        except Exception as err:  # a bug or an outage: retried while attempts are left
            failure = {"error_code": "handler_error", "message": f"{type(err).__name__}: {err}"[:2000], "retryable": True}
        done.set()
        keeper.join()
        if lost:
            log("cancelled", occurrence=occurrence, code=lost[0].problem.get("code"))
            return
        if failure is None:
            res = settle(task, "complete", {"outputs": outputs})
            if res is not None:
                # Outputs are not logged: they may hold what the contract
                # classifies as sensitive.
                log("completed", occurrence=occurrence, attempt=task["attempt"], route=res.get("route"))
                return
            refusal = settle_refusal.get(occurrence)
            if refusal is None or refusal.problem.get("code") != "invalid_outputs":
                return
            # Outputs the contract refuses will be refused again: fail the
            # task rather than leave it to its lock's expiry and a rerun,
            # saying what the contract refused (its pointers and rules, not
            # the values), for the operator who reads the failure.
            why = "; ".join(f"{e.get('path')}: {e.get('message')}" for e in refusal.problem.get("errors", []))
            failure = {"error_code": "invalid_outputs", "message": ("the outputs violate the contract: " + why)[:2000], "retryable": False}
        res = settle(task, "fail", failure)
        if res is not None:
            # Not the message, which may quote what the task was given (Relais
            # scrubs its copy; a log line would keep it as sent).
            log("failed", occurrence=occurrence, attempt=task["attempt"], error_code=failure["error_code"],
                status=res.get("status"), attempts_left=res.get("attempts_left"))
    finally:
        settle_refusal.pop(occurrence, None)
        done.set()
        slots.release()


settle_refusal = {}  # occurrence → its last refused settlement (a Refused)


def settle(task, action, body):
    """Sends a complete or a fail, naming the attempt, and retries what got
    no answer (or a 5xx, a 429) until the lock would have ended: a replay
    is answered as the first. Returns the answer, or None when refused."""
    occurrence = task["id"]
    body = {"worker_id": worker_id, "attempt": task["attempt"], **body}
    give_up = time.monotonic() + lock_seconds
    while True:
        try:
            return post(f"/occurrences/{occurrence}/{action}", body)
        except Refused as err:
            code = err.problem.get("code")
            if code in ("occurrence_cancelled", "deadline_exceeded"):
                log("cancelled", occurrence=occurrence, code=code)  # no longer wanted
                return None
            if err.status not in (429, 500, 502, 503, 504) or time.monotonic() > give_up:
                settle_refusal[occurrence] = err
                log("refused", occurrence=occurrence, action=action, **err.fields())  # its lock lost, invalid outputs…
                return None
            time.sleep(err.retry_after)
        except (OSError, http.client.HTTPException) as err:
            if time.monotonic() > give_up:
                log("unanswered", occurrence=occurrence, action=action, error=str(err))
                return None
            time.sleep(1)


def stop(signum, _frame):
    log("draining", signal=signal.Signals(signum).name)
    stopping.set()
    conn = fetching
    sock = conn.sock if conn is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # what the fetch claims as it leaves is released
        except OSError:
            pass


def main():
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log("subscribed", definition=DEFINITION, concurrency=concurrency)
    request_id, backoff = None, 1
    while not stopping.is_set():
        slots.acquire()
        if stopping.is_set():
            slots.release()
            break
        free = 1
        while free < concurrency and slots.acquire(blocking=False):
            free += 1
        request_id = request_id or str(uuid.uuid4())
        try:
            got = post("/fetch-and-lock", {"worker_id": worker_id, "subscriptions": [{"definition": DEFINITION}],
                                           "max_tasks": free, "lock_duration": f"PT{lock_seconds}S", "wait": f"PT{WAIT_SECONDS}S",
                                           "request_id": request_id}, timeout=WAIT_SECONDS + 30, hold=True)["occurrences"]
        except Refused as err:
            for _ in range(free):
                slots.release()
            if err.status in (400, 401, 403, 404):
                log("refused", **err.fields())
                sys.exit(1)
            request_id = None  # answered: nothing was claimed
            log("fetch_refused", retry_in=err.retry_after, **err.fields())
            time.sleep(err.retry_after)
            continue
        except (OSError, http.client.HTTPException) as err:
            for _ in range(free):
                slots.release()
            if stopping.is_set():
                break
            # No answer: the same request_id again returns what it claimed.
            log("fetch_unanswered", error=str(err), retry_in=backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, 30)
            continue
        request_id, backoff = None, 1
        for _ in range(free - len(got)):
            slots.release()
        for task in got:
            threading.Thread(target=run, args=(task,)).start()
    # Non-daemon task threads finish (and settle) before the interpreter
    # exits.
    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join()
    log("stopped")


if __name__ == "__main__":
    main()
