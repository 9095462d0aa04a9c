// Peer 2: express-idempotency with express-idempotency-redis-adapter, as
// their READMEs set them up.  POST /api/bench/:x is idempotent by the
// Idempotency-Key header and answers 201 {"id":"<x>","ok":true}, the C bench
// handler's trivial work.  The middleware answers a replay itself and still
// calls the handler, which must return on isHit (the documented usage).
import express from "express";
import { idempotency, getSharedIdempotencyService } from "express-idempotency";
import RedisAdapterModule from "express-idempotency-redis-adapter";
import { serve, ran, redisUrl } from "./serve.mjs";

const RedisAdapter = RedisAdapterModule.default;

serve(async () => {
  const adapter = new RedisAdapter({ connectionConfig: { url: redisUrl } });
  await adapter.connect();
  const app = express();
  app.post(
    "/api/bench/:x",
    express.json(),
    idempotency({ dataAdapter: adapter }),
    (req, res) => {
      if (getSharedIdempotencyService().isHit(req)) return;
      ran();
      res.status(201).json({ id: req.params.x, ok: true });
    },
  );
  // the middleware's errors (409: the first request is still in progress;
  // 417: the key was used for another request) as JSON, not express's page
  app.use((err, req, res, next) => {
    res.status(res.statusCode >= 400 ? res.statusCode : 500);
    res.json({ error: err.message });
  });
  return app;
});
