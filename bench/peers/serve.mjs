// What the two peer servers share: one process per worker with node:cluster
// (env WORKERS, default one per core; 1 runs no cluster), listening on
// 127.0.0.1:PORT, and the handler-run counter behind GET /runs (the sum
// over the workers, asked of each through the primary when /runs is read,
// so counting costs nothing per request).
import cluster from "node:cluster";
import os from "node:os";

const workers = Number(process.env.WORKERS || os.availableParallelism());
const port = Number(process.env.PORT || 8080);
export const redisUrl = process.env.REDIS_URL || "redis://127.0.0.1:6379";

let runs = 0;
// the business logic ran once more
export function ran() {
  runs++;
}

// serve(makeApp): makeApp is async and returns an express app; its
// GET /runs is added here
export async function serve(makeApp) {
  if (workers > 1 && cluster.isPrimary) {
    primary();
    return;
  }
  const app = await makeApp();
  app.get("/runs", async (req, res) => res.json({ runs: await totalRuns() }));
  app.listen(port, "127.0.0.1");
}

function primary() {
  // a worker's "runs?" is answered with the sum of all workers' counts
  let asks = 0;
  const pending = new Map();
  for (let i = 0; i < workers; i++) cluster.fork();
  cluster.on("exit", (w, code, sig) => {
    console.error(`worker ${w.process.pid} exited (${sig || code})`);
    process.exit(1);
  });
  cluster.on("message", (w, m) => {
    if (m.type === "runs?") {
      const all = Object.values(cluster.workers);
      pending.set(++asks, { from: w, id: m.id, left: all.length, sum: 0 });
      for (const o of all) o.send({ type: "count", ask: asks });
    } else if (m.type === "count") {
      const p = pending.get(m.ask);
      p.sum += m.runs;
      if (--p.left === 0) {
        pending.delete(m.ask);
        p.from.send({ type: "runs", id: p.id, runs: p.sum });
      }
    }
  });
}

let ids = 0;
const waiting = new Map();
if (cluster.isWorker) {
  process.on("message", (m) => {
    if (m.type === "count") process.send({ type: "count", ask: m.ask, runs });
    else if (m.type === "runs") {
      waiting.get(m.id)(m.runs);
      waiting.delete(m.id);
    }
  });
}

function totalRuns() {
  if (!cluster.isWorker) return Promise.resolve(runs);
  return new Promise((resolve) => {
    waiting.set(++ids, resolve);
    process.send({ type: "runs?", id: ids });
  });
}
