// node race.mjs URL [N]: N (default 16) concurrent POSTs to URL/api/bench/race
// with the same new Idempotency-Key, each on its own connection opened
// beforehand; prints how many times the handler ran (URL/runs before and
// after) and the statuses.
import http from "node:http";

const [url, n = 16] = process.argv.slice(2);
const key = `race-${process.pid}-${Date.now()}`;
const runs = async () => (await (await fetch(`${url}/runs`)).json()).runs;

// N keep-alive connections, opened by N concurrent GET /runs, so that the
// N POSTs are written in one go rather than behind N connection setups
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(n) });
const get = () =>
  new Promise((resolve, reject) =>
    http.get(`${url}/runs`, { agent }, (res) => res.resume().on("end", resolve)).on("error", reject));
const post = () =>
  new Promise((resolve, reject) => {
    const req = http.request(`${url}/api/bench/race`, {
      method: "POST",
      agent,
      headers: { "Idempotency-Key": key, "Content-Type": "application/json" },
    });
    req.on("response", (res) => res.resume().on("end", () => resolve(res.statusCode)));
    req.on("error", reject);
    req.end('{"amount":1}');
  });

const before = await runs();
await Promise.all(Array.from({ length: Number(n) }, get));
const statuses = await Promise.all(Array.from({ length: Number(n) }, post));
const count = {};
for (const s of statuses) count[s] = (count[s] || 0) + 1;
const ran = (await runs()) - before;
agent.destroy();
console.log(`${ran} handler runs for ${n} concurrent requests with one key; statuses ${JSON.stringify(count)}`);
