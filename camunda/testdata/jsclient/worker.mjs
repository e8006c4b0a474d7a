// A worker written against the official Camunda 7 external task client,
// unmodified, as a Camunda user would write it; TestOfficialJavaScriptClient
// runs it against Relais. It reports what it did as JSON lines on stdout
// and exits once every scenario ran (or on the first unexpected error).
//
// Scenarios, chosen by the task's "name" variable:
//   complete-me  complete with typed variables (String, Integer, Double,
//                Boolean, Date, Json object and list)
//   extend-me    extend the lock, then complete
//   fail-me      report failures, Camunda style: retries - 1 each time
//   bpmn-me      throw a BPMN error with a code the process routes on
import {
  Client,
  BasicAuthInterceptor,
  Variables,
} from "camunda-external-task-client-js";

const { RELAIS_ENGINE_REST, RELAIS_CONSUMER, RELAIS_TOKEN, RELAIS_TOPIC } =
  process.env;

const say = (event, fields) =>
  process.stdout.write(JSON.stringify({ event, ...fields }) + "\n");

const client = new Client({
  baseUrl: RELAIS_ENGINE_REST,
  workerId: "js-worker",
  maxTasks: 2,
  interval: 50,
  lockDuration: 10000,
  asyncResponseTimeout: 2000,
  interceptors: new BasicAuthInterceptor({
    username: RELAIS_CONSUMER,
    password: RELAIS_TOKEN,
  }),
});

const pending = new Set(["complete-me", "extend-me", "fail-me", "bpmn-me"]);
const finished = (name) => {
  pending.delete(name);
  if (pending.size === 0) {
    client.stop();
    say("done", {});
    process.exit(0);
  }
};
const fatal = (what) => (...args) => {
  const err = args[args.length - 1];
  say("error", { what, message: String(err && err.message), body: err && err.response && err.response.body && err.response.body.toString() });
  process.exit(1);
};
client.on("poll:error", fatal("poll"));
client.on("complete:error", fatal("complete"));
client.on("handleFailure:error", fatal("handleFailure"));
client.on("handleBpmnError:error", fatal("handleBpmnError"));
client.on("extendLock:error", fatal("extendLock"));

client.subscribe(RELAIS_TOPIC, async ({ task, taskService }) => {
  const name = task.variables.get("name");
  switch (name) {
    case "complete-me": {
      const typed = task.variables.getAllTyped();
      say("received", {
        name,
        retries: task.retries,
        types: Object.fromEntries(Object.entries(typed).map(([k, v]) => [k, v.type])),
        count: task.variables.get("count"),
        big: task.variables.get("big"),
        vip: task.variables.get("vip"),
        since: task.variables.get("since").toISOString(),
        address: task.variables.get("address"),
        tags: task.variables.get("tags"),
        card: task.variables.get("card"),
      });
      const out = new Variables()
        .set("result", "created")
        .set("crm_id", "JS-42")
        .set("score", 7)
        .set("rate", 0.5)
        .set("ok", true)
        .set("due", new Date("2026-12-24T00:00:00.000Z"))
        .set("at", new Date("2026-12-01T14:04:05.000Z"))
        .set("meta", { note: "from js" })
        .set("items", [1, 2, 3]);
      await taskService.complete(task, out);
      say("completed", { name });
      finished(name);
      break;
    }
    case "extend-me": {
      await taskService.extendLock(task, 120000);
      say("extended", { name });
      await taskService.complete(
        task,
        new Variables().setAll({ result: "existing", crm_id: "JS-7" })
      );
      finished(name);
      break;
    }
    case "fail-me": {
      const retries = task.retries - 1;
      await taskService.handleFailure(task, {
        errorMessage: `attempt with ${task.retries} retries failed`,
        errorDetails: "a stack trace",
        retries,
        retryTimeout: 0,
      });
      say("failed", { name, retries });
      if (retries === 0) finished(name);
      break;
    }
    case "bpmn-me": {
      await taskService.handleBpmnError(task, "CRM_DOWN", "CRM is down");
      say("bpmn", { name });
      finished(name);
      break;
    }
    default:
      say("unexpected", { name });
      process.exit(1);
  }
});
