// An example Relais connected worker in Node.js: the add_company_to_crm
// definition (examples/definitions) over a worker stream (gRPC over h2c,
// DESIGN §10), doing what examples/crmworker does in Go with the SDK. It
// adds companies to a CRM, here an in-memory map, and reports whether each
// one was created or already there.
//
//	npm ci --omit=dev
//	RELAIS_URL=http://127.0.0.1:8080 RELAIS_TOKEN=<consumer token> node worker.mjs
//
// SIGINT or SIGTERM drains the stream (no new tasks), lets the tasks in
// flight finish and settle, and exits. Its streams are resumable: when one
// ends (a rolling restart of Relais, a replica that died), the tasks
// running go on, and the next stream resumes them.
//
// It logs one JSON object a line on stdout.
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { CancellationReason, ProblemSchema, WorkerService } from "./gen/relais/worker/v1/worker_pb.js";

const url = process.env.RELAIS_URL;
const token = process.env.RELAIS_TOKEN;
if (!url || !token) {
  console.error("RELAIS_URL and RELAIS_TOKEN (a consumer token granted add_company_to_crm) are required");
  process.exit(2);
}
// One worker id per process: two processes sharing one replace each
// other's streams, and each replacement hands back what the other held,
// an attempt spent. Set WORKER_ID only to something unique, such as a pod
// name.
const workerId = process.env.WORKER_ID || `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
// How many tasks run at once: the stream's credit.
const concurrency = Number(process.env.CONCURRENCY || 4);
// Stands in for a slow CRM call, in milliseconds.
const crmLatency = Number(process.env.CRM_LATENCY_MS || 0);

const log = (event, fields = {}) => console.log(JSON.stringify({ time: new Date().toISOString(), event, worker: workerId, ...fields }));

// http:// is gRPC over cleartext HTTP/2 (h2c); https:// uses TLS.
const client = createClient(
  WorkerService,
  createGrpcTransport({
    baseUrl: url,
    httpVersion: "2",
    interceptors: [
      (next) => (req) => {
        req.header.set("authorization", `Bearer ${token}`);
        return next(req);
      },
    ],
  }),
);

// problem turns a refusal into what Relais said: its problem code (the
// REST API's), its detail and its pointers.
function problem(err) {
  const ce = ConnectError.from(err);
  const [p] = ce.findDetails(ProblemSchema);
  if (!p) {
    return { grpc: Code[ce.code], detail: ce.rawMessage };
  }
  return { grpc: Code[ce.code], code: p.code, detail: p.detail, errors: p.errors.map((e) => `${e.path}: ${e.message}`) };
}

// The CRM: normalised company name → CRM id.
const crm = new Map();

// addCompany is the task. Looking the company up before creating it makes
// the task safe to run twice: a task redelivered after a crash finds the
// company its first attempt created and reports it existing.
async function addCompany(inputs, signal) {
  if (crmLatency > 0) {
    await sleep(crmLatency, undefined, { signal });
  }
  const key = String(inputs.company_name).trim().toLowerCase();
  const id = crm.get(key);
  if (id) {
    return { result: "existing", crm_id: id, matched_on: ["name"] };
  }
  const created = `CRM-${String(crm.size + 1).padStart(4, "0")}`;
  crm.set(key, created);
  return { result: "created", crm_id: created };
}

// settle sends a task's outcome, again while it gets no answer (a replica
// restarting, a connection cut) or Unavailable, until the task's lock would
// have lapsed: bound to its attempt, a try whose answer was lost and the
// next are one settlement (Relais answers the replay as the first), and
// giving up at the first error would leave finished work to be done again.
const lockMs = 60_000; // the lock the stream asks for (Relais's default)
// A connection cut as its replica exits reads as Canceled (an HTTP/2
// reset), or Internal mid-message.
const unanswered = new Set([Code.Unavailable, Code.Aborted, Code.Unknown, Code.ResourceExhausted, Code.DeadlineExceeded, Code.Canceled, Code.Internal]);
async function settle(occurrenceId, send) {
  const giveUp = Date.now() + lockMs;
  for (let delay = 250; ; delay = Math.min(delay * 2, 2000)) {
    try {
      return await send();
    } catch (err) {
      if (!unanswered.has(ConnectError.from(err).code) || Date.now() + delay > giveUp) {
        throw err;
      }
      log("retrying", { occurrence: occurrenceId, ...problem(err), retry_in_ms: delay });
      await sleep(delay);
    }
  }
}

// The tasks running, by occurrence id ({ work, attempt }): a cancellation
// aborts its own; a new stream resumes them.
const running = new Map();
let stream = null; // { id, abort } of the stream being read
let stopping = false;

// run runs one assignment and settles it. It is not awaited by the loop
// that reads the stream: that loop must go on acknowledging heartbeats
// while tasks run, or after three unacknowledged ones Relais ends the
// stream and offers the tasks to another worker.
async function run(a) {
  const work = new AbortController();
  running.set(a.occurrenceId, { work, attempt: a.attempt });
  try {
    const inputs = JSON.parse(new TextDecoder().decode(a.inputs));
    let outputs;
    try {
      outputs = await addCompany(inputs, work.signal);
    } catch (err) {
      if (work.signal.aborted) {
        return; // cancelled: Relais settled it, there is nothing to report
      }
      // The CRM failed: retryable, Relais offers the task again later
      // while attempts are left.
      const res = await settle(a.occurrenceId, () =>
        client.fail({
          occurrenceId: a.occurrenceId,
          workerId,
          attempt: a.attempt,
          errorCode: "CRM_UNAVAILABLE",
          message: String(err?.message ?? err),
          retryable: true,
          retryDelay: { seconds: 5n },
        }),
      );
      log("failed", { occurrence: a.occurrenceId, status: res.status, attempts_left: res.attemptsLeft });
      return;
    }
    if (work.signal.aborted) {
      return;
    }
    const res = await settle(a.occurrenceId, () =>
      client.complete({
        occurrenceId: a.occurrenceId,
        workerId,
        // Binds the result to its attempt: sent again after a lost answer,
        // it never settles a later attempt of the task given to this worker.
        attempt: a.attempt,
        outputs: new TextEncoder().encode(JSON.stringify(outputs)),
      }),
    );
    log("completed", { occurrence: a.occurrenceId, attempt: a.attempt, result: outputs.result, crm_id: outputs.crm_id, route: res.route });
  } catch (err) {
    // A settlement refused (its lock lost, the instance stopped, invalid
    // outputs): the problem says which.
    const p = problem(err);
    log("refused", { occurrence: a.occurrenceId, ...p });
    if (p.code === "invalid_outputs") {
      // Outputs the contract refuses will be refused again: fail the
      // task, as the Go SDK does. Left alone, its reservation stays (the
      // stream keeps its lock alive) and holds a slot until the stream
      // ends.
      await client
        .fail({ occurrenceId: a.occurrenceId, workerId, attempt: a.attempt, errorCode: "invalid_outputs", message: p.errors.join("; ").slice(0, 1000), retryable: false })
        .then((res) => log("failed", { occurrence: a.occurrenceId, status: res.status, attempts_left: res.attemptsLeft }))
        .catch((err) => log("refused", { occurrence: a.occurrenceId, ...problem(err) }));
    }
  } finally {
    running.delete(a.occurrenceId);
    if (stopping && running.size === 0) {
      stream?.abort.abort(); // drained and done
    }
  }
}

// subscribe reads one stream until it ends: heartbeats acknowledged at
// once, assignments started, cancellations passed to their task.
async function subscribe() {
  const abort = new AbortController();
  // The tasks still running when the last stream ended: this one takes
  // them over if Relais still holds them for this worker (a replica that
  // stopped or died leaves them locked to a resumable stream's worker).
  const resume = [...running].map(([occurrenceId, r]) => ({ occurrenceId, attempt: r.attempt }));
  // Stopping, it subscribes only to finish what it resumes: a credit of
  // just those leaves no room for new work before its Drain is heard.
  const credit = stopping ? Math.max(1, resume.length) : concurrency;
  const events = client.subscribe(
    { workerId, maxInFlight: credit, subscriptions: [{ definition: "add_company_to_crm", revisions: [1] }], resumable: true, resume },
    { signal: abort.signal },
  );
  for await (const ev of events) {
    const { case: kind, value } = ev.event;
    if (kind === "heartbeat") {
      if (!stream) {
        stream = { id: value.streamId, abort };
        const interval = value.interval ? Number(value.interval.seconds) * 1000 + value.interval.nanos / 1e6 : 0;
        log("subscribed", { stream: value.streamId, heartbeat_ms: interval, resumed: value.resumed.length });
        // What the first heartbeat does not list is no longer this
        // worker's (handed back as the connection dropped, or its lock
        // lapsed): its outcome would be refused.
        for (const r of resume) {
          if (!value.resumed.includes(r.occurrenceId)) {
            log("cancelled", { occurrence: r.occurrenceId, reason: "not_resumed" });
            running.get(r.occurrenceId)?.work.abort();
          }
        }
        if (stopping) {
          await drain();
        }
      }
      // Acknowledged without waiting for the answer: the loop never
      // stops reading.
      client.heartbeat({ streamId: value.streamId, sequence: value.sequence }).catch((err) => log("heartbeat_refused", problem(err)));
      if (value.draining && stopping && running.size === 0) {
        abort.abort(); // nothing more will come, nothing is running
      }
    } else if (kind === "assignment") {
      run(value);
    } else if (kind === "cancellation") {
      log("cancelled", { occurrence: value.occurrenceId, reason: CancellationReason[value.reason] });
      running.get(value.occurrenceId)?.work.abort();
    }
  }
}

// drain asks for no more assignments; those held are finished.
async function drain() {
  // Said before asking: the stream may end (its draining heartbeat read,
  // nothing running) before the answer comes back.
  log("draining", { running: running.size });
  try {
    await client.drain({ streamId: stream.id });
  } catch (err) {
    log("drain_refused", problem(err));
  }
  if (running.size === 0) {
    stream.abort.abort();
  }
}

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    if (stopping) {
      return;
    }
    stopping = true;
    log("stopping", { signal, running: running.size });
    if (!stream) {
      // Between streams: the next one resumes what still runs, and
      // drains at once.
      if (running.size === 0) {
        process.exit(0);
      }
      return;
    }
    drain();
  });
}

// The stream is subscribed again after it ends for a reason worth a retry
// (the replica shut down or restarted, the connection dropped); a refusal
// that will not change (a bad token, no grant, another process with this
// worker id) ends the worker.
// A stream cut as its replica exits reads as Canceled (an HTTP/2 reset),
// or as Aborted over HTTP/1.1 (the Connect and gRPC-Web transports): both
// retried, unless this worker cancelled it itself (stopping, above).
const retried = [Code.Unavailable, Code.ResourceExhausted, Code.DeadlineExceeded, Code.Unknown, Code.Internal, Code.Canceled, Code.Aborted];
let backoff = 500;
for (;;) {
  stream = null;
  try {
    await subscribe();
  } catch (err) {
    const code = ConnectError.from(err).code;
    if (stopping && code === Code.Canceled) {
      break; // our own end, once drained
    }
    log("stream_ended", problem(err));
    if (!retried.includes(code)) {
      process.exitCode = 1;
      break;
    }
  }
  if (stopping) {
    break;
  }
  // A stream that was up starts the backoff again.
  backoff = stream ? 500 : Math.min(backoff * 2, 10_000);
  await sleep(backoff);
}
log("stopped", { running: running.size });
